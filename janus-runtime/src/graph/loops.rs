//! Loop nodes: a body graph run once per trip, with carried values, values that stay the same
//! on every trip, and values sliced per trip from a stacked operand (as `lax.scan`). A loop
//! node is a rolled loop: the graph holds its body once whatever the trip count, so compiling
//! costs the same for 10 trips or 10,000, and the trip count is a size like any other (a
//! shape-polymorphic graph generalises over it).
//!
//! The node's operands are one per body input, in order: the first trip's value of a carried
//! input, the value of an invariant one, and `[trips, ...]` stacked slices of a sliced one.
//! Its outputs are the first [`LoopSpec::finals`] body outputs as the last trip left them,
//! then one `[trips, ...]` stack per entry of [`LoopSpec::stacked`]: that body output on every
//! trip. Output 0 is the node's own value, output `k >= 1` a [`NodeOp::Project`](super::NodeOp::Project) of it.
//!
//! Derivation (`grad_graph`) turns a loop into a forward loop that also stacks the residuals
//! its body's backward needs, and a backward loop over the trips in reverse.

use super::{Graph, Node};
use crate::ops::TensorType;
use std::hash::{Hash, Hasher};

/// How a loop body reads one of its inputs on each trip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopIn {
    /// The operand, the same on every trip.
    Invariant,
    /// The operand on the first trip; on later trips, body output `from` of the trip before.
    Carried {
        /// The body output that feeds it.
        from: usize,
    },
    /// Slice `t` (along the first dimension) of the `[trips, ...]` operand on trip `t`.
    Sliced,
}

/// A loop node's parameters (see the module docs).
#[derive(Clone, Debug)]
pub struct LoopSpec {
    /// One trip: inputs as [`LoopSpec::ins`] says, outputs as the module docs say.
    pub body: Graph,
    /// Trips per run (at least 1).
    pub trips: usize,
    /// Per body input, how each trip reads it.
    pub ins: Vec<LoopIn>,
    /// Body outputs `0..finals` leave the loop with their last trip's values.
    pub finals: usize,
    /// Body outputs collected over the trips, each a `[trips, ...]` loop output.
    pub stacked: Vec<usize>,
    /// Trips run from `trips - 1` down to 0 (a backward loop). Trip `t` still reads slice `t`
    /// and writes slice `t` of the stacks; the final values are trip 0's.
    pub reverse: bool,
}

impl LoopSpec {
    /// The loop node's output types: the finals, then the stacks.
    pub fn out_types(&self) -> Vec<TensorType> {
        let body_ty = |j: usize| self.body.node(self.body.outputs[j]).ty.clone();
        let mut v: Vec<TensorType> = (0..self.finals).map(body_ty).collect();
        v.extend(self.stacked.iter().map(|&j| stacked_type(&body_ty(j), self.trips)));
        v
    }

    /// The operand type body input `k` needs.
    pub fn operand_type(&self, k: usize) -> TensorType {
        let t = &self.body.inputs[k].ty;
        match self.ins[k] {
            LoopIn::Sliced => stacked_type(t, self.trips),
            _ => t.clone(),
        }
    }

    /// Consistency of the spec with the node `n` that holds it in `g`.
    pub(crate) fn check(&self, n: &Node, g: &Graph) -> Result<(), String> {
        let b = &self.body;
        if self.trips == 0 {
            return Err("a loop runs at least one trip".into());
        }
        if self.ins.len() != b.inputs.len() || n.inputs.len() != b.inputs.len() {
            return Err(format!(
                "loop has {} operands and {} input kinds for a body of {} inputs",
                n.inputs.len(),
                self.ins.len(),
                b.inputs.len()
            ));
        }
        if self.finals > b.outputs.len() || self.stacked.iter().any(|&j| j >= b.outputs.len()) {
            return Err("loop output names a body output that does not exist".into());
        }
        if self.finals + self.stacked.len() == 0 {
            return Err("loop has no outputs".into());
        }
        if b.rng.is_some() {
            return Err("loop body draws random numbers".into());
        }
        for (k, a) in n.inputs.iter().enumerate() {
            let want = self.operand_type(k);
            if g.node(*a).ty != want {
                return Err(format!("loop operand {k} is {:?}, the body needs {want:?}", g.node(*a).ty));
            }
            if let LoopIn::Carried { from } = self.ins[k]
                && (from >= b.outputs.len() || b.node(b.outputs[from]).ty != b.inputs[k].ty)
            {
                return Err(format!("carried input {k} is not fed by a body output of its type"));
            }
        }
        if self.out_types().first() != Some(&n.ty) {
            return Err("loop node type differs from its output 0".into());
        }
        super::verify(b).map_err(|e| format!("loop body: {e}"))
    }

    /// Whether `self` and `other` are the same loop (bodies compared node by node, spans
    /// aside).
    fn same(&self, other: &LoopSpec) -> bool {
        self.trips == other.trips
            && self.ins == other.ins
            && self.finals == other.finals
            && self.stacked == other.stacked
            && self.reverse == other.reverse
            && same_graph(&self.body, &other.body)
    }
}

/// `[trips] ++ t.shape`.
pub(crate) fn stacked_type(t: &TensorType, trips: usize) -> TensorType {
    let mut dims = vec![trips];
    dims.extend(t.shape.iter());
    TensorType { shape: dims.into(), dtype: t.dtype }
}

/// Two graphs with the same inputs, nodes (ops, operands, types) and outputs.
pub(crate) fn same_graph(a: &Graph, b: &Graph) -> bool {
    a.inputs == b.inputs
        && a.outputs == b.outputs
        && a.rng == b.rng
        && a.nodes.len() == b.nodes.len()
        && a.nodes.iter().zip(&b.nodes).all(|(x, y)| x.op == y.op && x.inputs == y.inputs && x.ty == y.ty)
}

impl PartialEq for LoopSpec {
    fn eq(&self, other: &Self) -> bool {
        self.same(other)
    }
}

impl Eq for LoopSpec {}

impl Hash for LoopSpec {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (self.trips, &self.ins, self.finals, &self.stacked, self.reverse).hash(h);
        self.body.inputs.hash(h);
        self.body.outputs.hash(h);
        for n in &self.body.nodes {
            (&n.op, &n.inputs, &n.ty).hash(h);
        }
    }
}

/// A one-line summary, e.g. `{12 trips, 3 carried, 2 invariant, 1 sliced; 9 body ops}`.
pub(crate) fn describe(s: &LoopSpec) -> String {
    let count = |f: fn(&LoopIn) -> bool| s.ins.iter().filter(|k| f(k)).count();
    format!(
        "{{{} trips{}, {} carried, {} invariant, {} sliced; {} finals, {} stacked; {} body ops}}",
        s.trips,
        if s.reverse { " in reverse" } else { "" },
        count(|k| matches!(k, LoopIn::Carried { .. })),
        count(|k| *k == LoopIn::Invariant),
        count(|k| *k == LoopIn::Sliced),
        s.finals,
        s.stacked.len(),
        s.body.op_count()
    )
}
