//! Whole-function speculation (see docs/design.md, "Speculation"): the commit check of a
//! speculative replay, and what happens when an assert fails or the path changes while
//! profiling.
//!
//! A `#[janus]` function's body is itself a fragment (`function#fn`) whose recording is
//! speculative: decisions on tensor values (`to_bool()`, and `item()` compared in an `if` or
//! `while` condition, which the macro rewrites into a predicate) become asserts, the predicates
//! the graph computes after its outputs; host statements make the recording unusable; host
//! decisions form the path, which two recordings must agree on. A replay computes everything,
//! then reads the predicates (the one synchronisation of a speculated call on a device): only
//! when every one holds are the outputs and `&mut` state handed back. Otherwise nothing was
//! written, the random stream is rewound, the call runs its statements (the fragment path), and
//! the key profiles again; after `max_failures` failures it stays on the fragment path.

use super::fragment::Fragment;
use crate::tensor::Tensor;

/// Whether every asserted predicate (the last `expected.len()` outputs) has its expected value;
/// if so, drops them from `outputs`.
pub(crate) fn commit(outputs: &mut Vec<Tensor>, expected: &[bool]) -> bool {
    let first = outputs.len() - expected.len();
    let holds = outputs[first..].iter().zip(expected).all(|(p, &want)| p.host_values::<bool>()[0] == want);
    if holds {
        outputs.truncate(first);
    }
    holds
}

impl Fragment {
    /// Limit of failed speculations for this function.
    pub(crate) fn max_failures(&self) -> u64 {
        self.site().max_failures.max(1) as u64
    }
}

/// What a tail read (`x.item()` ending a speculated body) reads: a tensor, or a reference to
/// one (a `&Tensor` parameter, a field behind a reference, a slice element).
#[doc(hidden)]
pub trait TailTensor {
    /// A handle of the tensor.
    fn handle(&self) -> Tensor;
}

impl TailTensor for Tensor {
    fn handle(&self) -> Tensor {
        self.clone()
    }
}

impl<T: TailTensor + ?Sized> TailTensor for &T {
    fn handle(&self) -> Tensor {
        (**self).handle()
    }
}

impl<T: TailTensor + ?Sized> TailTensor for &mut T {
    fn handle(&self) -> Tensor {
        (**self).handle()
    }
}

/// The tensor a speculated body's tail read reads, handed out of the function graph and read
/// after it (generated code calls this in place of the read).
#[doc(hidden)]
#[inline]
pub fn tail_tensor<T: TailTensor + ?Sized>(t: &T) -> Tensor {
    t.handle()
}

/// A host statement of a `#[janus]` function is about to run (generated code calls this): a
/// whole-function recording that meets one is unusable, since a replay would skip it.
#[doc(hidden)]
#[inline]
pub fn host_statement(line: u32) {
    crate::recorder::host_statement(line);
}

/// Host decision `site` of a `#[janus]` function (an `if` or `while` condition at `line`, a
/// loop trip, a `match` arm) went the way `taken`: part of the path two profiled recordings
/// must agree on. Returns `taken`.
#[doc(hidden)]
#[inline]
pub fn branch(site: u32, line: u32, taken: bool) -> bool {
    crate::recorder::decision(crate::recorder::Decision { site, line, taken });
    taken
}

/// A comparison of a host read with a host value in a condition.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// `t.item() <op> rhs` (or `t.item_f64() <op> rhs` with `f64`), rewritten by the macro from an
/// `if`/`while` condition: computed as a predicate tensor in the precision the host comparison
/// has, then read with `to_bool()`, which a whole-function recording turns into an assert. The
/// answer is exactly the host comparison's.
#[doc(hidden)]
#[track_caller]
pub fn item_cmp(t: &Tensor, op: Cmp, rhs: f64, f64_read: bool) -> bool {
    if t.elems() != 1 {
        t.item(); // the usual panic, naming the shape and the caller
    }
    let v = t.to_dtype(if f64_read { crate::DType::F64 } else { crate::DType::F32 });
    let p = match op {
        Cmp::Gt => v.gt_scalar(rhs),
        Cmp::Ge => v.ge_scalar(rhs),
        Cmp::Lt => v.lt_scalar(rhs),
        Cmp::Le => v.le_scalar(rhs),
        Cmp::Eq => v.eq_scalar(rhs),
        Cmp::Ne => v.eq_scalar(rhs).logical_not(),
    };
    p.to_bool()
}
