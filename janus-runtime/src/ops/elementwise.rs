//! Elementwise ops: unary functions, broadcasting arithmetic and comparisons, `where`, casts.
//! Each op's shape rule, kernel and VJP are next to each other.

use super::{Cast, Clamp, Powf, TensorType};
use crate::DType;
use crate::error::bail;
use crate::shape::{Shape, Strides, broadcast_shapes};
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::fused::{self, FUnary};
use janus_kernels::strided::{PARALLEL_MIN_ELEMS, Src, map1, map2, map3};
use janus_kernels::{Element, Float, with_any_type, with_float_type};

/// Transcendental maps cost ~10x a plain add per element, so they go parallel sooner.
const COSTLY_PAR: usize = PARALLEL_MIN_ELEMS / 4;

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// `ln x`
    Log,
    /// `sqrt x`
    Sqrt,
    /// `|x|`
    Abs,
    /// `tanh x`
    Tanh,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `max(x, 0)`
    Relu,
    /// `x^2`
    Square,
    /// `1 / x`
    Recip,
    /// `-1`, `0` or `1`
    Sign,
    /// Logical not of a `bool` tensor.
    Not,
}

impl UnaryOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Square => "square",
            UnaryOp::Recip => "recip",
            UnaryOp::Sign => "sign",
            UnaryOp::Not => "logical_not",
        }
    }
}

/// Broadcasting binary arithmetic and logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (floats only)
    Div,
    /// Elementwise maximum (NaN propagates).
    Maximum,
    /// Elementwise minimum (NaN propagates).
    Minimum,
    /// Logical and of `bool` tensors.
    And,
    /// Logical or of `bool` tensors.
    Or,
}

impl BinaryOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::And => "logical_and",
            BinaryOp::Or => "logical_or",
        }
    }
}

/// Broadcasting comparisons producing `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
}

impl CmpOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
        }
    }
}

// ---- shape rules ----------------------------------------------------------------------------

#[track_caller]
pub(crate) fn infer_float(op: &str, x: &Tensor) -> TensorType {
    if !x.dtype().is_float() {
        bail!(op, "expected a float tensor, got {} {:?}", x.dtype(), x.shape());
    }
    TensorType { shape: x.shape().clone(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_numeric(op: &str, x: &Tensor) -> TensorType {
    if x.dtype() == DType::Bool {
        bail!(op, "expected a numeric tensor, got {} {:?}", x.dtype(), x.shape());
    }
    TensorType { shape: x.shape().clone(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_unary(u: UnaryOp, x: &Tensor) -> TensorType {
    match u {
        UnaryOp::Not if x.dtype() != DType::Bool => {
            bail!(u.name(), "expected a bool tensor, got {} {:?}", x.dtype(), x.shape())
        }
        UnaryOp::Not => TensorType { shape: x.shape().clone(), dtype: DType::Bool },
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Square | UnaryOp::Sign | UnaryOp::Relu => {
            infer_numeric(u.name(), x)
        }
        _ => infer_float(u.name(), x),
    }
}

#[track_caller]
fn broadcast(op: &str, a: &Tensor, b: &Tensor) -> Shape {
    match broadcast_shapes(a.dims(), b.dims()) {
        Some(s) => s,
        None => bail!(op, "shapes {:?} and {:?} cannot be broadcast together", a.shape(), b.shape()),
    }
}

#[track_caller]
fn same_dtype(op: &str, a: &Tensor, b: &Tensor) {
    if a.dtype() != b.dtype() {
        bail!(
            op,
            "dtype mismatch: {} {:?} and {} {:?} (convert one with to_dtype)",
            a.dtype(),
            a.shape(),
            b.dtype(),
            b.shape()
        );
    }
}

#[track_caller]
pub(crate) fn infer_binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> TensorType {
    same_dtype(op.name(), a, b);
    let ok = match op {
        BinaryOp::And | BinaryOp::Or => a.dtype() == DType::Bool,
        BinaryOp::Div => a.dtype().is_float(),
        _ => a.dtype() != DType::Bool,
    };
    if !ok {
        bail!(
            op.name(),
            "not defined for {} operands (shapes {:?} and {:?})",
            a.dtype(),
            a.shape(),
            b.shape()
        );
    }
    TensorType { shape: broadcast(op.name(), a, b), dtype: a.dtype() }
}

#[track_caller]
pub(crate) fn infer_compare(op: CmpOp, a: &Tensor, b: &Tensor) -> TensorType {
    same_dtype(op.name(), a, b);
    if a.dtype() == DType::Bool && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
        bail!(op.name(), "ordering comparison of bool tensors {:?} and {:?}", a.shape(), b.shape());
    }
    TensorType { shape: broadcast(op.name(), a, b), dtype: DType::Bool }
}

#[track_caller]
pub(crate) fn infer_where(c: &Tensor, a: &Tensor, b: &Tensor) -> TensorType {
    if c.dtype() != DType::Bool {
        bail!("where_cond", "the condition must be a bool tensor, got {} {:?}", c.dtype(), c.shape());
    }
    same_dtype("where_cond", a, b);
    let ab = broadcast("where_cond", a, b);
    match broadcast_shapes(c.dims(), &ab) {
        Some(shape) => TensorType { shape, dtype: a.dtype() },
        None => bail!("where_cond", "condition shape {:?} cannot be broadcast with {:?}", c.shape(), ab),
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

impl From<UnaryOp> for FUnary {
    fn from(u: UnaryOp) -> FUnary {
        match u {
            UnaryOp::Neg => FUnary::Neg,
            UnaryOp::Exp => FUnary::Exp,
            UnaryOp::Log => FUnary::Log,
            UnaryOp::Sqrt => FUnary::Sqrt,
            UnaryOp::Abs => FUnary::Abs,
            UnaryOp::Tanh => FUnary::Tanh,
            UnaryOp::Sigmoid => FUnary::Sigmoid,
            UnaryOp::Relu => FUnary::Relu,
            UnaryOp::Square => FUnary::Square,
            UnaryOp::Recip => FUnary::Recip,
            UnaryOp::Sign => FUnary::Sign,
            UnaryOp::Not => FUnary::Not,
        }
    }
}

/// Float unary ops through [`fused::unary`], one loop per op (a constant function each).
fn unary_float<T: Float>(u: UnaryOp, x: &Tensor) -> Data {
    let (shape, src) = (x.shape(), x.src::<T>());
    let mut out = vec![T::ZERO; x.numel()];
    macro_rules! each {
        ($($op:ident: $par:expr),*) => {
            match u {
                $(UnaryOp::$op => map1(shape, src, &mut out, $par, |v: T| fused::unary(FUnary::$op, v)),)*
                UnaryOp::Not => unreachable!("rejected by the shape rule"),
            }
        };
    }
    each!(
        Neg: PARALLEL_MIN_ELEMS, Exp: COSTLY_PAR, Log: COSTLY_PAR, Sqrt: PARALLEL_MIN_ELEMS,
        Abs: PARALLEL_MIN_ELEMS, Tanh: COSTLY_PAR, Sigmoid: COSTLY_PAR, Relu: PARALLEL_MIN_ELEMS,
        Square: PARALLEL_MIN_ELEMS, Recip: PARALLEL_MIN_ELEMS, Sign: PARALLEL_MIN_ELEMS
    );
    finish(out, shape)
}

pub(crate) fn unary(u: UnaryOp, x: &Tensor) -> Data {
    match x.dtype() {
        DType::F32 => unary_float::<f32>(u, x),
        DType::F64 => unary_float::<f64>(u, x),
        DType::I64 => {
            let mut out = vec![0i64; x.numel()];
            let f: fn(i64) -> i64 = match u {
                UnaryOp::Neg => |v| v.wrapping_neg(),
                UnaryOp::Abs => |v| v.wrapping_abs(),
                UnaryOp::Square => |v| v.wrapping_mul(v),
                UnaryOp::Sign => i64::signum,
                UnaryOp::Relu => |v| v.max(0),
                _ => unreachable!("rejected by the shape rule"),
            };
            map1(x.shape(), x.src::<i64>(), &mut out, PARALLEL_MIN_ELEMS, f);
            finish(out, x.shape())
        }
        DType::Bool => {
            let mut out = vec![false; x.numel()];
            map1(x.shape(), x.src::<bool>(), &mut out, PARALLEL_MIN_ELEMS, |v: bool| !v);
            finish(out, x.shape())
        }
    }
}

pub(crate) fn powf(p: &Powf, x: &Tensor) -> Data {
    with_float_type!(x.dtype(), T => {
        let e = T::from_f64(p.exponent.get());
        let mut out = vec![T::ZERO; x.numel()];
        map1(x.shape(), x.src::<T>(), &mut out, COSTLY_PAR, |v: T| v.powf(e));
        finish(out, x.shape())
    }, _ => unreachable!("rejected by the shape rule"))
}

// `T = bool` is instantiated by the dtype macro but rejected by the shape rules.
#[allow(clippy::bool_comparison)]
pub(crate) fn clamp(p: &Clamp, x: &Tensor) -> Data {
    with_any_type!(x.dtype(), T => {
        let (lo, hi) = (T::from_f64(p.min.get()), T::from_f64(p.max.get()));
        let mut out = vec![T::default(); x.numel()];
        map1(x.shape(), x.src::<T>(), &mut out, PARALLEL_MIN_ELEMS, |v: T| {
            if v < lo { lo } else if v > hi { hi } else { v }
        });
        finish(out, x.shape())
    })
}

pub(crate) fn cast(p: &Cast, x: &Tensor) -> Data {
    with_any_type!(x.dtype(), S => {
        with_any_type!(p.dtype, D => {
            let mut out = vec![D::default(); x.numel()];
            map1(x.shape(), x.src::<S>(), &mut out, PARALLEL_MIN_ELEMS, |v: S| D::from_f64(v.to_f64()));
            finish(out, x.shape())
        })
    })
}

fn binary_typed<T: Element, O: Stored + Copy + Send + Default>(
    a: &Tensor,
    b: &Tensor,
    ty: &TensorType,
    f: impl Fn(T, T) -> O + Sync,
) -> Data {
    let (sa, sb) = (broadcast_strides(a, &ty.shape), broadcast_strides(b, &ty.shape));
    let mut out = vec![O::default(); ty.shape.numel()];
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
        let mut out = vec![T::default(); ty.shape.numel()];
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

// ---- gradients ------------------------------------------------------------------------------

/// Sums a broadcast gradient back down to `shape` (the adjoint of broadcasting).
pub(crate) fn sum_to(g: &Tensor, shape: &Shape) -> Tensor {
    if g.shape() == shape {
        return g.clone();
    }
    let lead = g.rank() - shape.rank();
    let mut dims: Vec<usize> = (0..lead).collect();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && g.dims()[lead + i] != 1 {
            dims.push(lead + i);
        }
    }
    g.sum_dims(&dims, true).reshape(shape)
}

pub(crate) fn unary_vjp(u: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Tensor {
    match u {
        UnaryOp::Neg => -g,
        UnaryOp::Exp => g * y,
        UnaryOp::Log => g / x,
        UnaryOp::Sqrt => g / (y * 2.0),
        UnaryOp::Abs => g * x.sign(),
        UnaryOp::Tanh => g * (1.0 - y.square()),
        UnaryOp::Sigmoid => g * y * (1.0 - y),
        UnaryOp::Relu => g * x.gt_scalar(0.0).to_dtype(x.dtype()),
        UnaryOp::Square => g * x * 2.0,
        UnaryOp::Recip => -(g * y.square()),
        // Piecewise constant: the gradient is zero.
        UnaryOp::Sign | UnaryOp::Not => Tensor::zeros_like(x),
    }
}

pub(crate) fn powf_vjp(p: &Powf, x: &Tensor, g: &Tensor) -> Tensor {
    let e = p.exponent.get();
    g * x.powf(e - 1.0) * e
}

pub(crate) fn clamp_vjp(p: &Clamp, x: &Tensor, g: &Tensor) -> Tensor {
    let inside = x.ge_scalar(p.min.get()).logical_and(&x.le_scalar(p.max.get()));
    g * inside.to_dtype(x.dtype())
}

/// Gradient weights of `maximum`/`minimum`: 1 where the operand wins, 1/2 on ties (PyTorch).
fn extremum_weights(a: &Tensor, b: &Tensor, a_wins: &Tensor) -> (Tensor, Tensor) {
    let dt = a.dtype();
    let wa = a_wins.to_dtype(dt) + a.eq(b).to_dtype(dt) * 0.5;
    let wb = 1.0 - &wa;
    (wa, wb)
}

pub(crate) fn binary_vjp(
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    g: &Tensor,
) -> Vec<Option<Tensor>> {
    let (na, nb) = (a.needs_grad(), b.needs_grad());
    let ga = |f: &dyn Fn() -> Tensor| na.then(|| sum_to(&f(), a.shape()));
    let gb = |f: &dyn Fn() -> Tensor| nb.then(|| sum_to(&f(), b.shape()));
    match op {
        BinaryOp::Add => vec![ga(&|| g.clone()), gb(&|| g.clone())],
        BinaryOp::Sub => vec![ga(&|| g.clone()), gb(&|| -g)],
        BinaryOp::Mul => vec![ga(&|| g * b), gb(&|| g * a)],
        BinaryOp::Div => vec![ga(&|| g / b), gb(&|| -(g * out / b))],
        BinaryOp::Maximum | BinaryOp::Minimum => {
            let a_wins = if op == BinaryOp::Maximum { a.gt(b) } else { a.lt(b) };
            let (wa, wb) = extremum_weights(a, b, &a_wins);
            vec![ga(&|| g * &wa), gb(&|| g * &wb)]
        }
        BinaryOp::And | BinaryOp::Or => vec![None, None],
    }
}

pub(crate) fn where_vjp(c: &Tensor, a: &Tensor, b: &Tensor, g: &Tensor) -> Vec<Option<Tensor>> {
    let zero = Tensor::scalar_dtype(0.0, g.dtype());
    vec![
        None,
        a.needs_grad().then(|| sum_to(&c.where_cond(g, &zero), a.shape())),
        b.needs_grad().then(|| sum_to(&c.where_cond(&zero, g), b.shape())),
    ]
}
