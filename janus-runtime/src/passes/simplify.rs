//! Algebraic simplification: identities (`x * 1`, `x / 1`, `x + (-0.0)`, `x - 0.0`, no-op
//! reshapes, casts, broadcasts, narrows, and the autograd markers `detach`/`requires_grad`),
//! view chains (`permute . permute`, `reshape . reshape`, `narrow . pad`), double negation, and
//! sums of zero-padded pieces (the gradient of `chunk`) rebuilt as one `cat`.
//!
//! Every rewrite holds bit for bit in IEEE arithmetic, signed zeros, infinities and NaN
//! included. That rules out `x + 0.0 -> x`: `-0.0 + 0.0` is `+0.0`. Adding `-0.0` (or
//! subtracting `+0.0`) is the identity, so those rewrites stay. For the same reason a sum of
//! padded pieces keeps one `+ 0.0` per piece (`pad(a) + pad(b)` turns a `-0.0` of `a` into
//! `+0.0`, and the `cat` must too); the add fuses into the piece's producer.

use super::{PassStats, Rewriter, is_full_of};
use crate::graph::Graph;
use crate::graph::{GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{Axis, BinaryOp, F64Bits, Full, Op, Permute, Reshape, TensorType, UnaryOp};
use smallvec::{SmallVec, smallvec};
use std::collections::HashMap;

/// Disjoint pieces `(start, len, node)` of a zero-padded tensor along `dim`.
#[derive(Clone)]
struct Pieces {
    dim: usize,
    parts: Vec<(usize, usize, NodeId)>,
}

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let mut r = Rewriter::new(&g);
    let mut pieces: HashMap<NodeId, Pieces> = HashMap::new();
    let mut rewrites = 0;
    for i in 0..g.nodes.len() {
        let node = r.remapped(i);
        match rewrite(&mut r.b, &node, &mut pieces) {
            Some(id) => {
                r.map[i] = Some(id);
                rewrites += 1;
            }
            None => {
                let id = r.b.push(node);
                r.map[i] = Some(id);
                note_pieces(&r.b, id, &mut pieces);
            }
        }
    }
    stats.add("simplify.rewrites", rewrites);
    r.finish()
}

/// Whether adding `n` is the identity: a fill of `-0.0` (`+0.0` when `subtract`); for integer
/// results any zero.
fn is_additive_identity(n: &Node, result: &TensorType, subtract: bool) -> bool {
    if !result.dtype.is_float() {
        return is_full_of(n, 0.0);
    }
    let zero: f64 = if subtract { 0.0 } else { -0.0 };
    matches!(&n.op, NodeOp::Op(Op::Full(f)) if f.value.get().to_bits() == zero.to_bits())
}

fn op_of(b: &GraphBuilder, id: NodeId) -> Option<&Op> {
    b.node(id).op.as_op()
}

fn push(b: &mut GraphBuilder, op: Op, inputs: SmallVec<[NodeId; 4]>, ty: TensorType, like: &Node) -> NodeId {
    b.push(Node { op: NodeOp::Op(op), inputs, ty, span: like.span })
}

/// Records a pad node as a one-piece set.
fn note_pieces(b: &GraphBuilder, id: NodeId, pieces: &mut HashMap<NodeId, Pieces>) {
    if let Some(Op::Pad(p)) = op_of(b, id) {
        let src = b.node(id).inputs[0];
        let len = b.node(src).ty.shape[p.dim];
        pieces.insert(id, Pieces { dim: p.dim, parts: vec![(p.before, len, src)] });
    }
}

fn rewrite(b: &mut GraphBuilder, n: &Node, pieces: &mut HashMap<NodeId, Pieces>) -> Option<NodeId> {
    let op = n.op.as_op()?;
    let x = *n.inputs.first()?;
    let same_as = |b: &GraphBuilder, id: NodeId| b.node(id).ty == n.ty;
    match op {
        Op::Reshape(_) | Op::BroadcastTo(_) | Op::Cast(_) if same_as(b, x) => Some(x),
        Op::Narrow(p) if p.start == 0 && same_as(b, x) => Some(x),
        Op::Pad(p) if p.before == 0 && p.after == 0 => Some(x),
        Op::Detach | Op::FreshLeaf => Some(x),
        Op::Reshape(p) => match op_of(b, x) {
            Some(Op::Reshape(_)) => {
                let src = b.node(x).inputs[0];
                if b.node(src).ty == n.ty {
                    return Some(src);
                }
                Some(push(
                    b,
                    Op::Reshape(Reshape { shape: p.shape.clone() }),
                    smallvec![src],
                    n.ty.clone(),
                    n,
                ))
            }
            _ => None,
        },
        Op::Permute(p) => {
            if p.perm.iter().enumerate().all(|(i, &d)| i == d) {
                return Some(x);
            }
            let Some(Op::Permute(q)) = op_of(b, x) else { return None };
            let perm: SmallVec<[usize; 4]> = p.perm.iter().map(|&d| q.perm[d]).collect();
            let src = b.node(x).inputs[0];
            if perm.iter().enumerate().all(|(i, &d)| i == d) {
                return Some(src);
            }
            Some(push(b, Op::Permute(Permute { perm }), smallvec![src], n.ty.clone(), n))
        }
        Op::Narrow(p) => match op_of(b, x) {
            Some(Op::Pad(q)) if q.dim == p.dim && q.before == p.start && same_as(b, b.node(x).inputs[0]) => {
                Some(b.node(x).inputs[0])
            }
            _ => None,
        },
        Op::Unary(UnaryOp::Neg) => match op_of(b, x) {
            Some(Op::Unary(UnaryOp::Neg)) => Some(b.node(x).inputs[0]),
            _ => None,
        },
        Op::Binary(bop) => {
            let y = n.inputs[1];
            let (nx, ny) = (b.node(x), b.node(y));
            let keep_x = nx.ty == n.ty;
            let keep_y = ny.ty == n.ty;
            match bop {
                BinaryOp::Add if keep_x && is_additive_identity(ny, &n.ty, false) => Some(x),
                BinaryOp::Add if keep_y && is_additive_identity(nx, &n.ty, false) => Some(y),
                BinaryOp::Sub if keep_x && is_additive_identity(ny, &n.ty, true) => Some(x),
                BinaryOp::Mul if keep_x && is_full_of(ny, 1.0) => Some(x),
                BinaryOp::Mul if keep_y && is_full_of(nx, 1.0) => Some(y),
                BinaryOp::Div if keep_x && is_full_of(ny, 1.0) => Some(x),
                BinaryOp::Add => sum_of_pieces(b, n, x, y, pieces),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `pad(a) + pad(b) + ...` along one dimension with disjoint ranges becomes one `cat` of the
/// pieces, with zero fills for gaps: no full-size zero buffers, no adds.
fn sum_of_pieces(
    b: &mut GraphBuilder,
    n: &Node,
    x: NodeId,
    y: NodeId,
    pieces: &mut HashMap<NodeId, Pieces>,
) -> Option<NodeId> {
    let (px, py) = (pieces.get(&x)?, pieces.get(&y)?);
    if px.dim != py.dim || b.node(x).ty != n.ty || b.node(y).ty != n.ty {
        return None;
    }
    let dim = px.dim;
    let mut parts: Vec<(usize, usize, NodeId)> = px.parts.iter().chain(&py.parts).copied().collect();
    parts.sort_by_key(|p| p.0);
    if parts.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return None; // overlapping ranges really add
    }
    let total = n.ty.shape[dim];
    let mut inputs: SmallVec<[NodeId; 4]> = SmallVec::new();
    let mut at = 0;
    let gap = |b: &mut GraphBuilder, len: usize| {
        let mut shape = n.ty.shape.clone();
        shape.0[dim] = len;
        let ty = TensorType { shape: shape.clone(), dtype: n.ty.dtype };
        push(
            b,
            Op::Full(Full { shape, dtype: n.ty.dtype, value: F64Bits::new(0.0), device: crate::Device::Cpu }),
            SmallVec::new(),
            ty,
            n,
        )
    };
    for &(start, len, src) in &parts {
        if start > at {
            inputs.push(gap(b, start - at));
        }
        // `x + 0.0`, as the padded sum computed it: a `-0.0` becomes `+0.0`.
        let piece = if n.ty.dtype.is_float() {
            let ty = TensorType { shape: crate::Shape::scalar(), dtype: n.ty.dtype };
            let f = Full {
                shape: ty.shape.clone(),
                dtype: n.ty.dtype,
                value: F64Bits::new(0.0),
                device: crate::Device::Cpu,
            };
            let zero = push(b, Op::Full(f), SmallVec::new(), ty, n);
            let src_ty = b.node(src).ty.clone();
            push(b, Op::Binary(BinaryOp::Add), smallvec![src, zero], src_ty, n)
        } else {
            src
        };
        inputs.push(piece);
        at = start + len;
    }
    if at < total {
        inputs.push(gap(b, total - at));
    }
    let id = push(b, Op::Cat(Axis { dim }), inputs, n.ty.clone(), n);
    pieces.insert(id, Pieces { dim, parts });
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn removes_identities_and_view_chains() {
        let g = trace(&[Tensor::ones([2, 3])], |x| {
            let a = (&x[0] * 1.0 + -0.0).reshape([3, 2]).reshape([2, 3]);
            let b = a.transpose(0, 1).transpose(0, 1).neg().neg().detach();
            vec![b]
        });
        let mut s = PassStats::default();
        let out = crate::passes::dce::run(run(g, &mut s), &mut s);
        // *1, +(-0), reshape pair, transpose pair, neg pair (`detach` of a value without
        // gradients is the value itself, and records nothing)
        assert_eq!(s.get("simplify.rewrites"), 5);
        assert_eq!(out.op_count(), 0, "{out}");
    }

    #[test]
    fn keeps_rewrites_that_change_signed_zeros() {
        // `-0.0 + 0.0 == +0.0` and `-0.0 - (-0.0) == +0.0`: neither is the identity.
        let x = Tensor::from_vec(vec![-0.0f32, 1.0], [2]);
        let g = trace(std::slice::from_ref(&x), |x| vec![&x[0] + 0.0, &x[0] - -0.0]);
        let mut s = PassStats::default();
        let out = run(g, &mut s);
        assert_eq!(s.get("simplify.rewrites"), 0, "{out}");
        let (got, _) = crate::passes::optimize(out);
        let e = crate::exec::Executor::compile(got).run(std::slice::from_ref(&x));
        for (o, want) in e.iter().zip([&x + 0.0, &x - -0.0]) {
            let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(o), bits(&want));
            assert_eq!(bits(o)[0], 0.0f32.to_bits());
        }
    }

    #[test]
    fn chunk_gradient_pads_become_one_cat() {
        let x = Tensor::ones([2, 8]).requires_grad();
        let g = trace(std::slice::from_ref(&x), |x| {
            let [a, b, c, d] = x[0].chunk::<4>(1);
            let loss = (a.exp() + b.tanh() + c.sigmoid() * d).sum_all();
            let grads = loss.backward();
            vec![grads.get(&x[0]).unwrap().clone()]
        });
        assert_eq!(count(&g, "pad"), 4);
        let mut s = PassStats::default();
        let out = crate::passes::dce::run(run(g, &mut s), &mut s);
        // One `+ 0.0` per piece keeps signed zeros as the padded sum has them (fused later).
        assert_eq!((count(&out, "pad"), count(&out, "cat"), count(&out, "add")), (0, 1, 4), "{out}");
    }
}
