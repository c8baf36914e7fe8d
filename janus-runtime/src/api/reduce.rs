//! Reduction methods (sums and means, max/min/argmax, logsumexp, softmax) and `matmul`.

use crate::eager::apply;
use crate::ops::{Axis, DimList, Op, ReduceDim, Sum};
use crate::shape::Dim;
use crate::tensor::Tensor;

impl Tensor {
    /// Sum over the given dimensions (each non-negative and in range; duplicates ignored).
    #[track_caller]
    pub fn sum_dims(&self, dims: &[usize], keepdim: bool) -> Tensor {
        let mut d: DimList = dims.iter().map(|&x| self.resolve_dim("sum", x, 0)).collect();
        d.sort_unstable();
        d.dedup();
        if d.is_empty() && !keepdim {
            return self.clone();
        }
        apply(Op::Sum(Sum { dims: d, keepdim }), &[self])
    }

    /// Sum of all elements (rank 0).
    #[track_caller]
    #[doc(alias = "sum")]
    pub fn sum_all(&self) -> Tensor {
        let all: Vec<usize> = (0..self.rank()).collect();
        apply(Op::Sum(Sum { dims: all.into_iter().collect(), keepdim: false }), &[self])
    }

    /// Mean of all elements (rank 0).
    #[track_caller]
    #[doc(alias = "mean")]
    pub fn mean_all(&self) -> Tensor {
        self.sum_all() * (1.0 / self.elems() as f64)
    }

    /// Sum along `dim`, removing it.
    #[track_caller]
    pub fn sum(&self, dim: impl Dim) -> Tensor {
        let d = self.resolve_dim("sum", dim, 0);
        self.sum_dims(&[d], false)
    }

    /// Sum along `dim`, keeping it as size 1.
    #[track_caller]
    pub fn sum_keepdim(&self, dim: impl Dim) -> Tensor {
        let d = self.resolve_dim("sum", dim, 0);
        self.sum_dims(&[d], true)
    }

    /// Mean along `dim`, removing it.
    #[track_caller]
    pub fn mean(&self, dim: impl Dim) -> Tensor {
        let d = self.resolve_dim("mean", dim, 0);
        self.sum_dims(&[d], false) * (1.0 / self.sizes()[d] as f64)
    }

    /// Mean along `dim`, keeping it as size 1.
    #[track_caller]
    pub fn mean_keepdim(&self, dim: impl Dim) -> Tensor {
        let d = self.resolve_dim("mean", dim, 0);
        self.sum_dims(&[d], true) * (1.0 / self.sizes()[d] as f64)
    }

    #[track_caller]
    fn along(&self, name: &str, dim: impl Dim, keepdim: bool, make: fn(ReduceDim) -> Op) -> Tensor {
        let dim = self.resolve_dim(name, dim, 0);
        apply(make(ReduceDim { dim, keepdim }), &[self])
    }

    /// Maximum along `dim` (values only; see [`argmax`](Tensor::argmax)).
    #[track_caller]
    pub fn max(&self, dim: impl Dim) -> Tensor {
        self.along("max", dim, false, Op::Max)
    }

    /// Maximum along `dim`, keeping it as size 1.
    #[track_caller]
    pub fn max_keepdim(&self, dim: impl Dim) -> Tensor {
        self.along("max", dim, true, Op::Max)
    }

    /// Minimum along `dim`.
    #[track_caller]
    pub fn min(&self, dim: impl Dim) -> Tensor {
        self.along("min", dim, false, Op::Min)
    }

    /// Minimum along `dim`, keeping it as size 1.
    #[track_caller]
    pub fn min_keepdim(&self, dim: impl Dim) -> Tensor {
        self.along("min", dim, true, Op::Min)
    }

    /// Maximum of all elements (rank 0).
    #[track_caller]
    pub fn max_all(&self) -> Tensor {
        self.reshape([-1]).max(0)
    }

    /// Minimum of all elements (rank 0).
    #[track_caller]
    pub fn min_all(&self) -> Tensor {
        self.reshape([-1]).min(0)
    }

    /// Index of the first maximum along `dim`, as `i64`.
    #[track_caller]
    pub fn argmax(&self, dim: impl Dim) -> Tensor {
        self.along("argmax", dim, false, Op::ArgMax)
    }

    /// `log(sum(exp(x)))` along `dim`, computed stably.
    #[track_caller]
    pub fn logsumexp(&self, dim: impl Dim) -> Tensor {
        self.along("logsumexp", dim, false, Op::LogSumExp)
    }

    /// `log(sum(exp(x)))` along `dim`, keeping it as size 1.
    #[track_caller]
    pub fn logsumexp_keepdim(&self, dim: impl Dim) -> Tensor {
        self.along("logsumexp", dim, true, Op::LogSumExp)
    }

    /// Softmax along `dim`, computed stably.
    #[track_caller]
    pub fn softmax(&self, dim: impl Dim) -> Tensor {
        let dim = self.resolve_dim("softmax", dim, 0);
        apply(Op::Softmax(Axis { dim }), &[self])
    }

    /// Log-softmax along `dim`, computed stably.
    #[track_caller]
    pub fn log_softmax(&self, dim: impl Dim) -> Tensor {
        let dim = self.resolve_dim("log_softmax", dim, 0);
        apply(Op::LogSoftmax(Axis { dim }), &[self])
    }

    /// Matrix product: `[m, k] @ [k, n]`, or batched `[..., m, k] @ [..., k, n]` over any
    /// number of leading batch dimensions, which broadcast (NumPy rules; a 2-D operand is
    /// shared by the whole batch). Transposed 2-D and 3-D operands are not copied; more
    /// batch dimensions are folded into one.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let q = Tensor::ones([2, 4, 5, 8]); // [batch, heads, time, d]
    /// let k = Tensor::ones([2, 4, 5, 8]);
    /// assert_eq!(q.matmul(&k.transpose(-2, -1)).dims(), &[2, 4, 5, 5]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        if self.rank() <= 3 && other.rank() <= 3 {
            return apply(Op::MatMul, &[self, other]);
        }
        self.matmul_batched(other)
    }

    /// `matmul` with more than one batch dimension: the batches broadcast and fold into one.
    #[track_caller]
    fn matmul_batched(&self, other: &Tensor) -> Tensor {
        let (ra, rb) = (self.rank(), other.rank());
        let batch = if ra >= 2 && rb >= 2 {
            crate::broadcast_shapes(&self.sizes()[..ra - 2], &other.sizes()[..rb - 2])
        } else {
            None
        };
        let Some(batch) = batch else {
            crate::error::bail!(
                "matmul",
                "expected matrices with broadcastable batch dimensions, got shapes {:?} and {:?}",
                self.shape_ref(),
                other.shape_ref()
            )
        };
        let _ctx = crate::error::Composite::enter("matmul");
        let b: usize = batch.0.iter().product();
        let fold = |t: &Tensor| {
            let r = t.rank();
            let (rows, cols) = (t.sizes()[r - 2], t.sizes()[r - 1]);
            if r == 2 {
                return t.clone();
            }
            let mut full = batch.0.to_vec();
            full.extend([rows, cols]);
            let t = if t.sizes() == full.as_slice() { t.clone() } else { t.broadcast_to(full) };
            t.reshape([b, rows, cols])
        };
        let y = fold(self).matmul(&fold(other));
        let mut shape = batch.0.to_vec();
        shape.extend([y.sizes()[1], y.sizes()[2]]);
        y.reshape(shape)
    }
}
