//! Reading a step's cold operands ahead of it. In an RNN's backward pass, each time step's cell
//! reads the residuals that the forward pass wrote many steps before, long gone from the core's
//! own caches; the product that precedes the cell on the chain (`dG @ W_hᵀ`) is compute-bound
//! and leaves the memory system idle. So before such a product runs, the plan asks the caches
//! for the other operands of the fused steps that read the product's result.
//!
//! Off unless `JANUS_PREFETCH=1` (or [`crate::set_prefetch`]): it has not paid as a whole.
//! Measured on 2026-12-02's AVX2 Zen 3 (README, "Reading the backward cell's operands ahead"):
//! the backward cell's first run in the step took 25-35 µs per call and a second run right
//! after 12-13 µs; with the prefetch, 21-23 µs; but `bench --only prefetch` found the LSTM
//! step within noise (0.97x-1.03x) and the CNN and Transformer steps 1-14% slower.

use super::frame::Frame;
use super::schedule::cost;
use crate::exec::lower::{Lowered, StepKind, ValRef};
use crate::exec::memory::{Extent, dependencies, extent};
use smallvec::SmallVec;

/// Products below this cost (multiply-adds) are too short to hide a prefetch behind: a
/// `[16, 512] @ [512, 128]` half of the LSTM's backward product costs 1M.
const MIN_PRODUCT: u64 = 1 << 18;

/// At most this many bytes fetched ahead of one product: well inside a core's L2 (512 KiB to
/// 2 MiB on the machines janus has run on), so that they are still there when read.
const MAX_BYTES: usize = 64 << 10;

/// Per step, the values to fetch into the caches before it runs.
#[derive(Default)]
pub(crate) struct Prefetch {
    ahead: Vec<SmallVec<[u32; 6]>>,
}

impl Prefetch {
    /// The plan for `l`'s steps: before each long enough product, the operands of the fused
    /// steps reading its result that it does not write itself, and their results (empty unless
    /// prefetching is on).
    pub(crate) fn new(l: &Lowered) -> Prefetch {
        if !crate::config::prefetch() {
            return Prefetch::default();
        }
        let extent = |i: usize| l.vals[i].as_ref().and_then(extent);
        let overlap = |x: Option<Extent>, y: Option<Extent>| match (x, y) {
            (Some((k, a, b)), Some((j, c, d))) => k == j && a < d && c < b,
            _ => false,
        };
        // Whether step `t` reads what step `s` writes (not merely reuses its memory).
        let reads_from = |t: usize, s: usize| {
            let w = l.steps[s].kind.writes();
            l.steps[t].kind.reads().iter().any(|&r| w.iter().any(|&o| overlap(extent(r), extent(o))))
        };
        let mut succs: Vec<SmallVec<[usize; 4]>> = vec![SmallVec::new(); l.steps.len()];
        for (t, preds) in dependencies(l).iter().enumerate() {
            for &s in preds {
                if reads_from(t, s) {
                    succs[s].push(t);
                }
            }
        }
        let fused = |t: usize| matches!(l.steps[t].kind, StepKind::Fused { .. });
        let bytes = |i: usize| l.vals[i].as_ref().map_or(0, |v| v.layout().span() * v.dtype.size_in_bytes());
        let mut ahead = vec![SmallVec::new(); l.steps.len()];
        let mut any = false;
        for (s, step) in l.steps.iter().enumerate() {
            if !matches!(step.kind, StepKind::MatMul { .. }) || cost(l, &step.kind) < MIN_PRODUCT {
                continue;
            }
            // The fused steps reading the product's result, directly or through one more step
            // (the LSTM's `dh` gains the output layer's gradient in a small product between),
            // with the steps whose results they read hot.
            let mut targets: SmallVec<[(usize, [usize; 2]); 4]> = SmallVec::new();
            for &r in &succs[s] {
                if fused(r) {
                    targets.push((r, [s, s]));
                } else {
                    targets.extend(succs[r].iter().filter(|&&t| fused(t)).map(|&t| (t, [s, r])));
                }
            }
            let list: &mut SmallVec<[u32; 6]> = &mut ahead[s];
            let mut total = 0;
            for (t, hot) in targets {
                let kind = &l.steps[t].kind;
                for i in kind.reads().into_iter().chain(kind.writes()) {
                    let written = hot
                        .iter()
                        .any(|&h| l.steps[h].kind.writes().iter().any(|&o| overlap(extent(i), extent(o))));
                    if !written && !list.contains(&(i as u32)) && total + bytes(i) <= MAX_BYTES {
                        total += bytes(i);
                        list.push(i as u32);
                    }
                }
            }
            any |= !list.is_empty();
        }
        if std::env::var("JANUS_SCHED_DEBUG").is_ok() {
            for (s, list) in ahead.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
                let b: usize = list.iter().map(|&i| bytes(i as usize)).sum();
                eprintln!(
                    "prefetch before step {s} ({}): {} values, {b} bytes",
                    super::profile::label(l, &l.steps[s]),
                    list.len()
                );
            }
        }
        if !any {
            ahead = Vec::new();
        }
        Prefetch { ahead }
    }

    /// Asks the caches for what step `s`'s successors will read, if anything.
    #[inline]
    pub(crate) fn issue<'a>(&self, s: usize, vals: &'a [Option<ValRef>], f: &Frame<'a>) {
        let Some(list) = self.ahead.get(s) else { return };
        for &i in list {
            let v = vals[i as usize].as_ref().expect("prefetched values have values");
            let (start, bytes) = f.span_of(v);
            janus_kernels::prefetch::lines(start, bytes);
        }
    }
}
