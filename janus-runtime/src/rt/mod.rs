//! The runtime behind `#[janus]` (see docs/design.md, "Probes and keys" and "Dispatch: profile,
//! record, agree"): fragment dispatch, keys, probes, check mode, statistics. Users call
//! [`Mode`], [`set_mode`], [`with_mode`], [`explain`], [`stats`], [`reset_stats`],
//! [`reset_caches`] and [`set_self_check`] (re-exported at the crate root);
//! what generated code calls lives in the hidden [`__private`] module, as serde does.

mod check;
mod coverage;
mod fragment;
mod host_values;
mod instance;
mod key;
mod probe;
mod speculate;
mod stats;

pub use crate::config::{Mode, mode, set_mode, with_mode};
pub use check::{SAMPLE_PERIOD, self_check, set_self_check};
pub use coverage::EagerKind;
pub use fragment::{cost_guard, set_cost_guard};
pub use probe::{Input, Prober};
pub use stats::{FragmentStats, KeyStats, OpCounts, Stats, explain, reset_caches, reset_stats, stats};

use crate::{DType, Tensor};

/// What `#[janus]` and `#[derive(Module)]` expansions call. Not for users: its names and
/// signatures change with the macro.
#[doc(hidden)]
pub mod __private {
    pub use super::fragment::{Enter, Fragment, Scope, Site};
    pub use super::host_values::{Split, host_call, host_value};
    pub use super::instance::Instance;
    pub use super::key::Key;
    pub use super::probe::{
        FixedMutRef, FixedOther, InOutModule, InOutOpaque, InOutRef, Input, OutputModule, OutputOpaque,
        Probe, ProbeKeyed, ProbeOpaque, Probed, Prober, Replayed, Witness, probe_or,
    };
    pub use super::speculate::{Cmp, TailTensor, branch, host_statement, item_cmp, tail_tensor};
    pub use super::{DynamicScalar, dynamic_scalar};
}

/// A host scalar named in `#[janus(dynamic(..))]`, as a scalar tensor: a runtime input of the
/// graph instead of a constant baked into it (see docs/design.md, "Keys").
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

/// Test-only fault injection (the `fault-injection` feature; hidden from the docs).
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub mod testing {
    pub use crate::exec::{break_compiled_backward, break_fused_kernels};
}
