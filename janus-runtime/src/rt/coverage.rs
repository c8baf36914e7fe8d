//! Counting executed tensor ops for staging coverage (`Stats::coverage`).
//!
//! Eager op calls are counted per thread with a plain thread-local increment in the op entry
//! point (`ops::apply`; compile-time work is not counted). A block that runs its statements
//! claims the ops its thread ran meanwhile (minus those claimed by blocks nested in it) and adds
//! them to its fragment's counter for the reason it ran eagerly: one atomic add per block run.
//! Ops claimed by no block ran in host code (host statements, code outside `#[janus]`
//! functions, eager `backward()` walks); a thread adds them to a global counter when it starts
//! a block's statements with none open (a sampled check does, at least every 4096 replays of a
//! variant) and when it asks for `stats()`. A replay stands for its recording's ops (derived from the variant's replay
//! count, see `rt::stats`), and a replayed backward adds the op count of its derived graph.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a block ran its statements, as counted for coverage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EagerKind {
    /// Recorded while its key was profiled (warm-up), or inline in an enclosing recording.
    Recorded,
    /// A replay checked against the statements (or a block inside a checked block's
    /// statements).
    Checked,
    /// The key's recording is unusable (a host read, a changed graph, a compile error, ...).
    Unstageable,
    /// Past the fragment's variant limit.
    VariantLimit,
    /// The key was being compiled on another thread.
    Busy,
    /// The replay panicked, so the statements ran.
    ReplayPanicked,
    /// A whole-function replay's assert did not hold: nothing was committed, the statements ran.
    SpeculationFailed,
    /// Mode eager: on purpose.
    ModeEager,
    /// Too few ops to gain from compiling (`min_ops`): on purpose.
    TooSmall,
    /// An input or output whose type cannot be keyed or rebuilt: on purpose.
    Opaque,
    /// A loop whose trip count changed between calls (or that is too long to unroll) runs on
    /// the host, its body dispatching to its own staged block per trip.
    Rolled,
    /// The compiled path cost more per call than the statements, so they ran instead for a
    /// while (or ran once to measure their cost; see `explain()`'s cost line).
    Cost,
}

impl EagerKind {
    /// Every kind, in counter order.
    pub const ALL: [EagerKind; 12] = [
        EagerKind::Recorded,
        EagerKind::Checked,
        EagerKind::Unstageable,
        EagerKind::VariantLimit,
        EagerKind::Busy,
        EagerKind::ReplayPanicked,
        EagerKind::SpeculationFailed,
        EagerKind::ModeEager,
        EagerKind::TooSmall,
        EagerKind::Opaque,
        EagerKind::Rolled,
        EagerKind::Cost,
    ];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            EagerKind::Recorded => "recorded (profiling)",
            EagerKind::Checked => "checked replays",
            EagerKind::Unstageable => "unusable recording",
            EagerKind::VariantLimit => "variant limit",
            EagerKind::Busy => "compiling elsewhere",
            EagerKind::ReplayPanicked => "replay panicked",
            EagerKind::SpeculationFailed => "speculation failed",
            EagerKind::ModeEager => "mode eager",
            EagerKind::TooSmall => "below min_ops",
            EagerKind::Opaque => "opaque input or output",
            EagerKind::Rolled => "loop rolled on the host",
            EagerKind::Cost => "cheaper eagerly",
        }
    }

    /// Whether the block stays eager by design (not counted against coverage).
    pub fn on_purpose(self) -> bool {
        matches!(self, EagerKind::ModeEager | EagerKind::TooSmall | EagerKind::Opaque)
    }
}

thread_local! {
    /// Of this thread's eager op calls, the ones claimed by blocks.
    static CLAIMED: Cell<u64> = const { Cell::new(0) };
    /// Of the unclaimed ones, those already added to `OUTSIDE`.
    static FLUSHED: Cell<u64> = const { Cell::new(0) };
    /// Blocks running their statements on this thread.
    static OPEN: Cell<u32> = const { Cell::new(0) };
}

/// Eager ops that ran outside every block, over all threads (as flushed).
static OUTSIDE: AtomicU64 = AtomicU64::new(0);

/// Adds this thread's unclaimed ops to the outside counter (only between blocks: inside one,
/// they still belong to it).
pub(crate) fn flush_outside() {
    if OPEN.with(Cell::get) > 0 {
        return;
    }
    let unclaimed = crate::eager::eager_op_count() - CLAIMED.with(Cell::get);
    let delta = unclaimed - FLUSHED.with(|f| f.replace(unclaimed));
    if delta > 0 {
        OUTSIDE.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Eager ops run outside blocks so far.
pub(crate) fn outside() -> u64 {
    OUTSIDE.load(Ordering::Relaxed)
}

/// Zeroes the outside counter.
pub(crate) fn reset_outside() {
    OUTSIDE.store(0, Ordering::Relaxed);
}

/// One block running its statements: on drop (after `exit`, or while a panic unwinds) it adds
/// the ops its thread ran meanwhile, minus nested blocks' claims, to `counter`.
pub(crate) struct OpScope {
    counter: &'static AtomicU64,
    ops_at_start: u64,
    claimed_at_start: u64,
}

impl OpScope {
    pub(crate) fn open(counter: &'static AtomicU64) -> OpScope {
        flush_outside();
        OPEN.with(|o| o.set(o.get() + 1));
        OpScope {
            counter,
            ops_at_start: crate::eager::eager_op_count(),
            claimed_at_start: CLAIMED.with(Cell::get),
        }
    }
}

impl Drop for OpScope {
    fn drop(&mut self) {
        let ran = crate::eager::eager_op_count() - self.ops_at_start;
        let nested = CLAIMED.with(Cell::get) - self.claimed_at_start;
        let own = ran - nested;
        self.counter.fetch_add(own, Ordering::Relaxed);
        CLAIMED.with(|c| c.set(c.get() + own));
        OPEN.with(|o| o.set(o.get() - 1));
    }
}
