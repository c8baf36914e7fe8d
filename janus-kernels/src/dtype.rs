//! Element types: the `DType` tag and the `Element` trait kernels are generic over.

use std::fmt;

/// The element type of a buffer or tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float, the default.
    F32,
    /// 64-bit IEEE float, for gradient checks and precision-sensitive users.
    F64,
    /// 64-bit signed integer, for indices and class targets.
    I64,
    /// Boolean, for masks and predicates.
    Bool,
}

impl DType {
    /// Bytes per element.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// Whether arithmetic on this type is floating point.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Lower-case name as printed in error messages and graph dumps (`f32`, `i64`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be stored in a buffer.
pub trait Element:
    Copy + Send + Sync + fmt::Debug + PartialOrd + Default + crate::buffer::Stored + 'static
{
    /// The tag for this type.
    const DTYPE: DType;
    /// Converts from `f64` (truncating toward zero for integers, `!= 0` for bool).
    fn from_f64(v: f64) -> Self;
    /// Converts to `f64` (bool as 0/1).
    fn to_f64(self) -> f64;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
}

impl Element for i64 {
    const DTYPE: DType = DType::I64;
    fn from_f64(v: f64) -> Self {
        v as i64
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_f64(self) -> f64 {
        if self { 1.0 } else { 0.0 }
    }
}

/// Floating-point elements: the types transcendental kernels and GEMM accept.
pub trait Float:
    Element
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
{
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// Negative infinity, the identity of `max`.
    const NEG_INFINITY: Self;
    /// Positive infinity, the identity of `min`.
    const INFINITY: Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// `self^p`.
    fn powf(self, p: Self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Maximum that propagates NaN (unlike `f32::max`), as PyTorch's `maximum` does.
    fn max_nan(self, other: Self) -> Self;
    /// Minimum that propagates NaN.
    fn min_nan(self, other: Self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// `exp`, vectorisable (a SIMD polynomial for `f32`, libm for `f64`).
    fn fast_exp(self) -> Self;
    /// `ln`, vectorisable.
    fn fast_ln(self) -> Self;
    /// `tanh`, vectorisable.
    fn fast_tanh(self) -> Self;
    /// `1 / (1 + exp(-x))`, vectorisable.
    fn fast_sigmoid(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// `2^self`.
    fn exp2(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// `ln(1 + self)`, accurate near zero.
    fn ln_1p(self) -> Self;
    /// `e^self - 1`, accurate near zero.
    fn exp_m1(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// Largest integer not above `self`.
    fn floor(self) -> Self;
    /// Smallest integer not below `self`.
    fn ceil(self) -> Self;
    /// Nearest integer, ties to even (as `torch.round` and CUDA's `rint`).
    fn round_ties_even(self) -> Self;
    /// The angle of the point `(other, self)`: `atan(self / other)` in the right quadrant.
    fn atan2(self, other: Self) -> Self;
    /// `self * a + b` rounded once (an FMA instruction inside [`crate::simd_math::with_best_simd`]
    /// on CPUs with FMA; exactly rounded everywhere, so the same bits on every CPU).
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! impl_float {
    ($t:ty, $exp:expr, $ln:expr, $tanh:expr, $sigmoid:expr, $erf:expr) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            const INFINITY: Self = <$t>::INFINITY;
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn powf(self, p: Self) -> Self {
                <$t>::powf(self, p)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn max_nan(self, other: Self) -> Self {
                if self.is_nan() || self > other { self } else { other }
            }
            #[inline(always)]
            fn min_nan(self, other: Self) -> Self {
                if self.is_nan() || self < other { self } else { other }
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn fast_exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn fast_ln(self) -> Self {
                $ln(self)
            }
            #[inline(always)]
            fn fast_tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn fast_sigmoid(self) -> Self {
                $sigmoid(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn exp2(self) -> Self {
                <$t>::exp2(self)
            }
            #[inline(always)]
            fn log2(self) -> Self {
                <$t>::log2(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn round_ties_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn atan2(self, other: Self) -> Self {
                <$t>::atan2(self, other)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
        }
    };
}
use crate::simd_math::{erf_lane, exp_lane, log_lane, sigmoid_lane, tanh_lane};
// std has no `erf`. f64 uses libm's (the musl one, within 1 ulp, also what Rust's own
// unstable `f64::erf` calls); f32 uses a branch-free approximation that vectorises.
impl_float!(f32, exp_lane, log_lane, tanh_lane, sigmoid_lane, erf_lane);
impl_float!(f64, f64::exp, f64::ln, f64::tanh, |x: f64| 1.0 / (1.0 + (-x).exp()), libm::erf);
