//! A replay's heap allocations (issue 13: no allocation on the hit path other than the
//! outputs). A counting global allocator counts the calling thread's allocations over many
//! replays of a one-kernel block; the output tensor needs three (its buffer, the buffer's
//! `Arc` and the tensor), and nothing else may allocate: the executor's list of outputs is
//! one an earlier replay on this thread handed back.
//! This file holds one test, so no other test's allocations run on its thread.

use janus::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// const-initialised thread-local `Cell`, which allocates nothing itself.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

#[janus(min_ops = 1)]
fn tiny(x: &Tensor) -> Tensor {
    let y = x * 2.0 + 1.0;
    y
}

#[test]
fn a_replay_allocates_only_its_output() {
    janus::set_self_check(false); // a sampled check runs the statements too
    let x = Tensor::ones([1]);
    for _ in 0..10 {
        tiny(&x); // recorded, compiled, first replays
    }
    let before = janus::stats().function("tiny").map(|f| f.hits).sum::<u64>();
    let count = || ALLOCS.with(Cell::get);
    let start = count();
    let calls = 1000;
    for _ in 0..calls {
        assert_eq!(tiny(&x).to_vec::<f32>().len(), 1);
    }
    // `to_vec` allocates its own result: one per call.
    let per_call = (count() - start) as f64 / calls as f64 - 1.0;
    let hits = janus::stats().function("tiny").map(|f| f.hits).sum::<u64>() - before;
    assert_eq!(hits, calls, "every call replayed");
    assert!(per_call <= 3.0, "a replay allocated {per_call} times (3 expected: the output)");
}
