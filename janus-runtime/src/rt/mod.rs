//! The runtime API that `#[janus]`-generated code calls (DESIGN §5-6). Users normally only
//! touch [`Mode`], [`set_mode`], [`with_mode`], [`explain`], [`stats`] and [`reset_caches`]
//! (re-exported at the crate root); the rest is public for the macro's expansion.

mod fragment;
mod key;
mod mode;
mod probe;
mod stats;

pub use fragment::{Enter, Fragment, Scope, Site};
pub use key::Key;
pub use mode::{Mode, mode, set_mode, with_mode};
pub use probe::{
    FixedMutRef, FixedOther, InOutModule, InOutOpaque, InOutRef, Input, OutputModule, OutputModuleRef,
    OutputOpaque, Probe, ProbeKeyed, ProbeOpaque, Probed, Prober, Replayed, Witness,
};
pub use stats::{FragmentStats, Stats, explain, reset_caches, stats};

use crate::{DType, Tensor};

/// A host scalar named in `#[janus(dynamic(..))]`, as a scalar tensor: a runtime input of the
/// graph instead of a constant baked into it (DESIGN §13 rule 13).
pub trait DynamicScalar: Copy {
    /// The scalar as a rank-0 tensor of its own precision.
    fn to_tensor(self) -> Tensor;
}

impl DynamicScalar for f32 {
    fn to_tensor(self) -> Tensor {
        Tensor::scalar_dtype(self as f64, DType::F32)
    }
}

impl DynamicScalar for f64 {
    fn to_tensor(self) -> Tensor {
        Tensor::scalar_dtype(self, DType::F64)
    }
}

/// A scalar that is already dynamic: inside the statements of an enclosing block, a
/// `dynamic(..)` name is bound to its rank-0 tensor.
impl DynamicScalar for &Tensor {
    fn to_tensor(self) -> Tensor {
        self.clone()
    }
}

/// `value` as a tracked scalar tensor (see [`DynamicScalar`]).
#[track_caller]
pub fn dynamic_scalar<S: DynamicScalar>(value: S) -> Tensor {
    value.to_tensor()
}

/// Test-only fault injection (hidden from the docs).
#[doc(hidden)]
pub mod testing {
    /// Makes every fused kernel add 1 to its first output element, to show that
    /// `JANUS_MODE=check` catches a miscompiled kernel.
    pub fn break_fused_kernels(on: bool) {
        crate::exec::BREAK_FUSED.store(on, std::sync::atomic::Ordering::Relaxed);
    }
}
