//! Eager execution of one op: [`apply`] is the single entry point every op goes through. It
//! checks and infers the result type (the op's shape rule), computes on the operands' device
//! when they are concrete (`crate::backend`), attaches an autograd node when an input needs
//! gradients (`crate::autograd`), and tells an active recording (`crate::recorder`).

use crate::autograd::{NodeBackward, is_grad_enabled};
use crate::ops::Op;
use crate::tensor::NodeRef;
use crate::tensor::{GradMeta, Tensor};

thread_local! {
    /// Eager op calls on this thread (for staging coverage, see `rt::coverage`).
    static EAGER_OPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Eager op calls on this thread so far: every [`apply`] that computed values, outside
/// [`uncounted`] work.
#[inline]
pub(crate) fn eager_op_count() -> u64 {
    EAGER_OPS.with(std::cell::Cell::get)
}

/// Runs `f` without counting its op calls: compile-time work (the constants a derivation's VJP
/// rules make) is not the program's.
pub(crate) fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    let before = eager_op_count();
    let r = f();
    EAGER_OPS.with(|c| c.set(before));
    r
}

/// Computes `op` on concrete operands without recording, autograd or user-facing checks beyond
/// the shape rule: how graph executors and passes evaluate primitive nodes.
#[track_caller]
pub(crate) fn eval(op: &Op, inputs: &[&Tensor]) -> Tensor {
    let ty = op.infer(inputs);
    let data = crate::backend::compute(op, inputs, &ty);
    Tensor::from_parts(ty.shape, ty.dtype, Some(data), GradMeta::None)
}

/// Runs `op` on `inputs`: the one entry point every op goes through.
#[track_caller]
pub(crate) fn apply(op: Op, inputs: &[&Tensor]) -> Tensor {
    let ty = op.infer(inputs);
    // Not `bool::then`: `#[track_caller]` does not pass through closures.
    let data = if inputs.iter().all(|t| t.is_concrete()) {
        EAGER_OPS.with(|c| c.set(c.get() + 1));
        Some(crate::backend::compute(&op, inputs, &ty))
    } else {
        None
    };
    let grad = if is_grad_enabled() && op.is_differentiable() && inputs.iter().any(|t| t.needs_grad()) {
        Some(inputs.iter().map(|&t| t.clone()).collect::<Vec<_>>())
    } else {
        None
    };
    match grad {
        None => {
            let out = Tensor::from_parts(ty.shape, ty.dtype, data, GradMeta::None);
            crate::recorder::op(&op, inputs, &out, None);
            out
        }
        Some(owned) => {
            // The node saves the output without its grad history, so no reference cycle forms;
            // a trace binds the saved copy to the same graph value.
            let saved = Tensor::from_parts(ty.shape.clone(), ty.dtype, data.clone(), GradMeta::None);
            let node = NodeRef::new(owned, NodeBackward::Op { op: op.clone(), output: saved.clone() });
            let out = Tensor::from_parts(ty.shape, ty.dtype, data, GradMeta::Node(node, 0));
            crate::recorder::op(&op, inputs, &out, Some(&saved));
            out
        }
    }
}
