//! Graph optimisation passes, each in its own module with its own tests, run in the order of
//! [`default_pipeline`]. Every pass counts what it did in [`PassStats`], so tests assert that a
//! pass acted (not just that values survived it). Between passes the verifier runs when
//! verification is on (debug builds, or [`set_verify_graphs`]).

mod cse;
pub(crate) mod dce;
mod epilogue;
mod fold;
mod fuse;
mod gemm_operands;
mod loops;
mod simplify;

use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Counters of what the passes did, keyed `pass.counter` (e.g. `dce.removed`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    /// The counters.
    pub counts: BTreeMap<&'static str, usize>,
}

impl PassStats {
    /// Adds `n` to counter `key`.
    pub fn add(&mut self, key: &'static str, n: usize) {
        *self.counts.entry(key).or_default() += n;
    }

    /// The value of counter `key` (0 if never counted).
    pub fn get(&self, key: &str) -> usize {
        self.counts.get(key).copied().unwrap_or(0)
    }
}

/// A graph-to-graph pass.
pub type Pass = fn(Graph, &mut PassStats) -> Graph;

/// The passes, in order.
pub fn default_pipeline() -> Vec<(&'static str, Pass)> {
    vec![
        ("loops", loops::run),       // loop bodies -> this pipeline, each
        ("simplify", simplify::run), // identities, view chains, pad-sums -> cat
        ("fold", fold::run),         // constant subgraphs -> constants
        ("cse", cse::run),           // identical nodes -> one
        ("dce", dce::run),           // unreachable nodes -> gone
        ("epilogue", epilogue::run), // add(matmul, c) -> matmul_add (GEMM accumulates)
        ("fuse", fuse::run),         // elementwise chains -> fused register programs
        ("dce", dce::run),
        ("gemm_operands", gemm_operands::run), // transposed GEMM right-hand sides -> one row-major copy
        ("dce", dce::run),                     // the transposes that gemm_operands left unread
    ]
}

static VERIFY: AtomicBool = AtomicBool::new(false);

/// Turns graph verification between passes on (it is also on in debug builds and with
/// `JANUS_VERIFY=1`).
pub fn set_verify_graphs(on: bool) {
    VERIFY.store(on, Ordering::Relaxed);
}

/// Whether graphs are verified between passes (and executor memory plans checked, see
/// `exec::memory::check`): in debug builds, after [`set_verify_graphs`] or with `JANUS_VERIFY=1`.
pub(crate) fn verifying() -> bool {
    VERIFY.load(Ordering::Relaxed) || crate::config::config().verify
}

/// Runs [`default_pipeline`] on `g`.
pub fn optimize(g: Graph) -> (Graph, PassStats) {
    let mut stats = PassStats::default();
    let verify = verifying();
    let mut g = g;
    if verify {
        check(&g, "the recording");
    }
    for (name, pass) in default_pipeline() {
        g = pass(g, &mut stats);
        if verify {
            check(&g, name);
        }
    }
    (g, stats)
}

fn check(g: &Graph, after: &str) {
    if let Err(e) = crate::graph::verify(g) {
        panic!("janus internal error: invalid graph after {after}:\n{e}");
    }
}

/// Rebuilds a graph node by node, mapping old node ids to new ones.
pub(crate) struct Rewriter<'g> {
    pub(crate) old: &'g Graph,
    pub(crate) b: GraphBuilder,
    pub(crate) map: Vec<Option<NodeId>>,
}

impl<'g> Rewriter<'g> {
    pub(crate) fn new(old: &'g Graph) -> Self {
        Rewriter { old, b: GraphBuilder::like(old), map: vec![None; old.nodes.len()] }
    }

    /// The new id of old node `id`.
    pub(crate) fn get(&self, id: NodeId) -> NodeId {
        self.map[id.index()].expect("operands are rewritten before their users")
    }

    /// Old node `i` with remapped operands (not yet pushed).
    pub(crate) fn remapped(&self, i: usize) -> Node {
        let mut n = self.old.nodes[i].clone();
        for a in n.inputs.iter_mut() {
            *a = self.get(*a);
        }
        n
    }

    /// Copies old node `i` unchanged (operands remapped).
    pub(crate) fn copy(&mut self, i: usize) -> NodeId {
        let n = self.remapped(i);
        let id = self.b.push(n);
        self.map[i] = Some(id);
        id
    }

    pub(crate) fn finish(self) -> Graph {
        let outs = self.old.outputs.iter().map(|o| self.get(*o)).collect();
        self.b.finish(outs)
    }
}

/// Whether `n` is a constant fill with every element equal to `v`.
pub(crate) fn is_full_of(n: &Node, v: f64) -> bool {
    matches!(&n.op, NodeOp::Op(crate::ops::Op::Full(f)) if f.value.get() == v)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Building graphs for pass tests by tracing small functions.
    use crate::graph::Graph;
    use crate::tensor::Tensor;

    /// Records `f` over `inputs` (registered as `x0`, `x1`, ...).
    pub(crate) fn trace(inputs: &[Tensor], f: impl FnOnce(&[Tensor]) -> Vec<Tensor>) -> Graph {
        let rec = crate::trace::start();
        for (i, t) in inputs.iter().enumerate() {
            rec.register_input(t, format!("x{i}"));
        }
        let outs = f(inputs);
        let refs: Vec<&Tensor> = outs.iter().collect();
        rec.finish(&refs).expect("usable recording")
    }

    /// Count of nodes whose op name is `name`.
    pub(crate) fn count(g: &Graph, name: &str) -> usize {
        g.nodes.iter().filter(|n| n.op.name() == name).count()
    }
}
