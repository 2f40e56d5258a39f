#!/usr/bin/env python3
"""Rows the spread rule marks in both of two whole quick runs, each way round.

Usage: both.py FIRST/compare.json SECOND/compare.json
"""
import json
import sys


def wider(a, b):
    return a is not None and b is not None and a > 1.5 and a > 1.25 * b


def marked(path):
    spindle, builtin = set(), set()
    for r in json.load(open(path)):
        if r['metric'].startswith('process'):
            continue
        spread = r.get('spread') or {}
        s, b = spread.get('spindle'), spread.get('builtin')
        key = (r['scenario'], r['variant'], r['metric'])
        if wider(s, b):
            spindle.add(key)
        if wider(b, s):
            builtin.add(key)
    return spindle, builtin


(s1, b1), (s2, b2) = marked(sys.argv[1]), marked(sys.argv[2])
print(f'Spindle wider in both: {len(s1 & s2)}; the built-in pool wider in both: {len(b1 & b2)}')
for key in sorted(s1 & s2):
    print('  ' + ' '.join(key))
