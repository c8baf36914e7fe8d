//! `Sequential`: layers applied in order, as a `Module` that `#[janus]` can stage.

use super::{BatchNorm2d, Conv2d, Dropout, LayerNorm, Linear};
use crate::Tensor;
use crate::module::{ConstLeaf, Leaves, Module, PathSegment, SavedTensors, Visitor, impl_module};

/// Max pooling over `[N, C, H, W]`, like `torch.nn.MaxPool2d(kernel, stride, padding)`.
#[derive(Clone, Debug)]
pub struct MaxPool2d {
    /// Window `[kh, kw]`.
    pub kernel: [usize; 2],
    /// Step `[sh, sw]` (PyTorch's default: the window).
    pub stride: [usize; 2],
    /// Padding `[ph, pw]` (with `-inf`).
    pub padding: [usize; 2],
}
impl_module!(MaxPool2d { kernel, stride, padding });

impl MaxPool2d {
    /// A `k x k` window with stride `k`, no padding.
    pub fn new(k: usize) -> Self {
        MaxPool2d { kernel: [k, k], stride: [k, k], padding: [0, 0] }
    }
    /// The pooled `x`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.max_pool2d(self.kernel, self.stride, self.padding)
    }
}

/// Average pooling over `[N, C, H, W]`, like `torch.nn.AvgPool2d(kernel, stride, padding)`.
#[derive(Clone, Debug)]
pub struct AvgPool2d {
    /// Window `[kh, kw]`.
    pub kernel: [usize; 2],
    /// Step `[sh, sw]`.
    pub stride: [usize; 2],
    /// Zero padding `[ph, pw]`.
    pub padding: [usize; 2],
}
impl_module!(AvgPool2d { kernel, stride, padding });

impl AvgPool2d {
    /// A `k x k` window with stride `k`, no padding.
    pub fn new(k: usize) -> Self {
        AvgPool2d { kernel: [k, k], stride: [k, k], padding: [0, 0] }
    }
    /// The pooled `x`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.avg_pool2d(self.kernel, self.stride, self.padding)
    }
}

/// One layer of a [`Sequential`]: an enum, so that a `Sequential` is a plain value whose leaves
/// can be enumerated and rebuilt (the variant is a constant leaf of the cache key), which a
/// `Vec<Box<dyn Layer>>` could not be. For a layer not listed here, write a struct with
/// `#[derive(Module)]` and a `forward` instead.
#[derive(Clone, Debug)]
pub enum Layer {
    /// [`Linear`].
    Linear(Linear),
    /// [`Conv2d`].
    Conv2d(Conv2d),
    /// [`BatchNorm2d`] (updates its running statistics in train mode).
    BatchNorm2d(BatchNorm2d),
    /// [`LayerNorm`].
    LayerNorm(LayerNorm),
    /// [`Dropout`].
    Dropout(Dropout),
    /// [`MaxPool2d`].
    MaxPool2d(MaxPool2d),
    /// [`AvgPool2d`].
    AvgPool2d(AvgPool2d),
    /// `relu`.
    Relu,
    /// `gelu` (the erf form).
    Gelu,
    /// `tanh`.
    Tanh,
    /// `sigmoid`.
    Sigmoid,
    /// Flattens every dimension after the first: `[N, ...] -> [N, prod(...)]`.
    Flatten,
}

impl Layer {
    /// The layer applied to `x`.
    #[track_caller]
    pub fn forward(&mut self, x: &Tensor) -> Tensor {
        match self {
            Layer::Linear(l) => l.forward(x),
            Layer::Conv2d(l) => l.forward(x),
            Layer::BatchNorm2d(l) => l.forward(x),
            Layer::LayerNorm(l) => l.forward(x),
            Layer::Dropout(l) => l.forward(x),
            Layer::MaxPool2d(l) => l.forward(x),
            Layer::AvgPool2d(l) => l.forward(x),
            Layer::Relu => x.relu(),
            Layer::Gelu => x.gelu(),
            Layer::Tanh => x.tanh(),
            Layer::Sigmoid => x.sigmoid(),
            Layer::Flatten => {
                let d = x.sizes();
                x.reshape([d[0], d[1..].iter().product::<usize>()])
            }
        }
    }
}

macro_rules! layer_module {
    ($($v:ident($i:literal)),* ; $($u:ident($j:literal)),*) => {
        impl Module for Layer {
            fn visit(&self, v: &mut dyn Visitor) {
                match self {
                    $(Layer::$v(l) => {
                        v.constant(ConstLeaf::Variant($i));
                        v.enter(PathSegment::Index(0));
                        l.visit(v);
                        v.leave();
                    })*
                    $(Layer::$u => v.constant(ConstLeaf::Variant($j)),)*
                }
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&mut Tensor)) {
                match self {
                    $(Layer::$v(l) => l.visit_mut(f),)*
                    _ => {}
                }
            }
            fn map_tensors(&self, f: &mut dyn FnMut(&Tensor) -> Tensor) -> Self {
                match self {
                    $(Layer::$v(l) => Layer::$v(l.map_tensors(f)),)*
                    $(Layer::$u => Layer::$u,)*
                }
            }
            fn unflatten(leaves: &mut dyn Leaves) -> Self {
                match leaves.constant() {
                    $(ConstLeaf::Variant($i) => Layer::$v(Module::unflatten(leaves)),)*
                    $(ConstLeaf::Variant($j) => Layer::$u,)*
                    other => panic!("janus internal error: no layer for leaf {other:?}"),
                }
            }
            fn prepare_load(&mut self, saved: &mut SavedTensors<'_>) {
                match self {
                    $(Layer::$v(l) => {
                        saved.enter(PathSegment::Index(0));
                        l.prepare_load(saved);
                        saved.leave();
                    })*
                    _ => {}
                }
            }
            fn set_training(&mut self, training: bool) {
                match self {
                    $(Layer::$v(l) => l.set_training(training),)*
                    _ => {}
                }
            }
        }
    };
}
layer_module!(Linear(0), Conv2d(1), BatchNorm2d(2), LayerNorm(3), Dropout(4), MaxPool2d(5), AvgPool2d(6);
    Relu(7), Gelu(8), Tanh(9), Sigmoid(10), Flatten(11));

macro_rules! layer_from {
    ($($v:ident),*) => {$(
        impl From<$v> for Layer {
            fn from(l: $v) -> Layer {
                Layer::$v(l)
            }
        }
    )*};
}
layer_from!(Linear, Conv2d, BatchNorm2d, LayerNorm, Dropout, MaxPool2d, AvgPool2d);

/// Layers applied in order, like `torch.nn.Sequential`. Parameters are named by position
/// (`layers.0.0.weight`: layer 0, its variant's field `weight`). A `Sequential` is a `Module`:
/// pass it (or a struct holding it) `&mut` to a `#[janus]` step, and
/// [`train`](Module::train)/[`eval`](Module::eval) reach every layer inside.
///
/// ```
/// use janus_runtime::{Module, Tensor, nn};
/// use nn::Layer;
/// let mut net = nn::Sequential::new(vec![
///     nn::Linear::new(4, 8).into(),
///     Layer::Relu,
///     nn::Dropout::new(0.5).into(),
///     nn::Linear::new(8, 2).into(),
/// ]);
/// net.eval();
/// let y = net.forward(&Tensor::randn([3, 4]));
/// assert_eq!(y.dims(), [3, 2]);
/// assert_eq!(net.named_tensors()[0].0, "layers.0.0.weight");
/// ```
#[derive(Clone, Debug)]
pub struct Sequential {
    /// The layers, first to last.
    pub layers: Vec<Layer>,
}

impl_module!(Sequential { layers });

impl Sequential {
    /// The layers, applied first to last.
    pub fn new(layers: Vec<Layer>) -> Self {
        Sequential { layers }
    }

    /// `x` through every layer. `&mut` because batch norm layers update their running
    /// statistics in train mode.
    #[track_caller]
    pub fn forward(&mut self, x: &Tensor) -> Tensor {
        let mut h = x.clone();
        for l in &mut self.layers {
            h = l.forward(&h);
        }
        h
    }
}
