//! Each thread's memo of its recent hits: per block, the last two variants that replayed (or
//! that run their statements for good, being unstageable), so a call that repeats one compares
//! its inputs with that variant's key as it probes them, without building a key, hashing it or
//! locking the variant table (issue 13's dispatch budget).
//!
//! An entry is valid while its block's variant table is unchanged: every write to the table
//! bumps the block's generation ([`State::variants_mut`]), and an entry made under another
//! generation is ignored. So a memo hit returns exactly what a lookup in the table would.
//!
//! An entry holds its variant until a later hit replaces it: after `janus::reset_caches()`, a
//! thread's memo may keep up to `2 * SLOTS` old graphs (and their pooled arenas) alive.

use super::{Fragment, State, Variant, VariantTable};
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLockWriteGuard};

/// Direct-mapped slots, by block address.
const SLOTS: usize = 16;

/// A memoised hit: the block (its address), the table's generation, and the variant.
type Entry = (usize, u64, Arc<Variant>);

thread_local! {
    /// Per slot, the two most recent hits, the newest first.
    static HITS: RefCell<[[Option<Entry>; 2]; SLOTS]> =
        const { RefCell::new([const { [None, None] }; SLOTS]) };
}

fn slot(frag: &Fragment) -> (usize, usize) {
    let addr = frag as *const Fragment as usize;
    (addr, ((addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize)
}

impl State {
    /// The generation of the variant table, to pass to [`find`] and [`remember`].
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The variant table, for writing: a new generation, so no memoised hit outlives the
    /// change.
    pub(super) fn variants_mut(&self) -> RwLockWriteGuard<'_, VariantTable> {
        let map = self.variants.write().unwrap();
        self.generation.fetch_add(1, Ordering::AcqRel);
        map
    }
}

/// Runs `f` on this thread's memoised variants of `frag` made under `generation` (at most two,
/// the newest first), borrowed from the memo: the memo keeps them alive while `f` runs, so a
/// replay takes no reference count on its variant (two atomic operations). A [`remember`]
/// while `f` runs is skipped. `None` if the memo is in use already (a re-entrant call) or gone
/// (the thread is exiting).
#[inline(always)] // the hit path
pub(super) fn with_memoised<R>(
    frag: &Fragment,
    generation: u64,
    f: impl FnOnce([Option<&Arc<Variant>>; 2]) -> R,
) -> Option<R> {
    let (addr, i) = slot(frag);
    HITS.try_with(|h| {
        let h = h.try_borrow().ok()?;
        let [a, b] = &h[i];
        Some(f([valid(a, addr, generation), valid(b, addr, generation)]))
    })
    .ok()
    .flatten()
}

/// The entry's variant, if it was made for the block at `addr` under `generation`.
#[inline(always)]
fn valid(e: &Option<Entry>, addr: usize, generation: u64) -> Option<&Arc<Variant>> {
    e.as_ref().filter(|(a, g, _)| *a == addr && *g == generation).map(|e| &e.2)
}

/// Memoises `v`, a variant of `frag` found in its table under `generation` that is staged, or
/// that runs its statements for good (unstageable).
pub(super) fn remember(frag: &Fragment, generation: u64, v: &Arc<Variant>) {
    let (addr, i) = slot(frag);
    HITS.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            let pair = &mut h[i];
            if !matches!(&pair[0], Some((a, g, u)) if *a == addr && *g == generation && Arc::ptr_eq(u, v)) {
                pair[1] = pair[0].replace((addr, generation, v.clone()));
            }
        }
    });
}
