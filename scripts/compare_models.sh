#!/usr/bin/env bash
# Side-by-side run of the README's model bench rows (issue 15): PyTorch eager and torch.compile
# on the refbench Transformer and CNN, then the janus bench of the same model, back to back,
# repeated. Usage: scripts/compare_models.sh REFBENCH_DIR [PYTHON] [REPEATS]
# REFBENCH_DIR is the reference benchmark folder (../shared/refbench here); PYTHON is the
# interpreter of the virtualenv its setup.sh builds (default /tmp/refvenv/bin/python).
set -euo pipefail
refbench=$(cd "${1:?usage: $0 REFBENCH_DIR [PYTHON] [REPEATS]}" && pwd)
python=${2:-/tmp/refvenv/bin/python}
repeats=${3:-2}
cargo build --release --example bench
bench=$(pwd)/target/release/examples/bench
for rep in $(seq "$repeats"); do
    for model in transformer cnn; do
        for mode in eager compile; do
            ms=$(cd "$refbench" && timeout 900 "$python" models_torch.py --model "$model" --mode "$mode" --steps 30 2>&1 \
                | grep -E '^RESULT' | sed 's/^RESULT //' \
                | "$python" -c 'import json, sys; print(json.load(sys.stdin)["median_ms_per_step"])') || ms="(failed)"
            echo "round $rep: torch $model $mode: $ms ms per step ($(date +%T))"
        done
        "$bench" --only "$model" | grep 'training step'
    done
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
done
