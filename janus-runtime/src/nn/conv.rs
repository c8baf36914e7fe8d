//! `Conv2d`: 2-D convolution over `[N, C, H, W]` inputs.

use super::uniform_param;
use crate::Tensor;
use crate::api::Conv2dOptions;
use crate::module::impl_module;

/// A 2-D convolution, like `torch.nn.Conv2d`: `weight` is `[out, in / groups, kh, kw]` and
/// `bias` `[out]`, both initialised uniformly in `±1/sqrt(fan_in)` (PyTorch's
/// `kaiming_uniform_(a=sqrt(5))`, with `fan_in = in / groups * kh * kw`).
///
/// ```
/// use janus_runtime::{Tensor, nn};
/// let conv = nn::Conv2d::new(1, 16, 3).padding(1);
/// let y = conv.forward(&Tensor::randn([2, 1, 28, 28]));
/// assert_eq!(y.dims(), [2, 16, 28, 28]);
/// ```
#[derive(Clone, Debug)]
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, kh, kw]`.
    pub weight: Tensor,
    /// `[out_channels]`, or `None` for a layer without bias.
    pub bias: Option<Tensor>,
    /// Stride `[sh, sw]`.
    pub stride: [usize; 2],
    /// Zero padding `[ph, pw]` on both sides.
    pub padding: [usize; 2],
    /// Dilation `[dh, dw]`.
    pub dilation: [usize; 2],
    /// Groups: `in` and `out` channels are split into this many independent convolutions.
    pub groups: usize,
}

impl_module!(Conv2d { weight, bias, stride, padding, dilation, groups });

impl Conv2d {
    /// A `kernel x kernel` convolution from `in_channels` to `out_channels`, stride 1, no
    /// padding (set them with the builder methods).
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize) -> Self {
        Self::with_groups(in_channels, out_channels, [kernel, kernel], 1)
    }

    /// A `kh x kw` convolution in `groups` groups (`in` and `out` divisible by `groups`).
    #[track_caller]
    pub fn with_groups(in_channels: usize, out_channels: usize, kernel: [usize; 2], groups: usize) -> Self {
        assert!(
            groups > 0 && in_channels.is_multiple_of(groups) && out_channels.is_multiple_of(groups),
            "janus::nn::Conv2d: {in_channels} in and {out_channels} out channels are not divisible by {groups} groups"
        );
        let fan_in = in_channels / groups * kernel[0] * kernel[1];
        let bound = 1.0 / (fan_in as f64).sqrt();
        Conv2d {
            weight: uniform_param(&[out_channels, in_channels / groups, kernel[0], kernel[1]], bound),
            bias: Some(uniform_param(&[out_channels], bound)),
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups,
        }
    }

    /// The same layer with stride `s` in both directions.
    pub fn stride(self, s: usize) -> Self {
        Conv2d { stride: [s, s], ..self }
    }

    /// The same layer with `p` zeros of padding on every side.
    pub fn padding(self, p: usize) -> Self {
        Conv2d { padding: [p, p], ..self }
    }

    /// The same layer with dilation `d` in both directions.
    pub fn dilation(self, d: usize) -> Self {
        Conv2d { dilation: [d, d], ..self }
    }

    /// The same layer without bias.
    pub fn no_bias(self) -> Self {
        Conv2d { bias: None, ..self }
    }

    /// The convolution of `x` (`[N, in, H, W]`): `[N, out, H', W']`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let opts = Conv2dOptions {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
        };
        x.conv2d(&self.weight, self.bias.as_ref(), opts)
    }
}
