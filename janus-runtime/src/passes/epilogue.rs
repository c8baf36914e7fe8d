//! Matmul epilogues: `matmul(a, b) + c` becomes `matmul_add(a, b, c)`, so the GEMM accumulates
//! into `c` (copied, broadcast, or in place when `c` dies there) instead of writing a product
//! that a separate add reads back. `matmul_add(a, b, c) + d` becomes `matmul_add(a, b, c + d)`,
//! so chains like `x @ Wx + h @ Wh + b` and gradient accumulations `sum_t h_t^T @ dg_t` become
//! GEMMs accumulating into one buffer. (Reassociation changes rounding in the last bits.)

use super::{PassStats, Rewriter};
use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{BinaryOp, Op};
use crate::shape::broadcast_shapes;
use smallvec::smallvec;

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let old_uses = g.use_counts();
    let mut r = Rewriter::new(&g);
    let mut uses: Vec<usize> = Vec::new(); // by new node id
    for (i, &old_use) in old_uses.iter().enumerate() {
        let node = r.remapped(i);
        let id = match &node.op {
            NodeOp::Op(Op::Binary(BinaryOp::Add)) => {
                let (x, y) = (node.inputs[0], node.inputs[1]);
                add(&mut r.b, &uses, &node, x, y).unwrap_or_else(|| r.b.push(node.clone()))
            }
            _ => r.b.push(node),
        };
        r.map[i] = Some(id);
        uses.resize(r.b.len(), 1);
        uses[id.index()] = old_use;
    }
    // Rewritten chains leave their intermediate nodes dead; drop them before counting.
    let g = super::dce::run(r.finish(), &mut PassStats::default());
    stats.add("epilogue.matmul_add", g.nodes.iter().filter(|n| n.op == NodeOp::MatMulAdd).count());
    g
}

/// `x + y` as a matmul epilogue, if one operand is a single-use matmul (or matmul_add) of the
/// result's shape.
fn add(b: &mut GraphBuilder, uses: &[usize], n: &Node, x: NodeId, y: NodeId) -> Option<NodeId> {
    let single = |id: NodeId| uses.get(id.index()).copied().unwrap_or(1) == 1;
    // The GEMM applied last should be the one whose operands are ready last (largest operand
    // id): then `x @ Wx + h @ Wh + b` accumulates `h @ Wh` onto `x @ Wx + b`, and the input
    // projection stays off an RNN's recurrent critical path.
    let ready = |id: NodeId| b.node(id).inputs.iter().map(|a| a.index()).max().unwrap_or(0);
    let order = if ready(y) > ready(x) { [(y, x), (x, y)] } else { [(x, y), (y, x)] };
    for (m, c) in order {
        let mn = b.node(m);
        if !single(m) || mn.ty != n.ty || b.node(c).ty.dtype != n.ty.dtype {
            continue;
        }
        if broadcast_shapes(&b.node(c).ty.shape, &n.ty.shape).as_ref() != Some(&n.ty.shape) {
            continue;
        }
        match &mn.op {
            NodeOp::Op(Op::MatMul) => {
                let (a, bb) = (mn.inputs[0], mn.inputs[1]);
                return Some(b.push(Node {
                    op: NodeOp::MatMulAdd,
                    inputs: smallvec![a, bb, c],
                    ty: n.ty.clone(),
                    span: n.span,
                }));
            }
            NodeOp::MatMulAdd => {
                let (a, bb, c0) = (mn.inputs[0], mn.inputs[1], mn.inputs[2]);
                // (a @ b + c0) + c  ==  a @ b + (c0 + c); the inner add may chain further.
                let ty = crate::ops::TensorType {
                    shape: broadcast_shapes(&b.node(c0).ty.shape, &b.node(c).ty.shape)?,
                    dtype: n.ty.dtype,
                };
                let inner = Node {
                    op: NodeOp::Op(Op::Binary(BinaryOp::Add)),
                    inputs: smallvec![c0, c],
                    ty,
                    span: n.span,
                };
                let inner_id = add(b, uses, &inner, c0, c).unwrap_or_else(|| b.push(inner));
                return Some(b.push(Node {
                    op: NodeOp::MatMulAdd,
                    inputs: smallvec![a, bb, inner_id],
                    ty: n.ty.clone(),
                    span: n.span,
                }));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn lstm_gate_sum_becomes_two_accumulating_gemms() {
        let ins = [
            Tensor::ones([2, 3]),
            Tensor::ones([3, 8]),
            Tensor::ones([2, 4]),
            Tensor::ones([4, 8]),
            Tensor::ones([8]),
        ];
        let g = trace(&ins, |x| vec![x[0].matmul(&x[1]) + x[2].matmul(&x[3]) + &x[4]]);
        let mut s = PassStats::default();
        let out = crate::passes::dce::run(run(g, &mut s), &mut s);
        assert_eq!(
            (count(&out, "matmul_add"), count(&out, "matmul"), count(&out, "add")),
            (2, 0, 0),
            "{out}"
        );
        assert!(s.get("epilogue.matmul_add") >= 1);
    }
}
