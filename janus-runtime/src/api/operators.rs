//! `+ - * /` and unary `-` for every combination of `Tensor`, `&Tensor` and scalars (a scalar
//! takes the tensor's dtype), plus `+=`-style rebinding.
//!
//! On the right a scalar may be `f32` or `f64` through one generic impl, so a float literal still
//! infers (`(&x * 2.0).exp()`). On the left only `f64` is implemented: two impls for the left
//! operand make `(1.0 - &p).exp()` fail to infer, and literals on the left are far more common
//! than `f32` variables there (write `&g * lr` or `lr as f64 * &g`).

use crate::tensor::Tensor;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A host number usable as an operand next to a tensor; it takes the tensor's dtype.
pub trait Scalar: Copy {
    /// The value as `f64`.
    fn to_f64(self) -> f64;
}

impl Scalar for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Scalar for f64 {
    fn to_f64(self) -> f64 {
        self
    }
}

macro_rules! tensor_ops {
    ($Trait:ident, $method:ident, $Assign:ident, $assign:ident, $call:ident) => {
        impl $Trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$call(self, rhs)
            }
        }
        impl $Trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$call(self, &rhs)
            }
        }
        impl $Trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$call(&self, rhs)
            }
        }
        impl $Trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$call(&self, &rhs)
            }
        }
        impl $Assign<&Tensor> for Tensor {
            #[track_caller]
            fn $assign(&mut self, rhs: &Tensor) {
                *self = Tensor::$call(self, rhs);
            }
        }
        impl $Assign<Tensor> for Tensor {
            #[track_caller]
            fn $assign(&mut self, rhs: Tensor) {
                *self = Tensor::$call(self, &rhs);
            }
        }
        impl<S: Scalar> $Trait<S> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                Tensor::$call(self, &self.scalar_like(rhs.to_f64()))
            }
        }
        impl<S: Scalar> $Trait<S> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor {
                Tensor::$call(&self, &self.scalar_like(rhs.to_f64()))
            }
        }
        impl $Trait<&Tensor> for f64 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$call(&rhs.scalar_like(self), rhs)
            }
        }
        impl $Trait<Tensor> for f64 {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$call(&rhs.scalar_like(self), &rhs)
            }
        }
        impl<S: Scalar> $Assign<S> for Tensor {
            #[track_caller]
            fn $assign(&mut self, rhs: S) {
                *self = Tensor::$call(self, &self.scalar_like(rhs.to_f64()));
            }
        }
    };
}

tensor_ops!(Add, add, AddAssign, add_assign, add);
tensor_ops!(Sub, sub, SubAssign, sub_assign, sub);
tensor_ops!(Mul, mul, MulAssign, mul_assign, mul);
tensor_ops!(Div, div, DivAssign, div_assign, div);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
