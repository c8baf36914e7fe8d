//! Loop bodies: each loop node's body is optimised with the whole pipeline (recursively, for
//! loops inside it), keeping its inputs and outputs. The loop itself is opaque to the other
//! passes.

use super::{PassStats, optimize};
use crate::graph::{Graph, NodeOp};
use std::sync::Arc;

pub(crate) fn run(mut g: Graph, stats: &mut PassStats) -> Graph {
    for n in &mut g.nodes {
        if let NodeOp::Loop(spec) = &mut n.op {
            let mut s = (**spec).clone();
            let (body, body_stats) = optimize(std::mem::replace(&mut s.body, Graph::empty()));
            s.body = body;
            for (k, v) in body_stats.counts {
                stats.add(k, v);
            }
            stats.add("loops.bodies", 1);
            *spec = Arc::new(s);
        }
    }
    g
}
