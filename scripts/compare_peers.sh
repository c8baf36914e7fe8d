#!/usr/bin/env bash
# Side-by-side run behind the README's results table (docs/perf/ has every run): each refbench peer script, then the janus
# bench, repeated. Usage: scripts/compare_peers.sh REFBENCH_DIR [PYTHON] [REPEATS] [OUT_DIR]
# REFBENCH_DIR is the reference benchmark folder (../shared/refbench here); PYTHON is the
# interpreter of the virtualenv its setup.sh builds (default /tmp/refvenv/bin/python).
# Peer results go to OUT_DIR/peers.jsonl, the janus tables to OUT_DIR/janus_N.txt.
# ONLY=lstm limits both sides to the LSTM step (the peers' LSTM scripts, then `bench --only lstm`).
# Peers whose framework is not installed (JAX, TensorFlow) print "(failed)" and are left out.
set -euo pipefail
refbench=$(cd "${1:?usage: $0 REFBENCH_DIR [PYTHON] [REPEATS] [OUT_DIR]}" && pwd)
python=${2:-/tmp/refvenv/bin/python}
repeats=${3:-2}
out=$(mkdir -p "${4:-target/peers}" && cd "${4:-target/peers}" && pwd)
cargo build --release --example bench
bench=$(pwd)/target/release/examples/bench
: >"$out/peers.jsonl"
specs=("lstm_torch.py eager" "lstm_torch.py cudnn" "lstm_torch.py compile --warm-cache" "lstm_jax.py jit"
    "lstm_tf.py function")
only=()
if [ "${ONLY:-}" = lstm ]; then
    only=(--only lstm)
else
    specs+=("pg_torch.py eager" "pg_torch.py compile --warm-cache" "pg_jax.py jit" "pg_tf.py function")
fi
for rep in $(seq "$repeats"); do
    for spec in "${specs[@]}"; do
        set -- $spec
        echo "== run $rep: $1 --mode $2 $(date +%T)"
        (cd "$refbench" && timeout 900 "$python" "$1" --mode "$2" ${3:-} --json-out "$out/peers.jsonl" 2>&1 \
            | grep -E '^RESULT' | cut -c1-120) || echo "   (failed)"
    done
    echo "== run $rep: janus bench $(date +%T)"
    "$bench" "${only[@]}" | tee "$out/janus_$rep.txt" | grep '^| LSTM\|^| Cart\|^| Tree\|^| training step\|^The step'

done
"$python" - "$out/peers.jsonl" <<'PY'
import json, sys
print("| peer | LSTM step, ms | CartPole infer, us | update 500, ms | episode 500, ms |")
print("|---|---:|---:|---:|---:|")
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    row = rows.setdefault(f"{r['framework']} {r['mode']}", [[], [], [], []])
    if r["workload"] == "lstm":
        row[0].append(r["median_ms_per_step"])
    else:
        row[1].append(r["infer_median_us_per_step"])
        row[2].append(r["fixed500_median_update_ms"])
        row[3].append(r["fixed500_median_episode_ms"])
span = lambda v: f"{min(v):.2f}-{max(v):.2f}" if v else "-"
for name, row in rows.items():
    print(f"| {name} | " + " | ".join(span(v) for v in row) + " |")
PY
