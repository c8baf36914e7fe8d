//! A process-wide shelf of large arenas, lent to whichever executor runs next.
//!
//! Why: each shape instance of a graph has an executor of its own, and each executor used to
//! keep its run's arenas pooled for its next run. With a new batch size every call (CartPole
//! with 256 environments trains on 6k to 126k rows, a new size each round), every instance kept
//! an arena sized for its rows, and 18 instances held 2.3 GB where eager mode peaked at
//! 0.42 GB; a third of the run went to the kernel zeroing fresh pages (docs/perf/2026-12-04.md,
//! large arenas shared). Arenas of at least [`MIN_BYTES`] therefore go back to this shelf after each run,
//! and a run takes the smallest one that holds it. Fresh ones are rounded up to a size class
//! (quarter powers of two), so that a slightly larger batch next round reuses the last one.
//!
//! The shelf keeps the arenas most recently returned and frees the oldest while the total is
//! over its budget: [`FLOOR_BYTES`], or twice its largest arena when that is more (so that two
//! graphs that alternate, a training step and an evaluation, each find theirs). It never
//! frees the only arena it has. [`release`] frees all of them (`janus::release_cached_arenas`).
//!
//! Smaller arenas stay with their executor: taking one from here costs a lock (~20 ns), which a
//! run that walks a MiB of memory does not notice but a 200 ns hit would.

use super::arena_buf::ArenaBuf;
use std::sync::Mutex;

/// Arenas at least this large are lent from the shelf instead of kept by their executor.
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// What the shelf may hold without freeing anything, if its largest arena is smaller than half.
pub(crate) const FLOOR_BYTES: usize = 256 << 20;

/// An arena on the shelf, of any dtype.
pub(crate) enum Entry {
    F32(ArenaBuf<f32>),
    F64(ArenaBuf<f64>),
    I64(ArenaBuf<i64>),
    Bool(ArenaBuf<bool>),
}

impl Entry {
    fn bytes(&self) -> usize {
        match self {
            Entry::F32(a) => bytes_of::<f32>(a.len()),
            Entry::F64(a) => bytes_of::<f64>(a.len()),
            Entry::I64(a) => bytes_of::<i64>(a.len()),
            Entry::Bool(a) => bytes_of::<bool>(a.len()),
        }
    }
}

/// The arenas not in use, oldest first, and their total bytes.
struct Shelf {
    entries: Vec<Entry>,
    bytes: usize,
}

static SHELF: Mutex<Shelf> = Mutex::new(Shelf { entries: Vec::new(), bytes: 0 });

/// The element types of the four arenas, each with its variant of [`Entry`].
pub(crate) trait Shelved: Clone + Default + Sized + 'static {
    fn wrap(a: ArenaBuf<Self>) -> Entry;
    /// The entry's arena, if it is of this dtype.
    fn peek(e: &Entry) -> Option<&ArenaBuf<Self>>;
    fn unwrap(e: Entry) -> ArenaBuf<Self>;
}

macro_rules! shelved {
    ($($t:ty => $variant:ident;)*) => {$(
        impl Shelved for $t {
            fn wrap(a: ArenaBuf<Self>) -> Entry {
                Entry::$variant(a)
            }
            fn peek(e: &Entry) -> Option<&ArenaBuf<Self>> {
                match e {
                    Entry::$variant(a) => Some(a),
                    _ => None,
                }
            }
            fn unwrap(e: Entry) -> ArenaBuf<Self> {
                match e {
                    Entry::$variant(a) => a,
                    _ => unreachable!("peeked as this dtype"),
                }
            }
        }
    )*};
}
shelved! { f32 => F32; f64 => F64; i64 => I64; bool => Bool; }

fn bytes_of<T>(len: usize) -> usize {
    len * std::mem::size_of::<T>()
}

/// Whether an arena of `len` elements of `T` is lent from the shelf.
pub(crate) fn lends<T>(len: usize) -> bool {
    bytes_of::<T>(len) >= MIN_BYTES
}

/// `len` rounded up to its size class: the next of 1, 1.25, 1.5, 1.75 times a power of two.
fn size_class(len: usize) -> usize {
    if len <= 4 {
        return len;
    }
    let quarter = 1usize << (usize::BITS - 1 - len.leading_zeros() - 2);
    len.div_ceil(quarter) * quarter
}

/// An arena of at least `len` elements: the smallest on the shelf that holds them, else a fresh
/// zeroed one of `len`'s size class. Its contents are whatever its last run left.
pub(crate) fn take<T: Shelved>(len: usize) -> ArenaBuf<T> {
    {
        let mut s = SHELF.lock().unwrap();
        let fits = |i: usize| T::peek(&s.entries[i]).map(ArenaBuf::len).filter(|&n| n >= len);
        if let Some(i) = (0..s.entries.len()).filter(|&i| fits(i).is_some()).min_by_key(|&i| fits(i)) {
            let e = s.entries.remove(i);
            s.bytes -= e.bytes();
            return T::unwrap(e);
        }
    }
    ArenaBuf::new(size_class(len))
}

/// Puts `buf` back, freeing the oldest arenas while the shelf is over budget (never the last).
pub(crate) fn put<T: Shelved>(buf: ArenaBuf<T>) {
    let mut freed = Vec::new();
    {
        let mut s = SHELF.lock().unwrap();
        let e = T::wrap(buf);
        s.bytes += e.bytes();
        s.entries.push(e);
        loop {
            let largest = s.entries.iter().map(Entry::bytes).max().unwrap_or(0);
            if s.entries.len() <= 1 || s.bytes <= FLOOR_BYTES.max(2 * largest) {
                break;
            }
            let oldest = s.entries.remove(0);
            s.bytes -= oldest.bytes();
            freed.push(oldest);
        }
    }
    // Unmapping hundreds of MiB takes a while: not under the lock.
    drop(freed);
}

/// Bytes of the large CPU arenas that compiled graphs keep between runs, shared by all of
/// them (those of runs in progress not counted). Arenas of 1 MiB or more are shared: the
/// cache keeps the most recently used within 256 MiB, or twice its largest arena if that is
/// more, and always keeps the last one.
pub fn cached_bytes() -> usize {
    SHELF.lock().unwrap().bytes
}

/// Frees the cached CPU arenas of [`cached_bytes`] (as `torch.cuda.empty_cache` does for
/// PyTorch's GPU cache). Runs in progress keep theirs and return them as usual; later runs
/// allocate afresh.
pub fn release() {
    let freed = {
        let mut s = SHELF.lock().unwrap();
        s.bytes = 0;
        std::mem::take(&mut s.entries)
    };
    drop(freed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_quarter_powers_of_two_and_hold_the_length() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(4), 4);
        assert_eq!(size_class(5), 5);
        assert_eq!(size_class(8), 8);
        assert_eq!(size_class(9), 10);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), 5 << 18);
        for len in (1..5000).chain([103_079 * 480, 104_526 * 480]) {
            let c = size_class(len);
            assert!(c >= len && c <= len + len / 4 + 1, "class {c} of {len}");
        }
        // Consecutive CartPole sizes share a class.
        assert_eq!(size_class(103_079 * 480), size_class(104_526 * 480));
    }

    /// One test, since the shelf is the process's (other tests of this binary that run graphs
    /// with large arenas touch it too: only this test's own arenas are counted, by size).
    #[test]
    fn the_shelf_lends_the_smallest_fit_and_frees_the_oldest_over_budget() {
        // Sizes no other unit test's graph uses: odd numbers of elements well above a MiB.
        const A: usize = (3 << 20) + 7;
        let a = take::<i64>(A);
        assert!(a.len() >= A && a.len() <= A + A / 4 + 1);
        let a_len = a.len();
        put(a);
        // A smaller need takes the same arena back.
        let again = take::<i64>(A - 1000);
        assert_eq!(again.len(), a_len);
        put(again);
        // Filling the shelf past its budget with arenas of a size of their own frees the
        // oldest, and never lets it grow past the budget by more than the last arena.
        let big = FLOOR_BYTES / 8 / 3 + 11;
        for _ in 0..8 {
            let bufs: Vec<_> = (0..4).map(|_| take::<i64>(big)).collect();
            bufs.into_iter().for_each(put);
            let largest = bytes_of::<i64>(size_class(big));
            assert!(
                cached_bytes() <= FLOOR_BYTES.max(2 * largest) + largest,
                "{} bytes cached",
                cached_bytes()
            );
        }
        release();
        assert_eq!(cached_bytes(), 0);
        // The shelf keeps one arena even when it alone is over the budget.
        let huge = take::<bool>(FLOOR_BYTES + 3);
        put(huge);
        assert!(cached_bytes() >= FLOOR_BYTES);
        release();
    }
}
