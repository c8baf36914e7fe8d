//! A caching device allocator: freed blocks go to size-bucketed free lists and serve later
//! requests of the same bucket without a driver call.
//!
//! All work runs on one stream per device, so a block freed on the host may be handed out again
//! at once: every kernel that used it was enqueued before any kernel of its next owner
//! (stream order). Sizes are rounded up to buckets with at most 1/8 slack, so a
//! request is served only by a block of its own bucket, and at most 12.5% of a block is wasted.
//! When the driver reports out-of-memory, the cache is released and the request retried once.
//!
//! While a thread captures a CUDA graph, the blocks it frees are *held* for that graph instead
//! of returning to the cache, because the captured kernels keep their addresses; the graph
//! gives them back when it is destroyed.

use std::collections::BTreeMap;

/// Device memory statistics, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in blocks handed out and not yet freed (bucket sizes).
    pub allocated: usize,
    /// Bytes obtained from the driver and not returned: allocated plus cached.
    pub reserved: usize,
    /// The highest `allocated` so far.
    pub peak_allocated: usize,
    /// The highest `reserved` so far.
    pub peak_reserved: usize,
    /// Requests served.
    pub requests: u64,
    /// Requests that needed a driver allocation (the rest came from the cache).
    pub driver_allocs: u64,
}

/// The driver side of the allocator (a real device, or a fake in tests).
pub trait RawAlloc {
    /// Error of a failed allocation.
    type Error;
    /// Allocates `bytes` (a bucket size) and returns the address.
    fn raw_alloc(&mut self, bytes: usize) -> Result<u64, Self::Error>;
    /// Returns an address obtained from `raw_alloc`.
    fn raw_free(&mut self, ptr: u64);
}

/// The bucket a request of `bytes` is served from: multiples of 512 bytes up to 4 KiB, then
/// eight buckets per power of two.
pub fn bucket(bytes: usize) -> usize {
    let b = bytes.max(1);
    if b <= 4096 {
        return b.div_ceil(512) * 512;
    }
    let step = 1usize << (usize::BITS - 1 - b.leading_zeros()).saturating_sub(3);
    b.div_ceil(step) * step
}

/// The caching allocator's bookkeeping, generic over the driver side.
pub struct Cache<A: RawAlloc> {
    raw: A,
    free: BTreeMap<usize, Vec<u64>>,
    stats: MemoryStats,
}

impl<A: RawAlloc> Cache<A> {
    /// An empty cache over `raw`.
    pub fn new(raw: A) -> Self {
        Cache { raw, free: BTreeMap::new(), stats: MemoryStats::default() }
    }

    /// Statistics so far.
    pub fn stats(&self) -> MemoryStats {
        self.stats
    }

    /// The driver side.
    pub fn raw(&mut self) -> &mut A {
        &mut self.raw
    }

    /// A block of at least `bytes`; returns its address and bucket size.
    pub fn alloc(&mut self, bytes: usize) -> Result<(u64, usize), A::Error> {
        let size = bucket(bytes);
        self.stats.requests += 1;
        let ptr = match self.free.get_mut(&size).and_then(Vec::pop) {
            Some(p) => p,
            None => {
                let p = match self.raw.raw_alloc(size) {
                    Ok(p) => p,
                    Err(_) => {
                        // Out of memory (or another failure): give the cache back and retry.
                        self.release_cached();
                        self.raw.raw_alloc(size)?
                    }
                };
                self.stats.driver_allocs += 1;
                self.stats.reserved += size;
                self.stats.peak_reserved = self.stats.peak_reserved.max(self.stats.reserved);
                p
            }
        };
        self.stats.allocated += size;
        self.stats.peak_allocated = self.stats.peak_allocated.max(self.stats.allocated);
        Ok((ptr, size))
    }

    /// Returns a block (address and bucket size from [`alloc`](Self::alloc)) to the cache.
    pub fn free(&mut self, ptr: u64, size: usize) {
        self.stats.allocated -= size;
        self.free.entry(size).or_default().push(ptr);
    }

    /// Returns every cached block to the driver.
    pub fn release_cached(&mut self) {
        for (size, ptrs) in std::mem::take(&mut self.free) {
            for p in ptrs {
                self.raw.raw_free(p);
                self.stats.reserved -= size;
            }
        }
    }

    /// Bytes held in the cache (reserved but not allocated).
    pub fn cached_bytes(&self) -> usize {
        self.free.iter().map(|(s, v)| s * v.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver with `limit` bytes of memory.
    struct Fake {
        next: u64,
        live: std::collections::HashMap<u64, usize>,
        limit: usize,
    }

    impl Fake {
        fn new(limit: usize) -> Self {
            Fake { next: 0, live: Default::default(), limit }
        }
    }

    impl RawAlloc for Fake {
        type Error = ();
        fn raw_alloc(&mut self, bytes: usize) -> Result<u64, ()> {
            if self.live.values().sum::<usize>() + bytes > self.limit {
                return Err(());
            }
            self.next += bytes as u64;
            self.live.insert(self.next, bytes);
            Ok(self.next)
        }
        fn raw_free(&mut self, ptr: u64) {
            self.live.remove(&ptr).expect("freed twice or never allocated");
        }
    }

    #[test]
    fn buckets_bound_the_waste() {
        for b in [1usize, 511, 512, 513, 4096, 4097, 10_000, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let k = bucket(b);
            assert!(k >= b, "{b} -> {k}");
            assert!(k - b <= 512.max(b / 8), "{b} -> {k}");
            assert_eq!(bucket(k), k, "a bucket size is its own bucket");
        }
    }

    #[test]
    fn freed_blocks_are_reused_and_counted() {
        let mut c = Cache::new(Fake::new(1 << 30));
        let (a, sa) = c.alloc(1000).unwrap();
        let (b, _) = c.alloc(3000).unwrap();
        assert_ne!(a, b);
        c.free(a, sa);
        let (a2, _) = c.alloc(900).unwrap(); // same bucket (1024)
        assert_eq!(a, a2);
        let s = c.stats();
        assert_eq!((s.requests, s.driver_allocs), (3, 2));
        assert_eq!(s.allocated, 1024 + 3072);
        assert_eq!(s.reserved, 1024 + 3072);
        assert_eq!(s.peak_allocated, 1024 + 3072);
    }

    #[test]
    fn out_of_memory_releases_the_cache_and_retries() {
        let mut c = Cache::new(Fake::new(10_000));
        let (a, sa) = c.alloc(4096).unwrap();
        c.free(a, sa);
        assert_eq!(c.cached_bytes(), 4096);
        // 4096 cached + 8192 requested exceed the limit: the cache must be given back first.
        assert!(c.alloc(8000).is_ok());
        assert_eq!(c.cached_bytes(), 0);
        assert_eq!(c.stats().reserved, 8192);
        assert!(c.alloc(8000).is_err(), "a request past the device's memory fails");
    }
}
