//! The per-thread Philox streams behind `randn`, `rand`, `multinomial` and layer initialisers.
//!
//! Each thread draws from its own stream `(key, counter)`. `manual_seed(s)` makes the calling
//! thread's stream a pure function of `s` (stream index 0) and sets the seed for threads that
//! draw for the first time afterwards (stream indices 1, 2, ... in order of first use). Threads
//! that already drew keep their streams. A draw of `n` values advances the counter by the number
//! of Philox blocks it used, whether it ran eagerly or in a compiled graph.

use crate::Tensor;
use janus_kernels::CpuBuffer;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

const DEFAULT_SEED: u64 = 0x5EED_0000_0000_0001;

static GLOBAL_SEED: AtomicU64 = AtomicU64::new(DEFAULT_SEED);
static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Copy)]
struct Stream {
    key: u64,
    counter: u64,
}

thread_local! {
    static STREAM: Cell<Option<Stream>> = const { Cell::new(None) };
}

/// SplitMix64 finaliser: decorrelates (seed, stream index) into a Philox key.
fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Seeds the random stream of the calling thread (and of threads that start drawing later).
///
/// Inside a `#[janus]` block's recording (a helper that reseeds), the recording becomes
/// unusable: a replay would skip the reseeding, so the block runs its statements.
pub fn manual_seed(seed: u64) {
    crate::recorder::reseeded("manual_seed");
    GLOBAL_SEED.store(seed, Ordering::Relaxed);
    STREAM.with(|s| s.set(Some(Stream { key: mix(seed, 0), counter: 0 })));
}

fn current() -> Stream {
    STREAM.with(|s| match s.get() {
        Some(st) => st,
        None => {
            let index = NEXT_STREAM.fetch_add(1, Ordering::Relaxed);
            let st = Stream { key: mix(GLOBAL_SEED.load(Ordering::Relaxed), index), counter: 0 };
            s.set(Some(st));
            st
        }
    })
}

/// The calling thread's stream position as `(key, counter)`.
pub fn stream_position() -> (u64, u64) {
    let s = current();
    (s.key, s.counter)
}

/// Moves the calling thread's stream to `(key, counter)`, as returned by [`stream_position`].
/// Like [`manual_seed`], it makes an active `#[janus]` recording unusable.
pub fn set_stream_position(key: u64, counter: u64) {
    crate::recorder::reseeded("set_stream_position");
    move_to(key, counter);
}

/// Moves the calling thread's stream to `(key, counter)`: the runtime's own rewinds and
/// advances (a replay's draws, a failed speculation).
pub(crate) fn move_to(key: u64, counter: u64) {
    STREAM.with(|s| s.set(Some(Stream { key, counter })));
}

/// Reserves `blocks` counter values and returns the state tensor `i64[2] = (key, counter)` that
/// random ops read.
pub(crate) fn take(blocks: u64) -> Tensor {
    let s = current();
    STREAM.with(|c| c.set(Some(Stream { key: s.key, counter: s.counter.wrapping_add(blocks) })));
    let state = Tensor::from_buffer(CpuBuffer::I64(vec![s.key as i64, s.counter as i64]), [2].into());
    crate::recorder::rng_state(&state, blocks);
    state
}
