//! Sorting methods: `argsort`, `sort`, `topk`, and `Tensor::randperm`.

use crate::DType;
use crate::eager::apply;
use crate::error::bail;
use crate::ops::{ArgSort, Op};
use crate::shape::Dim;
use crate::tensor::Tensor;

impl Tensor {
    /// The indices (`i64`) that sort each lane along `dim`, smallest first or, with
    /// `descending`, largest first. The sort is stable; NaN sorts above every number, as in
    /// PyTorch.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0], [3]);
    /// assert_eq!(x.argsort(0, false).to_vec::<i64>(), vec![1, 2, 0]);
    /// ```
    #[track_caller]
    pub fn argsort(&self, dim: impl Dim, descending: bool) -> Tensor {
        let dim = if self.rank() == 0 { 0 } else { self.resolve_dim("argsort", dim, 0) };
        apply(Op::ArgSort(ArgSort { dim, descending }), &[self])
    }

    /// The values sorted along `dim` and the indices they came from (`torch.sort`). The values'
    /// gradient flows back to the positions they were taken from.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0, 0.0], [2, 2]);
    /// let (values, indices) = x.sort(1, true);
    /// assert_eq!(values.to_vec::<f32>(), vec![3.0, 1.0, 2.0, 0.0]);
    /// assert_eq!(indices.to_vec::<i64>(), vec![0, 1, 0, 1]);
    /// ```
    #[track_caller]
    pub fn sort(&self, dim: impl Dim, descending: bool) -> (Tensor, Tensor) {
        if self.rank() == 0 {
            return (self.clone(), Tensor::scalar_dtype(0.0, DType::I64).to_device(self.device()));
        }
        let dim = self.resolve_dim("sort", dim, 0);
        let idx = self.argsort(dim, descending);
        (self.gather(dim, &idx), idx)
    }

    /// The `k` largest (or, without `largest`, smallest) values along `dim`, in order, and
    /// their indices (`torch.topk` with `sorted=True`). Ties keep their original order.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.1f32, 0.7, 0.2, 0.9], [4]);
    /// let (values, indices) = x.topk(2, 0, true);
    /// assert_eq!(values.to_vec::<f32>(), vec![0.9, 0.7]);
    /// assert_eq!(indices.to_vec::<i64>(), vec![3, 1]);
    /// ```
    #[track_caller]
    pub fn topk(&self, k: usize, dim: impl Dim, largest: bool) -> (Tensor, Tensor) {
        let dim = self.resolve_dim("topk", dim, 0);
        let n = self.sizes()[dim];
        if k > n {
            bail!("topk", "k = {k} is larger than dim {dim} of size {n} (tensor {:?})", self.shape_ref());
        }
        let idx = self.argsort(dim, largest).narrow(dim, 0, k);
        (self.gather(dim, &idx), idx)
    }

    /// A random permutation of `0..n` (`i64`), from the thread's random stream: reproducible
    /// after [`manual_seed`](crate::manual_seed), and the same inside compiled graphs.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// janus_runtime::manual_seed(3);
    /// let mut p = Tensor::randperm(5).to_vec::<i64>();
    /// p.sort();
    /// assert_eq!(p, vec![0, 1, 2, 3, 4]);
    /// ```
    #[track_caller]
    pub fn randperm(n: usize) -> Tensor {
        // Sorting f64 uniforms: ties (2^-53 apart) are vanishingly rare, and sorting keeps the
        // draw counter-based, so eager and compiled runs give the same permutation.
        Tensor::rand_dtype([n], DType::F64).argsort(0, false)
    }
}
