//! Lowering an optimised graph to executor steps (device-independent: both backends run them).
//!
//! Every node gets a *value*: a region of a buffer plus a strided layout. Inputs and constants
//! are their tensors' buffers; views (`reshape` of contiguous data, `permute`, `narrow`,
//! `broadcast_to`) reuse their operand's buffer with a new layout; everything else is computed
//! by a step into a buffer of its own. Values that reach the graph's outputs get fresh output
//! buffers each run; the rest live in a per-dtype arena whose ranges are reused once a value's
//! last reader has run, and a `matmul_add` whose addend dies there accumulates in place (the
//! memory plan, `memory.rs`).

use super::memory::MemoryPlan;
use crate::DType;
use crate::graph::fused::FusedProgram;
use crate::graph::{Graph, NodeOp};
use crate::ops::{Op, eval};
use crate::shape::{Shape, Strides};
use crate::tensor::Tensor;
use janus_kernels::reduce::ReduceDims;
use smallvec::SmallVec;
use std::sync::Arc;

/// Which buffer a value lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BufRef {
    /// Input `k` (made contiguous at the start of a run).
    Input(usize),
    /// Constant `k`, evaluated at compile time.
    Const(usize),
    /// The arena of the value's dtype, from element `start`.
    Arena(usize),
    /// Output buffer `k`, allocated fresh each run.
    Output(usize),
    /// Memo `k`: a dense copy of a view of an input, cached by the input's identity.
    Memo(usize),
}

/// A value: its buffer region and its strided layout inside that region.
#[derive(Clone, Debug)]
pub(crate) struct ValRef {
    pub(crate) buf: BufRef,
    /// Elements of the region (the whole buffer for inputs, constants and outputs).
    pub(crate) len: usize,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) strides: Strides,
    pub(crate) offset: usize,
}

impl ValRef {
    /// The value's shape, strides and offset (within its buffer region).
    pub(crate) fn layout(&self) -> crate::layout::Layout<'_> {
        crate::layout::Layout::new(&self.shape, &self.strides, self.offset)
    }
}

/// What a step computes; operands and results are node indices (resolved to values at run).
#[derive(Clone, Debug)]
pub(crate) enum StepKind {
    Fused {
        prog: Arc<FusedProgram>,
        inputs: SmallVec<[usize; 4]>,
        outputs: SmallVec<[usize; 4]>,
        /// Per input, the strides reading it over the program's shape (filled in once the
        /// layouts are final, so that a run does not recompute them).
        reads: SmallVec<[Strides; 4]>,
    },
    MatMul {
        a: usize,
        b: usize,
        c: Option<usize>,
        out: usize,
    },
    Reduce {
        kind: ReduceKind,
        x: usize,
        dims: ReduceDims,
        out: usize,
    },
    Cat {
        dim: usize,
        parts: SmallVec<[usize; 4]>,
        out: usize,
    },
    Copy {
        x: usize,
        out: usize,
    },
    RngState {
        rng: usize,
        offset: u64,
        out: usize,
    },
    Random {
        normal: bool,
        state: usize,
        out: usize,
    },
    /// One category per row of dense weights `probs`.
    Multinomial {
        probs: usize,
        state: usize,
        out: usize,
    },
    Generic {
        op: Op,
        inputs: SmallVec<[usize; 4]>,
        out: usize,
    },
}

/// Reductions with a direct kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceKind {
    Sum,
    Max,
    Min,
    ArgMax,
    LogSumExp,
    Softmax,
    LogSoftmax,
}

impl StepKind {
    /// Operand nodes read.
    pub(crate) fn reads(&self) -> SmallVec<[usize; 4]> {
        match self {
            StepKind::Fused { inputs, .. } | StepKind::Generic { inputs, .. } => inputs.clone(),
            StepKind::Cat { parts, .. } => parts.clone(),
            StepKind::MatMul { a, b, c, .. } => {
                let mut r: SmallVec<[usize; 4]> = SmallVec::from_slice(&[*a, *b]);
                r.extend(c.iter().copied());
                r
            }
            StepKind::Reduce { x, .. } | StepKind::Copy { x, .. } => SmallVec::from_slice(&[*x]),
            StepKind::RngState { rng, .. } => SmallVec::from_slice(&[*rng]),
            StepKind::Random { state, .. } => SmallVec::from_slice(&[*state]),
            StepKind::Multinomial { probs, state, .. } => SmallVec::from_slice(&[*probs, *state]),
        }
    }

    /// Result nodes written.
    pub(crate) fn writes(&self) -> SmallVec<[usize; 4]> {
        match self {
            StepKind::Fused { outputs, .. } => outputs.clone(),
            StepKind::MatMul { out, .. }
            | StepKind::Reduce { out, .. }
            | StepKind::Cat { out, .. }
            | StepKind::Copy { out, .. }
            | StepKind::RngState { out, .. }
            | StepKind::Random { out, .. }
            | StepKind::Multinomial { out, .. }
            | StepKind::Generic { out, .. } => SmallVec::from_slice(&[*out]),
        }
    }
}

/// One unit of execution.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) kind: StepKind,
}

/// The lowered program: steps, one value per node, constants, outputs and the plan.
pub(crate) struct Lowered {
    pub(crate) steps: Vec<Step>,
    pub(crate) vals: Vec<Option<ValRef>>,
    pub(crate) consts: Vec<Tensor>,
    pub(crate) outputs: Vec<usize>,
    pub(crate) output_bufs: Vec<(DType, usize)>,
    pub(crate) plan: MemoryPlan,
    /// For each node, the node owning its buffer (itself unless it is a view).
    pub(crate) roots: Vec<usize>,
    /// Dense copies of input views (`(graph input, the viewed node)`), made
    /// before the steps run and reused while the same input tensor comes back.
    pub(crate) memos: Vec<(usize, usize)>,
}

/// Where a node's value is before buffers are assigned: the node owning the buffer and the
/// layout inside it.
#[derive(Clone)]
pub(crate) struct Placement {
    pub(crate) root: usize,
    pub(crate) strides: Strides,
    pub(crate) offset: usize,
}

fn dense(shape: &Shape) -> Strides {
    shape.contiguous_strides()
}

pub(crate) fn is_dense(l: &Placement, shape: &Shape) -> bool {
    crate::layout::Layout::new(shape, &l.strides, l.offset).is_dense()
}

// Long by design: one arm per node kind, in one pass that threads the layouts through.
pub(crate) fn lower(g: &Graph) -> Lowered {
    let n = g.nodes.len();
    let mut layout: Vec<Option<Placement>> = vec![None; n];
    let mut steps: Vec<Step> = Vec::new();
    let mut consts: Vec<Tensor> = Vec::new();
    let mut const_of: Vec<Option<usize>> = vec![None; n];
    let mut input_of: Vec<Option<usize>> = vec![None; n];
    let mut memo_of: Vec<Option<usize>> = vec![None; n];
    let mut memos: Vec<(usize, usize)> = Vec::new();
    let own = |i: usize, shape: &Shape| Some(Placement { root: i, strides: dense(shape), offset: 0 });
    for (i, node) in g.nodes.iter().enumerate() {
        let shape = &node.ty.shape;
        let arg = |k: usize| node.inputs[k].index();
        let lay = |k: usize| layout[arg(k)].clone().expect("operands precede users");
        let mut push = |kind: StepKind| steps.push(Step { kind });
        layout[i] = match &node.op {
            NodeOp::Input(k) => {
                input_of[i] = Some(*k);
                own(i, shape)
            }
            NodeOp::Op(op @ (Op::Full(_) | Op::Constant(_) | Op::Arange(_))) => {
                const_of[i] = Some(consts.len());
                consts.push(eval(op, &[]));
                own(i, shape)
            }
            NodeOp::Op(Op::Reshape(_)) if is_dense(&lay(0), &g.node(node.inputs[0]).ty.shape) => {
                let l = lay(0);
                Some(Placement { root: l.root, strides: dense(shape), offset: l.offset })
            }
            NodeOp::Op(Op::Permute(p)) => {
                let l = lay(0);
                Some(Placement {
                    root: l.root,
                    strides: p.perm.iter().map(|&d| l.strides[d]).collect(),
                    offset: l.offset,
                })
            }
            NodeOp::Op(Op::Narrow(p)) => {
                let l = lay(0);
                Some(Placement { offset: l.offset + p.start * l.strides[p.dim], ..l })
            }
            NodeOp::Op(Op::BroadcastTo(p)) => {
                let l = lay(0);
                let src = &g.node(node.inputs[0]).ty.shape;
                let strides = crate::layout::Layout::new(src, &l.strides, l.offset).broadcast_to(&p.shape);
                Some(Placement { root: l.root, strides, offset: l.offset })
            }
            NodeOp::Op(Op::Reshape(_)) => {
                // A copy of a view of an input is a pure function of that (immutable) input:
                // made once per distinct input tensor, not once per run (an RNN's `W^T`).
                match input_of[lay(0).root] {
                    Some(k) => {
                        memo_of[i] = Some(memos.len());
                        memos.push((k, arg(0)));
                    }
                    None => push(StepKind::Copy { x: arg(0), out: i }),
                }
                own(i, shape)
            }
            NodeOp::Project(_) => own(i, shape), // written by its fused step
            NodeOp::Fused(p) => {
                let mut outputs: SmallVec<[usize; 4]> = SmallVec::from_slice(&[i]);
                for (j, later) in g.nodes.iter().enumerate().skip(i + 1) {
                    if matches!(later.op, NodeOp::Project(_)) && later.inputs[0].index() == i {
                        outputs.push(j);
                    }
                }
                outputs[1..].sort_by_key(|&j| match g.nodes[j].op {
                    NodeOp::Project(k) => k,
                    _ => unreachable!(),
                });
                let inputs = node.inputs.iter().map(|a| a.index()).collect();
                push(StepKind::Fused { prog: p.clone(), inputs, outputs, reads: SmallVec::new() });
                own(i, shape)
            }
            NodeOp::MatMulAdd => {
                push(StepKind::MatMul { a: arg(0), b: arg(1), c: Some(arg(2)), out: i });
                own(i, shape)
            }
            NodeOp::RngState { offset } => {
                push(StepKind::RngState { rng: arg(0), offset: *offset, out: i });
                own(i, shape)
            }
            NodeOp::Op(op) => {
                let x_shape = node.inputs.first().map(|a| &g.node(*a).ty.shape);
                let x_dense = node.inputs.first().is_some_and(|_| is_dense(&lay(0), x_shape.unwrap()));
                let kind = match op {
                    Op::MatMul => StepKind::MatMul { a: arg(0), b: arg(1), c: None, out: i },
                    Op::RandNormal(_) | Op::RandUniform(_) => {
                        StepKind::Random { normal: matches!(op, Op::RandNormal(_)), state: arg(0), out: i }
                    }
                    Op::Multinomial if x_dense => {
                        StepKind::Multinomial { probs: arg(0), state: arg(1), out: i }
                    }
                    Op::Sum(p)
                        if x_dense && p.dims.windows(2).all(|w| w[1] == w[0] + 1) && !p.dims.is_empty() =>
                    {
                        let xs = x_shape.unwrap();
                        let (a, b) = (p.dims[0], *p.dims.last().unwrap());
                        let dims = ReduceDims {
                            outer: xs[..a].iter().product(),
                            n: xs[a..=b].iter().product(),
                            inner: xs[b + 1..].iter().product(),
                        };
                        StepKind::Reduce { kind: ReduceKind::Sum, x: arg(0), dims, out: i }
                    }
                    Op::Max(p) | Op::Min(p) | Op::ArgMax(p) | Op::LogSumExp(p) if x_dense => {
                        let kind = match op {
                            Op::Max(_) => ReduceKind::Max,
                            Op::Min(_) => ReduceKind::Min,
                            Op::ArgMax(_) => ReduceKind::ArgMax,
                            _ => ReduceKind::LogSumExp,
                        };
                        StepKind::Reduce {
                            kind,
                            x: arg(0),
                            dims: ReduceDims::new(x_shape.unwrap(), p.dim),
                            out: i,
                        }
                    }
                    Op::Softmax(p) | Op::LogSoftmax(p) if x_dense => {
                        let kind = if matches!(op, Op::Softmax(_)) {
                            ReduceKind::Softmax
                        } else {
                            ReduceKind::LogSoftmax
                        };
                        StepKind::Reduce {
                            kind,
                            x: arg(0),
                            dims: ReduceDims::new(x_shape.unwrap(), p.dim),
                            out: i,
                        }
                    }
                    Op::Cat(p)
                        if node
                            .inputs
                            .iter()
                            .enumerate()
                            .all(|(k, a)| is_dense(&lay(k), &g.node(*a).ty.shape)) =>
                    {
                        StepKind::Cat {
                            dim: p.dim,
                            parts: node.inputs.iter().map(|a| a.index()).collect(),
                            out: i,
                        }
                    }
                    op => StepKind::Generic {
                        op: op.clone(),
                        inputs: node.inputs.iter().map(|a| a.index()).collect(),
                        out: i,
                    },
                };
                push(kind);
                own(i, shape)
            }
        };
    }
    let mut l = super::memory::assign_buffers(g, steps, layout, consts, const_of, input_of, &memo_of);
    l.memos = memos;
    for step in &mut l.steps {
        if let StepKind::Fused { prog, inputs, reads, .. } = &mut step.kind {
            *reads = inputs
                .iter()
                .map(|&i| {
                    l.vals[i].as_ref().expect("fused operands have values").layout().broadcast_to(&prog.shape)
                })
                .collect();
        }
    }
    l
}
