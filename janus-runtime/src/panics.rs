//! Noticing panics. A recording during which a panic happened is unusable even when user code
//! caught the panic (`catch_unwind(..).unwrap_or_else(..)` in a helper): the fallback it took
//! depends on values, and compiling it in would freeze one call's decision. A panic that is
//! caught by no one unwinds through the recording's guard, which abandons it; a caught one
//! leaves no trace there, so every panic on a thread bumps that thread's counter, and a
//! recording compares the counter at its end with the one at its start.
//!
//! The counter is bumped by a panic hook, installed when the first recording starts and
//! chained to the hook that was set before (so panic messages print as they did), and by
//! janus's own error path (`op_panic`), which still works if a program replaces the hook later.
//! The hook also lets janus silence a panic it catches itself: a replay that panics runs the
//! block's statements instead, which then panic (or not) exactly as eager mode does, so the
//! replay's message would only be a duplicate.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

thread_local! {
    static PANICS: Cell<u64> = const { Cell::new(0) };
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Counts a panic on this thread (safe to call from a panic hook).
pub(crate) fn note_panic() {
    let _ = PANICS.try_with(|p| p.set(p.get().wrapping_add(1)));
}

/// Panics seen on this thread so far.
pub(crate) fn count() -> u64 {
    PANICS.with(Cell::get)
}

/// Installs the counting hook once, chained to the current one.
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            note_panic();
            if !QUIET.try_with(Cell::get).unwrap_or(false) {
                previous(info);
            }
        }));
    });
}

/// The text of a caught panic's payload (empty when it is neither a `String` nor a `&str`).
pub(crate) fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `f`, catching a panic without printing its message (while janus's hook is installed:
/// fragments install it when first entered).
#[inline]
pub(crate) fn catch_quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            QUIET.with(|q| q.set(self.0));
        }
    }
    let _restore = Restore(QUIET.with(|q| q.replace(true)));
    catch_unwind(AssertUnwindSafe(f))
}
