//! Software prefetch: asking the caches for memory that a later step reads, so that it arrives
//! while other work runs.

/// Bytes per cache line on the CPUs janus runs on.
const LINE: usize = 64;

/// Requests the cache lines of the `bytes` bytes from `start` into the caches (the `T0` hint:
/// all levels), without waiting for them. Takes an address, not a slice: the memory may be
/// written by another thread meanwhile (a prefetch neither reads it into the program nor
/// makes a reference to it). A no-op on CPUs without a prefetch instruction janus issues.
pub fn lines(start: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let mut off = 0;
        while off < bytes {
            // SAFETY: a prefetch only hints the caches: it never faults, whatever the address,
            // and neither reads nor writes memory as far as the program can tell.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(off).cast()) };
            off += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}
