//! Loop bodies: each loop node's body is optimised with the whole pipeline (recursively, for
//! loops inside it), keeping its inputs and outputs. The loop itself is opaque to the other
//! passes.
//!
//! (Splitting a loop's tail off into a second loop and hoisting its per-trip products with
//! weights out of the loop as one GEMM each was tried: on the issue-14 LSTM at T=129, B=18 it
//! measured 22.0-22.4 ms per step against 19.3-20.1 without. The hoisted products, with K = 65
//! and 128, ran no faster than the per-trip ones, and left the body's two workers less to
//! overlap.)

use super::{PassStats, optimize};
use crate::graph::loops::LoopIn;
use crate::graph::{Graph, NodeOp};
use std::sync::Arc;

pub(crate) fn run(mut g: Graph, stats: &mut PassStats) -> Graph {
    for n in &mut g.nodes {
        if let NodeOp::Loop(spec) = &mut n.op {
            let mut s = (**spec).clone();
            let invariant = s.ins.iter().map(|k| *k == LoopIn::Invariant).collect();
            let body = std::mem::replace(&mut s.body, Graph::empty());
            let (body, body_stats) =
                super::gemm_operands::with_invariant_inputs(invariant, || optimize(body));
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
