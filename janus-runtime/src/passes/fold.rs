//! Constant folding: a primitive node whose operands are all constants is evaluated at compile
//! time (up to [`FOLD_LIMIT`] elements) and replaced by a constant, or by a compact fill when
//! every element is equal.

use super::{PassStats, Rewriter};
use crate::DType;
use crate::eager::eval;
use crate::graph::{Graph, Node, NodeOp};
use crate::ops::{Constant, F64Bits, Full, Op};
use crate::tensor::Tensor;
use smallvec::SmallVec;

/// Largest result (in elements) folded into the graph.
pub(crate) const FOLD_LIMIT: usize = 1 << 16;

fn is_source(op: &Op) -> bool {
    matches!(op, Op::Full(_) | Op::Constant(_) | Op::Arange(_))
}

/// The node replacing a folded value: a fill when all elements are equal, else literal data.
fn constant_node(t: &Tensor, span: Option<&'static std::panic::Location<'static>>) -> Node {
    let ty = crate::ops::TensorType { shape: t.shape_ref().clone(), dtype: t.dtype() };
    // A fill stores its value as an `f64`: `i64` values are compared natively and must survive
    // the round trip.
    let uniform = if t.dtype() == DType::I64 {
        let vals = t.to_vec::<i64>();
        vals.first()
            .copied()
            .filter(|&v| vals.iter().all(|&x| x == v) && (v as f64) as i64 == v)
            .map(|v| v as f64)
    } else {
        let vals = t.to_vec::<f64>();
        vals.first().copied().filter(|v| vals.iter().all(|x| x.to_bits() == v.to_bits()))
    };
    let op = match uniform {
        Some(v) => Op::Full(Full {
            shape: ty.shape.clone(),
            dtype: ty.dtype,
            value: F64Bits::new(v),
            device: t.device(),
        }),
        None => {
            let buf = janus_kernels::with_any_type!(t.dtype(), T => {
                janus_kernels::buffer::Stored::wrap(t.to_vec::<T>())
            });
            Op::Constant(Constant {
                data: crate::storage::SharedBuffer::new(buf),
                shape: ty.shape.clone(),
                device: t.device(),
            })
        }
    };
    Node { op: NodeOp::Op(op), inputs: SmallVec::new(), ty, span }
}

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let mut r = Rewriter::new(&g);
    let mut values: Vec<Option<Tensor>> = vec![None; g.nodes.len()];
    let mut folded = 0;
    for i in 0..g.nodes.len() {
        let node = &g.nodes[i];
        let small = node.ty.shape.elems() <= FOLD_LIMIT;
        if let NodeOp::Op(op) = &node.op
            && small
        {
            if is_source(op) {
                values[i] = Some(eval(op, &[]));
            } else if !node.inputs.is_empty() && node.inputs.iter().all(|a| values[a.index()].is_some()) {
                let args: Vec<&Tensor> =
                    node.inputs.iter().map(|a| values[a.index()].as_ref().unwrap()).collect();
                let v = eval(op, &args);
                let id = r.b.push(constant_node(&v, node.span));
                r.map[i] = Some(id);
                values[i] = Some(v);
                folded += 1;
                continue;
            }
        }
        r.copy(i);
    }
    stats.add("fold.folded", folded);
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passes::testing::{count, trace};

    #[test]
    fn folds_constant_subgraphs_into_fills_and_literals() {
        let g = trace(&[Tensor::ones([3])], |x| {
            let c = (Tensor::full([3], 2.0) * 3.0).exp(); // uniform: becomes one fill
            let r = Tensor::arange(3).to_dtype(crate::DType::F32) + 1.0; // [1, 2, 3]: a literal
            vec![&x[0] * c + r]
        });
        let mut s = PassStats::default();
        let out = crate::passes::dce::run(run(g, &mut s), &mut s);
        assert_eq!(s.get("fold.folded"), 4); // mul, exp, cast, add
        assert_eq!((count(&out, "exp"), count(&out, "arange"), count(&out, "constant")), (0, 0, 1));
    }
}
