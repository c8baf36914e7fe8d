//! Normalisation, dropout and masking, composed from primitive ops so that they stage, fuse
//! and differentiate like any other code: `layer_norm`, `batch_norm` (functional: the new
//! running statistics are returned, not stored), `dropout`, `masked_fill`, `tril`/`triu`.

use crate::eager::apply;
use crate::error::{Composite, bail};
use crate::ops::{Arange, Op};
use crate::tensor::Tensor;
use crate::{DType, Device};

/// `(x - mean) / sqrt(var + eps)` with the biased variance over `dims`; returns it with the
/// mean and the variance (kept dims).
fn normalize(x: &Tensor, dims: &[usize], eps: f64) -> (Tensor, Tensor, Tensor) {
    let count: usize = dims.iter().map(|&d| x.sizes()[d]).product();
    let inv = 1.0 / count.max(1) as f64;
    let mean = x.sum_dims(dims, true) * inv;
    let centered = x - &mean;
    let var = centered.square().sum_dims(dims, true) * inv;
    let y = &centered * (&var + eps).rsqrt();
    (y, mean, var)
}

/// `y * weight + bias`, each when given.
fn affine(y: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, shape: &[usize]) -> Tensor {
    let y = match weight {
        Some(w) => y * w.reshape(shape.to_vec()),
        None => y,
    };
    match bias {
        Some(b) => y + b.reshape(shape.to_vec()),
        None => y,
    }
}

impl Tensor {
    /// Layer normalisation over the trailing `normalized_shape` dimensions (PyTorch's
    /// `F.layer_norm`): `(x - mean) / sqrt(var + eps) * weight + bias`, with the biased
    /// variance; `weight` and `bias` have shape `normalized_shape`.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f64, 3.0], [1, 2]);
    /// assert_eq!(x.layer_norm(&[2], None, None, 0.0).to_vec::<f64>(), [-1.0, 1.0]);
    /// ```
    #[track_caller]
    #[doc(alias = "LayerNorm")]
    pub fn layer_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Tensor {
        let k = normalized_shape.len();
        let param_ok =
            |p: Option<&Tensor>| p.is_none_or(|p| p.sizes() == normalized_shape && p.dtype() == self.dtype());
        if k == 0
            || k > self.rank()
            || self.sizes()[self.rank() - k..] != *normalized_shape
            || !self.dtype().is_float()
            || !param_ok(weight)
            || !param_ok(bias)
        {
            bail!(
                "layer_norm",
                "input {} {:?} must be float and end in normalized_shape {normalized_shape:?}, like weight {:?} and bias {:?}",
                self.dtype(),
                self.shape_ref(),
                weight.map(|w| (w.dtype(), w.shape_ref().clone())),
                bias.map(|b| (b.dtype(), b.shape_ref().clone()))
            );
        }
        let _ctx = Composite::enter("layer_norm");
        let dims: Vec<usize> = (self.rank() - k..self.rank()).collect();
        let (y, _, _) = normalize(self, &dims, eps);
        affine(y, weight, bias, normalized_shape)
    }

    /// Batch normalisation of `[N, C, ...]` per channel (dim 1), as PyTorch's `F.batch_norm`,
    /// in value style: returns `(y, new_running_mean, new_running_var)`.
    ///
    /// In training mode `y` is normalised by the batch statistics (biased variance), gradients
    /// flow through them, and the new running statistics are
    /// `(1 - momentum) * old + momentum * batch`, with the *unbiased* batch variance, detached.
    /// In eval mode `y` uses the running statistics, which are returned unchanged.
    /// `running_mean`, `running_var`, `weight` and `bias` are `[C]`.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f64, 3.0], [2, 1]);
    /// let (mean, var) = (Tensor::zeros_dtype([1], DType::F64), Tensor::full_dtype([1], 1.0, DType::F64));
    /// let (y, m, v) = x.batch_norm(&mean, &var, None, None, true, 0.5, 0.0);
    /// assert_eq!(y.to_vec::<f64>(), [-1.0, 1.0]);
    /// assert_eq!((m.to_vec::<f64>(), v.to_vec::<f64>()), (vec![1.0], vec![1.5]));
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    #[doc(alias = "BatchNorm2d")]
    pub fn batch_norm(
        &self,
        running_mean: &Tensor,
        running_var: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> (Tensor, Tensor, Tensor) {
        let c = if self.rank() >= 2 { self.sizes()[1] } else { 0 };
        let per_channel =
            |p: Option<&Tensor>| p.is_none_or(|p| p.sizes() == [c] && p.dtype() == self.dtype());
        if self.rank() < 2
            || !self.dtype().is_float()
            || ![Some(running_mean), Some(running_var), weight, bias].into_iter().all(per_channel)
        {
            bail!(
                "batch_norm",
                "expected a float [N, C, ...] input and [C] statistics and parameters of its dtype, got input {} {:?}, \
                 running_mean {:?}, running_var {:?}, weight {:?}, bias {:?}",
                self.dtype(),
                self.shape_ref(),
                running_mean.shape_ref(),
                running_var.shape_ref(),
                weight.map(|w| w.shape_ref().clone()),
                bias.map(|b| b.shape_ref().clone())
            );
        }
        let count = self.elems() / c.max(1);
        if training && count <= 1 {
            bail!(
                "batch_norm",
                "expected more than 1 value per channel when training, got input {:?}",
                self.shape_ref()
            );
        }
        let _ctx = Composite::enter("batch_norm");
        let mut stat_shape = vec![1; self.rank()];
        stat_shape[1] = c;
        if !training {
            let y = (self - running_mean.reshape(stat_shape.clone()))
                * (running_var.reshape(stat_shape.clone()) + eps).rsqrt();
            return (affine(y, weight, bias, &stat_shape), running_mean.clone(), running_var.clone());
        }
        let dims: Vec<usize> = (0..self.rank()).filter(|&d| d != 1).collect();
        let (y, mean, var) = normalize(self, &dims, eps);
        let unbias = count as f64 / (count - 1) as f64;
        let new_mean = (running_mean * (1.0 - momentum) + mean.detach().reshape([c]) * momentum).detach();
        let new_var =
            (running_var * (1.0 - momentum) + var.detach().reshape([c]) * (momentum * unbias)).detach();
        (affine(y, weight, bias, &stat_shape), new_mean, new_var)
    }

    /// Inverted dropout: in training mode each element is zeroed with probability `p` and the
    /// others scaled by `1 / (1 - p)`; the identity when `!training` or `p == 0`. The mask
    /// comes from the thread's Philox stream (`janus::manual_seed`), so compiled code draws
    /// the same bits as eager code. Panics unless `0 <= p < 1`.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// janus_runtime::manual_seed(0);
    /// let y = Tensor::ones([1000]).dropout(0.5, true).to_vec::<f32>();
    /// assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
    /// ```
    #[track_caller]
    #[doc(alias = "Dropout")]
    pub fn dropout(&self, p: f64, training: bool) -> Tensor {
        if !(0.0..1.0).contains(&p) || !self.dtype().is_float() {
            bail!(
                "dropout",
                "p must be in [0, 1) and the input a float, got p = {p} for {} {:?}",
                self.dtype(),
                self.shape_ref()
            );
        }
        if !training || p == 0.0 {
            return self.clone();
        }
        let _ctx = Composite::enter("dropout");
        let u = Tensor::rand_on(self.shape_ref().clone(), self.dtype(), self.device());
        let keep = u.ge_scalar(p).to_dtype(self.dtype()) * (1.0 / (1.0 - p));
        self * keep
    }

    /// `value` where the `bool` `mask` (broadcast to this tensor's shape) is true, this tensor
    /// elsewhere (PyTorch's `masked_fill`). The gradient flows where the mask is false.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]);
    /// let m = Tensor::from_vec(vec![false, true, false], [3]);
    /// assert_eq!(x.masked_fill(&m, -1.0).to_vec::<f32>(), [1.0, -1.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Tensor {
        if mask.dtype() != DType::Bool
            || crate::broadcast_shapes(self.sizes(), mask.sizes())
                .is_none_or(|s| s.0.as_slice() != self.sizes())
        {
            bail!(
                "masked_fill",
                "the mask must be bool and broadcast to the input's shape, got mask {} {:?} for input {:?}",
                mask.dtype(),
                mask.shape_ref(),
                self.shape_ref()
            );
        }
        let _ctx = Composite::enter("masked_fill");
        mask.where_cond(&self.scalar_like(value), self)
    }

    /// The `bool` mask of `[rows, cols]` positions with `col - row <= diagonal` (`lower`) or
    /// `>= diagonal`.
    #[track_caller]
    fn triangle(&self, op: &'static str, diagonal: i64, lower: bool) -> Tensor {
        if self.rank() < 2 {
            bail!(op, "expected at least 2 dimensions, got {:?}", self.shape_ref());
        }
        let (r, c) = (self.sizes()[self.rank() - 2], self.sizes()[self.rank() - 1]);
        let device: Device = self.device();
        let rows = apply(Op::Arange(Arange { n: r, device }), &[]).unsqueeze(1);
        let cols = apply(Op::Arange(Arange { n: c, device }), &[]);
        let offset = cols - rows;
        if lower { offset.le_scalar(diagonal as f64) } else { offset.ge_scalar(diagonal as f64) }
    }

    /// The lower triangle of the last two dimensions: elements with `col - row <= diagonal`
    /// are kept, the others zeroed (PyTorch's `tril`).
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::ones([2, 2]);
    /// assert_eq!(x.tril(0).to_vec::<f32>(), [1.0, 0.0, 1.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn tril(&self, diagonal: i64) -> Tensor {
        let keep = self.triangle("tril", diagonal, true);
        let _ctx = Composite::enter("tril");
        keep.where_cond(self, &self.scalar_like(0.0))
    }

    /// The upper triangle of the last two dimensions: elements with `col - row >= diagonal`
    /// are kept, the others zeroed (PyTorch's `triu`).
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::ones([2, 2]);
    /// assert_eq!(x.triu(1).to_vec::<f32>(), [0.0, 1.0, 0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn triu(&self, diagonal: i64) -> Tensor {
        let keep = self.triangle("triu", diagonal, false);
        let _ctx = Composite::enter("triu");
        keep.where_cond(self, &self.scalar_like(0.0))
    }
}
