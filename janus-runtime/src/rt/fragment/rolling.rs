//! Rolled loops at dispatch: when a block's staged loop compiles as a loop node instead of
//! unrolled, and how calls of ever-new lengths share one graph.
//!
//! - A recording rolls its loop (`trace::roll`) when it is too long to unroll (over
//!   [`ROLL_NODES`] nodes) or when its call's sequences are stacked (below); see
//!   [`Fragment::roll`].
//! - A block's *trip class* (its key with sequence lengths left out, `key::trip_class`) that
//!   has seen more than [`UNROLLED_LENGTHS`] lengths rolls from then on ([`Fragment::rolled`]):
//!   calls of new lengths key each sequence input *stacked*, one `[len, ...]` leaf instead of
//!   `len` leaves ([`stack_sequences`]). The length is then a size like any other: the
//!   recording reads the elements as rows of the stack, its loop rolls over it, two lengths
//!   compile, and the rest get instances of one shape-polymorphic variant. The stack is an
//!   eager `stack` of the elements (a copy, with autograd history when they need gradients, so
//!   gradients reach each element as in eager mode).
//! - The statements read the length on the host (`xs.len()`), so every new length is
//!   validated by one recording; a size seen once runs on the host instead
//!   ([`Fragment::first_sighting`]), its body staged, and validates when it comes back.
//! - Where sequences do not qualify, a loop did not roll, or the variant limit is reached,
//!   calls run their statements with the loop on the host, the body dispatching per trip to
//!   its own cached graph ([`Fragment::rolled_call`]).

use super::*;
use crate::module::ConstLeaf;

/// Recordings of a block with a loop larger than this roll their loop into a loop node (or,
/// when it does not roll, are not compiled: the loop runs on the host, its body staged on its
/// own). Unrolled, compiling costs time in proportion to the trip count (49 ms for the forward
/// of a 1024-step small LSTM, 440 ms for its first three calls).
pub(super) const ROLL_NODES: usize = 16_384;

/// Sequence lengths per trip class that compile unrolled; further lengths run on the host.
const UNROLLED_LENGTHS: usize = 3;

thread_local! {
    /// Calls on this thread running their statements because their loop rolled.
    static ROLLING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Marks a rolled call's statements as running (also when they panic).
pub(super) struct RollingGuard;

impl RollingGuard {
    pub(super) fn enter() -> RollingGuard {
        ROLLING.set(ROLLING.get() + 1);
        RollingGuard
    }
}

impl Drop for RollingGuard {
    fn drop(&mut self) {
        ROLLING.set(ROLLING.get() - 1);
    }
}

/// Why a call's loop ran on the host.
pub(super) const ROLLED: &str = "trip count keeps changing: the loop runs on the host, its body staged";

/// Why a call whose rolled loop would need a recording to validate its sizes ran on the host.
pub(super) const SEEN_ONCE: &str =
    "sizes seen once: the loop runs on the host, its body staged (a second call validates them)";

/// Keys of stacked calls seen once, per fragment (see [`Fragment::first_sighting`]).
const SIGHTINGS: usize = 1024;

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
        let stack = crate::eager::uncounted(|| Tensor::stack(&refs, 0));
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
    /// A call whose trip count keeps changing (see [`Fragment::rolled`]): keyed with its
    /// sequences stacked, so that its loop rolls into one graph over all lengths (`stacked`);
    /// or, where they do not stack or a loop did not roll, its statements run, the loop's
    /// body staged on its own.
    #[inline(never)]
    pub(super) fn rolled_call(
        &'static self,
        st: &'static State,
        inputs: &[Probed],
        instance: Instance,
        mode: Mode,
    ) -> Enter {
        // Past the variant limit no new key compiles: the loop runs on the host, its body
        // staged.
        let full = st.keys.load(Ordering::Relaxed) >= self.site.max_variants as u64;
        match st.roll_failed.get() {
            None if full => st.counters.eager(EagerKind::Rolled, ROLLED),
            None => {
                if let Some(mut s) = stack_sequences(inputs) {
                    // Counts the call (as a replay or in `calls`).
                    return self.dispatch(st, &mut s.inputs, instance, mode, &s.rows);
                }
                st.counters.eager(EagerKind::Rolled, ROLLED);
            }
            Some(why) => st.counters.eager(EagerKind::Rolled, &format!("{ROLLED} ({why})")),
        }
        Counters::bump(&st.counters.calls);
        Enter::Body(self.scope(ScopeKind::Rolled(RollingGuard::enter()), EagerKind::Rolled))
    }

    /// Whether a stacked call (keyed `key`, new) is the first of its sizes, and should run on
    /// the host instead of recording. Its block generalised already, and an instance at new
    /// sizes must be validated by a recording at them (a sequence's length, read on the host
    /// as `xs.len()`, could have become anything). In a stream of ever new lengths that would
    /// record (run eagerly) every call; on the host, the loop's body replays its own graph per
    /// trip instead, and sizes that come back are validated and replay one graph.
    pub(super) fn first_sighting(&self, st: &State, fp: u64, key: &Key, leaves: &[Tensor]) -> bool {
        if !st.generic.read().unwrap().contains_key(&key::erase_dims(key, leaves)) {
            return false; // the first sizes record, to compile the samples of a fit
        }
        let mut seen = st.sighted.lock().unwrap();
        if seen.contains(&fp) {
            return false;
        }
        if seen.len() >= SIGHTINGS {
            seen.pop_front();
        }
        seen.push_back(fp);
        true
    }

    /// Whether this new key's loop runs on the host: its trip class was seen with more than
    /// [`UNROLLED_LENGTHS`] sequence lengths (the trip count keeps changing), and compiling
    /// one unrolled graph per length would cost a compile per call. Earlier keys keep their
    /// graphs; a few lengths (buckets) stay unrolled.
    #[inline(never)]
    pub(super) fn rolled(&self, st: &State, inputs: &[Probed], instance: Instance, mode: Mode) -> bool {
        let (class, lens) = key::trip_class(inputs, &instance, mode);
        if lens.is_empty() {
            return false;
        }
        // Inside a call whose own loop rolled (its lengths vary), a block's loop over another
        // length rolls at its second length: a fixed length (a loop over layers) still unrolls.
        let unrolled = if ROLLING.get() > 0 { 1 } else { UNROLLED_LENGTHS };
        let mut trips = st.trips.lock().unwrap();
        let (seen, rolled) = trips.entry(class).or_default();
        if !*rolled && !seen.contains(&lens) {
            if seen.len() < unrolled {
                seen.push(lens.clone());
            } else {
                *rolled = true;
                log::info!(target: "janus", "{} ({}): {ROLLED}", self.name(), self.span());
            }
        }
        *rolled && !seen.contains(&lens)
    }

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
