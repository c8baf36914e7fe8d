//! Dead-code elimination: drops nodes no output depends on (graph inputs always stay, so the
//! signature is unchanged; projections of a live fused group stay with it).

use super::{PassStats, Rewriter};
use crate::graph::{Graph, NodeId, NodeOp};

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    run_mapped(g, stats).0
}

/// [`run`], also returning each old node's new id (`None` for a dropped node).
pub(crate) fn run_mapped(g: Graph, stats: &mut PassStats) -> (Graph, Vec<Option<NodeId>>) {
    let n = g.nodes.len();
    let mut live = vec![false; n];
    for o in &g.outputs {
        live[o.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for a in &g.nodes[i].inputs {
                live[a.index()] = true;
            }
        }
    }
    for (i, node) in g.nodes.iter().enumerate() {
        let keep = matches!(node.op, NodeOp::Input(_))
            || matches!(node.op, NodeOp::Project(_)) && live[node.inputs[0].index()];
        live[i] |= keep;
    }
    let removed = live.iter().filter(|l| !**l).count();
    if removed == 0 {
        let same = (0..n).map(|i| Some(NodeId(i as u32))).collect();
        return (g, same);
    }
    stats.add("dce.removed", removed);
    let mut r = Rewriter::new(&g);
    for (i, _) in live.iter().enumerate().filter(|(_, l)| **l) {
        r.copy(i);
    }
    let map = r.map.clone();
    (r.finish(), map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn removes_unused_work_and_keeps_inputs() {
        let g = trace(&[Tensor::ones([3]), Tensor::ones([3])], |x| {
            let _unused = x[0].exp().tanh();
            vec![&x[0] + 1.0]
        });
        let mut s = PassStats::default();
        let out = run(g, &mut s);
        assert_eq!(s.get("dce.removed"), 2);
        assert_eq!((count(&out, "exp"), count(&out, "input")), (0, 2));
    }
}
