//! Fault injection for tests (behind the `fault-injection` feature, off in normal builds):
//! makes compiled kernels wrong on purpose, to show that check mode and the self-check catch a
//! miscompilation.

/// Whether fused kernels corrupt their first output element.
#[cfg(feature = "fault-injection")]
pub(crate) static BREAK_FUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a fused step corrupts its output (always `false` without the feature).
#[inline(always)]
pub(crate) fn fused_broken() -> bool {
    #[cfg(feature = "fault-injection")]
    {
        BREAK_FUSED.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        false
    }
}

/// Makes every fused kernel add 1 to its first output element (CPU backend).
#[cfg(feature = "fault-injection")]
pub fn break_fused_kernels(on: bool) {
    BREAK_FUSED.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether compiled backward graphs corrupt their gradients.
#[cfg(feature = "fault-injection")]
pub(crate) static BREAK_BACKWARD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a compiled backward adds 1 to its first gradient (always `false` without the
/// feature).
#[inline(always)]
pub(crate) fn backward_broken() -> bool {
    #[cfg(feature = "fault-injection")]
    {
        BREAK_BACKWARD.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        false
    }
}

/// Makes every compiled backward graph add 1 to the first gradient it returns (forward graphs
/// and eager kernels stay right): a miscompiled backward that only a gradient check can see.
#[cfg(feature = "fault-injection")]
pub fn break_compiled_backward(on: bool) {
    BREAK_BACKWARD.store(on, std::sync::atomic::Ordering::Relaxed);
}
