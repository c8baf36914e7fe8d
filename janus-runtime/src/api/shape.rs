//! Shape methods: reshape, transposes, slicing, broadcasting, concatenation, indexing.

use crate::DType;
use crate::eager::apply;
use crate::error::bail;
use crate::ops::{Axis, BroadcastTo, IndexAdd, Narrow, OneHot, Op, Pad, Permute, Reshape, ScatterAdd};
use crate::shape::{Dim, ReshapeSpec, Shape};
use crate::tensor::Tensor;

impl Tensor {
    /// The same elements in another shape; one dimension may be `-1` (inferred). A view when
    /// the tensor is contiguous, a copy otherwise.
    #[track_caller]
    #[doc(alias = "view", alias = "view_as")]
    pub fn reshape(&self, spec: impl ReshapeSpec) -> Tensor {
        let spec = spec.to_spec();
        let numel = self.elems();
        let known: usize = spec.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
        let holes = spec.iter().filter(|&&d| d < 0).count();
        let valid = match holes {
            0 => known == numel && spec.iter().all(|&d| d >= 0),
            1 => known != 0 && numel.is_multiple_of(known) && spec.iter().all(|&d| d >= -1),
            _ => false,
        };
        if !valid {
            bail!("reshape", "cannot reshape {:?} ({numel} elements) to {:?}", self.shape_ref(), &spec[..]);
        }
        let dims: Vec<usize> = spec.iter().map(|&d| if d < 0 { numel / known } else { d as usize }).collect();
        let shape = Shape::from(dims);
        if &shape == self.shape_ref() {
            return self.clone();
        }
        apply(Op::Reshape(Reshape { shape }), &[self])
    }

    /// A 1-D view of all elements.
    #[track_caller]
    pub fn flatten(&self) -> Tensor {
        self.reshape([-1])
    }

    /// Reorders dimensions: result dimension `i` is dimension `perm[i]` (a view).
    #[track_caller]
    #[doc(alias = "transpose")]
    pub fn permute(&self, perm: &[usize]) -> Tensor {
        if perm.iter().enumerate().all(|(i, &p)| i == p) && perm.len() == self.rank() {
            return self.clone();
        }
        apply(Op::Permute(Permute { perm: perm.iter().copied().collect() }), &[self])
    }

    /// Swaps two dimensions (a view).
    #[track_caller]
    pub fn transpose(&self, d0: impl Dim, d1: impl Dim) -> Tensor {
        let (a, b) = (self.resolve_dim("transpose", d0, 0), self.resolve_dim("transpose", d1, 0));
        let mut perm: Vec<usize> = (0..self.rank()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// The transpose of a 2-D tensor (a view).
    #[track_caller]
    #[doc(alias = "transpose")]
    pub fn t(&self) -> Tensor {
        if self.rank() != 2 {
            bail!("t", "expected a 2-D tensor, got {:?}; use transpose for other ranks", self.shape_ref());
        }
        self.transpose(0, 1)
    }

    /// Inserts a size-1 dimension at `dim` (`-1` appends).
    #[track_caller]
    pub fn unsqueeze(&self, dim: impl Dim) -> Tensor {
        let d = self.resolve_dim("unsqueeze", dim, 1);
        let mut dims = self.sizes().to_vec();
        dims.insert(d, 1);
        self.reshape(dims)
    }

    /// Removes the size-1 dimension `dim`.
    #[track_caller]
    pub fn squeeze(&self, dim: impl Dim) -> Tensor {
        let d = self.resolve_dim("squeeze", dim, 0);
        if self.sizes()[d] != 1 {
            bail!("squeeze", "dimension {d} of {:?} has size {}, not 1", self.shape_ref(), self.sizes()[d]);
        }
        let mut dims = self.sizes().to_vec();
        dims.remove(d);
        self.reshape(dims)
    }

    /// NumPy broadcast to `shape` (a view).
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Tensor {
        let shape = shape.into();
        if &shape == self.shape_ref() {
            return self.clone();
        }
        apply(Op::BroadcastTo(BroadcastTo { shape }), &[self])
    }

    /// Elements `start..start + len` of dimension `dim` (a view).
    #[track_caller]
    #[doc(alias = "select", alias = "slice")]
    pub fn narrow(&self, dim: impl Dim, start: usize, len: usize) -> Tensor {
        let dim = self.resolve_dim("narrow", dim, 0);
        if start == 0 && len == self.sizes()[dim] {
            return self.clone();
        }
        apply(Op::Narrow(Narrow { dim, start, len }), &[self])
    }

    /// Pads dimension `dim` with `before` zeros in front and `after` zeros behind.
    #[track_caller]
    pub fn pad(&self, dim: impl Dim, before: usize, after: usize) -> Tensor {
        let dim = self.resolve_dim("pad", dim, 0);
        self.pad_dim(dim, before, after)
    }

    pub(crate) fn pad_dim(&self, dim: usize, before: usize, after: usize) -> Tensor {
        if before == 0 && after == 0 {
            return self.clone();
        }
        apply(Op::Pad(Pad { dim, before, after }), &[self])
    }

    /// Splits dimension `dim` into `N` equal views (its size must be divisible by `N`).
    #[track_caller]
    pub fn chunk<const N: usize>(&self, dim: impl Dim) -> [Tensor; N] {
        let d = self.resolve_dim("chunk", dim, 0);
        let size = self.sizes()[d];
        if N == 0 || !size.is_multiple_of(N) {
            bail!(
                "chunk",
                "dimension {d} of {:?} (size {size}) does not split into {N} equal chunks",
                self.shape_ref()
            );
        }
        let len = size / N;
        std::array::from_fn(|i| self.narrow(d, i * len, len))
    }

    /// Concatenates tensors along `dim`; all other dimensions and the dtype must agree.
    #[track_caller]
    #[doc(alias = "concat", alias = "concatenate")]
    pub fn cat(tensors: &[&Tensor], dim: impl Dim) -> Tensor {
        let Some(first) = tensors.first() else { bail!("cat", "needs at least one tensor") };
        let dim = first.resolve_dim("cat", dim, 0);
        if tensors.len() == 1 {
            return (*first).clone();
        }
        apply(Op::Cat(Axis { dim }), tensors)
    }

    /// Stacks same-shaped tensors along a new dimension `dim`.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], dim: impl Dim) -> Tensor {
        let Some(first) = tensors.first() else { bail!("stack", "needs at least one tensor") };
        let d = first.resolve_dim("stack", dim, 1);
        if let Some(t) = tensors.iter().find(|t| t.shape_ref() != first.shape_ref()) {
            bail!(
                "stack",
                "tensors must have one shape, got {:?} and {:?}",
                first.shape_ref(),
                t.shape_ref()
            );
        }
        let parts: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(d)).collect();
        let refs: Vec<&Tensor> = parts.iter().collect();
        Tensor::cat(&refs, d)
    }

    /// A contiguous copy, or this tensor if it already is contiguous.
    pub fn contiguous(&self) -> Tensor {
        if self.is_concrete() && self.is_contiguous() {
            return self.clone();
        }
        // Reshape to the same shape copies exactly when the input is not contiguous.
        apply(Op::Reshape(Reshape { shape: self.shape_ref().clone() }), &[self])
    }

    /// Slices of dimension `dim` picked by a 1-D `i64` index tensor.
    #[track_caller]
    pub fn index_select(&self, dim: impl Dim, idx: &Tensor) -> Tensor {
        let dim = self.resolve_dim("index_select", dim, 0);
        apply(Op::IndexSelect(Axis { dim }), &[self, idx])
    }

    /// `out[p] = self[p with dimension dim replaced by idx[p]]`; `idx` is `i64` of this rank.
    #[track_caller]
    pub fn gather(&self, dim: impl Dim, idx: &Tensor) -> Tensor {
        let dim = self.resolve_dim("gather", dim, 0);
        apply(Op::Gather(Axis { dim }), &[self, idx])
    }

    /// Adds slices of `self` (along `dim`) into zeros of length `size` at positions `idx`.
    #[track_caller]
    pub fn index_add_into(&self, dim: impl Dim, idx: &Tensor, size: usize) -> Tensor {
        let dim = self.resolve_dim("index_add", dim, 0);
        apply(Op::IndexAdd(IndexAdd { dim, size }), &[self, idx])
    }

    /// Adds each element of `self` into zeros of `shape` at its position with dimension `dim`
    /// replaced by `idx` (the adjoint of [`gather`](Tensor::gather)).
    #[track_caller]
    pub fn scatter_add_into(&self, dim: impl Dim, idx: &Tensor, shape: impl Into<Shape>) -> Tensor {
        let dim = self.resolve_dim("scatter_add", dim, 0);
        apply(Op::ScatterAdd(ScatterAdd { dim, shape: shape.into() }), &[self, idx])
    }

    /// One-hot `f32` encoding of `i64` class indices: a new last dimension of `classes`.
    #[track_caller]
    pub fn one_hot(&self, classes: usize) -> Tensor {
        self.one_hot_dtype(classes, DType::F32)
    }

    /// One-hot encoding in `dtype`.
    #[track_caller]
    pub fn one_hot_dtype(&self, classes: usize, dtype: DType) -> Tensor {
        apply(Op::OneHot(OneHot { classes, dtype }), &[self])
    }
}
