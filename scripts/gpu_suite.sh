#!/usr/bin/env bash
# The GPU suite in one command, for a GPU machine that has no Rust toolchain.
#
#   scripts/gpu_suite.sh build [DIR]    here: builds the GPU tests, the bench and the examples,
#                                      strips them into DIR (default target/gpu-suite), and
#                                      copies ../shared/refbench's PyTorch peers when present
#   scripts/gpu_suite.sh run DIR OUT [QUICK]
#                                      on the GPU machine: every GPU test (op parity, the CUDA
#                                      fuzz, #[janus] on CUDA, the LSTM parity), the bench with
#                                      CUDA rows, the examples with --device cuda, and the
#                                      PyTorch peers with the machine's own python3; writes
#                                      OUT/results.md plus one log per stage. QUICK=1 runs the
#                                      tests only.
#
# With the device tool: run `build`, then carry DIR and call
#   bash scripts/gpu_suite.sh run target/gpu-suite $OUT
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
    local dir=${1:-target/gpu-suite}
    set -e
    local examples=(bench lstm_charlm cartpole tree_rnn)
    cargo build --release --test cuda $(printf -- '--example %s ' "${examples[@]}")
    local tests
    tests=$(cargo test --release --test cuda --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "cuda":
        print(m["executable"])')
    rm -rf "$dir" && mkdir -p "$dir"
    cp "$tests" "$dir/cuda_tests"
    for e in "${examples[@]}"; do cp "target/release/examples/$e" "$dir/"; done
    strip --strip-debug "$dir"/*
    if [ -d ../shared/refbench ]; then
        mkdir -p "$dir/refbench" && cp ../shared/refbench/*.py ../shared/refbench/*.sh "$dir/refbench/"
    fi
    du -sh "$dir"
}

stage() { # name, command...: runs, logs to OUT/name.log, records pass/fail and seconds
    local name=$1; shift
    local t0=$SECONDS
    echo "=== $name: $*"
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$OUT/$name.log"
    echo "| $name | $([ $rc = 0 ] && echo pass || echo "FAIL ($rc)") | $((SECONDS - t0)) s |" >> "$OUT/results.md"
}

run() {
    local dir=$1; OUT=$2; local quick=${3:-0}
    mkdir -p "$OUT"
    export JANUS_REQUIRE_CUDA=1 JANUS_CACHE_DIR=/tmp/janus-cache RUST_BACKTRACE=1
    { echo "# GPU suite, $(date -u +%F\ %H:%M) UTC"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
      echo; echo "| stage | result | time |"; echo "|---|---|---|"; } > "$OUT/results.md"
    stage tests "$dir/cuda_tests" --test-threads=1 --nocapture
    if [ "$quick" = 1 ]; then cat "$OUT/results.md"; return; fi
    stage bench "$dir/bench" --device cuda
    stage lstm_charlm "$dir/lstm_charlm" --device cuda --steps 300 --plot ""
    stage cartpole "$dir/cartpole" --device cuda --envs 256
    stage tree_rnn "$dir/tree_rnn" --device cuda
    if [ -d "$dir/refbench" ]; then
        stage peers bash "$dir/refbench/gpu_anchors.sh" "$OUT"
    fi
    cat "$OUT/results.md"
}

case ${1:-} in
    build) build "${2:-}" ;;
    run) run "$2" "$3" "${4:-0}" ;;
    *) echo "usage: $0 build [DIR] | run DIR OUT [QUICK]" >&2; exit 2 ;;
esac
