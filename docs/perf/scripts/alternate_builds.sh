#!/usr/bin/env bash
# Alternate two builds of the bench, run by run, and pair their rows: the "previous build
# alternating with this one" measurement that most entries of docs/perf/ report.
#
#   docs/perf/scripts/alternate_builds.sh OLD_BENCH NEW_BENCH RUNS OUT_DIR [BENCH ARGS...]
#
# OLD_BENCH and NEW_BENCH are bench binaries (`target/release/examples/bench`) of the two
# commits, for example the old one built in a separate worktree:
#   git worktree add /tmp/janus-old <commit> && (cd /tmp/janus-old && cargo build --release --example bench)
#   cargo build --release --example bench
#   docs/perf/scripts/alternate_builds.sh /tmp/janus-old/target/release/examples/bench \
#       target/release/examples/bench 3 /tmp/ab -- --only lstm
# Each run writes OUT_DIR/old.N.txt and OUT_DIR/new.N.txt (the bench's stdout), old first,
# then scripts/bench_compare.py prints the medians over the runs of each build, row by row.
# bench_compare.py pairs the main table's rows (lstm, mlp, cartpole, tree, cnn, transformer,
# gan); the other workloads' tables (hit, dims, stream, ...) are left in the files to read.
# Record the machine, both commits and this command line with the numbers (docs/perf/README.md).
set -euo pipefail
old=${1:?usage: $0 OLD_BENCH NEW_BENCH RUNS OUT_DIR [BENCH ARGS...]}
new=${2:?usage: $0 OLD_BENCH NEW_BENCH RUNS OUT_DIR [BENCH ARGS...]}
runs=${3:?usage: $0 OLD_BENCH NEW_BENCH RUNS OUT_DIR [BENCH ARGS...]}
out=${4:?usage: $0 OLD_BENCH NEW_BENCH RUNS OUT_DIR [BENCH ARGS...]}
shift 4
if [ "${1:-}" = "--" ]; then
    shift
fi
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../../.." && pwd)
for n in $(seq "$runs"); do
    echo "== run $n: old $(date +%T)"
    "$old" "$@" >"$out/old.$n.txt"
    echo "== run $n: new $(date +%T)"
    "$new" "$@" >"$out/new.$n.txt"
done
olds=()
news=()
for n in $(seq "$runs"); do
    olds+=("$out/old.$n.txt")
    news+=("$out/new.$n.txt")
done
python3 "$here/scripts/bench_compare.py" "${olds[@]}" -- "${news[@]}"
