//! Arena memory in 2 MiB pages where Linux grants them: a mapping of its own, aligned to 2 MiB
//! and marked `MADV_HUGEPAGE`, so that the kernel backs it with transparent huge pages when
//! their mode is `madvise` (the default of many distributions) or `always`.
//!
//! Why: a training step's arena is several MiB (6.8 MB for the LSTM step) and is walked once
//! forward and once backward per step, besides the packed weights and gemm's buffers; in 4 KiB
//! pages that is some 1,700 translations, near the size of the second-level TLB.
//!
//! Opt-in (`JANUS_HUGEPAGES=1`, [`crate::set_hugepages`]): measured within noise on the bench's
//! LSTM, CNN and Transformer steps (README, "Performance"). Otherwise, below [`MIN_BYTES`], off
//! Linux, or when the mapping fails, the arena is an ordinary zeroed `Vec`. Either way it starts zeroed.

/// Arenas smaller than this stay in the allocator's memory: a huge page would be mostly unused.
pub(crate) const MIN_BYTES: usize = 2 << 20;

/// A cache line: where heap arenas start.
const LINE: usize = 64;

/// One arena of `T`, zeroed at creation.
pub(crate) enum ArenaBuf<T> {
    /// The allocator's memory, from element `.1` (the first on a cache-line boundary), `.2`
    /// elements long.
    Heap(Vec<T>, usize, usize),
    /// A mapping of `map_len` bytes at `map`; the arena starts at its first 2 MiB boundary and
    /// holds `len` elements.
    #[cfg(target_os = "linux")]
    Mapped { map: *mut libc::c_void, map_len: usize, start: *mut T, len: usize },
}

// SAFETY: the mapping is owned by the value like a `Vec`'s memory, and is only reached through
// `&mut self` (`as_mut_ptr`) or dropped with it.
unsafe impl<T: Send> Send for ArenaBuf<T> {}
// SAFETY: as above; `&self` gives no access to the memory.
unsafe impl<T: Sync> Sync for ArenaBuf<T> {}

impl<T: Clone + Default> ArenaBuf<T> {
    /// `len` zeroed elements (`T::default()` must be all-zero bits, as for the arenas' types).
    pub(crate) fn new(len: usize) -> Self {
        let bytes = len * std::mem::size_of::<T>();
        if bytes >= MIN_BYTES && crate::config::hugepages() {
            #[cfg(target_os = "linux")]
            if let Some(buf) = Self::mapped(len) {
                return buf;
            }
        }
        // From the first cache line: glibc's 16-byte alignment left the CartPole update's
        // arena 48 bytes past one, so every 64-byte vector load of it spanned two lines (serial
        // runs 71-75 µs against 66-70 aligned).
        let size = std::mem::size_of::<T>().max(1);
        let v = vec![T::default(); len + LINE / size];
        let skip = (LINE - v.as_ptr() as usize % LINE) % LINE / size;
        ArenaBuf::Heap(v, skip, len)
    }

    #[cfg(target_os = "linux")]
    fn mapped(len: usize) -> Option<Self> {
        const HUGE: usize = 2 << 20;
        let bytes = len * std::mem::size_of::<T>();
        let used = bytes.div_ceil(HUGE) * HUGE;
        let map_len = used + HUGE;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory; the result is checked against MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let skip = (HUGE - map as usize % HUGE) % HUGE;
        // SAFETY: `skip < HUGE` and `skip + used <= map_len`, so the range is inside the mapping.
        let start = unsafe { map.cast::<u8>().add(skip) };
        // SAFETY: advice on a range of our own mapping; a refusal (THP off) is harmless.
        unsafe { libc::madvise(start.cast(), used, libc::MADV_HUGEPAGE) };
        Some(ArenaBuf::Mapped { map, map_len, start: start.cast(), len })
    }
}

impl<T> ArenaBuf<T> {
    /// An empty arena (no allocation).
    pub(crate) const fn empty() -> Self {
        ArenaBuf::Heap(Vec::new(), 0, 0)
    }

    /// Elements the arena holds.
    pub(crate) fn len(&self) -> usize {
        match self {
            ArenaBuf::Heap(_, _, len) => *len,
            #[cfg(target_os = "linux")]
            ArenaBuf::Mapped { len, .. } => *len,
        }
    }

    /// The arena's first element.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        match self {
            // SAFETY: `skip` is within the allocation (`new` allocated that many extra).
            ArenaBuf::Heap(v, skip, _) => unsafe { v.as_mut_ptr().add(*skip) },
            #[cfg(target_os = "linux")]
            ArenaBuf::Mapped { start, .. } => *start,
        }
    }

    /// Whether the arena is a 2 MiB-aligned mapping marked for huge pages.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        !matches!(self, ArenaBuf::Heap(..))
    }
}

impl<T> Drop for ArenaBuf<T> {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let ArenaBuf::Mapped { map, map_len, .. } = *self {
            // SAFETY: the mapping was made by `mapped` with this length and is unmapped once.
            unsafe { libc::munmap(map, map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under whichever setting the test process has (the mapped path itself: the next test,
    /// and `tests/opt_in_memory.rs` through the switch); on a cache line either way.
    #[test]
    fn arenas_start_zeroed_and_hold_their_length_either_way() {
        for len in [0, 10, MIN_BYTES / 4 + 3] {
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

    #[cfg(target_os = "linux")]
    #[test]
    fn mapped_arenas_start_zeroed_on_a_2_mib_boundary() {
        let len = 3 * MIN_BYTES / 4 + 5;
        let mut a = ArenaBuf::<f32>::mapped(len).expect("an anonymous mapping of 8 MiB");
        assert!(a.is_mapped());
        let p = a.as_mut_ptr();
        assert_eq!(p as usize % (2 << 20), 0, "a mapped arena starts on a 2 MiB boundary");
        // SAFETY: the mapping holds at least `len` elements.
        let s = unsafe { std::slice::from_raw_parts_mut(p, len) };
        assert!(s.iter().all(|&x| x.to_bits() == 0));
        s.iter_mut().enumerate().for_each(|(i, x)| *x = i as f32);
        assert_eq!(s[len - 1], (len - 1) as f32);
    }
}
