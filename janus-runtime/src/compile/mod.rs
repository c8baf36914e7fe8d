//! Compilation: a recorded graph optimised (`passes`), lowered to an executor (`exec`), with
//! its backward derived symbolically (`grad_graph`) and compiled lazily, once per set of
//! outputs that receive cotangents. [`Compiled`] is what a `#[janus]` fragment replays;
//! [`trace`] (`function.rs`) compiles a whole function of tensors.

mod function;
mod generic;

pub use generic::Generic;

pub use function::{Traced, trace};

use crate::autograd::sum::GradPart;
use crate::autograd::{CustomBackward, GradMeta, NodeBackward, is_grad_enabled};
use crate::exec::{Executor, MemoryPlan};
use crate::grad_graph::{Derivative, derive};
use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{F64Bits, Full, Op};
use crate::passes::{PassStats, optimize};
use crate::random;
use crate::tensor::NodeRef;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How a replayed output reproduces the grad flags and the identity the eager call gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutGrad {
    /// No autograd history.
    Plain,
    /// Fresh gradient leaf `j` (`requires_grad()` inside the function): the same tensor as the
    /// leaf the replay's autograd node points to.
    Leaf(usize),
    /// Differentiable output number `k` of the derivative.
    Diff(usize),
    /// Input `k` passed through: the caller's own handle is returned (see docs/design.md,
    /// "Keys", aliasing).
    Input(usize),
    /// The same handle as output `k` (an earlier one), as in the eager call.
    Same(usize),
}

/// What the eager call gave one output: the autograd facts a replay must reproduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutKind {
    /// A gradient leaf.
    pub leaf: bool,
    /// Autograd history (needs gradients and is not a leaf).
    pub history: bool,
    /// The first output that is the same tensor (itself if none before it is).
    pub same_as: usize,
}

impl OutKind {
    /// The kinds of `outs`, as an eager call produced them.
    pub fn of(outs: &[&Tensor]) -> Vec<OutKind> {
        (0..outs.len())
            .map(|k| OutKind {
                leaf: outs[k].is_leaf(),
                history: outs[k].needs_grad() && !outs[k].is_leaf(),
                same_as: outs[..k].iter().position(|o| o.same(outs[k])).unwrap_or(k),
            })
            .collect()
    }
}

/// A compiled variant: the optimised executor and everything a replay needs.
pub struct Compiled {
    name: String,
    recorded: Graph,
    exec: Executor,
    stats: PassStats,
    num_outputs: usize,
    /// Residual outputs of the forward executor (after the outputs).
    num_residuals: usize,
    /// The fresh leaves' values follow the residuals.
    num_leaves: usize,
    out_grad: Vec<OutGrad>,
    /// Ops of the recording (the eager op calls one replay stands for).
    recorded_ops: u64,
    grad: Option<GradParts>,
    /// Milliseconds spent optimising and compiling (recording excluded).
    pub compile_ms: f64,
}

struct GradParts {
    derivative: Arc<Derivative>,
    backward: BackwardCache,
    /// An instance of a shape-polymorphic variant: its templates and symbol values, which
    /// build its backward executors.
    generic: Option<(Arc<generic::Generic>, Vec<usize>)>,
}

/// Per set of cotangents: the backward executor and the ops of its derived graph.
type BackwardCache = Mutex<HashMap<Vec<bool>, (Arc<Executor>, u64)>>;

/// Counts the ops of replayed backward graphs (for `janus::stats()` coverage): one relaxed add
/// per run, not one per op. (Forward replays are counted by their caller, from the number of
/// replays and [`Compiled::recorded_ops`].)
pub(crate) trait OpSink: Send + Sync + std::panic::RefUnwindSafe {
    /// A backward run ran `ops` derived ops.
    fn backward(&self, ops: u64);
}

/// Ops of a graph that stand for eager op calls (not inputs, stream states or markers; a
/// loop's body ops once per trip).
pub(crate) fn op_calls(g: &Graph) -> u64 {
    (g.nodes.iter())
        .map(|n| match &n.op {
            NodeOp::Op(op) if !op.is_marker() => 1,
            NodeOp::Loop(l) => l.trips as u64 * op_calls(&l.body),
            _ => 0,
        })
        .sum()
}

impl Compiled {
    /// Compiles a recorded graph; `needs[k]` says whether input `k` needs gradients and
    /// `out_kinds` what the eager call gave each output. Fails when a replay could not give
    /// the outputs the same autograd history and identity.
    pub fn new(
        name: &str,
        recorded: Graph,
        needs: &[bool],
        out_kinds: &[OutKind],
    ) -> Result<Compiled, String> {
        let t0 = Instant::now();
        let any_history = out_kinds.iter().any(|o| o.history);
        let (grad, mut to_run, num_residuals) = if any_history {
            let d = crate::eager::uncounted(|| derive(&recorded, needs));
            let (fwd, n_res) = (d.forward.clone(), d.num_residuals);
            let parts =
                GradParts { derivative: Arc::new(d), backward: Mutex::new(HashMap::new()), generic: None };
            (Some(parts), fwd, n_res)
        } else {
            (None, recorded.clone(), 0)
        };
        let leaves: Vec<NodeId> = match &grad {
            Some(g) => g.derivative.fresh_leaves.clone(),
            None => {
                let l = fresh_leaf_nodes(&recorded);
                to_run.outputs.extend(l.iter().copied());
                l
            }
        };
        let mut out_grad = Vec::with_capacity(out_kinds.len());
        for (k, kind) in out_kinds.iter().enumerate() {
            let node = recorded.outputs[k];
            let diff = grad.as_ref().and_then(|g| g.derivative.diff_outputs.iter().position(|&o| o == k));
            let og = if kind.same_as != k {
                OutGrad::Same(kind.same_as)
            } else if let NodeOp::Input(i) = recorded.node(node).op {
                OutGrad::Input(i)
            } else if let Some(j) = leaves.iter().position(|&l| l == node) {
                OutGrad::Leaf(j)
            } else {
                OutGrad::Plain
            };
            let ok = match og {
                OutGrad::Same(_) | OutGrad::Input(_) => true,
                OutGrad::Leaf(_) => kind.leaf,
                _ => !kind.leaf && kind.history == diff.is_some(),
            };
            if !ok {
                return Err(format!(
                    "output {k} would replay with other autograd history than eager mode gave it ({kind:?})"
                ));
            }
            out_grad.push(match (og, diff) {
                (OutGrad::Plain, Some(j)) => OutGrad::Diff(j),
                _ => og,
            });
        }
        let (optimised, stats) = crate::eager::uncounted(|| optimize(to_run));
        crate::graph::dump::dump(&format!("{name}-forward"), &optimised);
        let exec = Executor::compile(optimised);
        Ok(Compiled {
            name: name.to_string(),
            num_outputs: recorded.outputs.len(),
            num_residuals,
            num_leaves: leaves.len(),
            recorded_ops: op_calls(&recorded),
            recorded,
            exec,
            stats,
            out_grad,
            grad,
            compile_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The generated elementwise kernels a CUDA run of this graph uses: the forward executor's
    /// and every backward executor compiled so far (for tests that compile them without a GPU).
    pub fn cuda_kernels(&self) -> Vec<janus_kernels::cuda::codegen::EwSpec> {
        let mut v = self.exec.cuda_kernels();
        if let Some(g) = &self.grad {
            for (e, _) in g.backward.lock().unwrap().values() {
                v.extend(e.cuda_kernels());
            }
        }
        v
    }

    /// The forward executor's CUDA steps by kind, and its memo copies (see
    /// [`Executor::cuda_step_counts`](crate::exec::Executor::cuda_step_counts)).
    pub fn cuda_step_counts(&self) -> (Vec<(String, usize)>, usize) {
        self.exec.cuda_step_counts()
    }

    /// CUDA runs of the forward executor: `(CUDA-graph replays, step-by-step runs)`.
    pub fn cuda_runs(&self) -> (u64, u64) {
        self.exec.cuda_runs()
    }

    /// Whether a call whose inputs need gradients as `needs` says (fewer than this variant was
    /// compiled for) gets every output's autograd history from a replay as eager mode would
    /// give it: each output with history depends on an input that needs gradients there, or
    /// on a fresh leaf.
    pub(crate) fn keeps_histories(&self, needs: &[bool]) -> bool {
        let Some(g) = &self.grad else { return true };
        let d = &g.derivative;
        self.out_grad.iter().all(|og| match *og {
            OutGrad::Diff(j) => (d.depends[j].iter().enumerate()).any(|(t, &dep)| {
                dep && d.grad_inputs.get(t).is_none_or(|&i| needs.get(i).copied().unwrap_or(false))
            }),
            _ => true,
        })
    }

    /// The ops of the recording (the eager op calls one replay stands for).
    pub fn recorded_ops(&self) -> u64 {
        self.recorded_ops
    }

    /// The graph as recorded.
    pub fn recorded_graph(&self) -> &Graph {
        &self.recorded
    }

    /// The optimised graph that runs.
    pub fn graph(&self) -> &Graph {
        self.exec.graph()
    }

    /// What the passes did.
    pub fn pass_stats(&self) -> &PassStats {
        &self.stats
    }

    /// The executor's memory plan.
    pub fn memory_plan(&self) -> &MemoryPlan {
        self.exec.memory_plan()
    }

    /// Bytes of the arenas its CPU runs use: the forward executor's and those of the backward
    /// executors compiled so far (see [`Executor::run_memory_plan`]).
    pub fn arena_bytes(&self) -> usize {
        self.sum_executors(|e| e.run_memory_plan().planned_bytes)
    }

    /// Bytes of the packed copies of right factors its CPU runs keep next to their arenas
    /// (see [`Executor::packed_bytes`]), over the same executors as [`Compiled::arena_bytes`].
    pub fn packed_bytes(&self) -> usize {
        self.sum_executors(Executor::packed_bytes)
    }

    /// `bytes` summed over the forward executor and the backward executors compiled so far.
    fn sum_executors(&self, bytes: impl Fn(&Executor) -> usize) -> usize {
        let backward = self
            .grad
            .as_ref()
            .map_or(0, |g| g.backward.lock().unwrap().values().map(|(e, _)| bytes(e)).sum());
        bytes(&self.exec) + backward
    }

    /// Runs on `inputs` (the recorded signature); draws random numbers from this thread's stream
    /// and reproduces the recorded outputs' grad flags and identities.
    pub fn replay(self: &Arc<Self>, inputs: &[Tensor]) -> Vec<Tensor> {
        match self.exec.graph().rng {
            None => self.rebuild(self.exec.run(inputs), inputs, None),
            // The stream's state joins the inputs: a list of our own to put it in.
            Some(_) => self.replay_counted(&mut inputs.iter().cloned().collect(), None),
        }
    }

    /// [`replay`](Compiled::replay), counting the ops its backward runs into `sink`. A graph
    /// that draws random numbers gets its stream's state as one more input, put into `inputs`
    /// for the run and taken out again (copying the inputs instead took and dropped a reference
    /// count per input: two atomic operations each, on every replay of CartPole's `act`).
    pub(crate) fn replay_counted(
        self: &Arc<Self>,
        inputs: &mut SmallVec<[Tensor; 8]>,
        sink: Option<&'static dyn OpSink>,
    ) -> Vec<Tensor> {
        let mut rng_after = None;
        let outs = match self.exec.graph().rng {
            None => self.exec.run(inputs),
            Some(r) => {
                let (key, counter) = random::stream_position();
                let state = Tensor::from_buffer(
                    janus_kernels::CpuBuffer::I64(vec![key as i64, counter as i64]),
                    [2].into(),
                );
                inputs.insert(r.input, state);
                rng_after = Some((key, counter.wrapping_add(r.blocks)));
                let outs = self.exec.run(inputs);
                inputs.remove(r.input);
                outs
            }
        };
        // Advanced only once the run succeeded: a replay that panics leaves the stream as the
        // statements that run instead expect it.
        if let Some((key, counter)) = rng_after {
            random::move_to(key, counter);
        }
        self.rebuild(outs, inputs, sink)
    }

    /// A run's outputs as the recording gave them: residuals split off for the backward,
    /// leaves made fresh, grad flags and identities reproduced (`inputs`: the run's, without
    /// the random stream's state).
    fn rebuild(
        self: &Arc<Self>,
        mut outs: Vec<Tensor>,
        inputs: &[Tensor],
        sink: Option<&'static dyn OpSink>,
    ) -> Vec<Tensor> {
        // Most replays return only their outputs: no split (a `split_off` at the end still
        // calls `memcpy`).
        let mut residuals =
            if outs.len() > self.num_outputs { outs.split_off(self.num_outputs) } else { Vec::new() };
        let leaves: Vec<Tensor> = if self.num_leaves == 0 {
            Vec::new()
        } else {
            let values = residuals.split_off(self.num_residuals);
            values
                .into_iter()
                .map(|t| {
                    Tensor::from_parts(t.shape_ref().clone(), t.dtype(), t.0.data.clone(), GradMeta::Leaf)
                })
                .collect()
        };
        let attach = self.grad.is_some() && is_grad_enabled();
        let node = attach.then(|| {
            let d = &self.grad.as_ref().unwrap().derivative;
            let edges: Vec<Tensor> = (d.grad_inputs.iter().map(|&k| inputs[k].clone()))
                .chain(d.grad_leaves.iter().map(|&j| leaves[j].clone()))
                .collect();
            NodeRef::new(
                edges,
                NodeBackward::Custom(Box::new(Backward { compiled: self.clone(), residuals, sink })),
            )
        });
        // In place: a replay allocates nothing here.
        for k in 0..outs.len() {
            let rebuilt = match (self.out_grad[k], &node) {
                (OutGrad::Input(i), _) => inputs[i].clone(),
                (OutGrad::Leaf(j), _) => leaves[j].clone(),
                (OutGrad::Same(m), _) => outs[m].clone(),
                (OutGrad::Diff(d), Some(node)) => outs[k].clone().with_node(node.clone(), d),
                _ => continue,
            };
            outs[k] = rebuilt;
        }
        outs
    }

    /// The backward executor for this set of cotangents, compiled on first use.
    fn backward_for(&self, mask: &[bool]) -> (Arc<Executor>, u64) {
        let g = self.grad.as_ref().expect("only differentiable variants have a backward");
        let mut cache = g.backward.lock().unwrap();
        if let Some(e) = cache.get(mask) {
            return e.clone();
        }
        let e = match &g.generic {
            Some((generic, values)) => {
                let (exec, ops) = generic.backward(values, &g.derivative, mask);
                (Arc::new(exec), ops)
            }
            None => {
                let specialised = without_cotangents(&g.derivative, mask);
                let ops = op_calls(&specialised);
                let (optimised, _) = crate::eager::uncounted(|| optimize(specialised));
                crate::graph::dump::dump(&format!("{}-backward", self.name), &optimised);
                (Arc::new(Executor::compile(optimised)), ops)
            }
        };
        cache.insert(mask.to_vec(), e.clone());
        e
    }
}

/// The `FreshLeaf` nodes of `g`, in order.
fn fresh_leaf_nodes(g: &Graph) -> Vec<NodeId> {
    (0..g.nodes.len())
        .filter(|&i| g.nodes[i].op == NodeOp::Op(Op::FreshLeaf))
        .map(|i| NodeId(i as u32))
        .collect()
}

/// The backward graph with the cotangents absent from `mask` replaced by zeros.
fn without_cotangents(d: &Derivative, mask: &[bool]) -> Graph {
    let bw = &d.backward;
    let n_res = bw.inputs.len() - d.diff_outputs.len();
    let mut b = GraphBuilder::new();
    let mut map: Vec<NodeId> = Vec::with_capacity(bw.nodes.len());
    for node in &bw.nodes {
        let id = match node.op {
            NodeOp::Input(k) if k < n_res || mask[k - n_res] => {
                b.input(bw.inputs[k].name.clone(), node.ty.clone())
            }
            NodeOp::Input(_) => b.push(Node {
                op: NodeOp::Op(Op::Full(Full {
                    shape: node.ty.shape.clone(),
                    dtype: node.ty.dtype,
                    value: F64Bits::new(0.0),
                    device: crate::Device::Cpu,
                })),
                inputs: SmallVec::new(),
                ty: node.ty.clone(),
                span: None,
            }),
            _ => {
                let inputs = node.inputs.iter().map(|a| map[a.index()]).collect();
                b.push(Node { op: node.op.clone(), inputs, ty: node.ty.clone(), span: node.span })
            }
        };
        map.push(id);
    }
    b.finish(bw.outputs.iter().map(|o| map[o.index()]).collect())
}

/// The autograd node of one replay: residuals saved by the forward, the compiled backward.
struct Backward {
    compiled: Arc<Compiled>,
    residuals: Vec<Tensor>,
    sink: Option<&'static dyn OpSink>,
}

impl CustomBackward for Backward {
    fn num_outputs(&self) -> usize {
        self.compiled.grad.as_ref().map_or(0, |g| g.derivative.diff_outputs.len())
    }

    fn backward(&self, _inputs: &[Tensor], grads: &[Option<Tensor>]) -> Vec<Option<GradPart>> {
        let mask: Vec<bool> = grads.iter().map(Option::is_some).collect();
        let (exec, ops) = self.compiled.backward_for(&mask);
        let mut args = self.residuals.clone();
        args.extend(grads.iter().flatten().cloned());
        let mut outs = exec.run(&args).into_iter();
        if let Some(sink) = self.sink {
            sink.backward(ops);
        }
        let d = &self.compiled.grad.as_ref().expect("differentiable variant").derivative;
        d.outer
            .iter()
            .enumerate()
            .map(|(k, &o)| {
                let mut first = outs.next().expect("one output per gradient");
                if k == 0 && crate::exec::faults::backward_broken() {
                    first = &first + 1.0;
                }
                let part = if o {
                    GradPart::Outer(first, outs.next().expect("two factors"))
                } else {
                    GradPart::Dense(first)
                };
                // No cotangent reached this input: no gradient, as in eager mode.
                d.depends.iter().zip(&mask).any(|(dep, &m)| m && dep[k]).then_some(part)
            })
            .collect()
    }
}

impl Tensor {
    /// A handle of this value as output `index` of autograd node `node`.
    pub(crate) fn with_node(self, node: crate::tensor::NodeRef, index: usize) -> Tensor {
        Tensor::from_parts(
            self.shape_ref().clone(),
            self.dtype(),
            self.0.data.clone(),
            GradMeta::Node(node, index),
        )
    }
}
