//! Sliding windows over `[N, C, H, W]` images: `unfold` (im2col) and its adjoint `fold`
//! (col2im), and max pooling. `conv2d` is `unfold` followed by one GEMM over the whole batch,
//! and average pooling sums over the unfolded windows (`src/api/conv.rs`). Max pooling is a
//! primitive with its own backward op: as `unfold` + `argmax` + `gather` it cost five passes
//! over the image and a column buffer `kh * kw` times its size.

use super::{F64Bits, TensorType};
use crate::error::bail;
use crate::shape::Shape;
use crate::tensor::{Data, Tensor};
use janus_kernels::conv::{self as k, Window};
use janus_kernels::with_float_type;

/// Window geometry shared by [`Unfold`] and [`Fold`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window2d {
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Step between windows.
    pub stride: [usize; 2],
    /// Implicit padding on each side.
    pub padding: [usize; 2],
    /// Spacing between window taps.
    pub dilation: [usize; 2],
}

/// im2col: `[N, C, H, W] -> [C, kh, kw, N, OH, OW]`, padding reading as `pad_value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Unfold {
    /// The window.
    pub window: Window2d,
    /// What the padding reads as (0 for convolution, -inf for max pooling).
    pub pad_value: F64Bits,
}

/// col2im, the adjoint of [`Unfold`]: `[C, kh, kw, N, OH, OW] -> [N, C, H, W]`, summing
/// overlapping taps.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fold {
    /// The window.
    pub window: Window2d,
    /// The image height and width.
    pub size: [usize; 2],
}

/// The kernel geometry of `w` over `n` images of `c` channels and `size` pixels.
pub(crate) fn window(w: &Window2d, n: usize, c: usize, size: [usize; 2]) -> Window {
    Window { n, c, size, kernel: w.kernel, stride: w.stride, padding: w.padding, dilation: w.dilation }
}

#[track_caller]
fn out_size(op: &str, w: &Window, x: &Tensor) -> [usize; 2] {
    match w.out_size() {
        Some(s) => s,
        None => bail!(
            op,
            "a {:?} window (stride {:?}, padding {:?}, dilation {:?}) does not fit an input of shape {:?}",
            w.kernel,
            w.stride,
            w.padding,
            w.dilation,
            x.shape_ref()
        ),
    }
}

#[track_caller]
pub(crate) fn infer_unfold(p: &Unfold, x: &Tensor) -> TensorType {
    if x.rank() != 4 || !x.dtype().is_float() {
        bail!("unfold", "expected a float [N, C, H, W] input, got {} {:?}", x.dtype(), x.shape_ref());
    }
    let d = x.sizes();
    let w = window(&p.window, d[0], d[1], [d[2], d[3]]);
    let [oh, ow] = out_size("unfold", &w, x);
    let [kh, kw] = p.window.kernel;
    TensorType { shape: [d[1], kh, kw, d[0], oh, ow].into(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_fold(p: &Fold, col: &Tensor) -> TensorType {
    let d = col.sizes();
    if col.rank() != 6 || !col.dtype().is_float() {
        bail!(
            "fold",
            "expected a float [C, kh, kw, N, OH, OW] input, got {} {:?}",
            col.dtype(),
            col.shape_ref()
        );
    }
    let w = window(&p.window, d[3], d[0], p.size);
    let [oh, ow] = out_size("fold", &w, col);
    if [d[1], d[2]] != p.window.kernel || [d[4], d[5]] != [oh, ow] {
        bail!(
            "fold",
            "columns {:?} do not match a {:?} window with {oh}x{ow} outputs over {:?} images",
            col.shape_ref(),
            p.window.kernel,
            p.size
        );
    }
    let shape: Shape = [d[3], d[0], p.size[0], p.size[1]].into();
    TensorType { shape, dtype: col.dtype() }
}

pub(crate) fn unfold(p: &Unfold, x: &Tensor, ty: &TensorType) -> Data {
    let d = x.sizes();
    let w = window(&p.window, d[0], d[1], [d[2], d[3]]);
    with_float_type!(x.dtype(), T => {
        let src = x.contiguous_slice::<T>();
        let mut out = vec![0 as T; ty.shape.elems()];
        k::unfold(&w, &src, p.pad_value.get() as T, &mut out);
        Data::contiguous(janus_kernels::buffer::Stored::wrap(out), &ty.shape)
    }, _ => unreachable!("rejected by the shape rule"))
}

pub(crate) fn fold(p: &Fold, col: &Tensor, ty: &TensorType) -> Data {
    let d = col.sizes();
    let w = window(&p.window, d[3], d[0], p.size);
    with_float_type!(col.dtype(), T => {
        let src = col.contiguous_slice::<T>();
        let mut out = vec![0 as T; ty.shape.elems()];
        k::fold(&w, &src, &mut out);
        Data::contiguous(janus_kernels::buffer::Stored::wrap(out), &ty.shape)
    }, _ => unreachable!("rejected by the shape rule"))
}

/// The two are adjoint linear maps: each one's VJP is the other (padding taps get no gradient).
pub(crate) fn unfold_vjp(p: &Unfold, x: &Tensor, g: &Tensor) -> Tensor {
    let d = x.sizes();
    g.fold_windows(p.window, [d[2], d[3]])
}

pub(crate) fn fold_vjp(p: &Fold, g: &Tensor) -> Tensor {
    g.unfold_windows(p.window, 0.0)
}

#[track_caller]
pub(crate) fn infer_max_pool(w: &Window2d, x: &Tensor) -> TensorType {
    if x.rank() != 4 || !x.dtype().is_float() {
        bail!("max_pool2d", "expected a float [N, C, H, W] input, got {} {:?}", x.dtype(), x.shape_ref());
    }
    let d = x.sizes();
    let [oh, ow] = out_size("max_pool2d", &window(w, d[0], d[1], [d[2], d[3]]), x);
    TensorType { shape: [d[0], d[1], oh, ow].into(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_max_pool_backward(w: &Window2d, x: &Tensor, g: &Tensor) -> TensorType {
    let y = infer_max_pool(w, x);
    if g.shape_ref() != &y.shape || g.dtype() != x.dtype() {
        bail!(
            "max_pool2d_backward",
            "the cotangent {} {:?} does not match the pooled {} {:?}",
            g.dtype(),
            g.shape_ref(),
            y.dtype,
            y.shape
        );
    }
    TensorType { shape: x.shape_ref().clone(), dtype: x.dtype() }
}

/// Max pooling (`-inf` padding, first maximum wins); the kernel is `janus_kernels::conv::max_pool`.
pub(crate) fn max_pool(w: &Window2d, x: &Tensor, ty: &TensorType) -> Data {
    let d = x.sizes();
    let g = window(w, d[0], d[1], [d[2], d[3]]);
    with_float_type!(x.dtype(), T => {
        let mut out = vec![0 as T; ty.shape.elems()];
        k::max_pool(&g, &x.contiguous_slice::<T>(), &mut out);
        Data::contiguous(janus_kernels::buffer::Stored::wrap(out), &ty.shape)
    }, _ => unreachable!("rejected by the shape rule"))
}

/// The input gradient of max pooling, recomputing each window's winner from `x`.
pub(crate) fn max_pool_backward(w: &Window2d, x: &Tensor, gy: &Tensor, ty: &TensorType) -> Data {
    let d = x.sizes();
    let g = window(w, d[0], d[1], [d[2], d[3]]);
    with_float_type!(x.dtype(), T => {
        let mut out = vec![0 as T; ty.shape.elems()];
        k::max_pool_backward(&g, &x.contiguous_slice::<T>(), &gy.contiguous_slice::<T>(), &mut out);
        Data::contiguous(janus_kernels::buffer::Stored::wrap(out), &ty.shape)
    }, _ => unreachable!("rejected by the shape rule"))
}

/// `max_pool2d`'s VJP: the cotangent routed to each window's winner.
pub(crate) fn max_pool_vjp(w: &Window2d, x: &Tensor, g: &Tensor) -> Tensor {
    g.max_pool2d_backward(*w, &x.detach())
}
