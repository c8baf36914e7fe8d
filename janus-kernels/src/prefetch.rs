//! Software prefetch: asking the caches for memory that a later step reads, so that it arrives
//! while other work runs.

/// Bytes per cache line on the CPUs janus runs on.
const LINE: usize = 64;

/// Requests every cache line of `data` into the caches (the `T0` hint: all levels), without
/// waiting for them. A no-op on CPUs without a prefetch instruction janus issues.
pub fn slice<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = data.as_ptr().cast::<i8>();
        let bytes = std::mem::size_of_val(data);
        let mut off = 0;
        while off < bytes {
            // SAFETY: `p + off` lies inside `data`; a prefetch only hints the caches, it reads
            // nothing into the program and never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
            off += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}
