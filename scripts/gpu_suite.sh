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
#                                      tests only, QUICK=2 everything but the PyTorch peers.
#                                      STAGES="tests bench ..." runs only the stages named
#                                      (tests windows bench gemm_torch lstm_charlm lstm_check
#                                      cartpole tree_rnn peers_lstm peers). Each stage has a time limit, so a hang
#                                      still leaves logs.
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
    cp scripts/gemm_torch.py "$dir/"
    if [ -d ../shared/refbench ]; then
        mkdir -p "$dir/refbench" && cp ../shared/refbench/*.py ../shared/refbench/*.sh "$dir/refbench/"
    fi
    du -sh "$dir"
}

stage() { # name, seconds, command...: runs under a time limit, logs to OUT/name.log, records
    # pass/fail and seconds (a stage that outlives its limit is killed and recorded as 124)
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    echo "=== $name (limit ${limit}s): $*"
    timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    tail -n 25 "$OUT/$name.log"
    echo "| $name | $([ $rc = 0 ] && echo pass || echo "FAIL ($rc)") | $((SECONDS - t0)) s |" >> "$OUT/results.md"
}

run() {
    local dir=$1; OUT=$2; local quick=${3:-0}
    mkdir -p "$OUT"
    export JANUS_REQUIRE_CUDA=1 JANUS_CACHE_DIR=/tmp/janus-cache RUST_BACKTRACE=1
    # The CUDA fuzz runs programs in seed order for this long (it prints how many ran).
    export JANUS_CUDA_FUZZ_SECONDS=${JANUS_CUDA_FUZZ_SECONDS:-90}
    { echo "# GPU suite, $(date -u +%F\ %H:%M) UTC"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
      echo; echo "| stage | result | time |"; echo "|---|---|---|"; } > "$OUT/results.md"
    want() { [ -z "${STAGES:-}" ] || [[ " $STAGES " == *" $1 "* ]]; }
    want tests && stage tests 240 "$dir/cuda_tests" --test-threads=1 --nocapture
    # The fuzz and the compiled-graph tests again with the sliding windows as device kernels
    # (`JANUS_CUDA_WINDOWS=device`; the default runs them through the host).
    want windows && stage windows 150 env JANUS_CUDA_WINDOWS=device JANUS_CUDA_FUZZ_SECONDS=${JANUS_CUDA_WINDOWS_FUZZ_SECONDS:-60} \
        "$dir/cuda_tests" --test-threads=1 --nocapture fuzz_cuda staged_cuda
    if [ "$quick" = 1 ]; then cat "$OUT/results.md"; return; fi
    want bench && stage bench 100 "$dir/bench" --device cuda
    # torch.matmul on the bench's GEMM shapes, timed the same way (the machine's own python3).
    want gemm_torch && stage gemm_torch 60 python3 "$dir/gemm_torch.py" --device cuda
    want lstm_charlm && stage lstm_charlm 60 "$dir/lstm_charlm" --device cuda --steps 300 --plot ""
    want lstm_check && stage lstm_check 45 "$dir/lstm_charlm" --device cuda --mode check --steps 20 --sample 0 --plot ""
    want cartpole && stage cartpole 60 "$dir/cartpole" --device cuda --envs 256 --episodes 10000
    want tree_rnn && stage tree_rnn 45 "$dir/tree_rnn" --device cuda
    if [ -d "$dir/refbench" ] && [ "$quick" != 2 ]; then
        # The LSTM step's PyTorch anchors alone (`peers_lstm`, only when named), or every GPU
        # anchor (`peers`).
        [[ " ${STAGES:-} " == *" peers_lstm "* ]] && stage peers_lstm 240 bash -c "cd $dir/refbench && for m in eager cudnn compile_cudagraphs; do
            python3 lstm_torch.py --mode \$m --steps 50 --device cuda --json-out $OUT/gpu_anchors.jsonl | grep ^RESULT; done"
        want peers && stage peers 300 bash "$dir/refbench/gpu_anchors.sh" "$OUT"
    fi
    cat "$OUT/results.md"
}

case ${1:-} in
    build) build "${2:-}" ;;
    run) run "$2" "$3" "${4:-0}" ;;
    *) echo "usage: $0 build [DIR] | run DIR OUT [QUICK]" >&2; exit 2 ;;
esac
