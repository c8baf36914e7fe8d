//! The op table: every primitive op, with its parameters as named-field `Hash + Eq` structs (so a
//! graph of ops doubles as its own cache key), and for each op its shape rule, its eager kernel
//! call and its gradient (VJP). The rules live next to each other in one family module per kind
//! of op; this file is the index that dispatches to them.
//!
//! Ops are data: this layer knows tensors but neither the backends, autograd nor recordings.
//! [`crate::eager::apply`] is the single entry point that runs one.

pub(crate) mod conv;
pub(crate) mod elementwise;
pub(crate) mod index;
pub(crate) mod linalg;
mod params;
pub(crate) mod reduce;
pub(crate) mod shape_ops;
pub(crate) mod sort;
pub(crate) mod source;

use crate::DType;
use crate::shape::Shape;
use crate::tensor::{Data, Tensor};

pub use conv::{Fold, Unfold, Window2d};
pub use elementwise::{BinaryOp, CmpOp, UnaryOp};
pub use params::*;
pub use sort::ArgSort;

/// Every primitive op. Composite ops (`mean`, `cross_entropy`, `stack`, ...) are built from
/// these by the `Tensor` methods (`src/api/`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Constant fill.
    Full(Full),
    /// `0..n`.
    Arange(Arange),
    /// Literal data.
    Constant(Constant),
    /// Uniform `[0, 1)` samples.
    RandUniform(RandFill),
    /// Standard normal samples.
    RandNormal(RandFill),
    /// One category per row of a weight matrix; inputs: weights, stream state.
    Multinomial,
    /// Elementwise function of one operand.
    Unary(UnaryOp),
    /// Elementwise power with a constant exponent.
    Powf(Powf),
    /// Elementwise clamp.
    Clamp(Clamp),
    /// Dtype conversion.
    Cast(Cast),
    /// Broadcasting arithmetic.
    Binary(BinaryOp),
    /// Broadcasting comparison, producing `bool`.
    Compare(CmpOp),
    /// `cond ? a : b`, broadcasting.
    Where,
    /// Sum over dimensions.
    Sum(Sum),
    /// Maximum along a dimension.
    Max(ReduceDim),
    /// Minimum along a dimension.
    Min(ReduceDim),
    /// Index of the maximum along a dimension.
    ArgMax(ReduceDim),
    /// The stable sorting permutation along a dimension.
    ArgSort(ArgSort),
    /// `log(sum(exp(x)))` along a dimension.
    LogSumExp(ReduceDim),
    /// Softmax along a dimension.
    Softmax(Axis),
    /// Log-softmax along a dimension.
    LogSoftmax(Axis),
    /// Matrix product (2-D, or batched 3-D with broadcasting of the batch).
    MatMul,
    /// Reshape (a view when the input is contiguous).
    Reshape(Reshape),
    /// Dimension permutation (a view).
    Permute(Permute),
    /// Slice of one dimension (a view).
    Narrow(Narrow),
    /// Zero padding of one dimension.
    Pad(Pad),
    /// Broadcast (a view).
    BroadcastTo(BroadcastTo),
    /// Concatenation along a dimension (n-ary).
    Cat(Axis),
    /// Select slices along a dimension by an `i64` index vector.
    IndexSelect(Axis),
    /// Adjoint of `IndexSelect`.
    IndexAdd(IndexAdd),
    /// Gather along a dimension by a same-rank `i64` index tensor.
    Gather(Axis),
    /// Adjoint of `Gather`.
    ScatterAdd(ScatterAdd),
    /// One-hot encoding.
    OneHot(OneHot),
    /// Sliding windows of `[N, C, H, W]` images as columns (im2col).
    Unfold(Unfold),
    /// The adjoint of `Unfold` (col2im).
    Fold(Fold),
    /// 2-D max pooling of `[N, C, H, W]` (padding never wins; the first maximum does).
    MaxPool2d(Window2d),
    /// Max pooling's input gradient; inputs: the pooled input, the output cotangent.
    MaxPool2dBackward(Window2d),
    /// A copy to another device.
    ToDevice(ToDevice),
    /// Identity on values that stops gradients (`detach()`, an op run under `no_grad`, a value
    /// saved by an autograd node): recorded where eager mode cuts the autograd graph, so the
    /// symbolic backward cuts it there too. Simplification removes it.
    Detach,
    /// Identity on values that starts a new gradient leaf (`requires_grad()` inside a recording):
    /// no gradient flows to its operand, and the derivation reports the gradient of the leaf
    /// itself. Simplification removes it.
    FreshLeaf,
}

/// The result type an op's shape rule infers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Result shape.
    pub shape: Shape,
    /// Result dtype.
    pub dtype: DType,
}

impl Op {
    /// The user-facing name, as used in error messages and graph dumps.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Full(_) => "full",
            Op::Arange(_) => "arange",
            Op::Constant(_) => "constant",
            Op::RandUniform(_) => "rand",
            Op::RandNormal(_) => "randn",
            Op::Multinomial => "multinomial",
            Op::Unary(u) => u.name(),
            Op::Powf(_) => "powf",
            Op::Clamp(_) => "clamp",
            Op::Cast(_) => "to_dtype",
            Op::Binary(b) => b.name(),
            Op::Compare(c) => c.name(),
            Op::Where => "where_cond",
            Op::Sum(_) => "sum",
            Op::Max(_) => "max",
            Op::Min(_) => "min",
            Op::ArgMax(_) => "argmax",
            Op::ArgSort(_) => "argsort",
            Op::LogSumExp(_) => "logsumexp",
            Op::Softmax(_) => "softmax",
            Op::LogSoftmax(_) => "log_softmax",
            Op::MatMul => "matmul",
            Op::Reshape(_) => "reshape",
            Op::Permute(_) => "permute",
            Op::Narrow(_) => "narrow",
            Op::Pad(_) => "pad",
            Op::BroadcastTo(_) => "broadcast_to",
            Op::Cat(_) => "cat",
            Op::IndexSelect(_) => "index_select",
            Op::IndexAdd(_) => "index_add",
            Op::Gather(_) => "gather",
            Op::ScatterAdd(_) => "scatter_add",
            Op::OneHot(_) => "one_hot",
            Op::Unfold(_) => "unfold",
            Op::Fold(_) => "fold",
            Op::MaxPool2d(_) => "max_pool2d",
            Op::MaxPool2dBackward(_) => "max_pool2d_backward",
            Op::ToDevice(_) => "to_device",
            Op::Detach => "detach",
            Op::FreshLeaf => "requires_grad",
        }
    }

    /// Whether this op only marks an autograd boundary (no eager op call corresponds to it).
    pub fn is_marker(&self) -> bool {
        matches!(self, Op::Detach | Op::FreshLeaf)
    }

    /// Shape rule: checks the operands and infers the result type. Panics with the op, the
    /// operand shapes and the caller's location on misuse.
    #[track_caller]
    pub(crate) fn infer(&self, x: &[&Tensor]) -> TensorType {
        match self {
            Op::Full(p) => TensorType { shape: p.shape.clone(), dtype: p.dtype },
            Op::Arange(p) => TensorType { shape: [p.n].into(), dtype: DType::I64 },
            Op::Constant(c) => TensorType { shape: c.shape.clone(), dtype: c.data.dtype() },
            Op::RandUniform(p) | Op::RandNormal(p) => TensorType { shape: p.shape.clone(), dtype: p.dtype },
            Op::Multinomial => source::infer_multinomial(x[0]),
            Op::Unary(u) => elementwise::infer_unary(*u, x[0]),
            Op::Powf(_) => elementwise::infer_float(self.name(), x[0]),
            Op::Clamp(_) => elementwise::infer_numeric(self.name(), x[0]),
            Op::Cast(c) => TensorType { shape: x[0].shape_ref().clone(), dtype: c.dtype },
            Op::Binary(b) => elementwise::infer_binary(*b, x[0], x[1]),
            Op::Compare(c) => elementwise::infer_compare(*c, x[0], x[1]),
            Op::Where => elementwise::infer_where(x[0], x[1], x[2]),
            Op::Sum(p) => reduce::infer_sum(p, x[0]),
            Op::Max(p) | Op::Min(p) | Op::LogSumExp(p) => {
                reduce::infer_reduce_dim(self.name(), p, x[0], x[0].dtype())
            }
            Op::ArgMax(p) => reduce::infer_reduce_dim(self.name(), p, x[0], DType::I64),
            Op::ArgSort(p) => sort::infer_argsort(p, x[0]),
            Op::Softmax(_) | Op::LogSoftmax(_) => elementwise::infer_float(self.name(), x[0]),
            Op::MatMul => linalg::infer_matmul(x[0], x[1]),
            Op::Reshape(p) => TensorType { shape: p.shape.clone(), dtype: x[0].dtype() },
            Op::Permute(p) => shape_ops::infer_permute(p, x[0]),
            Op::Narrow(p) => shape_ops::infer_narrow(p, x[0]),
            Op::Pad(p) => shape_ops::infer_pad(p, x[0]),
            Op::BroadcastTo(p) => shape_ops::infer_broadcast_to(p, x[0]),
            Op::Cat(p) => shape_ops::infer_cat(p, x),
            Op::IndexSelect(p) => index::infer_index_select(p, x[0], x[1]),
            Op::IndexAdd(p) => index::infer_index_add(p, x[0], x[1]),
            Op::Gather(p) => index::infer_gather(p, x[0], x[1]),
            Op::ScatterAdd(p) => index::infer_scatter_add(p, x[0], x[1]),
            Op::OneHot(p) => index::infer_one_hot(p, x[0]),
            Op::Unfold(p) => conv::infer_unfold(p, x[0]),
            Op::Fold(p) => conv::infer_fold(p, x[0]),
            Op::MaxPool2d(w) => conv::infer_max_pool(w, x[0]),
            Op::MaxPool2dBackward(w) => conv::infer_max_pool_backward(w, x[0], x[1]),
            Op::ToDevice(_) => TensorType { shape: x[0].shape_ref().clone(), dtype: x[0].dtype() },
            Op::Detach | Op::FreshLeaf => TensorType { shape: x[0].shape_ref().clone(), dtype: x[0].dtype() },
        }
    }

    /// The CPU kernel: computes the result from concrete CPU operands (`to_device` is the
    /// backend's: `crate::backend::compute`).
    #[track_caller]
    pub(crate) fn compute_cpu(&self, x: &[&Tensor], ty: &TensorType) -> Data {
        match self {
            Op::Full(p) => source::full(p),
            Op::Arange(p) => source::arange(p),
            Op::Constant(c) => Data::shared(c.data.clone(), &c.shape),
            Op::RandUniform(p) => source::rand(p, x[0], false),
            Op::RandNormal(p) => source::rand(p, x[0], true),
            Op::Multinomial => source::multinomial(x[0], x[1]),
            Op::Unary(u) => elementwise::unary(*u, x[0]),
            Op::Powf(p) => elementwise::powf(p, x[0]),
            Op::Clamp(p) => elementwise::clamp(p, x[0]),
            Op::Cast(p) => elementwise::cast(p, x[0]),
            Op::Binary(b) => elementwise::binary(*b, x[0], x[1], ty),
            Op::Compare(c) => elementwise::compare(*c, x[0], x[1], ty),
            Op::Where => elementwise::where_cond(x[0], x[1], x[2], ty),
            Op::Sum(p) => reduce::sum(p, x[0], ty),
            Op::Max(p) => reduce::max(p, x[0], ty),
            Op::Min(p) => reduce::min(p, x[0], ty),
            Op::ArgMax(p) => reduce::argmax(p, x[0], ty),
            Op::ArgSort(p) => sort::argsort(p, x[0]),
            Op::LogSumExp(p) => reduce::logsumexp(p, x[0], ty),
            Op::Softmax(p) => reduce::softmax(p, x[0], false),
            Op::LogSoftmax(p) => reduce::softmax(p, x[0], true),
            Op::MatMul => linalg::matmul(x[0], x[1], ty),
            Op::Reshape(p) => shape_ops::reshape(p, x[0]),
            Op::Permute(p) => shape_ops::permute(p, x[0]),
            Op::Narrow(p) => shape_ops::narrow(p, x[0]),
            Op::Pad(p) => shape_ops::pad(p, x[0], ty),
            Op::BroadcastTo(p) => shape_ops::broadcast_to(p, x[0]),
            Op::Cat(p) => shape_ops::cat(p, x, ty),
            Op::IndexSelect(p) => index::index_select(p, x[0], x[1], ty),
            Op::IndexAdd(p) => index::index_add(p, x[0], x[1], ty),
            Op::Gather(p) => index::gather(p, x[0], x[1], ty),
            Op::ScatterAdd(p) => index::scatter_add(p, x[0], x[1], ty),
            Op::OneHot(p) => index::one_hot(p, x[0], ty),
            Op::Unfold(p) => conv::unfold(p, x[0], ty),
            Op::Fold(p) => conv::fold(p, x[0], ty),
            Op::MaxPool2d(w) => conv::max_pool(w, x[0], ty),
            Op::MaxPool2dBackward(w) => conv::max_pool_backward(w, x[0], x[1], ty),
            Op::ToDevice(_) => unreachable!("transfers run in backend::compute"),
            Op::Detach | Op::FreshLeaf => x[0].data().clone(),
        }
    }

    /// Whether gradients flow through this op to any input.
    pub(crate) fn is_differentiable(&self) -> bool {
        !matches!(
            self,
            Op::Full(_)
                | Op::Arange(_)
                | Op::Constant(_)
                | Op::RandUniform(_)
                | Op::RandNormal(_)
                | Op::Multinomial
                | Op::Compare(_)
                | Op::ArgMax(_)
                | Op::ArgSort(_)
                | Op::OneHot(_)
                | Op::MaxPool2dBackward(_)
                | Op::Detach
                | Op::FreshLeaf
        )
    }

    /// The gradient rule: input cotangents (one slot per input, `None` where no gradient
    /// flows) from the output cotangent `g`, written in terms of `Tensor` ops so the same rule
    /// serves the eager tape and symbolic autodiff.
    pub(crate) fn vjp(&self, x: &[Tensor], out: &Tensor, g: &Tensor) -> Vec<Option<Tensor>> {
        match self {
            Op::Unary(u) => vec![Some(elementwise::unary_vjp(*u, &x[0], out, g))],
            Op::Powf(p) => vec![Some(elementwise::powf_vjp(p, &x[0], g))],
            Op::Clamp(p) => vec![Some(elementwise::clamp_vjp(p, &x[0], g))],
            Op::Cast(_) => vec![x[0].dtype().is_float().then(|| g.to_dtype(x[0].dtype()))],
            Op::Binary(b) => elementwise::binary_vjp(*b, &x[0], &x[1], out, g),
            Op::Where => elementwise::where_vjp(&x[0], &x[1], &x[2], g),
            Op::Sum(_) => vec![Some(reduce::sum_vjp(&x[0], g, self))],
            Op::Max(p) | Op::Min(p) => vec![Some(reduce::extremum_vjp(p, &x[0], out, g))],
            Op::LogSumExp(p) => vec![Some(reduce::logsumexp_vjp(p, &x[0], out, g))],
            Op::Softmax(p) => vec![Some(reduce::softmax_vjp(p, out, g))],
            Op::LogSoftmax(p) => vec![Some(reduce::log_softmax_vjp(p, out, g))],
            Op::MatMul => linalg::matmul_vjp(&x[0], &x[1], g),
            Op::Reshape(_) => vec![Some(g.reshape(x[0].shape_ref()))],
            Op::Permute(p) => vec![Some(shape_ops::permute_vjp(p, g))],
            Op::Narrow(p) => vec![Some(shape_ops::narrow_vjp(p, &x[0], g))],
            Op::Pad(p) => vec![Some(g.narrow(p.dim, p.before, x[0].sizes()[p.dim]))],
            Op::BroadcastTo(_) => vec![Some(elementwise::sum_to(g, x[0].shape_ref()))],
            Op::Cat(p) => shape_ops::cat_vjp(p, x, g),
            Op::IndexSelect(p) => vec![Some(index::index_select_vjp(p, &x[0], &x[1], g)), None],
            Op::IndexAdd(p) => vec![Some(g.index_select(p.dim, &x[1])), None],
            Op::Gather(p) => vec![Some(index::gather_vjp(p, &x[0], &x[1], g)), None],
            Op::ScatterAdd(p) => vec![Some(g.gather(p.dim, &x[1])), None],
            Op::ToDevice(_) => vec![Some(g.to_device(x[0].device()))],
            Op::Unfold(p) => vec![Some(conv::unfold_vjp(p, &x[0], g))],
            Op::Fold(p) => vec![Some(conv::fold_vjp(p, g))],
            Op::MaxPool2d(w) => vec![Some(conv::max_pool_vjp(w, &x[0], g))],
            Op::Full(_)
            | Op::Arange(_)
            | Op::Constant(_)
            | Op::RandUniform(_)
            | Op::RandNormal(_)
            | Op::Multinomial
            | Op::Compare(_)
            | Op::ArgMax(_)
            | Op::ArgSort(_)
            | Op::OneHot(_)
            // Gradients are first order (`backward` runs under `no_grad`), so nothing
            // differentiates a gradient op.
            | Op::MaxPool2dBackward(_)
            | Op::Detach
            | Op::FreshLeaf => vec![None; x.len()],
        }
    }
}
