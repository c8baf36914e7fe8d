//! Common-subexpression elimination: nodes with the same op (parameters included) and the same
//! operands compute the same value once. Random ops are safe to merge: their values are a pure
//! function of their stream-state operand.

use super::{PassStats, Rewriter};
use crate::graph::{Graph, NodeId, NodeOp};
use smallvec::SmallVec;
use std::collections::HashMap;

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let mut r = Rewriter::new(&g);
    let mut seen: HashMap<(NodeOp, SmallVec<[NodeId; 4]>), NodeId> = HashMap::new();
    let mut merged = 0;
    for i in 0..g.nodes.len() {
        let n = r.remapped(i);
        if matches!(n.op, NodeOp::Input(_)) {
            r.copy(i);
            continue;
        }
        let key = (n.op.clone(), n.inputs.clone());
        match seen.get(&key) {
            Some(&id) => {
                r.map[i] = Some(id);
                merged += 1;
            }
            None => {
                let id = r.b.push(n);
                r.map[i] = Some(id);
                seen.insert(key, id);
            }
        }
    }
    stats.add("cse.merged", merged);
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn merges_repeated_computations() {
        let g = trace(&[Tensor::ones([4])], |x| vec![x[0].exp() * 2.0 + x[0].exp() * 2.0]);
        let mut s = PassStats::default();
        let out = crate::passes::dce::run(run(g, &mut s), &mut s);
        assert_eq!(s.get("cse.merged"), 3); // exp, the scalar 2.0, and the product
        assert_eq!(count(&out, "exp"), 1);
    }
}
