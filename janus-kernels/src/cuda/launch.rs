//! Kernel arguments and launch geometry.

use super::library::MAX_RANK;
use std::ffi::c_void;

/// Arguments of one launch, each stored in its own little buffer of 8-byte words (the
/// driver reads each argument through a pointer, as many bytes as the kernel declares).
#[derive(Default)]
pub struct Args {
    words: Vec<Vec<u64>>,
}

impl Args {
    /// No arguments yet.
    pub fn new() -> Self {
        Args::default()
    }

    /// A device address.
    pub fn ptr(mut self, p: u64) -> Self {
        self.words.push(vec![p]);
        self
    }

    /// A 64-bit integer (`i64` or `u64` in the kernel).
    pub fn u64(mut self, v: u64) -> Self {
        self.words.push(vec![v]);
        self
    }

    /// A 64-bit signed integer.
    pub fn i64(self, v: i64) -> Self {
        self.u64(v as u64)
    }

    /// A 32-bit integer (`int` or `u32` in the kernel: the low four bytes are read).
    pub fn u32(self, v: u32) -> Self {
        self.u64(v as u64)
    }

    /// A struct passed by value, as its 8-byte words.
    pub fn words(mut self, w: Vec<u64>) -> Self {
        self.words.push(w);
        self
    }

    /// An `ND` struct (rank, shape and strides, padded to `MAX_RANK`).
    pub fn nd(self, shape: &[usize], strides: &[usize]) -> Self {
        self.words(nd_words(shape, strides))
    }

    /// `rest`'s arguments after these.
    pub fn append(&mut self, rest: Args) {
        self.words.extend(rest.words);
    }

    /// Pointers to each argument, as `cuLaunchKernel` takes them. Valid while `self` lives.
    pub fn pointers(&mut self) -> Vec<*mut c_void> {
        self.words.iter_mut().map(|w| w.as_mut_ptr() as *mut c_void).collect()
    }
}

/// The words of the library's `struct ND { i64 rank; i64 shape[8]; i64 st[8]; }`.
pub fn nd_words(shape: &[usize], strides: &[usize]) -> Vec<u64> {
    assert!(shape.len() <= MAX_RANK, "cuda: rank {} exceeds the kernels' limit of {MAX_RANK}", shape.len());
    let mut w = vec![0u64; 1 + 2 * MAX_RANK];
    w[0] = shape.len() as u64;
    for (i, (&s, &st)) in shape.iter().zip(strides).enumerate() {
        w[1 + i] = s as u64;
        w[1 + MAX_RANK + i] = st as u64;
    }
    w
}

/// Threads per block of every janus kernel.
pub const BLOCK: u32 = 256;

/// Blocks for `units` units of work of one thread each (grid-stride loops cover the rest).
pub fn grid_for(units: usize, sm_count: u32) -> u32 {
    let want = units.div_ceil(BLOCK as usize).max(1);
    want.min(sm_count as usize * 16).max(1) as u32
}

/// The grid of a stage copy of `entries` copies, the largest `max_bytes` long: `(x, y)` with y
/// one row of blocks per entry and x enough 16-byte moves per thread to cover the largest,
/// up to 4 blocks per SM in all (the copies are bandwidth bound).
pub fn stage_grid(entries: usize, max_bytes: usize, sm_count: u32) -> (u32, u32) {
    let y = entries.max(1);
    let want = max_bytes.div_ceil(16 * BLOCK as usize).max(1);
    let cap = (sm_count as usize * 4).div_ceil(y).max(1);
    (want.min(cap) as u32, y as u32)
}

/// Blocks for `units` units of one warp each.
pub fn grid_for_warps(units: usize, sm_count: u32) -> u32 {
    grid_for(units.saturating_mul(32), sm_count)
}
