#!/usr/bin/env python3
"""Busy time per step kind and worker from a JANUS_TIMELINE file.

usage: scripts/timeline_summary.py TIMELINE [ROWS]

Each timeline line is `thread start end duration description #step wN`; this sums the
durations of each description per worker and prints the largest totals first (total µs,
calls, µs per call). JANUS_TIMELINE appends, so the totals cover every sampled run in the
file (delete it between experiments); the per-call means do not depend on how many.
"""
import collections
import re
import sys


def main():
    path = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    agg = collections.defaultdict(lambda: [0, 0.0])
    for line in open(path):
        if line.startswith("#"):
            continue
        parts = line.split(None, 4)
        if len(parts) < 5:
            continue
        m = re.match(r"(.*?) #\d+ (w\d)\s*$", parts[4])
        if not m:
            continue
        key = (m.group(1), m.group(2))
        agg[key][0] += 1
        agg[key][1] += float(parts[3])
    print(f"{'busy, µs':>10} {'calls':>6} {'µs/call':>8}  worker  step")
    for (name, worker), (calls, total) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:rows]:
        print(f"{total:10.1f} {calls:6d} {total / calls:8.1f}  {worker:6}  {name}")


if __name__ == "__main__":
    main()
