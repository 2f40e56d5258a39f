#!/usr/bin/env python3
"""The spread rule between two whole quick runs of one build: each pool against itself.

Usage: aa.py FIRST/compare.json SECOND/compare.json
For each main-table row, the rule (a spread over 1.5x and over 1.25 times the other's) is asked of Spindle's runs in
the first against Spindle's runs in the second, and the other way round; the same for the built-in pool's; and, for
reference, of Spindle against the built-in pool within each run (the `wider` flag).
"""
import json
import sys


def wider(a, b):
    return a is not None and b is not None and a > 1.5 and a > 1.25 * b


def rows(path):
    return {(r['scenario'], r['variant'], r['metric']): r for r in json.load(open(path))
            if not r['metric'].startswith('process')}


first, second = rows(sys.argv[1]), rows(sys.argv[2])
keys = [k for k in first if k in second]
spread = lambda r, pool: (r.get('spread') or {}).get(pool)
for pool in ('spindle', 'builtin'):
    a = sum(wider(spread(first[k], pool), spread(second[k], pool)) for k in keys)
    b = sum(wider(spread(second[k], pool), spread(first[k], pool)) for k in keys)
    print(f'{pool} against itself: first wider than second in {a} rows, second wider than first in {b} (of {len(keys)})')
for name, run in (('first', first), ('second', second)):
    s = sum(wider(spread(r, 'spindle'), spread(r, 'builtin')) for r in run.values())
    b = sum(wider(spread(r, 'builtin'), spread(r, 'spindle')) for r in run.values())
    print(f'{name} run: Spindle wider than the built-in pool in {s} rows, the built-in pool wider than Spindle in {b}')
