#!/usr/bin/env python3
"""Medians of the bench's main-table rows over alternating runs of two builds.

Usage: scripts/bench_compare.py OLD_OUTPUTS... -- NEW_OUTPUTS...
Each file is the stdout of one `cargo run --release --example bench` run. Rows are matched by
workload and metric; `--rename OLD=NEW` maps a metric that changed its name between builds.
Prints, per row and mode, the median over the runs of each build and the new/old ratio.
"""
import statistics
import sys


def parse(path):
    rows = {}
    header = None
    for line in open(path):
        if not line.startswith("| "):
            header = None if not line.startswith("|") else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "workload":
            header = cells
            continue
        if header is None or header[1] != "metric":
            continue
        rec = {}
        for name, v in zip(header[2:], cells[2:]):
            try:
                rec[name] = float(v)
            except ValueError:
                pass
        rows[(cells[0], cells[1])] = rec
    return rows


def main(argv):
    renames = {}
    while argv and argv[0] == "--rename":
        old, new = argv[1].split("=", 1)
        renames[old] = new
        argv = argv[2:]
    split = argv.index("--")
    old_runs = [parse(p) for p in argv[:split]]
    new_runs = [parse(p) for p in argv[split + 1:]]
    modes = ["eager", "janus", "check"]
    print(f"medians over {len(old_runs)} old and {len(new_runs)} new runs, alternating")
    print("| workload | metric | mode | old | new | new/old |")
    print("|---|---|---|---:|---:|---:|")
    for (workload, metric) in old_runs[0]:
        new_metric = renames.get(metric, metric)
        for mode in modes:
            olds = [r[(workload, metric)][mode] for r in old_runs if mode in r.get((workload, metric), {})]
            news = [r[(workload, new_metric)][mode] for r in new_runs
                    if mode in r.get((workload, new_metric), {})]
            if not olds or not news:
                continue
            o, n = statistics.median(olds), statistics.median(news)
            print(f"| {workload} | {new_metric} | {mode} | {o:.3f} | {n:.3f} | {n / o:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
