//! Elementwise ops: unary functions, broadcasting arithmetic and comparisons, `where`, casts.
//! Each op's shape rule and kernel are here, its VJP in [`vjp`].

mod vjp;
pub use janus_kernels::elementwise::{BinaryOp, CmpOp, UnaryOp};
pub(crate) use vjp::{binary_vjp, clamp_vjp, powf_vjp, sum_to, unary_vjp, where_vjp};

use super::{Cast, Clamp, Powf, TensorType};
use crate::DType;
use crate::error::bail;
use crate::shape::{Shape, Strides, broadcast_shapes};
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::fused::{self, FBinary, FUnary};
use janus_kernels::strided::{PARALLEL_MIN_ELEMS, Src, map1, map2, map3};
use janus_kernels::{Element, Float, with_any_type, with_float_type};

/// Transcendental maps cost ~10x a plain add per element, so they go parallel sooner.
const COSTLY_PAR: usize = PARALLEL_MIN_ELEMS / 4;

// ---- shape rules ----------------------------------------------------------------------------

#[track_caller]
pub(crate) fn infer_float(op: &str, x: &Tensor) -> TensorType {
    if !x.dtype().is_float() {
        bail!(op, "expected a float tensor, got {} {:?}", x.dtype(), x.shape_ref());
    }
    TensorType { shape: x.shape_ref().clone(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_numeric(op: &str, x: &Tensor) -> TensorType {
    if x.dtype() == DType::Bool {
        bail!(op, "expected a numeric tensor, got {} {:?}", x.dtype(), x.shape_ref());
    }
    TensorType { shape: x.shape_ref().clone(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_unary(u: UnaryOp, x: &Tensor) -> TensorType {
    match u {
        UnaryOp::Not if x.dtype() != DType::Bool => {
            bail!(u.name(), "expected a bool tensor, got {} {:?}", x.dtype(), x.shape_ref())
        }
        UnaryOp::Not => TensorType { shape: x.shape_ref().clone(), dtype: DType::Bool },
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Square | UnaryOp::Sign | UnaryOp::Relu => {
            infer_numeric(u.name(), x)
        }
        _ => infer_float(u.name(), x),
    }
}

#[track_caller]
fn broadcast(op: &str, a: &Tensor, b: &Tensor) -> Shape {
    match broadcast_shapes(a.sizes(), b.sizes()) {
        Some(s) => s,
        None => bail!(op, "shapes {:?} and {:?} cannot be broadcast together", a.shape_ref(), b.shape_ref()),
    }
}

#[track_caller]
fn same_dtype(op: &str, a: &Tensor, b: &Tensor) {
    if a.dtype() != b.dtype() {
        bail!(
            op,
            "dtype mismatch: {} {:?} and {} {:?} (convert one with to_dtype)",
            a.dtype(),
            a.shape_ref(),
            b.dtype(),
            b.shape_ref()
        );
    }
}

#[track_caller]
pub(crate) fn infer_binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> TensorType {
    same_dtype(op.name(), a, b);
    let ok = match op {
        BinaryOp::And | BinaryOp::Or => a.dtype() == DType::Bool,
        BinaryOp::Div | BinaryOp::Atan2 => a.dtype().is_float(),
        _ => a.dtype() != DType::Bool,
    };
    if !ok {
        bail!(
            op.name(),
            "not defined for {} operands (shapes {:?} and {:?})",
            a.dtype(),
            a.shape_ref(),
            b.shape_ref()
        );
    }
    TensorType { shape: broadcast(op.name(), a, b), dtype: a.dtype() }
}

#[track_caller]
pub(crate) fn infer_compare(op: CmpOp, a: &Tensor, b: &Tensor) -> TensorType {
    same_dtype(op.name(), a, b);
    if a.dtype() == DType::Bool && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
        bail!(op.name(), "ordering comparison of bool tensors {:?} and {:?}", a.shape_ref(), b.shape_ref());
    }
    TensorType { shape: broadcast(op.name(), a, b), dtype: DType::Bool }
}

#[track_caller]
pub(crate) fn infer_where(c: &Tensor, a: &Tensor, b: &Tensor) -> TensorType {
    if c.dtype() != DType::Bool {
        bail!("where_cond", "the condition must be a bool tensor, got {} {:?}", c.dtype(), c.shape_ref());
    }
    same_dtype("where_cond", a, b);
    let ab = broadcast("where_cond", a, b);
    match broadcast_shapes(c.sizes(), &ab) {
        Some(shape) => TensorType { shape, dtype: a.dtype() },
        None => bail!("where_cond", "condition shape {:?} cannot be broadcast with {:?}", c.shape_ref(), ab),
    }
}

// ---- kernels --------------------------------------------------------------------------------

/// Strides that read `t` at every index of the (larger or equal) broadcast shape `out`.
pub(crate) fn broadcast_strides(t: &Tensor, out: &[usize]) -> Strides {
    t.layout().broadcast_to(out)
}

fn src_for<'a, T: Element>(t: &'a Tensor, strides: &'a Strides) -> Src<'a, T> {
    let d = t.data();
    Src::new(d.cpu().as_slice::<T>().expect("dtype checked"), strides, d.offset)
}

fn finish<T: Stored>(out: Vec<T>, shape: &Shape) -> Data {
    Data::contiguous(T::wrap(out), shape)
}

/// Float unary ops through [`fused::unary`], one loop per op (a constant function each).
fn unary_float<T: Float>(u: UnaryOp, x: &Tensor) -> Data {
    let (shape, src) = (x.shape_ref(), x.src::<T>());
    let mut out = vec![T::ZERO; x.elems()];
    macro_rules! each {
        ($($op:ident: $par:expr),*) => {
            match u {
                $(UnaryOp::$op => map1(shape, src, &mut out, $par, |v: T| fused::unary(FUnary::Op(UnaryOp::$op), v)),)*
                UnaryOp::Not => unreachable!("rejected by the shape rule"),
            }
        };
    }
    each!(
        Neg: PARALLEL_MIN_ELEMS, Exp: COSTLY_PAR, Log: COSTLY_PAR, Sqrt: PARALLEL_MIN_ELEMS,
        Abs: PARALLEL_MIN_ELEMS, Tanh: COSTLY_PAR, Sigmoid: COSTLY_PAR, Relu: PARALLEL_MIN_ELEMS,
        Square: PARALLEL_MIN_ELEMS, Recip: PARALLEL_MIN_ELEMS, Sign: PARALLEL_MIN_ELEMS,
        Sin: COSTLY_PAR, Cos: COSTLY_PAR, Tan: COSTLY_PAR, Exp2: COSTLY_PAR, Log2: COSTLY_PAR,
        Log1p: COSTLY_PAR, Expm1: COSTLY_PAR, Erf: COSTLY_PAR, Gelu: COSTLY_PAR, Silu: COSTLY_PAR,
        Softplus: COSTLY_PAR, Floor: PARALLEL_MIN_ELEMS, Ceil: PARALLEL_MIN_ELEMS,
        Round: PARALLEL_MIN_ELEMS, Rsqrt: PARALLEL_MIN_ELEMS
    );
    finish(out, shape)
}

pub(crate) fn unary(u: UnaryOp, x: &Tensor) -> Data {
    match x.dtype() {
        DType::F32 => unary_float::<f32>(u, x),
        DType::F64 => unary_float::<f64>(u, x),
        DType::I64 => {
            let mut out = vec![0i64; x.elems()];
            let f: fn(i64) -> i64 = match u {
                UnaryOp::Neg => |v| v.wrapping_neg(),
                UnaryOp::Abs => |v| v.wrapping_abs(),
                UnaryOp::Square => |v| v.wrapping_mul(v),
                UnaryOp::Sign => i64::signum,
                UnaryOp::Relu => |v| v.max(0),
                _ => unreachable!("rejected by the shape rule"),
            };
            map1(x.shape_ref(), x.src::<i64>(), &mut out, PARALLEL_MIN_ELEMS, f);
            finish(out, x.shape_ref())
        }
        DType::Bool => {
            let mut out = vec![false; x.elems()];
            map1(x.shape_ref(), x.src::<bool>(), &mut out, PARALLEL_MIN_ELEMS, |v: bool| !v);
            finish(out, x.shape_ref())
        }
    }
}

pub(crate) fn powf(p: &Powf, x: &Tensor) -> Data {
    with_float_type!(x.dtype(), T => {
        let e = T::from_f64(p.exponent.get());
        let mut out = vec![T::ZERO; x.elems()];
        map1(x.shape_ref(), x.src::<T>(), &mut out, COSTLY_PAR, |v: T| v.powf(e));
        finish(out, x.shape_ref())
    }, _ => unreachable!("rejected by the shape rule"))
}

// `T = bool` is instantiated by the dtype macro but rejected by the shape rules.
#[allow(clippy::bool_comparison)]
pub(crate) fn clamp(p: &Clamp, x: &Tensor) -> Data {
    with_any_type!(x.dtype(), T => {
        let (lo, hi) = (T::from_f64(p.min.get()), T::from_f64(p.max.get()));
        let mut out = vec![T::default(); x.elems()];
        map1(x.shape_ref(), x.src::<T>(), &mut out, PARALLEL_MIN_ELEMS, |v: T| {
            if v < lo { lo } else if v > hi { hi } else { v }
        });
        finish(out, x.shape_ref())
    })
}

pub(crate) fn cast(p: &Cast, x: &Tensor) -> Data {
    with_any_type!(x.dtype(), S => {
        with_any_type!(p.dtype, D => {
            let mut out = vec![D::default(); x.elems()];
            cast_into(x.shape_ref(), x.src::<S>(), &mut out);
            finish(out, x.shape_ref())
        })
    })
}

/// `x` over `shape` converted into `out`: eager mode's cast, and the compiled one's
/// (`exec/cpu/steps.rs`), so both give the same bits.
pub(crate) fn cast_into<S: Element, D: Element>(shape: &[usize], x: Src<S>, out: &mut [D]) {
    map1(shape, x, out, PARALLEL_MIN_ELEMS, |v: S| D::from_f64(v.to_f64()));
}

fn binary_typed<T: Element, O: Stored + Copy + Send + Default>(
    a: &Tensor,
    b: &Tensor,
    ty: &TensorType,
    f: impl Fn(T, T) -> O + Sync,
) -> Data {
    let (sa, sb) = (broadcast_strides(a, &ty.shape), broadcast_strides(b, &ty.shape));
    let mut out = vec![O::default(); ty.shape.elems()];
    map2(&ty.shape, src_for::<T>(a, &sa), src_for::<T>(b, &sb), &mut out, PARALLEL_MIN_ELEMS, f);
    finish(out, &ty.shape)
}

macro_rules! arith {
    ($op:expr, $a:expr, $b:expr, $ty:expr, $T:ty) => {
        match $op {
            BinaryOp::Add => binary_typed::<$T, $T>($a, $b, $ty, |x, y| x + y),
            BinaryOp::Sub => binary_typed::<$T, $T>($a, $b, $ty, |x, y| x - y),
            BinaryOp::Mul => binary_typed::<$T, $T>($a, $b, $ty, |x, y| x * y),
            BinaryOp::Div => binary_typed::<$T, $T>($a, $b, $ty, |x, y| x / y),
            BinaryOp::Maximum => binary_typed::<$T, $T>($a, $b, $ty, |x: $T, y: $T| x.max_nan(y)),
            BinaryOp::Minimum => binary_typed::<$T, $T>($a, $b, $ty, |x: $T, y: $T| x.min_nan(y)),
            BinaryOp::Atan2 => binary_typed::<$T, $T>($a, $b, $ty, |x: $T, y: $T| {
                fused::binary(FBinary::Op(BinaryOp::Atan2), x, y)
            }),
            BinaryOp::And | BinaryOp::Or => unreachable!("rejected by the shape rule"),
        }
    };
}

pub(crate) fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, ty: &TensorType) -> Data {
    match a.dtype() {
        DType::F32 => arith!(op, a, b, ty, f32),
        DType::F64 => arith!(op, a, b, ty, f64),
        DType::I64 => match op {
            BinaryOp::Add => binary_typed::<i64, i64>(a, b, ty, i64::wrapping_add),
            BinaryOp::Sub => binary_typed::<i64, i64>(a, b, ty, i64::wrapping_sub),
            BinaryOp::Mul => binary_typed::<i64, i64>(a, b, ty, i64::wrapping_mul),
            BinaryOp::Maximum => binary_typed::<i64, i64>(a, b, ty, i64::max),
            BinaryOp::Minimum => binary_typed::<i64, i64>(a, b, ty, i64::min),
            _ => unreachable!("rejected by the shape rule"),
        },
        DType::Bool => match op {
            BinaryOp::And => binary_typed::<bool, bool>(a, b, ty, |x, y| x & y),
            BinaryOp::Or => binary_typed::<bool, bool>(a, b, ty, |x, y| x | y),
            _ => unreachable!("rejected by the shape rule"),
        },
    }
}

// Ordering comparisons of bools are rejected by the shape rule.
#[allow(clippy::bool_comparison)]
pub(crate) fn compare(op: CmpOp, a: &Tensor, b: &Tensor, ty: &TensorType) -> Data {
    with_any_type!(a.dtype(), T => match op {
        CmpOp::Gt => binary_typed::<T, bool>(a, b, ty, |x, y| x > y),
        CmpOp::Ge => binary_typed::<T, bool>(a, b, ty, |x, y| x >= y),
        CmpOp::Lt => binary_typed::<T, bool>(a, b, ty, |x, y| x < y),
        CmpOp::Le => binary_typed::<T, bool>(a, b, ty, |x, y| x <= y),
        CmpOp::Eq => binary_typed::<T, bool>(a, b, ty, |x, y| x == y),
        CmpOp::Ne => binary_typed::<T, bool>(a, b, ty, |x, y| x != y),
    })
}

pub(crate) fn where_cond(c: &Tensor, a: &Tensor, b: &Tensor, ty: &TensorType) -> Data {
    let (sc, sa, sb) =
        (broadcast_strides(c, &ty.shape), broadcast_strides(a, &ty.shape), broadcast_strides(b, &ty.shape));
    with_any_type!(a.dtype(), T => {
        let mut out = vec![T::default(); ty.shape.elems()];
        map3(
            &ty.shape,
            src_for::<bool>(c, &sc),
            src_for::<T>(a, &sa),
            src_for::<T>(b, &sb),
            &mut out,
            PARALLEL_MIN_ELEMS,
            |c, x, y| if c { x } else { y },
        );
        finish(out, &ty.shape)
    })
}
