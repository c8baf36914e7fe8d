//! The graph IR: a DAG of typed nodes with named inputs and outputs, built through a mutable
//! [`GraphBuilder`] and frozen into an immutable [`Graph`]. Ops are the runtime's own [`Op`]
//! (named-field `Hash + Eq` parameters), so a graph doubles as its own cache key.

pub(crate) mod dump;
mod export;
pub mod fused;
pub mod generic;
pub mod loops;
mod verify;

pub use verify::verify;

use crate::ops::{Op, TensorType};
use smallvec::SmallVec;
use std::panic::Location;
use std::sync::Arc;

/// Index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeOp {
    /// Graph input number `index`.
    Input(usize),
    /// A primitive op of the runtime's op table.
    Op(Op),
    /// The random-stream state `i64[2] = (key, counter + offset)`, from the graph's stream input.
    RngState {
        /// Philox blocks consumed by earlier random ops of this graph.
        offset: u64,
    },
    /// A fused elementwise group (made by the fusion pass); its value is the group's output 0.
    Fused(Arc<crate::graph::fused::FusedProgram>),
    /// Output `k` (k >= 1) of the multi-output node that is its only operand.
    Project(usize),
    /// `a @ b + c` with `c` broadcast to the product's shape (made by the epilogue pass): the
    /// GEMM accumulates into `c`'s values instead of a separate add.
    MatMulAdd,
    /// A rolled loop (see [`loops`]); its value is its output 0.
    Loop(Arc<loops::LoopSpec>),
}

impl NodeOp {
    /// Short name for printing.
    pub fn name(&self) -> &'static str {
        match self {
            NodeOp::Input(_) => "input",
            NodeOp::Op(op) => op.name(),
            NodeOp::RngState { .. } => "rng_state",
            NodeOp::Fused(_) => "fused",
            NodeOp::Project(_) => "project",
            NodeOp::MatMulAdd => "matmul_add",
            NodeOp::Loop(_) => "loop",
        }
    }

    /// The primitive op, if this is one.
    pub fn as_op(&self) -> Option<&Op> {
        match self {
            NodeOp::Op(op) => Some(op),
            _ => None,
        }
    }
}

/// One node: its op, operand nodes, result type and the source location that created it.
#[derive(Clone, Debug)]
pub struct Node {
    /// What it computes.
    pub op: NodeOp,
    /// Operands, earlier nodes.
    pub inputs: SmallVec<[NodeId; 4]>,
    /// Result shape and dtype.
    pub ty: TensorType,
    /// The user's call that created it, when known.
    pub span: Option<&'static Location<'static>>,
}

/// The first difference between two recordings.
#[derive(Clone, Copy, Debug)]
pub struct GraphDiff {
    /// Index of the first differing node.
    pub node: usize,
    /// Its source location, when known.
    pub span: Option<&'static Location<'static>>,
    /// Whether the nodes are constants of one type that differ only in value.
    pub constant_only: bool,
}

/// A named graph input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GraphInput {
    /// Where the value comes from (`xs[t]`, `m.wx`, `rng`, `cotangent 0`).
    pub name: String,
    /// Its type.
    pub ty: TensorType,
}

/// Which input carries the random-stream state, and how many Philox blocks a run consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RngUse {
    /// Index of the `i64[2]` stream-state input.
    pub input: usize,
    /// Blocks consumed by one run; the caller advances its stream by this much.
    pub blocks: u64,
}

/// An immutable graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// Nodes in topological order (operands before users).
    pub nodes: Vec<Node>,
    /// Inputs; node `Input(i)` reads `inputs[i]`.
    pub inputs: Vec<GraphInput>,
    /// Output nodes, in order.
    pub outputs: Vec<NodeId>,
    /// Random-stream use, if any op draws random numbers.
    pub rng: Option<RngUse>,
}

impl Graph {
    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// Number of nodes that are not inputs.
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| !matches!(n.op, NodeOp::Input(_))).count()
    }

    /// How many times each node is used (as an operand or an output).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut uses = vec![0; self.nodes.len()];
        for n in &self.nodes {
            for i in &n.inputs {
                uses[i.index()] += 1;
            }
        }
        for o in &self.outputs {
            uses[o.index()] += 1;
        }
        uses
    }

    /// Where two recordings differ: the first differing node (and whether only a constant's value
    /// differs there), or `None` if they are the same graph.
    pub fn diff(&self, other: &Graph) -> Option<GraphDiff> {
        if self.inputs != other.inputs || self.rng != other.rng {
            return Some(GraphDiff { node: 0, span: None, constant_only: false });
        }
        for (i, (a, b)) in self.nodes.iter().zip(&other.nodes).enumerate() {
            if a.op != b.op || a.inputs != b.inputs || a.ty != b.ty {
                let is_const = |n: &Node| {
                    matches!(n.op, NodeOp::Op(crate::ops::Op::Full(_) | crate::ops::Op::Constant(_)))
                };
                let constant_only = is_const(a) && is_const(b) && a.ty == b.ty;
                return Some(GraphDiff { node: i, span: a.span.or(b.span), constant_only });
            }
        }
        if self.nodes.len() != other.nodes.len() || self.outputs != other.outputs {
            let node = self.nodes.len().min(other.nodes.len());
            return Some(GraphDiff { node, span: None, constant_only: false });
        }
        None
    }

    /// A graph with no inputs, nodes or outputs.
    pub fn empty() -> Graph {
        Graph { nodes: Vec::new(), inputs: Vec::new(), outputs: Vec::new(), rng: None }
    }

    /// A builder holding a copy of this graph (node ids unchanged).
    pub fn to_builder(&self) -> GraphBuilder {
        GraphBuilder { nodes: self.nodes.clone(), inputs: self.inputs.clone(), rng: self.rng }
    }
}

/// Builds a graph node by node.
#[derive(Clone, Debug, Default)]
pub struct GraphBuilder {
    nodes: Vec<Node>,
    inputs: Vec<GraphInput>,
    rng: Option<RngUse>,
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input and returns its node.
    pub fn input(&mut self, name: impl Into<String>, ty: TensorType) -> NodeId {
        let index = self.inputs.len();
        self.inputs.push(GraphInput { name: name.into(), ty: ty.clone() });
        self.push(Node { op: NodeOp::Input(index), inputs: SmallVec::new(), ty, span: None })
    }

    /// Adds a node (operands must already exist).
    pub fn push(&mut self, node: Node) -> NodeId {
        debug_assert!(node.inputs.iter().all(|i| i.index() < self.nodes.len()), "operands precede users");
        self.nodes.push(node);
        NodeId(self.nodes.len() as u32 - 1)
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// Number of nodes so far.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node was added.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The random-stream input, created on first use; returns its node.
    pub(crate) fn rng_input(&mut self) -> NodeId {
        if let Some(r) = self.rng {
            return self
                .nodes
                .iter()
                .position(|n| n.op == NodeOp::Input(r.input))
                .map(|i| NodeId(i as u32))
                .unwrap();
        }
        let ty = TensorType { shape: [2].into(), dtype: crate::DType::I64 };
        let id = self.input("rng", ty);
        self.rng = Some(RngUse { input: self.inputs.len() - 1, blocks: 0 });
        id
    }

    /// Records that random ops consumed `blocks` more Philox blocks; returns the offset before.
    pub(crate) fn consume_rng(&mut self, blocks: u64) -> u64 {
        let r = self.rng.as_mut().expect("rng_input was created");
        let before = r.blocks;
        r.blocks += blocks;
        before
    }

    /// A builder with `g`'s inputs and stream use but no nodes: input nodes are pushed by the
    /// caller (as copies of `g`'s).
    pub(crate) fn like(g: &Graph) -> Self {
        GraphBuilder { nodes: Vec::new(), inputs: g.inputs.clone(), rng: g.rng }
    }

    /// Freezes the graph with these outputs.
    pub fn finish(self, outputs: Vec<NodeId>) -> Graph {
        Graph { nodes: self.nodes, inputs: self.inputs, outputs, rng: self.rng }
    }
}
