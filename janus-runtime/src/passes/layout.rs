//! Operand layouts for GEMM: a right-hand operand that is a transposed view (column-major) is
//! copied to row-major once, right after the transpose, and every GEMM using it reads the copy.
//! The `gemm` crate packs a column-major right-hand side slowly: `[32x512] @ [512x128]` ran at
//! 62 GFLOP/s from `W^T` against 216 from a row-major copy here, and an RNN uses the same
//! `W^T` at every time step.

use super::{PassStats, Rewriter};
use crate::graph::{Graph, Node, NodeOp};
use crate::ops::{Op, Reshape};
use smallvec::smallvec;
use std::collections::{HashMap, HashSet};

/// Whether `n` swaps the last two dimensions of its operand.
fn is_transpose(n: &Node) -> bool {
    match &n.op {
        NodeOp::Op(Op::Permute(p)) => {
            let r = p.perm.len();
            r >= 2 && p.perm[r - 1] == r - 2 && p.perm[r - 2] == r - 1 && (0..r - 2).all(|i| p.perm[i] == i)
        }
        _ => false,
    }
}

fn is_gemm(n: &Node) -> bool {
    matches!(n.op, NodeOp::Op(Op::MatMul) | NodeOp::MatMulAdd)
}

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let rhs: HashSet<usize> = g
        .nodes
        .iter()
        .filter(|n| is_gemm(n) && is_transpose(g.node(n.inputs[1])))
        .map(|n| n.inputs[1].index())
        .collect();
    if rhs.is_empty() {
        return g;
    }
    let mut r = Rewriter::new(&g);
    let mut dense = HashMap::new();
    for i in 0..g.nodes.len() {
        let mut node = r.remapped(i);
        if is_gemm(&node)
            && let Some(&d) = dense.get(&g.nodes[i].inputs[1].index())
        {
            node.inputs[1] = d;
        }
        let id = r.b.push(node);
        r.map[i] = Some(id);
        if rhs.contains(&i) {
            // A reshape to the same shape of a non-contiguous value lowers to a copy.
            let ty = g.nodes[i].ty.clone();
            let copy = Node {
                op: NodeOp::Op(Op::Reshape(Reshape { shape: ty.shape.clone() })),
                inputs: smallvec![id],
                ty,
                span: g.nodes[i].span,
            };
            dense.insert(i, r.b.push(copy));
        }
    }
    stats.add("layout.dense_rhs", dense.len());
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn shared_transposed_rhs_is_copied_once() {
        let g = trace(&[Tensor::ones([4, 8]), Tensor::ones([6, 8])], |x| {
            let wt = x[1].t();
            vec![x[0].matmul(&wt), (&x[0] * 2.0).matmul(&wt)]
        });
        let mut s = PassStats::default();
        let out = run(crate::passes::cse::run(g, &mut s), &mut s);
        assert_eq!((s.get("layout.dense_rhs"), count(&out, "reshape")), (1, 1), "{out}");
    }
}
