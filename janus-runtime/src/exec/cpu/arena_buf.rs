//! The memory of one CPU arena: a zeroed `Vec` whose used part starts on a cache line.
//!
//! (Arenas in mappings of their own marked for transparent huge pages were tried and measured
//! within noise on the LSTM, CNN and Transformer steps: `docs/perf/`, 2026-12-02.)

/// A cache line: where arenas start.
const LINE: usize = 64;

/// One arena of `T`, zeroed at creation: the allocator's memory, from element `skip` (the first
/// on a cache-line boundary), `len` elements long.
pub(crate) struct ArenaBuf<T> {
    buf: Vec<T>,
    skip: usize,
    len: usize,
}

impl<T: Clone + Default> ArenaBuf<T> {
    /// `len` zeroed elements (`T::default()` must be all-zero bits, as for the arenas' types).
    pub(crate) fn new(len: usize) -> Self {
        // From the first cache line: glibc's 16-byte alignment left the CartPole update's
        // arena 48 bytes past one, so every 64-byte vector load of it spanned two lines (serial
        // runs 71-75 µs against 66-70 aligned).
        let size = std::mem::size_of::<T>().max(1);
        let buf = vec![T::default(); len + LINE / size];
        let skip = (LINE - buf.as_ptr() as usize % LINE) % LINE / size;
        ArenaBuf { buf, skip, len }
    }
}

impl<T> ArenaBuf<T> {
    /// An empty arena (no allocation).
    pub(crate) const fn empty() -> Self {
        ArenaBuf { buf: Vec::new(), skip: 0, len: 0 }
    }

    /// Elements the arena holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The arena's first element.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        // SAFETY: `skip` is within the allocation (`new` allocated that many extra).
        unsafe { self.buf.as_mut_ptr().add(self.skip) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_start_zeroed_on_a_cache_line_and_hold_their_length() {
        for len in [0, 10, (1 << 20) + 3] {
            let mut a = ArenaBuf::<f32>::new(len);
            let p = a.as_mut_ptr();
            // SAFETY: the arena holds `len` elements.
            let s = unsafe { std::slice::from_raw_parts_mut(p, len) };
            assert!(s.iter().all(|&x| x.to_bits() == 0));
            s.iter_mut().enumerate().for_each(|(i, x)| *x = i as f32);
            assert!(len == 0 || s[len - 1] == (len - 1) as f32);
            assert_eq!(p as usize % LINE, 0, "an arena of {len} starts on a cache line");
        }
    }
}
