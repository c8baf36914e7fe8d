//! A process-wide shelf of large arenas, lent to whichever executor runs next.
//!
//! Why: each shape instance of a graph has an executor of its own, and each executor used to
//! keep its run's arenas pooled for its next run. With a new batch size every call (CartPole
//! with 256 environments trains on 6k to 126k rows, a new size each round), every instance kept
//! an arena sized for its rows, and 18 instances held 2.3 GB where eager mode peaked at
//! 0.42 GB; a third of the run went to the kernel zeroing fresh pages (README, "Large varying
//! batches"). Arenas of at least [`MIN_BYTES`] therefore go back to this shelf after each run,
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

use super::pages::ArenaBuf;
use std::sync::Mutex;

/// Arenas at least this large are lent from the shelf instead of kept by their executor.
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// What the shelf may hold without freeing anything, if its largest arena is smaller than half.
pub(crate) const FLOOR_BYTES: usize = 256 << 20;

/// The arenas not in use, oldest first, per dtype, and their total bytes.
pub(crate) struct Shelf {
    f32: Vec<ArenaBuf<f32>>,
    f64: Vec<ArenaBuf<f64>>,
    i64: Vec<ArenaBuf<i64>>,
    bool: Vec<ArenaBuf<bool>>,
    /// Return order across the dtypes: (dtype slot, bytes) per arena, oldest first.
    order: Vec<(usize, usize)>,
    bytes: usize,
}

static SHELF: Mutex<Shelf> = Mutex::new(Shelf {
    f32: Vec::new(),
    f64: Vec::new(),
    i64: Vec::new(),
    bool: Vec::new(),
    order: Vec::new(),
    bytes: 0,
});

/// The element types of the four arenas, each with its row of the shelf.
pub(crate) trait Shelved: Clone + Default + Sized + 'static {
    /// Slot of the dtype (as `memory::dtype_slot`).
    const SLOT: usize;
    fn row(s: &mut Shelf) -> &mut Vec<ArenaBuf<Self>>;
}

macro_rules! shelved {
    ($($t:ty => $slot:literal, $field:ident;)*) => {$(
        impl Shelved for $t {
            const SLOT: usize = $slot;
            fn row(s: &mut Shelf) -> &mut Vec<ArenaBuf<Self>> {
                &mut s.$field
            }
        }
    )*};
}
shelved! { f32 => 0, f32; f64 => 1, f64; i64 => 2, i64; bool => 3, bool; }

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
        let row = T::row(&mut s);
        let best = (0..row.len()).filter(|&i| row[i].len() >= len).min_by_key(|&i| row[i].len());
        if let Some(i) = best {
            let buf = row.remove(i);
            let b = bytes_of::<T>(buf.len());
            // Of the arenas of this dtype and size, the order forgets the oldest: which one it
            // was does not matter, only the bytes and the count.
            let k = s
                .order
                .iter()
                .position(|&(slot, n)| slot == T::SLOT && n == b)
                .expect("shelf order lists it");
            s.order.remove(k);
            s.bytes -= b;
            return buf;
        }
    }
    ArenaBuf::new(size_class(len))
}

/// Puts `buf` back, freeing the oldest arenas while the shelf is over budget (never the last).
pub(crate) fn put<T: Shelved>(buf: ArenaBuf<T>) {
    let mut freed = Vec::new();
    {
        let mut s = SHELF.lock().unwrap();
        let b = bytes_of::<T>(buf.len());
        T::row(&mut s).push(buf);
        s.order.push((T::SLOT, b));
        s.bytes += b;
        loop {
            let largest = s.order.iter().map(|&(_, n)| n).max().unwrap_or(0);
            if s.order.len() <= 1 || s.bytes <= FLOOR_BYTES.max(2 * largest) {
                break;
            }
            let (slot, n) = s.order.remove(0);
            s.bytes -= n;
            freed.push(remove_oldest(&mut s, slot, n));
        }
    }
    // Unmapping hundreds of MiB takes a while: not under the lock.
    drop(freed);
}

/// Removes the first arena of dtype `slot` and `bytes` from its row (the oldest: rows are in
/// return order).
/// Boxed, to be dropped outside the lock.
fn remove_oldest(s: &mut Shelf, slot: usize, bytes: usize) -> Box<dyn std::any::Any> {
    fn first<T>(row: &mut Vec<ArenaBuf<T>>, bytes: usize) -> ArenaBuf<T> {
        let i = row.iter().position(|a| bytes_of::<T>(a.len()) == bytes).expect("shelf row holds it");
        row.remove(i)
    }
    match slot {
        0 => Box::new(first(&mut s.f32, bytes)),
        1 => Box::new(first(&mut s.f64, bytes)),
        2 => Box::new(first(&mut s.i64, bytes)),
        _ => Box::new(first(&mut s.bool, bytes)),
    }
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
        s.order.clear();
        s.bytes = 0;
        (
            std::mem::take(&mut s.f32),
            std::mem::take(&mut s.f64),
            std::mem::take(&mut s.i64),
            std::mem::take(&mut s.bool),
        )
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
