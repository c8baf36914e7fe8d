//! Gradients (VJPs) of the elementwise ops, written in `Tensor` ops so the eager tape and
//! symbolic autodiff share them.

use super::{BinaryOp, Clamp, Powf, UnaryOp};
use crate::shape::Shape;
use crate::tensor::Tensor;
use janus_kernels::fused;

/// Sums a broadcast gradient back down to `shape` (the adjoint of broadcasting).
pub(crate) fn sum_to(g: &Tensor, shape: &Shape) -> Tensor {
    if g.shape_ref() == shape {
        return g.clone();
    }
    let lead = g.rank() - shape.rank();
    let mut dims: Vec<usize> = (0..lead).collect();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && g.sizes()[lead + i] != 1 {
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
        // From the result, as PyTorch's `threshold_backward`: `y > 0` exactly where `x > 0` (a NaN
        // or -0.0 stays itself, and neither is above 0), and a compiled product that applies
        // the relu in its closing pass then stores only `y` (`exec/lower.rs`).
        UnaryOp::Relu => g * y.gt_scalar(0.0).to_dtype(y.dtype()),
        UnaryOp::Square => g * x * 2.0,
        UnaryOp::Recip => -(g * y.square()),
        UnaryOp::Sin => g * x.cos(),
        UnaryOp::Cos => -(g * x.sin()),
        UnaryOp::Tan => g * (1.0 + y.square()),
        UnaryOp::Exp2 => g * y * std::f64::consts::LN_2,
        UnaryOp::Log2 => g / (x * std::f64::consts::LN_2),
        UnaryOp::Log1p => g / (x + 1.0),
        UnaryOp::Expm1 => g * (y + 1.0),
        UnaryOp::Erf => g * (-x.square()).exp() * std::f64::consts::FRAC_2_SQRT_PI,
        // d/dx x*Phi(x) = Phi(x) + x*phi(x), phi the standard normal density.
        UnaryOp::Gelu => {
            let cdf = ((x * std::f64::consts::FRAC_1_SQRT_2).erf() + 1.0) * 0.5;
            let pdf = (x.square() * -0.5).exp()
                * (0.5 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2);
            g * (cdf + x * pdf)
        }
        UnaryOp::Silu => {
            let s = x.sigmoid();
            g * &s * (x * (1.0 - &s) + 1.0)
        }
        // PyTorch's rule: the gradient of the linear branch above the threshold is exactly 1.
        UnaryOp::Softplus => {
            let linear = x.gt_scalar(fused::SOFTPLUS_THRESHOLD);
            linear.where_cond(g, &(g * x.sigmoid()))
        }
        UnaryOp::Rsqrt => g * y.square() * y * -0.5,
        // Piecewise constant: the gradient is zero.
        UnaryOp::Sign | UnaryOp::Not | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => {
            Tensor::zeros_like(x)
        }
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
    let ga = |f: &dyn Fn() -> Tensor| na.then(|| sum_to(&f(), a.shape_ref()));
    let gb = |f: &dyn Fn() -> Tensor| nb.then(|| sum_to(&f(), b.shape_ref()));
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
        BinaryOp::Atan2 => {
            // d/da atan2(a, b) = b / (a^2 + b^2); d/db = -a / (a^2 + b^2).
            let r2 = a.square() + b.square();
            vec![ga(&|| g * b / &r2), gb(&|| -(g * a / &r2))]
        }
        BinaryOp::And | BinaryOp::Or => vec![None, None],
    }
}

pub(crate) fn where_vjp(c: &Tensor, a: &Tensor, b: &Tensor, g: &Tensor) -> Vec<Option<Tensor>> {
    let zero = Tensor::scalar_dtype(0.0, g.dtype());
    vec![
        None,
        a.needs_grad().then(|| sum_to(&c.where_cond(g, &zero), a.shape_ref())),
        b.needs_grad().then(|| sum_to(&c.where_cond(&zero, g), b.shape_ref())),
    ]
}
