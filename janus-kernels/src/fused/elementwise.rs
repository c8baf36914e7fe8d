//! The fused machine's per-element functions and the tight loops that apply them to a tile.

use super::{FBinary, FUnary, SOFTPLUS_THRESHOLD};
use crate::dtype::Float;
use crate::elementwise::{BinaryOp, CmpOp, UnaryOp};

pub(super) fn bit<T: Float>(b: bool) -> T {
    if b { T::ONE } else { T::ZERO }
}

/// `f` applied to one element: the single definition of each unary function, shared by fused
/// programs and eager kernels so both give bit-identical results. Inlined, so a constant `f`
/// leaves no `match` in a caller's loop.
#[inline(always)]
pub fn unary<T: Float>(f: FUnary, x: T) -> T {
    match f {
        FUnary::Op(UnaryOp::Neg) => -x,
        FUnary::Op(UnaryOp::Exp) => x.fast_exp(),
        FUnary::Op(UnaryOp::Log) => x.fast_ln(),
        FUnary::Op(UnaryOp::Sqrt) => x.sqrt(),
        FUnary::Op(UnaryOp::Abs) => x.abs(),
        FUnary::Op(UnaryOp::Tanh) => x.fast_tanh(),
        FUnary::Op(UnaryOp::Sigmoid) => x.fast_sigmoid(),
        FUnary::Op(UnaryOp::Relu) => {
            if x < T::ZERO {
                T::ZERO
            } else {
                x
            }
        }
        FUnary::Op(UnaryOp::Square) => x * x,
        FUnary::Op(UnaryOp::Recip) => T::ONE / x,
        FUnary::Op(UnaryOp::Sign) => {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                -T::ONE
            } else {
                x
            }
        }
        FUnary::Op(UnaryOp::Not) => bit(x == T::ZERO),
        FUnary::Powf(p) => x.powf(T::from_f64(f64::from_bits(p))),
        FUnary::Clamp(lo, hi) => {
            let (lo, hi) = (T::from_f64(f64::from_bits(lo)), T::from_f64(f64::from_bits(hi)));
            if x < lo {
                lo
            } else if x > hi {
                hi
            } else {
                x
            }
        }
        FUnary::Trunc => T::from_f64(x.to_f64().trunc()),
        FUnary::NonZero => bit(x != T::ZERO),
        FUnary::Op(UnaryOp::Sin) => x.sin(),
        FUnary::Op(UnaryOp::Cos) => x.cos(),
        FUnary::Op(UnaryOp::Tan) => x.tan(),
        FUnary::Op(UnaryOp::Exp2) => x.exp2(),
        FUnary::Op(UnaryOp::Log2) => x.log2(),
        FUnary::Op(UnaryOp::Log1p) => x.ln_1p(),
        FUnary::Op(UnaryOp::Expm1) => x.exp_m1(),
        FUnary::Op(UnaryOp::Erf) => x.erf(),
        // The CUDA code generator writes these with the same operations in the same order.
        FUnary::Op(UnaryOp::Gelu) => {
            let half = T::from_f64(0.5);
            let y = x * half * (T::ONE + (x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf());
            // The limit at -inf, where the formula gives -inf * 0 = NaN (as PyTorch's does).
            if x == T::NEG_INFINITY { T::from_f64(-0.0) } else { y }
        }
        FUnary::Op(UnaryOp::Silu) => x * x.fast_sigmoid(),
        FUnary::Op(UnaryOp::Softplus) => {
            if x > T::from_f64(SOFTPLUS_THRESHOLD) {
                x
            } else {
                x.fast_exp().ln_1p()
            }
        }
        FUnary::Op(UnaryOp::Floor) => x.floor(),
        FUnary::Op(UnaryOp::Ceil) => x.ceil(),
        FUnary::Op(UnaryOp::Round) => x.round_ties_even(),
        FUnary::Op(UnaryOp::Rsqrt) => T::ONE / x.sqrt(),
    }
}

/// `f` applied to one pair of elements: the single definition of each binary function, shared by
/// fused programs and eager kernels (see [`unary`]).
#[inline(always)]
pub fn binary<T: Float>(f: FBinary, a: T, b: T) -> T {
    match f {
        FBinary::Op(BinaryOp::Add) => a + b,
        FBinary::Op(BinaryOp::Sub) => a - b,
        FBinary::Op(BinaryOp::Mul) => a * b,
        FBinary::Op(BinaryOp::Div) => a / b,
        FBinary::Op(BinaryOp::Maximum) => a.max_nan(b),
        FBinary::Op(BinaryOp::Minimum) => a.min_nan(b),
        FBinary::Op(BinaryOp::And) => bit(a != T::ZERO && b != T::ZERO),
        FBinary::Op(BinaryOp::Or) => bit(a != T::ZERO || b != T::ZERO),
        FBinary::Cmp(CmpOp::Gt) => bit(a > b),
        FBinary::Cmp(CmpOp::Ge) => bit(a >= b),
        FBinary::Cmp(CmpOp::Lt) => bit(a < b),
        FBinary::Cmp(CmpOp::Le) => bit(a <= b),
        FBinary::Cmp(CmpOp::Eq) => bit(a == b),
        FBinary::Cmp(CmpOp::Ne) => bit(a != b),
        FBinary::Op(BinaryOp::Atan2) => a.atan2(b),
    }
}

/// `out[i] = f(x[i])` as a straight loop the compiler vectorises.
#[inline(always)]
fn map1<T: Copy>(out: &mut [T], x: &[T], f: impl Fn(T) -> T) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// `out[i] = f(x[i], y[i])` as a straight loop.
#[inline(always)]
fn map2<T: Copy>(out: &mut [T], x: &[T], y: &[T], f: impl Fn(T, T) -> T) {
    for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
        *o = f(a, b);
    }
}

/// One specialised loop per unary function, so no `match` runs per element.
#[inline(always)]
pub(super) fn each_unary<T: Float>(f: FUnary, out: &mut [T], x: &[T]) {
    match f {
        FUnary::Op(UnaryOp::Neg) => map1(out, x, |v| -v),
        FUnary::Op(UnaryOp::Exp) => map1(out, x, T::fast_exp),
        FUnary::Op(UnaryOp::Log) => map1(out, x, T::fast_ln),
        FUnary::Op(UnaryOp::Sqrt) => map1(out, x, T::sqrt),
        FUnary::Op(UnaryOp::Abs) => map1(out, x, T::abs),
        FUnary::Op(UnaryOp::Tanh) => map1(out, x, T::fast_tanh),
        FUnary::Op(UnaryOp::Sigmoid) => map1(out, x, T::fast_sigmoid),
        FUnary::Op(UnaryOp::Relu) => map1(out, x, |v| if v < T::ZERO { T::ZERO } else { v }),
        FUnary::Op(UnaryOp::Square) => map1(out, x, |v| v * v),
        FUnary::Op(UnaryOp::Recip) => map1(out, x, |v| T::ONE / v),
        FUnary::Op(UnaryOp::Not) => map1(out, x, |v| bit(v == T::ZERO)),
        FUnary::NonZero => map1(out, x, |v| bit(v != T::ZERO)),
        FUnary::Op(UnaryOp::Erf) => map1(out, x, T::erf),
        FUnary::Op(UnaryOp::Rsqrt) => map1(out, x, |v| T::ONE / v.sqrt()),
        f @ FUnary::Op(UnaryOp::Gelu | UnaryOp::Silu) => {
            // `unary` with `f` fixed per arm, so the loop has no `match` and vectorises.
            if f == FUnary::Op(UnaryOp::Gelu) {
                map1(out, x, |v| unary(FUnary::Op(UnaryOp::Gelu), v))
            } else {
                map1(out, x, |v| unary(FUnary::Op(UnaryOp::Silu), v))
            }
        }
        f => map1(out, x, |v| unary(f, v)),
    }
}

/// One specialised loop per binary function; `c` on the left or right when `consts` is set.
#[inline(always)]
pub(super) fn each_binary<T: Float>(f: FBinary, out: &mut [T], x: &[T], y: &[T]) {
    match f {
        FBinary::Op(BinaryOp::Add) => map2(out, x, y, |a, b| a + b),
        FBinary::Op(BinaryOp::Sub) => map2(out, x, y, |a, b| a - b),
        FBinary::Op(BinaryOp::Mul) => map2(out, x, y, |a, b| a * b),
        FBinary::Op(BinaryOp::Div) => map2(out, x, y, |a, b| a / b),
        FBinary::Op(BinaryOp::Maximum) => map2(out, x, y, T::max_nan),
        FBinary::Op(BinaryOp::Minimum) => map2(out, x, y, T::min_nan),
        FBinary::Cmp(CmpOp::Gt) => map2(out, x, y, |a, b| bit(a > b)),
        FBinary::Cmp(CmpOp::Lt) => map2(out, x, y, |a, b| bit(a < b)),
        FBinary::Cmp(CmpOp::Ge) => map2(out, x, y, |a, b| bit(a >= b)),
        FBinary::Cmp(CmpOp::Le) => map2(out, x, y, |a, b| bit(a <= b)),
        FBinary::Cmp(CmpOp::Eq) => map2(out, x, y, |a, b| bit(a == b)),
        f => map2(out, x, y, |a, b| binary(f, a, b)),
    }
}

/// `f(x[i], c)` (or `f(c, x[i])`), one specialised loop per function.
#[inline(always)]
pub(super) fn each_binary_const<T: Float>(f: FBinary, out: &mut [T], x: &[T], c: T, const_left: bool) {
    match (f, const_left) {
        (FBinary::Op(BinaryOp::Add), _) => map1(out, x, |v| v + c),
        (FBinary::Op(BinaryOp::Mul), _) => map1(out, x, |v| v * c),
        (FBinary::Op(BinaryOp::Sub), false) => map1(out, x, |v| v - c),
        (FBinary::Op(BinaryOp::Sub), true) => map1(out, x, |v| c - v),
        (FBinary::Op(BinaryOp::Div), false) => map1(out, x, |v| v / c),
        (FBinary::Op(BinaryOp::Div), true) => map1(out, x, |v| c / v),
        (FBinary::Op(BinaryOp::Maximum), false) => map1(out, x, |v| v.max_nan(c)),
        (FBinary::Op(BinaryOp::Maximum), true) => map1(out, x, |v| c.max_nan(v)),
        (FBinary::Op(BinaryOp::Minimum), false) => map1(out, x, |v| v.min_nan(c)),
        (FBinary::Op(BinaryOp::Minimum), true) => map1(out, x, |v| c.min_nan(v)),
        (FBinary::Cmp(CmpOp::Gt), false) => map1(out, x, |v| bit(v > c)),
        (FBinary::Cmp(CmpOp::Lt), false) => map1(out, x, |v| bit(v < c)),
        (f, false) => map1(out, x, |v| binary(f, v, c)),
        (f, true) => map1(out, x, |v| binary(f, c, v)),
    }
}

/// `bit(x[i] f c) * g[i]` (or `bit(c f x[i]) * g[i]`): a comparison with a constant and the
/// product of its 0/1 result, in one loop, with the operations of the two instructions (a
/// product is the same bits either way round).
#[inline(always)]
pub(super) fn each_mask_product<T: Float>(
    f: FBinary,
    out: &mut [T],
    x: &[T],
    g: &[T],
    c: T,
    const_left: bool,
) {
    macro_rules! right {
        ($op:ident) => {
            map2(out, x, g, |v, w| binary(FBinary::Cmp(CmpOp::$op), v, c) * w)
        };
    }
    match (f, const_left) {
        (FBinary::Cmp(CmpOp::Gt), false) => right!(Gt),
        (FBinary::Cmp(CmpOp::Ge), false) => right!(Ge),
        (FBinary::Cmp(CmpOp::Lt), false) => right!(Lt),
        (FBinary::Cmp(CmpOp::Le), false) => right!(Le),
        (f, false) => map2(out, x, g, |v, w| binary(f, v, c) * w),
        (f, true) => map2(out, x, g, |v, w| binary(f, c, v) * w),
    }
}
