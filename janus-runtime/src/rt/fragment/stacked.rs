//! Sequences as one stacked input, for loops whose trip count keeps changing.
//!
//! A block with a staged loop over a sequence input (`xs: &[Tensor]`, one leaf per element)
//! has a key per length. Once its trip count keeps changing (see `Fragment::rolled`), calls
//! with new lengths are keyed with each sequence *stacked*: one `[len, ...]` leaf instead of
//! `len` leaves. The length is then a size like any other: the recording's loop rolls into a
//! loop node over the stacked input (its rows are what the statements read as `xs[t]`), two
//! lengths compile, and the rest get instances of one shape-polymorphic variant.
//!
//! The stack is an eager `stack` of the elements (a copy, with autograd history when they need
//! gradients, so gradients reach each element as in eager mode). Sequences qualify when their
//! elements are CPU tensors of one type and grad flags, distinct from each other and from the
//! call's other leaves; otherwise the loop runs on the host as before.

use super::*;
use crate::module::ConstLeaf;

/// The length constant of a stacked sequence in its probe (its length is the stack's size).
const STACKED: usize = usize::MAX;

/// A call's inputs with its sequences stacked.
pub(super) struct Stacked {
    /// The probes, each sequence's elements replaced by their stack.
    pub(super) inputs: Vec<Probed>,
    /// Per stacked sequence: the position of its stack among the leaves, and its elements.
    pub(super) rows: Vec<(usize, Vec<Tensor>)>,
}

/// `inputs` with their sequences stacked, or `None` when none qualifies. A sequence qualifies
/// when it holds two elements or more, CPU tensors of one type and grad flags, distinct from
/// each other and from the call's other leaves; others stay as they are (a list of one state,
/// say, whose length does not follow the trip count).
pub(super) fn stack_sequences(inputs: &[Probed]) -> Option<Stacked> {
    if inputs.iter().any(|p| p.grads.is_some()) {
        return None; // a `Grads` input is keyed by the leaves it holds
    }
    let all: Vec<u64> = inputs.iter().flat_map(|p| p.leaves.iter().map(Tensor::id)).collect();
    let qualifies = |p: &Probed| {
        // One level of elements (a `Vec<Vec<Tensor>>` is not stacked), two or more, all alike.
        let [ConstLeaf::Len(n)] = p.consts[..] else { return false };
        let Some(first) = p.leaves.first() else { return false };
        n >= 2
            && n == p.leaves.len()
            && p.leaves.iter().all(|t| {
                t.dtype() == first.dtype()
                    && t.shape_ref() == first.shape_ref()
                    && t.device() == crate::Device::Cpu
                    && t.needs_grad() == first.needs_grad()
                    && t.is_leaf() == first.is_leaf()
                    && all.iter().filter(|&&id| id == t.id()).count() == 1
            })
    };
    let mut out = Vec::with_capacity(inputs.len());
    let mut rows = Vec::new();
    let mut at = 0;
    for p in inputs {
        if !qualifies(p) {
            at += p.leaves.len();
            out.push(p.clone());
            continue;
        }
        let refs: Vec<&Tensor> = p.leaves.iter().collect();
        let stack = crate::ops::uncounted(|| Tensor::stack(&refs, 0));
        rows.push((at, p.leaves.to_vec()));
        at += 1;
        out.push(Probed {
            leaves: smallvec::smallvec![stack],
            consts: vec![ConstLeaf::Len(STACKED)],
            ..p.clone()
        });
    }
    (!rows.is_empty()).then_some(Stacked { inputs: out, rows })
}

/// The gradient targets of a checked call with stacked sequences: its leaves, each stack
/// replaced by the elements it stacks (gradients reach them through the stack).
pub(super) fn row_targets(inputs: &[Probed], rows: &[(usize, Vec<Tensor>)]) -> Vec<(String, Tensor)> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in inputs {
        for t in &p.leaves {
            match rows.iter().find(|(k, _)| *k == at) {
                Some((_, elements)) => {
                    out.extend(
                        elements.iter().enumerate().map(|(i, e)| (format!("{}[{i}]", p.name), e.clone())),
                    );
                }
                None => out.push((p.name.to_string(), t.clone())),
            }
            at += 1;
        }
    }
    out
}

impl Fragment {
    /// Rolls the recording's staged loops into loop nodes where that is needed or pays: a call
    /// with stacked sequences must roll (its graph is for every length), and a loop too long
    /// to unroll (over [`ROLL_NODES`] nodes) does. A stacked call that does not roll is an
    /// error (the call runs its statements); after a loop of several trips failed to roll,
    /// calls of new lengths run on the host.
    pub(super) fn roll(&self, st: &State, f: &mut crate::trace::Finished) -> Result<(), String> {
        if !self.site.has_loop || !(f.stacked || f.graph.nodes.len() > ROLL_NODES) {
            return Ok(());
        }
        match f.cpu && crate::trace::roll_finished(f, 2) {
            true => Ok(()),
            false if f.stacked => {
                let why = "its loop did not roll: the trips recorded different graphs, read values of \
                           earlier trips after the loop, or ran on a GPU";
                let longest = longest_run(&f.trips);
                if longest >= 4 {
                    log::info!(target: "janus", "{} ({}): {why}; calls of new lengths run on the host", self.name(), self.span());
                    let _ = st.roll_failed.set(format!("{why} ({longest} trips)"));
                }
                Err(why.into())
            }
            false => Ok(()),
        }
    }
}

/// The most consecutive trips of one block, at any depth (a whole function's loop is inside
/// its loop block's trip).
fn longest_run(trips: &[crate::trace::Trip]) -> usize {
    let mut best = 0;
    let depths = trips.iter().map(|t| t.depth).max().map_or(0, |d| d + 1);
    for depth in 0..depths {
        let level: Vec<&crate::trace::Trip> = trips.iter().filter(|t| t.depth == depth).collect();
        let mut i = 0;
        while i < level.len() {
            let j = (i + 1..level.len()).find(|&j| level[j].site != level[i].site).unwrap_or(level.len());
            best = best.max(j - i);
            i = j;
        }
    }
    best
}
