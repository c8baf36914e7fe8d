//! `Module`: a value whose tensor leaves can be enumerated with their paths, visited mutably and
//! rebuilt, and whose non-tensor leaves (integers, bools, floats, enum variants, lengths) are
//! *constant leaves* that key caches. It is the Rust counterpart of a JAX pytree.
//!
//! `#[derive(Module)]` (from `janus-macros`) implements it for structs and enums; this module
//! implements it for tensors, scalars and the standard containers.

use std::collections::BTreeMap;

use crate::tensor::Tensor;
use janus_kernels::DType;

/// One step of a leaf's path: a named field or a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathSegment<'a> {
    /// A struct field (or enum variant field) by name.
    Field(&'a str),
    /// A position in a `Vec`, array, tuple or tuple struct.
    Index(usize),
}

/// A non-tensor leaf. Constant leaves are part of a fragment's cache key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConstLeaf {
    /// Any integer (widened).
    Int(i128),
    /// A bool.
    Bool(bool),
    /// An `f32` by its bits.
    F32(u32),
    /// An `f64` by its bits.
    F64(u64),
    /// An enum variant (or `Option` presence) by index.
    Variant(u32),
    /// The length of a `Vec`.
    Len(usize),
}

/// The value itself (`3`, `true`, `0.25`), an enum variant by its index, a length as `len 4`.
impl std::fmt::Display for ConstLeaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ConstLeaf::Int(n) => write!(f, "{n}"),
            ConstLeaf::Bool(b) => write!(f, "{b}"),
            ConstLeaf::F32(bits) => write!(f, "{}", f32::from_bits(bits)),
            ConstLeaf::F64(bits) => write!(f, "{}", f64::from_bits(bits)),
            ConstLeaf::Variant(k) => write!(f, "variant {k}"),
            ConstLeaf::Len(n) => write!(f, "len {n}"),
        }
    }
}

/// Receives a module's leaves in a fixed order, with `enter`/`leave` around each path step.
pub trait Visitor {
    /// A path step begins.
    fn enter(&mut self, _segment: PathSegment<'_>) {}
    /// The last path step ends.
    fn leave(&mut self) {}
    /// A tensor leaf.
    fn tensor(&mut self, t: &Tensor);
    /// A constant leaf.
    fn constant(&mut self, _c: ConstLeaf) {}
}

/// Supplies leaves in visiting order to [`Module::unflatten`].
pub trait Leaves {
    /// The next tensor leaf.
    fn tensor(&mut self) -> Tensor;
    /// The next constant leaf.
    fn constant(&mut self) -> ConstLeaf;
}

fn int_of(c: ConstLeaf) -> i128 {
    match c {
        ConstLeaf::Int(v) => v,
        other => panic!("janus internal error: expected an integer leaf, got {other:?}"),
    }
}

/// A value with enumerable tensor leaves and constant leaves. See the module docs.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a janus Module",
    label = "not a tensor, constant or module",
    note = "module leaves are `Tensor`s, integers, bools, floats and `#[derive(Module)]` types; `Vec`, arrays, `Option`, `Box` and tuples of modules are modules"
)]
pub trait Module {
    /// Visits every leaf in a fixed order.
    fn visit(&self, v: &mut dyn Visitor);

    /// Visits every tensor leaf mutably, in the order of [`visit`](Module::visit).
    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor));

    /// A copy of this value with every tensor leaf replaced by `f(leaf)` and constant leaves
    /// kept.
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self
    where
        Self: Sized;

    /// Rebuilds a value from the leaves [`visit`](Module::visit) would produce for it (tensors
    /// and constants, in order), like unflattening a pytree.
    fn unflatten(leaves: &mut dyn Leaves) -> Self
    where
        Self: Sized;

    /// The tensor leaves, in visiting order.
    fn tensors(&self) -> Vec<Tensor> {
        struct Collect(Vec<Tensor>);
        impl Visitor for Collect {
            fn tensor(&mut self, t: &Tensor) {
                self.0.push(t.clone());
            }
        }
        let mut c = Collect(Vec::new());
        self.visit(&mut c);
        c.0
    }

    /// The tensor leaves with their dotted paths (`l1.weight`, `layers.0.bias`).
    #[doc(alias = "state_dict", alias = "named_parameters", alias = "parameters")]
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        #[derive(Default)]
        struct Named {
            path: Vec<String>,
            out: Vec<(String, Tensor)>,
        }
        impl Visitor for Named {
            fn enter(&mut self, s: PathSegment<'_>) {
                self.path.push(match s {
                    PathSegment::Field(f) => f.to_string(),
                    PathSegment::Index(i) => i.to_string(),
                });
            }
            fn leave(&mut self) {
                self.path.pop();
            }
            fn tensor(&mut self, t: &Tensor) {
                let name = if self.path.is_empty() { "tensor".to_string() } else { self.path.join(".") };
                self.out.push((name, t.clone()));
            }
        }
        let mut n = Named::default();
        self.visit(&mut n);
        n.out
    }

    /// Creates the state this value makes lazily, such as an optimiser's moment buffers (made
    /// on its first step), from what a checkpoint holds, so that [`load`](crate::load) can fill
    /// it. `saved` answers by paths relative to this value. The default does nothing;
    /// containers and `#[derive(Module)]` pass the call on to their fields.
    fn prepare_load(&mut self, _saved: &mut SavedTensors<'_>) {}

    /// Sets the train/eval mode flag of every layer inside this value, like PyTorch's
    /// `module.train(mode)`. Layers that behave differently in the two modes
    /// ([`nn::Dropout`](crate::nn::Dropout), [`nn::BatchNorm2d`](crate::nn::BatchNorm2d), and
    /// the layers built from them) keep the flag in a `training: bool` field, which is a
    /// constant leaf: the mode is part of every cache key, so a `#[janus]` step called in eval
    /// mode after train mode compiles (or finds) a variant of its own and never replays the
    /// train-mode graph. The default does nothing; containers and `#[derive(Module)]` pass the
    /// call on to their fields, and a derived struct's own flag is a `bool` field marked
    /// `#[module(training)]`.
    fn set_training(&mut self, _training: bool) {}

    /// Train mode (the default of every layer): dropout drops, batch norm normalises with the
    /// batch's statistics and updates its running ones. `model.train()` in PyTorch.
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Eval mode: dropout is the identity, batch norm uses its running statistics.
    /// `model.eval()` in PyTorch.
    fn eval(&mut self) {
        self.set_training(false);
    }
}

/// The tensors a checkpoint holds (dtype and shape by dotted path), as
/// [`Module::prepare_load`] sees them: paths are relative to the value being prepared.
pub struct SavedTensors<'a> {
    entries: &'a BTreeMap<String, (DType, Vec<usize>)>,
    path: Vec<String>,
}

impl<'a> SavedTensors<'a> {
    /// The tensors of a checkpoint, at its root.
    pub fn new(entries: &'a BTreeMap<String, (DType, Vec<usize>)>) -> Self {
        SavedTensors { entries, path: Vec::new() }
    }

    /// Moves one path step down (a container passing the call to a field or element).
    pub fn enter(&mut self, segment: PathSegment<'_>) {
        self.path.push(match segment {
            PathSegment::Field(f) => f.to_string(),
            PathSegment::Index(i) => i.to_string(),
        });
    }

    /// Moves back up the last step.
    pub fn leave(&mut self) {
        self.path.pop();
    }

    /// The dtype and shape of the saved tensor at `name`, relative to the current path.
    pub fn get(&self, name: &str) -> Option<(DType, &[usize])> {
        let full =
            if self.path.is_empty() { name.to_string() } else { format!("{}.{name}", self.path.join(".")) };
        self.entries.get(&full).map(|(d, s)| (*d, s.as_slice()))
    }

    /// Zeros for the saved list `name` (`name.0`, `name.1`, ... while they exist), each with its
    /// saved dtype and shape: the state of a `Vec<Tensor>` that a module fills lazily.
    pub fn zeros_list(&self, name: &str) -> Vec<Tensor> {
        (0..)
            .map_while(|i| self.get(&format!("{name}.{i}")))
            .map(|(dtype, dims)| Tensor::zeros_dtype(dims, dtype))
            .collect()
    }
}

impl Module for Tensor {
    fn visit(&self, v: &mut dyn Visitor) {
        v.tensor(self);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
        f(self);
    }
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
        f(self)
    }
    fn unflatten(leaves: &mut dyn Leaves) -> Self {
        leaves.tensor()
    }
}

macro_rules! constant_leaf {
    ($($t:ty => |$x:ident| $leaf:expr, |$c:ident| $back:expr;)*) => {$(
        impl Module for $t {
            fn visit(&self, v: &mut dyn Visitor) {
                let $x = *self;
                v.constant($leaf);
            }
            fn visit_mut(&mut self, _f: &mut dyn FnMut(&mut Tensor)) {}
            fn map_tensors(&self, _f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
                *self
            }
            fn unflatten(leaves: &mut dyn Leaves) -> Self {
                let $c = leaves.constant();
                $back
            }
        }
    )*};
}

constant_leaf! {
    bool => |x| ConstLeaf::Bool(x), |c| matches!(c, ConstLeaf::Bool(true));
    i8 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as i8;
    i16 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as i16;
    i32 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as i32;
    i64 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as i64;
    isize => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as isize;
    u8 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as u8;
    u16 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as u16;
    u32 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as u32;
    u64 => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as u64;
    usize => |x| ConstLeaf::Int(x as i128), |c| int_of(c) as usize;
    f32 => |x| ConstLeaf::F32(x.to_bits()), |c| match c { ConstLeaf::F32(b) => f32::from_bits(b), o => panic!("janus internal error: expected an f32 leaf, got {o:?}") };
    f64 => |x| ConstLeaf::F64(x.to_bits()), |c| match c { ConstLeaf::F64(b) => f64::from_bits(b), o => panic!("janus internal error: expected an f64 leaf, got {o:?}") };
    () => |_x| ConstLeaf::Len(0), |_c| ();
}

impl<T: Module> Module for Vec<T> {
    fn visit(&self, v: &mut dyn Visitor) {
        v.constant(ConstLeaf::Len(self.len()));
        for (i, x) in self.iter().enumerate() {
            v.enter(PathSegment::Index(i));
            x.visit(v);
            v.leave();
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
        for x in self {
            x.visit_mut(f);
        }
    }
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
        self.iter().map(|x| x.map_tensors(f)).collect()
    }
    fn prepare_load(&mut self, saved: &mut SavedTensors<'_>) {
        for (i, x) in self.iter_mut().enumerate() {
            saved.enter(PathSegment::Index(i));
            x.prepare_load(saved);
            saved.leave();
        }
    }
    fn set_training(&mut self, training: bool) {
        for x in self {
            x.set_training(training);
        }
    }
    fn unflatten(leaves: &mut dyn Leaves) -> Self {
        let n = match leaves.constant() {
            ConstLeaf::Len(n) => n,
            o => panic!("janus internal error: expected a length leaf, got {o:?}"),
        };
        (0..n).map(|_| T::unflatten(leaves)).collect()
    }
}

impl<T: Module, const N: usize> Module for [T; N] {
    fn visit(&self, v: &mut dyn Visitor) {
        for (i, x) in self.iter().enumerate() {
            v.enter(PathSegment::Index(i));
            x.visit(v);
            v.leave();
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
        for x in self {
            x.visit_mut(f);
        }
    }
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
        std::array::from_fn(|i| self[i].map_tensors(f))
    }
    fn unflatten(leaves: &mut dyn Leaves) -> Self {
        std::array::from_fn(|_| T::unflatten(leaves))
    }
    fn set_training(&mut self, training: bool) {
        for x in self {
            x.set_training(training);
        }
    }
    fn prepare_load(&mut self, saved: &mut SavedTensors<'_>) {
        for (i, x) in self.iter_mut().enumerate() {
            saved.enter(PathSegment::Index(i));
            x.prepare_load(saved);
            saved.leave();
        }
    }
}

impl<T: Module> Module for Option<T> {
    fn visit(&self, v: &mut dyn Visitor) {
        v.constant(ConstLeaf::Variant(self.is_some() as u32));
        if let Some(x) = self {
            x.visit(v);
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
        if let Some(x) = self {
            x.visit_mut(f);
        }
    }
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
        self.as_ref().map(|x| x.map_tensors(f))
    }
    fn unflatten(leaves: &mut dyn Leaves) -> Self {
        match leaves.constant() {
            ConstLeaf::Variant(1) => Some(T::unflatten(leaves)),
            _ => None,
        }
    }
    fn prepare_load(&mut self, saved: &mut SavedTensors<'_>) {
        if let Some(x) = self {
            x.prepare_load(saved);
        }
    }
    fn set_training(&mut self, training: bool) {
        if let Some(x) = self {
            x.set_training(training);
        }
    }
}

impl<T: Module> Module for Box<T> {
    fn visit(&self, v: &mut dyn Visitor) {
        (**self).visit(v);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
        (**self).visit_mut(f);
    }
    fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
        Box::new((**self).map_tensors(f))
    }
    fn unflatten(leaves: &mut dyn Leaves) -> Self {
        Box::new(T::unflatten(leaves))
    }
    fn prepare_load(&mut self, saved: &mut SavedTensors<'_>) {
        (**self).prepare_load(saved);
    }
    fn set_training(&mut self, training: bool) {
        (**self).set_training(training);
    }
}

macro_rules! tuple_module {
    ($($T:ident $i:tt),+) => {
        impl<$($T: Module),+> Module for ($($T,)+) {
            fn visit(&self, v: &mut dyn Visitor) {
                $(
                    v.enter(PathSegment::Index($i));
                    self.$i.visit(v);
                    v.leave();
                )+
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
                $( self.$i.visit_mut(f); )+
            }
            fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
                ($( self.$i.map_tensors(f), )+)
            }
            fn unflatten(leaves: &mut dyn Leaves) -> Self {
                ($( $T::unflatten(leaves), )+)
            }
            fn prepare_load(&mut self, saved: &mut SavedTensors<'_>) {
                $(
                    saved.enter(PathSegment::Index($i));
                    self.$i.prepare_load(saved);
                    saved.leave();
                )+
            }
            fn set_training(&mut self, training: bool) {
                $( self.$i.set_training(training); )+
            }
        }
    };
}
tuple_module!(A 0);
tuple_module!(A 0, B 1);
tuple_module!(A 0, B 1, C 2);
tuple_module!(A 0, B 1, C 2, D 3);
tuple_module!(A 0, B 1, C 2, D 3, E 4);
tuple_module!(A 0, B 1, C 2, D 3, E 4, F 5);

/// Implements [`Module`] for a struct from its field list (for the runtime's own layers and
/// optimisers, which cannot use the derive macro from inside this crate). A struct with lazily
/// created state names the method that creates it for [`Module::prepare_load`] after `;`. A
/// layer with a train/eval flag names that `bool` field after `training =`; the other fields
/// get [`Module::set_training`] passed on.
macro_rules! impl_module {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        $crate::module::impl_module!($ty { $($field),* }; |_this, _saved| {});
    };
    ($ty:ident { $($field:ident),* $(,)? }; training = $flag:ident) => {
        $crate::module::impl_module!($ty { $($field),* }; |_this, _saved| {}; |this, training| {
            this.$flag = training;
        });
    };
    ($ty:ident { $($field:ident),* $(,)? }; |$this:ident, $saved:ident| $prepare:block) => {
        $crate::module::impl_module!($ty { $($field),* }; |$this, $saved| $prepare; |_this, _training| {});
    };
    ($ty:ident { $($field:ident),* $(,)? }; |$this:ident, $saved:ident| $prepare:block;
     |$tthis:ident, $training:ident| $set:block) => {
        impl $crate::module::Module for $ty {
            fn visit(&self, v: &mut dyn $crate::module::Visitor) {
                $(
                    v.enter($crate::module::PathSegment::Field(stringify!($field)));
                    $crate::module::Module::visit(&self.$field, v);
                    v.leave();
                )*
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&mut $crate::Tensor)) {
                $( $crate::module::Module::visit_mut(&mut self.$field, f); )*
            }
            fn map_tensors(&self, f: &mut dyn FnMut(&$crate::Tensor) -> $crate::Tensor) -> Self {
                $ty { $( $field: $crate::module::Module::map_tensors(&self.$field, f), )* }
            }
            fn unflatten(leaves: &mut dyn $crate::module::Leaves) -> Self {
                $ty { $( $field: $crate::module::Module::unflatten(leaves), )* }
            }
            fn prepare_load(&mut self, $saved: &mut $crate::module::SavedTensors<'_>) {
                let $this = &mut *self;
                $prepare
                $(
                    $saved.enter($crate::module::PathSegment::Field(stringify!($field)));
                    $crate::module::Module::prepare_load(&mut self.$field, $saved);
                    $saved.leave();
                )*
            }
            fn set_training(&mut self, $training: bool) {
                $( $crate::module::Module::set_training(&mut self.$field, $training); )*
                let $tthis = &mut *self;
                $set
            }
        }
        impl $crate::rt::Input for $ty {
            fn probe(&self, p: &mut $crate::rt::Prober) {
                p.module(self);
            }
        }
    };
}
pub(crate) use impl_module;
