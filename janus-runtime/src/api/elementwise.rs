//! Elementwise methods: unary functions, arithmetic, comparisons, `where_cond`, conversions.

use crate::eager::apply;
use crate::error::{DeviceError, bail};
use crate::ops::{BinaryOp, Cast, Clamp, CmpOp, F64Bits, Op, Powf, UnaryOp};
use crate::tensor::Tensor;
use crate::{DType, Device};

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self) -> Tensor {
                    apply(Op::Unary(UnaryOp::$op), &[self])
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`.
    neg => Neg;
    /// `e^x` (vectorised in `f32`).
    exp => Exp;
    /// Natural logarithm (vectorised in `f32`).
    log => Log;
    /// Square root.
    sqrt => Sqrt;
    /// Absolute value.
    abs => Abs;
    /// Hyperbolic tangent (vectorised in `f32`).
    tanh => Tanh;
    /// Logistic sigmoid `1 / (1 + e^-x)` (vectorised in `f32`).
    sigmoid => Sigmoid;
    /// `max(x, 0)`.
    relu => Relu;
    /// `x * x`.
    square => Square;
    /// `1 / x`.
    recip => Recip;
    /// `-1`, `0` or `1` by the sign of `x`.
    sign => Sign;
    /// Logical not of a `bool` tensor.
    logical_not => Not;
    /// Sine.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, std::f32::consts::FRAC_PI_2], [2]);
    /// assert_eq!(x.sin().to_vec::<f32>(), vec![0.0, 1.0]);
    /// ```
    sin => Sin;
    /// Cosine.
    cos => Cos;
    /// Tangent.
    tan => Tan;
    /// `2^x`.
    exp2 => Exp2;
    /// Base-2 logarithm.
    log2 => Log2;
    /// `ln(1 + x)`, accurate for small `x`.
    log1p => Log1p;
    /// `e^x - 1`, accurate for small `x`.
    expm1 => Expm1;
    /// The error function `2/sqrt(pi) * integral from 0 to x of e^(-t^2) dt`.
    erf => Erf;
    /// GELU, the exact form `x * Phi(x)` with `Phi` the standard normal CDF (PyTorch's default
    /// `gelu`, `approximate='none'`).
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let y = Tensor::from_vec(vec![-1.0f64, 0.0, 1.0], [3]).gelu().to_vec::<f64>();
    /// assert!((y[0] + 0.158655).abs() < 1e-6 && y[1] == 0.0 && (y[2] - 0.841345).abs() < 1e-6);
    /// ```
    gelu => Gelu;
    /// SiLU (swish): `x * sigmoid(x)`.
    silu => Silu;
    /// `ln(1 + e^x)`; `x` itself above 20, as PyTorch's `softplus` (`beta=1, threshold=20`).
    softplus => Softplus;
    /// Rounds down. Its gradient is zero, as in PyTorch.
    floor => Floor;
    /// Rounds up. Its gradient is zero.
    ceil => Ceil;
    /// Rounds to the nearest integer, ties to even (as `torch.round`): `0.5` gives `0`, `1.5`
    /// gives `2`. Its gradient is zero.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.5f32, 1.5, -2.5, 2.7], [4]);
    /// assert_eq!(x.round().to_vec::<f32>(), vec![0.0, 2.0, -2.0, 3.0]);
    /// ```
    round => Round;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt;
}

/// A rank-0 float operand takes the other operand's float dtype (PyTorch's promotion rule for
/// 0-dim tensors), so `f32_tensor * dynamic_f64_scalar` works; shaped operands of different
/// dtypes are still an error.
#[track_caller]
fn promote_scalar<'a>(
    a: &'a Tensor,
    b: &'a Tensor,
) -> (std::borrow::Cow<'a, Tensor>, std::borrow::Cow<'a, Tensor>) {
    use std::borrow::Cow;
    let floats = a.dtype().is_float() && b.dtype().is_float() && a.dtype() != b.dtype();
    match (floats, a.rank(), b.rank()) {
        (true, 0, r) if r > 0 => (Cow::Owned(a.to_dtype(b.dtype())), Cow::Borrowed(b)),
        (true, r, 0) if r > 0 => (Cow::Borrowed(a), Cow::Owned(b.to_dtype(a.dtype()))),
        _ => (Cow::Borrowed(a), Cow::Borrowed(b)),
    }
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    let (a, b) = promote_scalar(self, other);
                    apply($op, &[&a, &b])
                }
            )*
        }
    };
}

binary_methods! {
    /// `self + other`, broadcasting.
    add => Op::Binary(BinaryOp::Add);
    /// `self - other`, broadcasting.
    sub => Op::Binary(BinaryOp::Sub);
    /// `self * other`, broadcasting.
    mul => Op::Binary(BinaryOp::Mul);
    /// `self / other`, broadcasting (floats only).
    div => Op::Binary(BinaryOp::Div);
    /// Elementwise maximum, broadcasting; NaN propagates.
    maximum => Op::Binary(BinaryOp::Maximum);
    /// Elementwise minimum, broadcasting; NaN propagates.
    minimum => Op::Binary(BinaryOp::Minimum);
    /// Logical and of `bool` tensors.
    logical_and => Op::Binary(BinaryOp::And);
    /// Logical or of `bool` tensors.
    logical_or => Op::Binary(BinaryOp::Or);
    /// `atan2(self, other)`: the angle in `(-pi, pi]` of the point `(other, self)`, broadcasting
    /// (floats only), as `torch.atan2(input, other)`.
    atan2 => Op::Binary(BinaryOp::Atan2);
    /// `self > other` as `bool`.
    gt => Op::Compare(CmpOp::Gt);
    /// `self >= other` as `bool`.
    ge => Op::Compare(CmpOp::Ge);
    /// `self < other` as `bool`.
    lt => Op::Compare(CmpOp::Lt);
    /// `self <= other` as `bool`.
    le => Op::Compare(CmpOp::Le);
    /// `self == other` as `bool`.
    eq => Op::Compare(CmpOp::Eq);
    /// `self != other` as `bool`.
    ne => Op::Compare(CmpOp::Ne);
}

macro_rules! scalar_compare_methods {
    ($($(#[$doc:meta])* $name:ident => $cmp:ident;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, value: f64) -> Tensor {
                    apply(Op::Compare(CmpOp::$cmp), &[self, &self.scalar_like(value)])
                }
            )*
        }
    };
}

scalar_compare_methods! {
    /// `self > value` as `bool`.
    gt_scalar => Gt;
    /// `self >= value` as `bool`.
    ge_scalar => Ge;
    /// `self < value` as `bool`.
    lt_scalar => Lt;
    /// `self <= value` as `bool`.
    le_scalar => Le;
    /// `self == value` as `bool`.
    eq_scalar => Eq;
}

impl Tensor {
    /// A rank-0 tensor of this tensor's dtype (for scalar operands).
    #[track_caller]
    pub(crate) fn scalar_like(&self, value: f64) -> Tensor {
        Tensor::scalar_dtype(value, self.dtype())
    }

    /// `self^exponent` elementwise.
    #[track_caller]
    pub fn powf(&self, exponent: f64) -> Tensor {
        apply(Op::Powf(Powf { exponent: F64Bits::new(exponent) }), &[self])
    }

    /// Clamps every element into `[min, max]`.
    #[track_caller]
    pub fn clamp(&self, min: f64, max: f64) -> Tensor {
        if min > max {
            bail!("clamp", "min {min} is greater than max {max} (tensor {:?})", self.shape_ref());
        }
        apply(Op::Clamp(Clamp { min: F64Bits::new(min), max: F64Bits::new(max) }), &[self])
    }

    /// `on_true` where this `bool` tensor is true, else `on_false`, broadcasting all three.
    #[track_caller]
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Tensor {
        apply(Op::Where, &[self, on_true, on_false])
    }

    /// Converts to another dtype (floats truncate toward zero into `i64`; non-zero is `true`).
    #[track_caller]
    #[doc(alias = "to", alias = "type", alias = "float", alias = "double", alias = "long")]
    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        apply(Op::Cast(Cast { dtype }), &[self])
    }

    /// Moves to `device` (a copy; the same tensor when it is already there). Differentiable:
    /// the gradient moves back. Panics where [`try_to_device`](Tensor::try_to_device) errs.
    #[track_caller]
    #[doc(alias = "to", alias = "cuda", alias = "cpu")]
    pub fn to_device(&self, device: Device) -> Tensor {
        match self.try_to_device(device) {
            Ok(t) => t,
            Err(e) => bail!("to_device", "{e} (tensor {:?})", self.shape_ref()),
        }
    }

    /// Moves to `device`, or explains why it cannot (no driver, no such device, a missing
    /// library).
    #[track_caller]
    pub fn try_to_device(&self, device: Device) -> Result<Tensor, DeviceError> {
        if self.device() == device {
            return Ok(self.clone());
        }
        if let Device::Cuda(n) = device {
            janus_kernels::cuda::device(n)
                .map_err(|e| DeviceError::Unavailable { device, reason: e.to_string() })?;
        }
        Ok(apply(Op::ToDevice(crate::ops::ToDevice { device }), &[self]))
    }
}
