//! Convolution and pooling over `[N, C, H, W]` images, built on the `unfold` (im2col) and
//! `fold` (col2im) primitives: a convolution is one GEMM over the whole batch, a pooling a
//! reduction over the unfolded windows. Gradients (input and weight) are the VJPs of those
//! ops, so a compiled backward is made of the same primitives.

use crate::eager::apply;
use crate::error::{Composite, bail};
use crate::ops::{F64Bits, Fold, Op, Unfold, Window2d};
use crate::tensor::Tensor;

/// Options of [`Tensor::conv2d`], with PyTorch's defaults: stride 1, no padding, dilation 1,
/// one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dOptions {
    /// Step between windows (height, width).
    pub stride: [usize; 2],
    /// Zero padding on each side (height, width).
    pub padding: [usize; 2],
    /// Spacing between kernel taps (height, width).
    pub dilation: [usize; 2],
    /// Channel groups: input and output channels are split into this many independent parts.
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 }
    }
}

impl Tensor {
    /// im2col: `[N, C, H, W] -> [C, kh, kw, N, OH, OW]`, every window of every sample as a
    /// column; the padding reads as `pad_value`.
    #[track_caller]
    pub(crate) fn unfold_windows(&self, window: Window2d, pad_value: f64) -> Tensor {
        apply(Op::Unfold(Unfold { window, pad_value: F64Bits::new(pad_value) }), &[self])
    }

    /// col2im, `unfold_windows`' adjoint: `[C, kh, kw, N, OH, OW] -> [N, C, H, W]` with
    /// `size = [H, W]`, summing every window's column into its taps (padding taps dropped).
    #[track_caller]
    pub(crate) fn fold_windows(&self, window: Window2d, size: [usize; 2]) -> Tensor {
        apply(Op::Fold(Fold { window, size }), &[self])
    }

    /// `max_pool2d`'s backward: the cotangent `self` routed to the first maximum of each
    /// window of `x`.
    #[track_caller]
    pub(crate) fn max_pool2d_backward(&self, window: Window2d, x: &Tensor) -> Tensor {
        apply(Op::MaxPool2dBackward(window), &[x, self])
    }

    /// 2-D convolution (cross-correlation, as in PyTorch's `F.conv2d`) of `self` `[N, C, H, W]`
    /// with `weight` `[O, C / groups, kh, kw]`, plus `bias` `[O]` when given; the result is
    /// `[N, O, OH, OW]` with `OH = (H + 2 * padding - dilation * (kh - 1) - 1) / stride + 1`.
    ///
    /// Runs as im2col and one GEMM per group over the whole batch.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// # use janus_runtime::Conv2dOptions;
    /// let x = Tensor::ones([1, 1, 3, 3]);
    /// let w = Tensor::ones([1, 1, 2, 2]);
    /// let y = x.conv2d(&w, None, Conv2dOptions { padding: [1, 1], ..Default::default() });
    /// assert_eq!(y.dims(), &[1, 1, 4, 4]);
    /// assert_eq!(y.to_vec::<f32>()[..4], [1.0, 2.0, 2.0, 1.0]);
    /// ```
    #[track_caller]
    #[doc(alias = "Conv2d")]
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: Conv2dOptions) -> Tensor {
        let (x, w) = (self.sizes(), weight.sizes());
        let g = opts.groups;
        let ok = self.rank() == 4
            && weight.rank() == 4
            && g > 0
            && x[1] == w[1] * g
            && w[0] % g == 0
            && self.dtype() == weight.dtype()
            && self.dtype().is_float()
            && bias.is_none_or(|b| b.sizes() == [w[0]] && b.dtype() == self.dtype());
        if !ok {
            bail!(
                "conv2d",
                "expected input [N, C, H, W], weight [O, C / groups, kh, kw] and bias [O] of one float \
                 dtype, got input {} {:?}, weight {} {:?}, bias {:?}, groups {g}",
                self.dtype(),
                self.shape_ref(),
                weight.dtype(),
                weight.shape_ref(),
                bias.map(|b| (b.dtype(), b.shape_ref().clone()))
            );
        }
        let _ctx = Composite::enter("conv2d");
        let window = Window2d {
            kernel: [w[2], w[3]],
            stride: opts.stride,
            padding: opts.padding,
            dilation: opts.dilation,
        };
        let col = self.unfold_windows(window, 0.0); // [C, kh, kw, N, OH, OW]
        let c = col.sizes();
        let (out_ch, taps, cols) = (w[0], w[1] * w[2] * w[3], c[3] * c[4] * c[5]);
        let y = if g == 1 {
            weight.reshape([out_ch, taps]).matmul(&col.reshape([taps, cols]))
        } else {
            weight.reshape([g, out_ch / g, taps]).matmul(&col.reshape([g, taps, cols]))
        };
        let y = y.reshape([out_ch, c[3], c[4], c[5]]);
        // The bias joins before the transpose to [N, O, OH, OW], while both are dense; the
        // result is made dense too (elementwise ops on the transposed view were ~10x slower).
        let y = match bias {
            Some(b) => y + b.reshape([out_ch, 1, 1, 1]),
            None => y,
        };
        y.permute(&[1, 0, 2, 3]).contiguous()
    }

    /// Checks a pooling call; returns its window.
    #[track_caller]
    fn pool_window(
        &self,
        op: &'static str,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Window2d {
        if self.rank() != 4 || !self.dtype().is_float() || kernel.contains(&0) || stride.contains(&0) {
            bail!(
                op,
                "expected a float [N, C, H, W] input, a non-empty kernel and a positive stride, got {} {:?}, \
                 kernel {kernel:?}, stride {stride:?}",
                self.dtype(),
                self.shape_ref()
            );
        }
        if padding[0] > kernel[0] / 2 || padding[1] > kernel[1] / 2 {
            bail!(
                op,
                "padding {padding:?} must be at most half the kernel {kernel:?} (input {:?})",
                self.shape_ref()
            );
        }
        Window2d { kernel, stride, padding, dilation: [1, 1] }
    }

    /// 2-D max pooling of `[N, C, H, W]`: the maximum of each `kernel` window, windows `stride`
    /// apart, the input padded by `padding` (at most half the kernel) that never wins. The
    /// gradient goes to the first maximum of each window.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec((0..16).map(|v| v as f32).collect::<Vec<_>>(), [1, 1, 4, 4]);
    /// assert_eq!(x.max_pool2d([2, 2], [2, 2], [0, 0]).to_vec::<f32>(), [5.0, 7.0, 13.0, 15.0]);
    /// ```
    #[track_caller]
    #[doc(alias = "MaxPool2d")]
    pub fn max_pool2d(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Tensor {
        let window = self.pool_window("max_pool2d", kernel, stride, padding);
        apply(Op::MaxPool2d(window), &[self])
    }

    /// 2-D average pooling of `[N, C, H, W]`: the mean of each `kernel` window, windows `stride`
    /// apart, the input zero-padded by `padding` (at most half the kernel). Padding counts in
    /// the mean, as with PyTorch's default `count_include_pad=True`.
    ///
    /// # Examples
    /// ```
    /// # use janus_runtime::{DType, Tensor};
    /// let x = Tensor::ones([1, 1, 2, 2]);
    /// assert_eq!(x.avg_pool2d([2, 2], [2, 2], [1, 1]).to_vec::<f32>(), [0.25; 4]);
    /// ```
    #[track_caller]
    #[doc(alias = "AvgPool2d")]
    pub fn avg_pool2d(&self, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Tensor {
        let window = self.pool_window("avg_pool2d", kernel, stride, padding);
        let col = self.unfold_windows(window, 0.0);
        let c = col.sizes().to_vec();
        let (col, [c, n, oh, ow]) =
            (col.reshape([c[0], c[1] * c[2], c[3] * c[4] * c[5]]), [c[0], c[3], c[4], c[5]]);
        let _ctx = Composite::enter("avg_pool2d");
        let mean = col.sum(1) * (1.0 / (kernel[0] * kernel[1]) as f64);
        mean.reshape([c, n, oh, ow]).permute(&[1, 0, 2, 3]).contiguous()
    }
}
