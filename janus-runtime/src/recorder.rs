//! The hook through which the value core (ops, autograd, random streams, host reads) tells an
//! active recording what it did. Tracing (`crate::trace`) implements [`Recorder`] and installs
//! itself in this thread's slot while a recording is active; the core only calls the hook, so
//! it depends on nothing above it. With no recording, each call is one thread-local read.

use crate::ops::Op;
use crate::tensor::Tensor;
use std::cell::Cell;
use std::panic::Location;

/// What a recording observes.
pub(crate) trait Recorder: Sync {
    /// `op` computed `out` from `inputs`; `alias` is another handle of the same value (the copy
    /// an autograd node saves); `at` is the user's call.
    fn op(
        &self,
        op: &Op,
        inputs: &[&Tensor],
        out: &Tensor,
        alias: Option<&Tensor>,
        at: &'static Location<'static>,
    );
    /// Tensor values reached the host (`item`, `to_vec`, formatting, saving).
    fn host_read(&self, what: &'static str);
    /// `new` is `of` with gradients stopped (`detach()`).
    fn detached(&self, new: &Tensor, of: &Tensor);
    /// `leaf` is a new gradient leaf over `of`'s value (`requires_grad()`).
    fn fresh_leaf(&self, leaf: &Tensor, of: &Tensor);
    /// `backward()` starts from `root`.
    fn backward(&self, root: &Tensor);
    /// A random op reserved `blocks` Philox blocks through the stream state `state`.
    fn rng_state(&self, state: &Tensor, blocks: u64);
    /// A host decision read `predicate` (a one-element bool) as `value`; returns whether the
    /// recording made it an assert (a whole-function recording) instead of a host read.
    fn assertion(&self, predicate: &Tensor, value: bool) -> bool;
    /// A host statement at `line` of a `#[janus]` function ran.
    fn host_statement(&self, line: u32);
    /// A host decision of a `#[janus]` function was taken.
    fn decision(&self, d: Decision);
    /// Code outside the runtime read a tensor's size at `at` (`dims()`, `shape()`, `numel()`).
    fn shape_read(&self, at: &'static Location<'static>);
    /// A helper call (`call`, at `at`) returned a host scalar that no key can see, or (`effect`)
    /// was made for a host effect.
    fn host_value(&self, call: &'static str, effect: bool, at: &'static Location<'static>);
    /// The random stream was moved by user code (`manual_seed`, `set_stream_position`): a
    /// replay would skip it.
    fn reseeded(&self, what: &'static str);
}

/// See [`Recorder::shape_read`]; reads from files for which `own` holds are not reported.
#[inline]
pub(crate) fn shape_read_from(at: &'static Location<'static>, own: fn(&str) -> bool) {
    if let Some(r) = active()
        && !own(at.file())
    {
        r.shape_read(at);
    }
}

thread_local! {
    static ACTIVE: Cell<Option<&'static dyn Recorder>> = const { Cell::new(None) };
}

/// Installs (or, with `None`, removes) this thread's recorder.
pub(crate) fn install(r: Option<&'static dyn Recorder>) {
    ACTIVE.with(|a| a.set(r));
}

#[inline]
fn active() -> Option<&'static dyn Recorder> {
    ACTIVE.with(Cell::get)
}

/// See [`Recorder::op`].
#[inline]
#[track_caller]
pub(crate) fn op(op: &Op, inputs: &[&Tensor], out: &Tensor, alias: Option<&Tensor>) {
    if let Some(r) = active() {
        r.op(op, inputs, out, alias, Location::caller());
    }
}

/// See [`Recorder::host_read`].
#[inline]
pub(crate) fn host_read(what: &'static str) {
    if let Some(r) = active() {
        r.host_read(what);
    }
}

/// See [`Recorder::detached`].
#[inline]
pub(crate) fn detached(new: &Tensor, of: &Tensor) {
    if let Some(r) = active() {
        r.detached(new, of);
    }
}

/// See [`Recorder::fresh_leaf`].
#[inline]
pub(crate) fn fresh_leaf(leaf: &Tensor, of: &Tensor) {
    if let Some(r) = active() {
        r.fresh_leaf(leaf, of);
    }
}

/// See [`Recorder::backward`].
#[inline]
pub(crate) fn backward(root: &Tensor) {
    if let Some(r) = active() {
        r.backward(root);
    }
}

/// See [`Recorder::rng_state`].
#[inline]
pub(crate) fn rng_state(state: &Tensor, blocks: u64) {
    if let Some(r) = active() {
        r.rng_state(state, blocks);
    }
}

/// See [`Recorder::assertion`]; `false` with no recording.
#[inline]
pub(crate) fn assertion(predicate: &Tensor, value: bool) -> bool {
    active().is_some_and(|r| r.assertion(predicate, value))
}

/// See [`Recorder::host_statement`].
#[inline]
pub(crate) fn host_statement(line: u32) {
    if let Some(r) = active() {
        r.host_statement(line);
    }
}

/// See [`Recorder::host_value`].
#[inline]
pub(crate) fn host_value(call: &'static str, effect: bool, at: &'static Location<'static>) {
    if let Some(r) = active() {
        r.host_value(call, effect, at);
    }
}

/// See [`Recorder::reseeded`].
#[inline]
pub(crate) fn reseeded(what: &'static str) {
    if let Some(r) = active() {
        r.reseeded(what);
    }
}

/// See [`Recorder::decision`].
#[inline]
pub(crate) fn decision(d: Decision) {
    if let Some(r) = active() {
        r.decision(d);
    }
}

/// One host decision of a whole-function recording: its site (numbered by the macro), the
/// source line, and the way it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The decision's number in its function.
    pub site: u32,
    /// Its line in the source.
    pub line: u32,
    /// Whether the branch was taken (a loop trip or a `match` arm reports `true`).
    pub taken: bool,
}
