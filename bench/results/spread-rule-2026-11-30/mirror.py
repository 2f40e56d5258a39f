#!/usr/bin/env python3
"""The comparison program's spread rule read both ways over every stored whole quick run (2 cores, quiet).

For each compare.json under bench/results with all 26 scenarios (not a subset, not beside busy loops, not on one
core), counts the main-table rows where Spindle's runs spread more than 1.5x and more than 1.25 times the built-in
pool's (the rule behind `wider`), and the rows where the built-in pool's runs do so against Spindle's.
Run from the repository root: python3 bench/results/spread-rule-2026-11-30/mirror.py
"""
import glob
import json

SKIP = ('load2', 'busy', 'one-core', 'subset', 'socket-echo-', 'queue-drain-', 'latest', 'run-', '-r1', '-r2', '-r3')


def wider(a, b):
    return a is not None and b is not None and a > 1.5 and a > 1.25 * b


runs = []
for path in sorted(glob.glob('bench/results/**/compare.json', recursive=True)):
    name = path[len('bench/results/'):]
    if any(key in name for key in SKIP):
        continue
    try:
        rows = json.load(open(path))
    except (OSError, ValueError):
        continue
    if not isinstance(rows, list) or not rows or 'spread' not in rows[0]:
        continue
    if len({r['scenario'] for r in rows}) < 26:
        continue
    one = other = 0
    for r in rows:
        if r['metric'].startswith('process'):
            continue
        spread = r.get('spread') or {}
        s, b = spread.get('spindle'), spread.get('builtin')
        one += wider(s, b)
        other += wider(b, s)
    runs.append((name, one, other))
    print(f'{name:70} Spindle wider {one:2}   built-in wider {other:2}')
ones = [r[1] for r in runs]
others = [r[2] for r in runs]
print(f'{len(runs)} runs: Spindle wider {sum(ones) / len(runs):.1f} on average ({min(ones)}-{max(ones)}), '
      f'built-in wider {sum(others) / len(runs):.1f} ({min(others)}-{max(others)})')
