#!/usr/bin/env python3
"""Median of the per-launch ratios new / old from launches.sh output files,
with a 95 % bootstrap interval over launches (the launch is the unit: its
figures share that launch's placement of memory):

    launch-stats.py OUT...

Pairs whose two figures differ by 1.5x or more straddle a change of the
VM's placement (fast/slow floor, shared/notes/benchmarking-on-this-vm.md)
and are left out."""
import random
import statistics
import sys


def interval(ratios):
    if len(ratios) < 5:
        return '-'
    medians = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(2000))
    return f'{medians[50]:.3f}-{medians[1949]:.3f}'


for path in sys.argv[1:]:
    rows = [tuple(map(float, line.split())) for line in open(path) if len(line.split()) == 3]
    ratios = [new / old for old, new, _ in rows if max(old, new) / min(old, new) < 1.5]
    load = [load for *_, load in rows]
    print(f'{path}: {len(rows)} launch pairs, load average {min(load)}-{max(load)}: new / old median '
          f'{statistics.median(ratios):.3f} (95 % {interval(ratios)}, {len(ratios)} pairs used, '
          f'range {min(ratios):.3f}-{max(ratios):.3f})')
