//! How `#[janus]` functions run: eagerly, staged, or staged and checked against eager.
//! The default comes from `JANUS_MODE`; overrides are per thread (DESIGN §13 rule 20), so tests
//! running in parallel threads do not interfere.

use std::cell::Cell;

/// Execution mode of `#[janus]` functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Run every statement eagerly, as without the attribute.
    Eager,
    /// Run static blocks as cached compiled graphs (the default).
    #[default]
    Janus,
    /// Run compiled graphs *and* the original statements, and panic on the first mismatch.
    Check,
}

thread_local! {
    static OVERRIDE: Cell<Option<Mode>> = const { Cell::new(None) };
}

/// The mode on this thread.
pub fn mode() -> Mode {
    OVERRIDE.with(Cell::get).unwrap_or_else(|| crate::config::config().mode)
}

/// Sets the mode for this thread (other threads keep theirs).
pub fn set_mode(m: Mode) {
    OVERRIDE.with(|o| o.set(Some(m)));
}

/// Runs `f` in mode `m` on this thread, then restores the previous mode (even on panic).
pub fn with_mode<R>(m: Mode, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Mode>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(m))));
    f()
}
