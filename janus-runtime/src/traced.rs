//! `janus::trace(f)`: a function of tensors run as a compiled graph. The first call for each
//! input signature (shapes, dtypes, grad flags, grad mode) runs `f` eagerly while recording;
//! if the recording is usable it is optimised and compiled, and later calls replay it. When
//! inputs need gradients, the replay adds one autograd node whose backward is derived by
//! symbolic autodiff and compiled lazily, once per set of outputs that receive cotangents.

use crate::autodiff::{Derivative, derive};
use crate::autograd::{CustomBackward, GradMeta, GradNode, NodeBackward, is_grad_enabled};
use crate::exec::{Executor, MemoryPlan};
use crate::grad_sum::GradPart;
use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{F64Bits, Full, Op};
use crate::passes::{PassStats, optimize};
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::trace::Unusable;
use crate::{DType, random};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How a replayed output reproduces the grad flags the eager call gave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutGrad {
    /// No autograd history.
    Plain,
    /// A fresh gradient leaf (`requires_grad()` inside the function).
    Leaf,
    /// Differentiable output number `k` of the derivative.
    Diff(usize),
    /// Input `k` passed through: the caller's own handle is returned (DESIGN §13 rule 9).
    Input(usize),
}

/// A compiled variant: the optimised executor and everything a replay needs.
pub struct Compiled {
    name: String,
    recorded: Graph,
    exec: Executor,
    stats: PassStats,
    num_outputs: usize,
    out_grad: Vec<OutGrad>,
    grad: Option<GradParts>,
    /// Milliseconds spent optimising and compiling (recording excluded).
    pub compile_ms: f64,
}

struct GradParts {
    derivative: Derivative,
    backward: Mutex<HashMap<Vec<bool>, Arc<Executor>>>,
}

impl Compiled {
    /// Compiles a recorded graph; `needs[k]` says whether input `k` needs gradients and
    /// `out_kinds` how each output was produced eagerly (leaf / with history / plain).
    pub fn new(name: &str, recorded: Graph, needs: &[bool], out_kinds: &[(bool, bool)]) -> Compiled {
        let t0 = Instant::now();
        let any_history = out_kinds.iter().any(|&(_, history)| history);
        let (grad, to_run) = if any_history && needs.iter().any(|&x| x) {
            let d = derive(&recorded, needs);
            let fwd = d.forward.clone();
            (Some(GradParts { derivative: d, backward: Mutex::new(HashMap::new()) }), fwd)
        } else {
            (None, recorded.clone())
        };
        let (optimised, stats) = optimize(to_run);
        crate::dump::dump(&format!("{name}-forward"), &optimised);
        let exec = Executor::compile(optimised);
        let out_grad = out_kinds
            .iter()
            .enumerate()
            .map(|(k, &(leaf, history))| {
                match (&recorded.node(recorded.outputs[k]).op, &grad, leaf, history) {
                    (NodeOp::Input(i), ..) => OutGrad::Input(*i),
                    (_, grad, leaf, history) => match (grad, leaf, history) {
                        (_, true, _) => OutGrad::Leaf,
                        (Some(g), _, true) => g
                            .derivative
                            .diff_outputs
                            .iter()
                            .position(|&o| o == k)
                            .map_or(OutGrad::Plain, OutGrad::Diff),
                        _ => OutGrad::Plain,
                    },
                }
            })
            .collect();
        Compiled {
            name: name.to_string(),
            num_outputs: recorded.outputs.len(),
            recorded,
            exec,
            stats,
            out_grad,
            grad,
            compile_ms: t0.elapsed().as_secs_f64() * 1e3,
        }
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

    /// Runs on `inputs` (the recorded signature); draws random numbers from this thread's stream
    /// and reproduces the recorded outputs' grad flags.
    pub fn replay(self: &Arc<Self>, inputs: &[Tensor]) -> Vec<Tensor> {
        let rng = self.exec.graph().rng;
        let mut args: Vec<Tensor> = Vec::with_capacity(inputs.len() + 1);
        args.extend_from_slice(inputs);
        if let Some(r) = rng {
            let (key, counter) = random::stream_position();
            let state = Tensor::from_buffer(
                janus_kernels::CpuBuffer::I64(vec![key as i64, counter as i64]),
                [2].into(),
            );
            args.insert(r.input, state);
            random::set_stream_position(key, counter.wrapping_add(r.blocks));
        }
        let mut outs = self.exec.run(args);
        let residuals = outs.split_off(self.num_outputs);
        let attach = self.grad.is_some() && is_grad_enabled();
        let node = attach.then(|| {
            let g = self.grad.as_ref().unwrap();
            let edges: Vec<Tensor> = g.derivative.grad_inputs.iter().map(|&k| inputs[k].clone()).collect();
            GradNode::new(
                edges,
                NodeBackward::Custom(Box::new(Backward { compiled: self.clone(), residuals })),
            )
        });
        outs.into_iter()
            .zip(&self.out_grad)
            .map(|(t, kind)| match (kind, &node) {
                (OutGrad::Input(i), _) => inputs[*i].clone(),
                (OutGrad::Leaf, _) => t.requires_grad(),
                (OutGrad::Diff(k), Some(node)) => t.with_node(node.clone(), *k),
                _ => t,
            })
            .collect()
    }

    /// The backward executor for this set of cotangents, compiled on first use.
    fn backward_for(&self, mask: &[bool]) -> Arc<Executor> {
        let g = self.grad.as_ref().expect("only differentiable variants have a backward");
        let mut cache = g.backward.lock().unwrap();
        if let Some(e) = cache.get(mask) {
            return e.clone();
        }
        let specialised = without_cotangents(&g.derivative, mask);
        let (optimised, _) = optimize(specialised);
        crate::dump::dump(&format!("{}-backward", self.name), &optimised);
        let e = Arc::new(Executor::compile(optimised));
        cache.insert(mask.to_vec(), e.clone());
        e
    }
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
}

impl CustomBackward for Backward {
    fn num_outputs(&self) -> usize {
        self.compiled.grad.as_ref().map_or(0, |g| g.derivative.diff_outputs.len())
    }

    fn backward(&self, _inputs: &[Tensor], grads: &[Option<Tensor>]) -> Vec<Option<GradPart>> {
        let mask: Vec<bool> = grads.iter().map(Option::is_some).collect();
        let exec = self.compiled.backward_for(&mask);
        let mut args = self.residuals.clone();
        args.extend(grads.iter().flatten().cloned());
        let mut outs = exec.run(args).into_iter();
        let d = &self.compiled.grad.as_ref().expect("differentiable variant").derivative;
        d.outer
            .iter()
            .enumerate()
            .map(|(k, &o)| {
                let first = outs.next().expect("one output per gradient");
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

/// What a `Traced` function does for one input signature.
enum Variant {
    Compiled(Arc<Compiled>),
    Eager(Unusable),
}

/// Input signature: shape, dtype and grad flag per input, plus the grad mode.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Signature {
    inputs: Vec<(Shape, DType, bool)>,
    grad_enabled: bool,
}

/// A function of tensors that runs as a compiled graph; see [`trace`].
pub struct Traced<F> {
    f: F,
    name: String,
    variants: Mutex<HashMap<Signature, Arc<VariantCell>>>,
    last: Mutex<Option<Arc<Compiled>>>,
}

struct VariantCell(Variant);

/// Wraps `f` (inputs in, outputs out) so that it runs as a compiled graph, recorded on the first
/// call with each input signature. `f` must be a function of its inputs: tensors it reaches
/// otherwise, and host reads, make the recording unusable (it then runs eagerly, correctly).
pub fn trace<F: Fn(&[Tensor]) -> Vec<Tensor>>(f: F) -> Traced<F> {
    Traced { f, name: "trace".into(), variants: Mutex::new(HashMap::new()), last: Mutex::new(None) }
}

impl<F: Fn(&[Tensor]) -> Vec<Tensor>> Traced<F> {
    /// Names the function in graph dumps.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Calls the function: replays a compiled variant, or records one.
    pub fn run(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        let sig = Signature {
            inputs: inputs.iter().map(|t| (t.shape().clone(), t.dtype(), t.needs_grad())).collect(),
            grad_enabled: is_grad_enabled(),
        };
        let found = self.variants.lock().unwrap().get(&sig).cloned();
        match found.as_deref() {
            Some(VariantCell(Variant::Compiled(c))) => c.replay(inputs),
            Some(VariantCell(Variant::Eager(_))) => (self.f)(inputs),
            None => {
                let (outs, variant) = self.record(inputs, &sig);
                if let Variant::Compiled(c) = &variant {
                    *self.last.lock().unwrap() = Some(c.clone());
                }
                self.variants.lock().unwrap().insert(sig, Arc::new(VariantCell(variant)));
                outs
            }
        }
    }

    fn record(&self, inputs: &[Tensor], sig: &Signature) -> (Vec<Tensor>, Variant) {
        let rec = crate::trace::start();
        for (k, t) in inputs.iter().enumerate() {
            rec.register_input(t, format!("input {k}"));
        }
        let outs = (self.f)(inputs);
        let refs: Vec<&Tensor> = outs.iter().collect();
        // As with PyTorch's `retain_graph=False`, a graph that `backward()` walked is consumed:
        // a replay of a recording that ran `backward()` returns results without history.
        let consumed = rec.saw_backward();
        let variant = match rec.finish(&refs) {
            Ok(g) => {
                let needs: Vec<bool> = sig.inputs.iter().map(|x| x.2 && sig.grad_enabled).collect();
                let mut needs_all = needs.clone();
                needs_all.resize(g.inputs.len(), false); // the random-stream input
                let kinds: Vec<(bool, bool)> =
                    outs.iter().map(|t| (t.is_leaf(), t.needs_grad() && !t.is_leaf() && !consumed)).collect();
                Variant::Compiled(Arc::new(Compiled::new(&self.name, g, &needs_all, &kinds)))
            }
            Err(why) => {
                log::info!("janus: {} runs eagerly for this signature: {why}", self.name);
                Variant::Eager(why)
            }
        };
        (outs, variant)
    }

    /// The most recently compiled variant.
    pub fn compiled(&self) -> Option<Arc<Compiled>> {
        self.last.lock().unwrap().clone()
    }

    /// The optimised graph of the most recently compiled variant.
    pub fn graph(&self) -> Option<Graph> {
        self.compiled().map(|c| c.graph().clone())
    }

    /// Graphviz DOT of the most recently compiled variant's optimised graph.
    pub fn dot(&self) -> Option<String> {
        self.compiled().map(|c| c.graph().to_dot())
    }

    /// Why the recording for these inputs' signature is unusable, if it is.
    pub fn eager_reason(&self, inputs: &[Tensor]) -> Option<String> {
        let sig = Signature {
            inputs: inputs.iter().map(|t| (t.shape().clone(), t.dtype(), t.needs_grad())).collect(),
            grad_enabled: is_grad_enabled(),
        };
        match self.variants.lock().unwrap().get(&sig).map(|v| &v.0) {
            Some(Variant::Eager(why)) => Some(why.to_string()),
            _ => None,
        }
    }
}

impl Tensor {
    /// A handle of this value as output `index` of autograd node `node`.
    pub(crate) fn with_node(self, node: Arc<GradNode>, index: usize) -> Tensor {
        Tensor::from_parts(
            self.shape().clone(),
            self.dtype(),
            self.0.data.clone(),
            GradMeta::Node(node, index),
        )
    }
}
