#!/usr/bin/env bash
# Runs the runtime's unit tests that exercise its unsafe code (the executor's frame and arenas,
# tensors written in place, the two-worker schedule) under Miri, the Rust interpreter that
# detects undefined behaviour. Needs the nightly toolchain with the miri component:
#   rustup component add --toolchain nightly miri rust-src
# Tree borrows: crossbeam-epoch (under rayon) breaks the stacked-borrows rules, a known upstream
# limitation. Leaks ignored: rayon's workers outlive the test threads. Slow (minutes per test):
# not part of CI. Usage: scripts/miri.sh [TEST FILTER...]
set -euo pipefail
filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then
    filters=(tensor::tests exec::cpu::shelf::tests::size_classes exec::loops passes::layout::tests::an_untransposed
        passes::layout::tests::a_flipped passes::fuse)
fi
MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-disable-isolation -Zmiri-tree-borrows -Zmiri-ignore-leaks" \
    cargo +nightly miri test -p janus-runtime --lib -- "${filters[@]}"
