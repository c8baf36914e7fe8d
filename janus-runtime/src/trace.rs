//! Hooks through which ops report to an active trace recording (filled in by the tracer).

use crate::ops::Op;
use crate::tensor::Tensor;

/// Called by every op after it computed `out`.
#[inline]
pub(crate) fn record(_op: &Op, _inputs: &[&Tensor], _out: &Tensor) {}

/// Called by host reads (`item`, `to_vec`, `to_bool`).
#[inline]
pub(crate) fn note_host_read(_what: &'static str) {}

/// Called when `backward()` starts.
#[inline]
pub(crate) fn on_backward(_root: &Tensor) {}
