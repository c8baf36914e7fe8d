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
use crate::eager::eval;
use crate::graph::fused::FusedProgram;
use crate::graph::{Graph, NodeOp};
use crate::ops::Op;
use crate::shape::{Shape, Strides};
use crate::tensor::Tensor;
use janus_kernels::fused::Reg;
use janus_kernels::reduce::ReduceDims;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// Which buffer a value lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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

/// A loop output that no node reads (its step does not store it).
pub(crate) const NO_NODE: usize = usize::MAX;

/// What a step computes; operands and results are node indices (resolved to values at run).
// The fused variant is the common and the largest one (its operands' strides inline): boxing
// it would add a pointer chase to every run of every program.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(crate) enum StepKind {
    Fused {
        prog: Arc<FusedProgram>,
        inputs: SmallVec<[usize; 4]>,
        outputs: SmallVec<[usize; 4]>,
        /// Per input, the strides reading it over the program's shape (filled in once the
        /// layouts are final, so that a run does not recompute them).
        reads: SmallVec<[Strides; 4]>,
        /// `sum` nodes of the program's float registers, accumulated as it runs (CPU only;
        /// see [`lower`]).
        sums: Vec<FusedSum>,
        /// Which of the program's fixed parts this step runs (`janus_kernels::fused::run_summing`),
        /// when the CPU backend split it between its workers: its outputs are then the parts'
        /// positions, its sums partial sums. `None`: the whole program.
        span: Option<std::ops::Range<usize>>,
    },
    /// `out = a @ b (+ c)`, then `relu` when `relu` is set (a linear layer's activation,
    /// folded in at lowering on the CPU: see [`lower_for`]).
    MatMul {
        a: usize,
        b: usize,
        c: Option<usize>,
        out: usize,
        relu: bool,
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
    /// A loop node: its body runs per trip (`exec/loops.rs`); `outputs` are the node and its
    /// projections, one per loop output ([`NO_NODE`] for an output without a projection).
    Loop {
        run: Arc<super::loops::LoopRun>,
        inputs: SmallVec<[usize; 4]>,
        outputs: SmallVec<[usize; 4]>,
    },
    /// Part of an `unfold` (its rows `first..`) or a `fold` (its image planes `first..`) of
    /// the whole input `x`, into `out`, a flat range of the whole result: the CPU backend's
    /// halves of such a step (`exec/cpu/split.rs`).
    WindowPart {
        op: Op,
        x: usize,
        out: usize,
        first: usize,
    },
}

/// A sum over some dimensions of a fused program's register, fused into the program's step:
/// the summed values need not be stored, and are read once, while still in registers.
#[derive(Clone, Debug)]
pub(crate) struct FusedSum {
    /// The register summed.
    pub(crate) reg: Reg,
    /// The `sum` node written.
    pub(crate) out: usize,
    /// Per dimension of the program's shape, the stride into the (dense) result; 0 where
    /// summed.
    pub(crate) strides: Strides,
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
    /// The step's kind, for counts (`fused`, `matmul`, ..., `generic OP` for an op that runs
    /// its eager kernel).
    pub(crate) fn kind_name(&self) -> String {
        match self {
            StepKind::Fused { .. } => "fused".into(),
            StepKind::MatMul { .. } => "matmul".into(),
            StepKind::Reduce { .. } => "reduce".into(),
            StepKind::Cat { .. } => "cat".into(),
            StepKind::Copy { .. } => "copy".into(),
            StepKind::RngState { .. } => "rng state".into(),
            StepKind::Random { .. } => "random".into(),
            StepKind::Multinomial { .. } => "multinomial".into(),
            StepKind::Generic { op, .. } => format!("generic {}", op.name()),
            StepKind::Loop { .. } => "loop".into(),
            StepKind::WindowPart { .. } => "window part".into(),
        }
    }

    /// Operand nodes read.
    pub(crate) fn reads(&self) -> SmallVec<[usize; 4]> {
        match self {
            StepKind::Fused { inputs, .. }
            | StepKind::Generic { inputs, .. }
            | StepKind::Loop { inputs, .. } => inputs.clone(),
            StepKind::Cat { parts, .. } => parts.clone(),
            StepKind::MatMul { a, b, c, .. } => {
                let mut r: SmallVec<[usize; 4]> = SmallVec::from_slice(&[*a, *b]);
                r.extend(c.iter().copied());
                r
            }
            StepKind::Reduce { x, .. } | StepKind::Copy { x, .. } | StepKind::WindowPart { x, .. } => {
                SmallVec::from_slice(&[*x])
            }
            StepKind::RngState { rng, .. } => SmallVec::from_slice(&[*rng]),
            StepKind::Random { state, .. } => SmallVec::from_slice(&[*state]),
            StepKind::Multinomial { probs, state, .. } => SmallVec::from_slice(&[*probs, *state]),
        }
    }

    /// Result nodes written.
    pub(crate) fn writes(&self) -> SmallVec<[usize; 4]> {
        match self {
            StepKind::Fused { outputs, sums, .. } => {
                let mut w = outputs.clone();
                w.extend(sums.iter().map(|s| s.out));
                w
            }
            StepKind::Loop { outputs, .. } => outputs.iter().copied().filter(|&o| o != NO_NODE).collect(),
            StepKind::MatMul { out, .. }
            | StepKind::Reduce { out, .. }
            | StepKind::Cat { out, .. }
            | StepKind::Copy { out, .. }
            | StepKind::RngState { out, .. }
            | StepKind::Random { out, .. }
            | StepKind::Multinomial { out, .. }
            | StepKind::Generic { out, .. }
            | StepKind::WindowPart { out, .. } => SmallVec::from_slice(&[*out]),
        }
    }
}

/// One unit of execution.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) kind: StepKind,
    /// The worker that should run it under the two-worker schedule: 0 either, 1 the caller,
    /// 2 the helper (the halves of a split step, see `cpu::schedule`).
    pub(crate) worker: u8,
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

/// Lowers for the CPU backend, with sums fused into the programs that feed them.
pub(crate) fn lower(g: &Graph) -> Lowered {
    lower_for(g, true)
}

/// Lowers `g`. With `fuse_sums` (the CPU backend; the CUDA code generator has no reductions),
/// a `sum` of a fused program's float result becomes part of the program's step
/// ([`FusedSum`]), and a result that only such sums read is no longer stored; and a program
/// that is only a `relu` of a product read nowhere else becomes that product's closing pass
/// ([`relu_of_product`]).
// Long by design: one arm per node kind, in one pass that threads the layouts through.
pub(crate) fn lower_for(g: &Graph, fuse_sums: bool) -> Lowered {
    let n = g.nodes.len();
    let mut layout: Vec<Option<Placement>> = vec![None; n];
    let mut steps: Vec<Step> = Vec::new();
    let mut consts: Vec<Tensor> = Vec::new();
    let mut const_of: Vec<Option<usize>> = vec![None; n];
    let mut input_of: Vec<Option<usize>> = vec![None; n];
    let mut memo_of: Vec<Option<usize>> = vec![None; n];
    let mut memos: Vec<(usize, usize)> = Vec::new();
    // For each float result of a fused step: the step and the register holding it; per step
    // with sums, whether they keep the first dimension.
    let mut fused_at: Vec<Option<FusedAt>> = vec![None; n];
    let mut sum_class: HashMap<usize, bool> = HashMap::new();
    // The step of each product's result, and each node's readers (graph outputs included).
    let mut product_at: Vec<Option<usize>> = vec![None; n];
    let uses = g.use_counts();
    let own = |i: usize, shape: &Shape| Some(Placement { root: i, strides: dense(shape), offset: 0 });
    for (i, node) in g.nodes.iter().enumerate() {
        let shape = &node.ty.shape;
        let relu_of = if fuse_sums { relu_of_product(g, i, &product_at, &uses) } else { None };
        let arg = |k: usize| node.inputs[k].index();
        let lay = |k: usize| layout[arg(k)].clone().expect("operands precede users");
        let mut push = |kind: StepKind| steps.push(Step { kind, worker: 0 });
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
            NodeOp::Project(_) => own(i, shape), // written by its fused or loop step
            NodeOp::Loop(spec) => {
                // Per loop output, its node (`NO_NODE` for an output no node reads).
                let mut outputs: SmallVec<[usize; 4]> = SmallVec::from_elem(NO_NODE, spec.out_types().len());
                outputs[0] = i;
                for (j, later) in g.nodes.iter().enumerate().skip(i + 1) {
                    if let NodeOp::Project(k) = later.op
                        && later.inputs[0].index() == i
                    {
                        outputs[k] = j;
                    }
                }
                push(StepKind::Loop {
                    run: Arc::new(super::loops::LoopRun::new(spec.clone())),
                    inputs: node.inputs.iter().map(|a| a.index()).collect(),
                    outputs,
                });
                own(i, shape)
            }
            NodeOp::Fused(_) if relu_of.is_some() => {
                let s = relu_of.expect("checked by the guard");
                let StepKind::MatMul { out, relu, .. } = &mut steps[s].kind else {
                    unreachable!("product_at names products")
                };
                // The product now writes the relu's result; its own result has no writer
                // and no reader left, so the plan gives it no memory.
                (*out, *relu) = (i, true);
                product_at[i] = None;
                own(i, shape)
            }
            NodeOp::Fused(p) => {
                let outputs = projections(g, i);
                let floats: SmallVec<[(usize, Reg); 4]> = (outputs.iter().zip(&p.outputs))
                    .zip(&p.program.outputs)
                    .filter(|((_, t), _)| t.dtype == p.dtype)
                    .map(|((&o, _), &r)| (o, r))
                    .collect();
                let inputs = node.inputs.iter().map(|a| a.index()).collect();
                push(StepKind::Fused {
                    prog: p.clone(),
                    inputs,
                    outputs,
                    reads: SmallVec::new(),
                    sums: Vec::new(),
                    span: None,
                });
                let (elems, cost) = (p.shape.elems(), (p.shape.elems() * p.program.instrs.len()) as u64);
                for (o, reg) in floats {
                    fused_at[o] = Some(FusedAt { step: steps.len() - 1, reg, elems, cost });
                }
                own(i, shape)
            }
            NodeOp::Op(Op::Sum(p))
                if fuse_sums && sum_target(fused_at[arg(0)], &sum_class, &p.dims).is_some() =>
            {
                let (FusedAt { step: s, reg, .. }, keeps) =
                    sum_target(fused_at[arg(0)], &sum_class, &p.dims).expect("checked by the guard");
                sum_class.insert(s, keeps);
                let StepKind::Fused { sums, .. } = &mut steps[s].kind else {
                    unreachable!("fused_at names fused steps")
                };
                let xs = g.node(node.inputs[0]).ty.shape.sizes();
                let mut strides: Strides = SmallVec::from_elem(0, xs.len());
                let mut acc = 1;
                for d in (0..xs.len()).rev() {
                    if !p.dims.contains(&d) {
                        strides[d] = acc;
                        acc *= xs[d];
                    }
                }
                sums.push(FusedSum { reg, out: i, strides });
                own(i, shape)
            }
            NodeOp::MatMulAdd => {
                push(StepKind::MatMul { a: arg(0), b: arg(1), c: Some(arg(2)), out: i, relu: false });
                product_at[i] = Some(steps.len() - 1);
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
                    Op::MatMul => StepKind::MatMul { a: arg(0), b: arg(1), c: None, out: i, relu: false },
                    Op::RandNormal(_) | Op::RandUniform(_) => {
                        StepKind::Random { normal: matches!(op, Op::RandNormal(_)), state: arg(0), out: i }
                    }
                    Op::Multinomial if x_dense => {
                        StepKind::Multinomial { probs: arg(0), state: arg(1), out: i }
                    }
                    // A sum over the leading dimension of 2^16 elements or more adds four fixed
                    // parts in eager mode (`strided::sum_dims`), where the reduction kernel adds
                    // one chain: it runs as the eager op instead, with the eager bits.
                    Op::Sum(p)
                        if x_dense
                            && p.dims.windows(2).all(|w| w[1] == w[0] + 1)
                            && !p.dims.is_empty()
                            && !(p.dims[0] == 0
                                && janus_kernels::strided::SumPlan::parts(
                                    x_shape.unwrap().elems(),
                                    None,
                                )
                                .0 > 1) =>
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
                let product = matches!(kind, StepKind::MatMul { .. });
                push(kind);
                if product {
                    product_at[i] = Some(steps.len() - 1);
                }
                own(i, shape)
            }
        };
    }
    if fuse_sums {
        drop_unread_results(g, &mut steps, &layout);
        alias_cats(g, &mut steps, &mut layout);
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

/// Multi-output node `i` and its projections, in output order (output `k` at position `k`;
/// an unused output has no projection, and the later ones move up).
fn projections(g: &Graph, i: usize) -> SmallVec<[usize; 4]> {
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
    outputs
}

/// A fused step's float result, as a sum may find it.
#[derive(Clone, Copy)]
struct FusedAt {
    step: usize,
    reg: Reg,
    /// The program's positions and cost (`schedule::cost`).
    elems: usize,
    cost: u64,
}

/// The product step whose result node `i` is `relu` of, when `i` is a fused program that only
/// loads that result and applies `relu` over its shape, and nothing else reads the result:
/// the product then applies the relu in its closing pass and writes `i` itself. CartPole's
/// hidden layer `relu(x W1 + b1)` wrote `[500, 128]` products that a pass read back once to
/// write their relu (11 µs of a 114 µs serial update, `JANUS_PROFILE=1`); the relu's gradient
/// reads its result (`vjp.rs`), so the product's own result has no other reader.
fn relu_of_product(g: &Graph, i: usize, product_at: &[Option<usize>], uses: &[usize]) -> Option<usize> {
    use janus_kernels::elementwise::UnaryOp;
    use janus_kernels::fused::{FUnary, Instr};
    let node = &g.nodes[i];
    let NodeOp::Fused(p) = &node.op else { return None };
    let relu =
        [Instr::Load { dst: 0, input: 0 }, Instr::Unary { dst: 1, f: FUnary::Op(UnaryOp::Relu), a: 0 }];
    if p.program.instrs[..] != relu[..] || p.program.outputs[..] != [1] || node.inputs.len() != 1 {
        return None;
    }
    let x = node.inputs[0].index();
    let xt = &g.nodes[x].ty;
    let plain =
        p.outputs.len() == 1 && p.outputs[0] == *xt && p.shape == xt.shape && p.inputs[..] == [xt.dtype];
    (plain && uses[x] == 1).then_some(product_at[x]?)
}

/// Whether a sum over `dims` of the result at `at` joins its program's step, and whether it
/// keeps the first dimension. The sums of one program all keep it or all reduce it
/// (`janus_kernels::fused::run_summing`). One that keeps it leaves the program free to split
/// between the CPU workers by rows; one that reduces it splits the program by its four fixed
/// parts instead (a split by rows would change its bits), so it joins only programs of at
/// least 2^16 positions, which have four parts, or programs too small to split.
fn sum_target(at: Option<FusedAt>, class: &HashMap<usize, bool>, dims: &[usize]) -> Option<(FusedAt, bool)> {
    let at = at?;
    let keeps = !dims.contains(&0);
    let parts = janus_kernels::strided::SumPlan::parts(at.elems, None).0;
    let fits = keeps || parts > 1 || at.cost < super::cpu::split_min_cost();
    (fits && class.get(&at.step).is_none_or(|&c| c == keeps)).then_some((at, keeps))
}

/// Concatenations whose parts are blocks of the result (the dimensions before the joined one
/// are all 1) and are all written by steps of this plan become views: each part's writer
/// writes straight into its block of the result, and the cat's copy is gone (as inductor's
/// `NonOwningLayout` buffers of a `cat`). An RNN's backward stacks the per-step gate
/// gradients and states into `[T*B, ...]` matrices for the weight-gradient GEMMs: those copies
/// were 5% of the LSTM step's work, one of them on its critical path, and a GEMM half over
/// the rows of some time steps can now start as soon as those steps have written them
/// (`memory::dependencies` orders by element ranges). Joined along a later dimension, a part is
/// strided rows of the result, which only a fused program writes (`janus_kernels::fused::Rows`):
/// the LSTM backward's four gate gradients land in the `[B, 4H]` gradient of the gates, itself a
/// block of the stack. CPU plans only: the CUDA executor tells an in-place addend by its buffer
/// alone.
fn alias_cats(g: &Graph, steps: &mut Vec<Step>, layout: &mut [Option<Placement>]) {
    let root = |layout: &[Option<Placement>], i: usize| layout[i].as_ref().map_or(i, |l| l.root);
    let outputs: std::collections::HashSet<usize> = g.outputs.iter().map(|o| o.index()).collect();
    // Per value, the steps reading it and the steps writing it.
    let mut readers: HashMap<usize, SmallVec<[usize; 2]>> = HashMap::new();
    let mut writers: HashMap<usize, SmallVec<[usize; 2]>> = HashMap::new();
    for (s, st) in steps.iter().enumerate() {
        st.kind.reads().into_iter().for_each(|r| readers.entry(r).or_default().push(s));
        st.kind.writes().into_iter().for_each(|w| writers.entry(w).or_default().push(s));
    }
    // Roots some step writes. A cat made a view stays in the set: its parts' writers write it.
    let written: std::collections::HashSet<usize> = writers.keys().map(|&w| root(layout, w)).collect();
    // The values placed in each root (re-rooted with it: no scan of every value per part).
    let mut rooted: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, l) in layout.iter().enumerate() {
        if let Some(l) = l {
            rooted.entry(l.root).or_default().push(i);
        }
    }
    let mut gone = vec![false; steps.len()];
    for s in 0..steps.len() {
        let StepKind::Cat { dim, parts, out } = &steps[s].kind else { continue };
        let (dim, out) = (*dim, *out);
        let shape = &g.nodes[out].ty.shape;
        // Blocks of the result, or (joined along a later dimension) strided rows of it, which
        // only a plain fused program writes (`janus_kernels::fused::Rows`): each part written
        // by one such step, read by nothing but this cat, float, with no views of its own, and
        // small enough that its program runs on one thread anyway (strided rows are not split
        // between rayon tasks).
        let rows = shape[..dim].iter().product::<usize>() != 1;
        if rows && shape.elems() == 0 {
            continue;
        }
        let writes_rows = |p: usize| {
            let by_fused = |w: &usize| matches!(&steps[*w].kind, StepKind::Fused { sums, span: None, .. } if sums.is_empty());
            g.nodes[p].ty.dtype.is_float()
                && g.nodes[p].ty.shape.elems() < janus_kernels::strided::PARALLEL_MIN_ELEMS
                && writers.get(&p).is_some_and(|w| w.len() == 1 && by_fused(&w[0]))
                && readers.get(&p).is_some_and(|r| r.as_slice() == [s])
                && rooted.get(&p).is_some_and(|v| v.as_slice() == [p])
                && layout[out].as_ref().is_some_and(|l| l.root == out && is_dense(l, shape))
        };
        if rows && !parts.iter().all(|&p| writes_rows(p)) {
            continue;
        }
        // A part qualifies when it is a value of its own (its own root, not an input, constant
        // or memo, which no step writes), some step writes it, it is no graph output (a
        // returned view would keep the whole result alive), and it appears once.
        let own = parts.iter().all(|&p| {
            root(layout, p) == p
                && !outputs.contains(&p)
                && written.contains(&p)
                && parts.iter().filter(|&&q| q == p).count() == 1
        });
        if !own {
            continue;
        }
        let block: usize = shape[dim + 1..].iter().product();
        let mut at = 0;
        for &p in parts.iter() {
            let offset = at * block;
            let moved = rooted.remove(&p).unwrap_or_default();
            for &i in &moved {
                let l = layout[i].as_mut().expect("rooted values have placements");
                l.root = out;
                l.offset += offset;
                if rows {
                    // The part alone (see `writes_rows`), read with the result's strides.
                    l.strides = dense(shape);
                }
            }
            rooted.entry(out).or_default().extend(moved);
            at += g.nodes[p].ty.shape[dim];
        }
        gone[s] = true;
    }
    let mut gone = gone.into_iter();
    steps.retain(|_| !gone.next().expect("one flag per step"));
}

/// Stops fused steps with sums from storing results that nothing else reads (no step, view or
/// graph output): the sums were their only readers.
fn drop_unread_results(g: &Graph, steps: &mut [Step], layout: &[Option<Placement>]) {
    let root = |i: usize| layout[i].as_ref().map_or(i, |l| l.root);
    let mut read = vec![false; g.nodes.len()];
    for st in steps.iter() {
        for r in st.kind.reads() {
            read[root(r)] = true;
        }
    }
    for o in &g.outputs {
        read[root(o.index())] = true;
    }
    for st in steps.iter_mut() {
        let StepKind::Fused { prog, outputs, sums, .. } = &mut st.kind else { continue };
        if sums.is_empty() || outputs.iter().all(|&o| read[o]) {
            continue;
        }
        let keep: Vec<bool> = outputs.iter().map(|&o| read[o]).collect();
        let mut p = (**prog).clone();
        let mut k = keep.iter();
        p.program.outputs.retain(|_| *k.next().unwrap());
        let mut k = keep.iter();
        p.outputs.retain(|_| *k.next().unwrap());
        outputs.retain(|o| read[*o]);
        *prog = Arc::new(p);
    }
}
