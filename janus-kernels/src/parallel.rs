//! Whether kernels may split work across rayon threads. A caller that already runs kernels on
//! several threads (the executor's two workers) turns intra-op parallelism off for its thread,
//! so nested fork/join does not fight it for the same cores.

use std::cell::Cell;

thread_local! {
    static SERIAL: Cell<bool> = const { Cell::new(false) };
}

/// Whether kernels called from this thread may use more than one thread.
#[inline]
pub fn allowed() -> bool {
    !SERIAL.with(Cell::get) && rayon::current_num_threads() > 1
}

/// Runs `f` with intra-op parallelism off on this thread.
pub fn serial<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SERIAL.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SERIAL.with(|s| s.replace(true)));
    f()
}
