//! Probing a fragment's inputs and outputs. The macro cannot see types, so generated code asks
//! through autoref specialization: a value whose type can be keyed (a tensor, a scalar, a
//! module, a container of those) yields its leaves; any other type makes the block opaque.
//! Containers decide on their element type at run time (see docs/design.md, "Probes"), because
//! `T` in `Vec<T>` may still be uninferred where the probe is written.

use super::instance::erased_type_id;
use crate::autograd::Grads;
use crate::module::{ConstLeaf, Leaves, Module, Visitor};
use crate::tensor::Tensor;
use std::any::TypeId;
use std::marker::PhantomData;

/// What probing one input or output found.
#[derive(Clone, Debug, Default)]
pub struct Probed {
    /// The source text of the place (`xs[t]`, `m.wx`).
    pub name: &'static str,
    /// `type_name` of the probed type.
    pub type_name: &'static str,
    /// Tensor leaves, in visiting order (inline for the few of a typical input: a hit
    /// allocates nothing for them).
    pub leaves: smallvec::SmallVec<[Tensor; 4]>,
    /// Constant leaves, in visiting order.
    pub consts: Vec<ConstLeaf>,
    /// The type that cannot be keyed or rebuilt, if any.
    pub opaque: Option<&'static str>,
    /// A `Grads` input, resolved against the other inputs when the key is built (boxed: it is
    /// rare, and a `Probed` under 128 bytes moves without a `memcpy` call on the hit path).
    pub grads: Option<Box<Grads>>,
}

/// Collects leaves while an input is probed.
#[derive(Default)]
pub struct Prober {
    pub(crate) probed: Probed,
}

impl Prober {
    /// Visits a module's leaves.
    pub fn module<M: Module + ?Sized>(&mut self, m: &M) {
        m.visit(self);
    }

    /// Marks the input as not keyable.
    pub fn opaque(&mut self, type_name: &'static str) {
        self.probed.opaque.get_or_insert(type_name);
    }

    fn elements<T>(&mut self, xs: &[T]) {
        self.probed.consts.push(ConstLeaf::Len(xs.len()));
        for x in xs {
            probe_any(x, self);
        }
    }
}

impl Visitor for Prober {
    fn tensor(&mut self, t: &Tensor) {
        self.probed.leaves.push(t.clone());
    }
    fn constant(&mut self, c: ConstLeaf) {
        self.probed.consts.push(c);
    }
}

/// Probes a value known only by `TypeId`: tensors, references to them, scalars and nested
/// vectors of them. Lifetimes are erased, so a `Vec<&Tensor>` built from a block's values
/// probes too.
fn probe_any<T>(x: &T, p: &mut Prober) {
    let id = erased_type_id::<T>();
    macro_rules! try_types {
        ($($t:ty),*) => {$(
            if id == TypeId::of::<$t>() {
                // SAFETY: `T` is `$t` up to lifetimes, which do not change the layout. The
                // reference only lives for this call, which clones the tensors it reads, so no
                // borrow is used beyond its lifetime.
                let v = unsafe { &*(x as *const T as *const $t) };
                return v.probe(p);
            }
        )*};
    }
    try_types!(
        Tensor,
        &'static Tensor,
        f32,
        f64,
        i64,
        i32,
        usize,
        u32,
        bool,
        Vec<Tensor>,
        Vec<&'static Tensor>,
        Vec<f32>,
        Vec<f64>,
        Vec<i64>,
        Vec<usize>
    );
    p.opaque(std::any::type_name::<T>());
}

/// A type whose values can be fragment inputs. Implemented for tensors, scalars, references,
/// containers (decided at run time), `Grads`, and `#[derive(Module)]` types.
pub trait Input {
    /// Records this value's leaves.
    fn probe(&self, p: &mut Prober);
}

impl Input for Tensor {
    fn probe(&self, p: &mut Prober) {
        p.probed.leaves.push(self.clone());
    }
}

macro_rules! scalar_input {
    ($($t:ty),*) => {$(
        impl Input for $t {
            fn probe(&self, p: &mut Prober) {
                p.module(self);
            }
        }
    )*};
}
scalar_input!(bool, i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64, ());

impl<T: Input + ?Sized> Input for &T {
    fn probe(&self, p: &mut Prober) {
        (**self).probe(p);
    }
}

impl<T: Input + ?Sized> Input for &mut T {
    fn probe(&self, p: &mut Prober) {
        (**self).probe(p);
    }
}

impl<T: Input + ?Sized> Input for Box<T> {
    fn probe(&self, p: &mut Prober) {
        (**self).probe(p);
    }
}

impl<T> Input for [T] {
    fn probe(&self, p: &mut Prober) {
        p.elements(self);
    }
}

impl<T> Input for Vec<T> {
    fn probe(&self, p: &mut Prober) {
        p.elements(self);
    }
}

impl<T, const N: usize> Input for [T; N] {
    fn probe(&self, p: &mut Prober) {
        p.elements(self);
    }
}

impl<T> Input for Option<T> {
    fn probe(&self, p: &mut Prober) {
        p.probed.consts.push(ConstLeaf::Variant(self.is_some() as u32));
        if let Some(x) = self {
            probe_any(x, p);
        }
    }
}

impl<A: Input, B: Input> Input for (A, B) {
    fn probe(&self, p: &mut Prober) {
        self.0.probe(p);
        self.1.probe(p);
    }
}

impl<A: Input, B: Input, C: Input> Input for (A, B, C) {
    fn probe(&self, p: &mut Prober) {
        self.0.probe(p);
        self.1.probe(p);
        self.2.probe(p);
    }
}

impl Input for Grads {
    fn probe(&self, p: &mut Prober) {
        p.probed.grads = Some(Box::new(self.clone()));
    }
}

/// `first`, or, when its type cannot be keyed, what `outer` probes (the value the place lies
/// in: `self` for `self.h`) if that can be. Opacity follows from types, so one instantiation
/// always takes the same branch.
#[inline]
pub fn probe_or(first: Probed, outer: impl FnOnce() -> Probed) -> Probed {
    if first.opaque.is_none() {
        return first;
    }
    let o = outer();
    if o.opaque.is_none() { o } else { first }
}

/// The autoref-specialization wrapper for inputs: `(&Probe(&place)).probe("place")`.
pub struct Probe<'a, T: ?Sized>(pub &'a T);

/// Probing a keyable input (chosen when `T: Input`).
pub trait ProbeKeyed {
    /// Probes the wrapped value.
    fn probe(&self, name: &'static str) -> Probed;
}

impl<T: Input + ?Sized> ProbeKeyed for Probe<'_, T> {
    fn probe(&self, name: &'static str) -> Probed {
        let mut p = Prober::default();
        self.0.probe(&mut p);
        p.probed.name = name;
        p.probed.type_name = std::any::type_name::<T>();
        p.probed
    }
}

/// Probing any other input: the block becomes opaque.
pub trait ProbeOpaque {
    /// Records the value as opaque.
    fn probe(&self, name: &'static str) -> Probed;
}

impl<T: ?Sized> ProbeOpaque for &Probe<'_, T> {
    fn probe(&self, name: &'static str) -> Probed {
        let t = std::any::type_name::<T>();
        Probed { name, type_name: t, opaque: Some(t), ..Default::default() }
    }
}

/// The outputs of one replay, taken in order by the generated code.
pub struct Replayed {
    /// Last first: taken by `pop`, so the executor's list needs no conversion.
    tensors: Vec<Tensor>,
    /// Last first.
    consts: Vec<ConstLeaf>,
}

impl Replayed {
    /// A replay's output tensors and host constants, in the order the generated code takes
    /// them.
    pub(crate) fn new(mut tensors: Vec<Tensor>, consts: &[ConstLeaf]) -> Replayed {
        tensors.reverse();
        Replayed { tensors, consts: consts.iter().rev().copied().collect() }
    }
}

impl Drop for Replayed {
    fn drop(&mut self) {
        // The executor's output list, for its next run on this thread.
        crate::exec::recycle_output_list(std::mem::take(&mut self.tensors));
    }
}

impl Leaves for Replayed {
    fn tensor(&mut self) -> Tensor {
        self.tensors.pop().expect("janus internal error: replay produced too few tensors")
    }
    fn constant(&mut self) -> ConstLeaf {
        self.consts.pop().expect("janus internal error: replay recorded too few constants")
    }
}

/// An output's type, fixed by the block's own code (`bind` in the body arm) before the replay
/// arm uses it: `(&&&witness).take(&mut out)`.
pub struct Witness<T>(PhantomData<fn() -> T>);

impl<T> Default for Witness<T> {
    fn default() -> Self {
        Witness(PhantomData)
    }
}

impl<T> Witness<T> {
    /// A witness whose type is fixed later by [`bind`](Witness::bind).
    pub fn new() -> Self {
        Witness(PhantomData)
    }
    /// Fixes the type to that of `value`.
    pub fn bind(&self, _value: &T) {}
    /// A witness of `value`'s type.
    pub fn of(_value: &T) -> Self {
        Witness(PhantomData)
    }
}

/// Outputs that are modules: probed through `Module`, rebuilt with `Module::unflatten`.
pub trait OutputModule<T> {
    /// Probes an output value.
    fn output(&self, value: &T, name: &'static str) -> Probed;
    /// Rebuilds a new value from a replay.
    fn take(&self, out: &mut Replayed) -> T;
    /// Rebuilds a value in place (an assigned place, or a local used through `&mut`).
    fn restore(&self, place: &mut T, out: &mut Replayed);
}

impl<T: Module> OutputModule<T> for &&Witness<T> {
    fn output(&self, value: &T, name: &'static str) -> Probed {
        let mut p = Prober::default();
        value.visit(&mut p);
        p.probed.name = name;
        p.probed.type_name = std::any::type_name::<T>();
        p.probed
    }
    fn take(&self, out: &mut Replayed) -> T {
        T::unflatten(out)
    }
    fn restore(&self, place: &mut T, out: &mut Replayed) {
        *place = T::unflatten(out);
    }
}

/// Any other output: the block is opaque and never replays, so `take`/`restore` are unreachable.
/// References are among them: a reference bound in a block (`let s = &mut v[0];`) cannot be
/// rebuilt, and an assigned one (`r = &mut b;`) rebinds the reference rather than changing
/// what it points to, which a restore through it would do instead.
pub trait OutputOpaque<T> {
    /// Records the output as not rebuildable.
    fn output(&self, value: &T, name: &'static str) -> Probed;
    /// Never called: opaque blocks always run their statements.
    fn take(&self, out: &mut Replayed) -> T;
    /// Never called: opaque blocks always run their statements.
    fn restore(&self, place: &mut T, out: &mut Replayed);
}

impl<T> OutputOpaque<T> for Witness<T> {
    fn output(&self, _value: &T, name: &'static str) -> Probed {
        let t = std::any::type_name::<T>();
        Probed { name, type_name: t, opaque: Some(t), ..Default::default() }
    }
    fn take(&self, _out: &mut Replayed) -> T {
        unreachable!("janus internal error: an opaque fragment replayed")
    }
    fn restore(&self, _place: &mut T, _out: &mut Replayed) {
        unreachable!("janus internal error: an opaque fragment replayed")
    }
}

/// Locals a block may mutate through an implicit `&mut` (method receivers, bare call
/// arguments, `&mut x`), restored on replay (see docs/design.md, "Scope analysis: inputs and
/// outputs"): modules are rebuilt in place.
pub trait InOutModule<T> {
    /// Probes the local after the block.
    fn inout_output(&self, value: &T, name: &'static str) -> Probed;
    /// Restores the local from a replay.
    fn inout_restore(&self, place: &mut T, out: &mut Replayed);
}

impl<T: Module> InOutModule<T> for &&Witness<T> {
    fn inout_output(&self, value: &T, name: &'static str) -> Probed {
        OutputModule::output(self, value, name)
    }
    fn inout_restore(&self, place: &mut T, out: &mut Replayed) {
        *place = T::unflatten(out);
    }
}

/// In-out locals that are references: a `&mut` to a module is restored through the reference;
/// a shared reference cannot have been mutated, so there is nothing to restore.
pub trait InOutRef<T> {
    /// Probes the local after the block.
    fn inout_output(&self, value: &T, name: &'static str) -> Probed;
    /// Restores the local from a replay.
    fn inout_restore(&self, place: &mut T, out: &mut Replayed);
}

impl<'a, U: Module> InOutRef<&'a mut U> for &Witness<&'a mut U> {
    fn inout_output(&self, value: &&'a mut U, name: &'static str) -> Probed {
        let mut p = Prober::default();
        (**value).visit(&mut p);
        p.probed.name = name;
        p.probed.type_name = std::any::type_name::<U>();
        p.probed
    }
    fn inout_restore(&self, place: &mut &'a mut U, out: &mut Replayed) {
        **place = U::unflatten(out);
    }
}

impl<'a, U: ?Sized> InOutRef<&'a U> for &Witness<&'a U> {
    fn inout_output(&self, _value: &&'a U, name: &'static str) -> Probed {
        Probed { name, type_name: std::any::type_name::<&U>(), ..Default::default() }
    }
    fn inout_restore(&self, _place: &mut &'a U, _out: &mut Replayed) {}
}

/// Any other in-out local (host state such as an RNG or an environment): the block is opaque.
pub trait InOutOpaque<T> {
    /// Records the local as not rebuildable.
    fn inout_output(&self, value: &T, name: &'static str) -> Probed;
    /// Never called: opaque blocks always run their statements.
    fn inout_restore(&self, place: &mut T, out: &mut Replayed);
}

impl<T> InOutOpaque<T> for Witness<T> {
    fn inout_output(&self, value: &T, name: &'static str) -> Probed {
        OutputOpaque::output(self, value, name)
    }
    fn inout_restore(&self, _place: &mut T, _out: &mut Replayed) {
        unreachable!("janus internal error: an opaque fragment replayed")
    }
}

/// In-out locals whose binding is not `mut` (loop and match pattern bindings): a value or a
/// shared reference cannot have been changed by the block, so there is nothing to restore; a
/// `&mut` reference could have been, and cannot be restored through an immutable binding, so
/// the block runs eagerly.
pub trait FixedMutRef<T> {
    /// Probes the local after the block.
    fn fixed_output(&self, value: &T, name: &'static str) -> Probed;
}

impl<'a, U: ?Sized> FixedMutRef<&'a mut U> for &Witness<&'a mut U> {
    fn fixed_output(&self, _value: &&'a mut U, name: &'static str) -> Probed {
        let t = std::any::type_name::<&mut U>();
        Probed {
            name,
            type_name: t,
            opaque: Some("a `&mut` pattern binding (bind it with `let mut`)"),
            ..Default::default()
        }
    }
}

/// See [`FixedMutRef`]: every other type.
pub trait FixedOther<T> {
    /// Probes the local after the block.
    fn fixed_output(&self, value: &T, name: &'static str) -> Probed;
}

impl<T> FixedOther<T> for Witness<T> {
    fn fixed_output(&self, _value: &T, name: &'static str) -> Probed {
        Probed { name, type_name: std::any::type_name::<T>(), ..Default::default() }
    }
}
