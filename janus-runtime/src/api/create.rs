//! Constructors: literals, fills, ranges and random tensors.

use crate::eager::apply;
use crate::error::bail;
use crate::ops::{Arange, Constant, F64Bits, Full, Op, RandFill, source::blocks_used};
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::{DType, Device, random};
use janus_kernels::Element;

/// A tensor from a literal list, in `f32` like `torch.tensor`: Rust's float literals are `f64`,
/// so `Tensor::from_vec(vec![1.0, 2.0], [2])` makes an `f64` tensor, while `tensor![1.0, 2.0]`
/// makes an `f32` one. Rows of a 2-D tensor must have the same length; each element is
/// converted with `as f32`. For other dtypes use [`Tensor::from_vec`].
///
/// # Examples
///
/// ```
/// use janus_runtime::{DType, tensor};
/// let v = tensor![1.0, 2.0, 3.0];
/// assert_eq!((v.dims(), v.dtype()), (&[3][..], DType::F32));
/// let m = tensor![[1.0, 2.0], [3.0, 4.0]];
/// assert_eq!(m.dims(), [2, 2]);
/// assert_eq!(m.to_vec::<f32>(), [1.0, 2.0, 3.0, 4.0]);
/// ```
#[macro_export]
macro_rules! tensor {
    ($([$($x:expr),* $(,)?]),+ $(,)?) => {
        $crate::Tensor::__from_rows(::std::vec![$(::std::vec![$(($x) as f32),*]),+])
    };
    ($($x:expr),* $(,)?) => {{
        let values: ::std::vec::Vec<f32> = ::std::vec![$(($x) as f32),*];
        let n = values.len();
        $crate::Tensor::from_vec(values, [n])
    }};
}

impl Tensor {
    /// A tensor from row-major data (`Vec<f32>`, `Vec<f64>`, `Vec<i64>` or `Vec<bool>`).
    #[track_caller]
    #[doc(alias = "tensor", alias = "from_numpy")]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Tensor {
        Tensor::from_vec_on(data, shape, Device::Cpu)
    }

    /// The rows of [`tensor!`]`[[..], [..]]` as a 2-D `f32` tensor.
    #[doc(hidden)]
    #[track_caller]
    pub fn __from_rows(rows: Vec<Vec<f32>>) -> Tensor {
        let cols = rows[0].len();
        if let Some((k, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != cols) {
            bail!(
                "tensor!",
                "row {k} has {} values, row 0 has {cols}: rows must have the same length",
                r.len()
            );
        }
        let n = rows.len();
        Tensor::from_vec(rows.concat(), [n, cols])
    }

    /// [`from_vec`](Tensor::from_vec) creating the tensor on `device` (PyTorch's
    /// `torch.tensor(.., device=)`); the values are copied there once.
    #[track_caller]
    pub fn from_vec_on<T: Element>(data: Vec<T>, shape: impl Into<Shape>, device: Device) -> Tensor {
        let shape = shape.into();
        if data.len() != shape.elems() {
            bail!(
                "from_vec",
                "{} values cannot fill shape {:?} ({} elements)",
                data.len(),
                shape,
                shape.elems()
            );
        }
        apply(
            Op::Constant(Constant { data: crate::storage::SharedBuffer::new(T::wrap(data)), shape, device }),
            &[],
        )
    }

    /// A rank-0 `f32` tensor.
    #[track_caller]
    pub fn scalar(value: f32) -> Tensor {
        Tensor::scalar_dtype(value as f64, DType::F32)
    }

    /// A rank-0 tensor of `dtype`.
    #[track_caller]
    pub fn scalar_dtype(value: f64, dtype: DType) -> Tensor {
        Tensor::full_dtype(Shape::scalar(), value, dtype)
    }

    /// A tensor of `dtype` with every element equal to `value`.
    #[track_caller]
    pub fn full_dtype(shape: impl Into<Shape>, value: f64, dtype: DType) -> Tensor {
        Tensor::full_on(shape, value, dtype, Device::Cpu)
    }

    /// A tensor of `dtype` on `device` with every element equal to `value` (PyTorch's
    /// `torch.full(.., device=)`).
    #[track_caller]
    pub fn full_on(shape: impl Into<Shape>, value: f64, dtype: DType, device: Device) -> Tensor {
        apply(Op::Full(Full { shape: shape.into(), dtype, value: F64Bits::new(value), device }), &[])
    }

    /// `f32` zeros on `device`.
    #[track_caller]
    pub fn zeros_on(shape: impl Into<Shape>, device: Device) -> Tensor {
        Tensor::full_on(shape, 0.0, DType::F32, device)
    }

    /// An `f32` tensor with every element equal to `value`.
    #[track_caller]
    pub fn full(shape: impl Into<Shape>, value: f64) -> Tensor {
        Tensor::full_dtype(shape, value, DType::F32)
    }

    /// `f32` zeros.
    #[track_caller]
    pub fn zeros(shape: impl Into<Shape>) -> Tensor {
        Tensor::full(shape, 0.0)
    }

    /// `f32` ones.
    #[track_caller]
    pub fn ones(shape: impl Into<Shape>) -> Tensor {
        Tensor::full(shape, 1.0)
    }

    /// Zeros of `dtype`.
    #[track_caller]
    pub fn zeros_dtype(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        Tensor::full_dtype(shape, 0.0, dtype)
    }

    /// Zeros with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn zeros_like(t: &Tensor) -> Tensor {
        Tensor::full_on(t.shape_ref(), 0.0, t.dtype(), t.device())
    }

    /// Ones with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn ones_like(t: &Tensor) -> Tensor {
        Tensor::full_on(t.shape_ref(), 1.0, t.dtype(), t.device())
    }

    /// `value` everywhere, with this tensor's shape, dtype and device.
    #[track_caller]
    pub fn full_like(t: &Tensor, value: f64) -> Tensor {
        Tensor::full_on(t.shape_ref(), value, t.dtype(), t.device())
    }

    /// `[0, 1, ..., n - 1]` as `i64`.
    #[track_caller]
    pub fn arange(n: usize) -> Tensor {
        apply(Op::Arange(Arange { n, device: Device::Cpu }), &[])
    }

    /// Standard normal `f32` samples from the thread's Philox stream.
    #[track_caller]
    pub fn randn(shape: impl Into<Shape>) -> Tensor {
        Tensor::randn_dtype(shape, DType::F32)
    }

    /// Uniform `[0, 1)` `f32` samples from the thread's Philox stream.
    #[track_caller]
    pub fn rand(shape: impl Into<Shape>) -> Tensor {
        Tensor::rand_dtype(shape, DType::F32)
    }

    /// Standard normal samples of a float `dtype`.
    #[track_caller]
    pub fn randn_dtype(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        random_fill(shape.into(), dtype, true, Device::Cpu)
    }

    /// Standard normal samples of a float `dtype` on `device`: the same values as on the CPU.
    #[track_caller]
    pub fn randn_on(shape: impl Into<Shape>, dtype: DType, device: Device) -> Tensor {
        random_fill(shape.into(), dtype, true, device)
    }

    /// Uniform `[0, 1)` samples of a float `dtype` on `device`: the same values as on the CPU.
    #[track_caller]
    pub fn rand_on(shape: impl Into<Shape>, dtype: DType, device: Device) -> Tensor {
        random_fill(shape.into(), dtype, false, device)
    }

    /// Uniform `[0, 1)` samples of a float `dtype`.
    #[track_caller]
    pub fn rand_dtype(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        random_fill(shape.into(), dtype, false, Device::Cpu)
    }

    /// One category index per row of non-negative weights (`[rows, classes]` gives `i64
    /// [rows]`; `[classes]` gives a scalar), drawn from the thread's Philox stream.
    #[track_caller]
    pub fn multinomial(&self) -> Tensor {
        let rows = if self.rank() == 2 { self.sizes()[0] } else { 1 };
        let dtype = if self.dtype().is_float() { self.dtype() } else { DType::F32 };
        let state = random::take(blocks_used(dtype, rows));
        apply(Op::Multinomial, &[self, &state])
    }
}

#[track_caller]
fn random_fill(shape: Shape, dtype: DType, normal: bool, device: Device) -> Tensor {
    if !dtype.is_float() {
        bail!(if normal { "randn" } else { "rand" }, "random samples must be a float dtype, got {dtype}");
    }
    let state = random::take(blocks_used(dtype, shape.elems()));
    let p = RandFill { shape, dtype, device };
    apply(if normal { Op::RandNormal(p) } else { Op::RandUniform(p) }, &[&state])
}
