//! The derivative of a loop node: the body's own derivative, run as two loops.
//!
//! - The forward loop runs the body's forward graph, which also outputs the residuals its
//!   backward needs, and stacks them over the trips (a residual that is an invariant or sliced
//!   body input is read from the loop's operand instead: a weight is not copied per trip).
//! - The backward loop runs the body's backward graph over the trips in reverse. It carries
//!   each differentiable body output's cotangent: on the last trip the cotangent of the loop's
//!   final value, on earlier ones the sum of the gradients of the carried inputs it fed on the
//!   trip after; a stacked output's per-trip cotangent is added. It carries the sum of the
//!   gradients of invariant inputs, and stacks those of sliced inputs. An invariant gradient
//!   of the form `aᵀ·g` (a weight's) is stacked as its factors instead, and summed over all
//!   trips as one GEMM after the loop, as the unrolled graph's stacked weight gradient is.
//!
//! Which outputs are differentiable, and which operands each output depends on, follow from
//! the body by a fixed point over the carried inputs.

use super::{Derivative, derive, symbolic};
use crate::graph::loops::{LoopIn, LoopSpec};
use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{BinaryOp, F64Bits, Full, Op, Permute, TensorType};
use crate::tensor::Tensor;
use smallvec::{SmallVec, smallvec};
use std::collections::HashMap;
use std::sync::Arc;

/// Which body inputs are differentiable (given which operands are) and which loop outputs are.
pub(super) fn activity(spec: &LoopSpec, operands: &[bool]) -> (Vec<bool>, Vec<bool>) {
    let b = &spec.body;
    let mut needs = operands.to_vec();
    loop {
        let act = super::activity(b, &needs);
        let mut changed = false;
        for (k, kind) in spec.ins.iter().enumerate() {
            if let LoopIn::Carried { from } = *kind
                && act[b.outputs[from].index()]
                && !needs[k]
            {
                needs[k] = true;
                changed = true;
            }
        }
        if !changed {
            let out = |j: usize| act[b.outputs[j].index()];
            let mut outs: Vec<bool> = (0..spec.finals).map(out).collect();
            outs.extend(spec.stacked.iter().map(|&j| out(j)));
            return (needs, outs);
        }
    }
}

/// `deps[o][k]`: whether loop output `o` depends differentiably on operand `k` (on some trip).
pub(super) fn deps(spec: &LoopSpec, needs: &[bool]) -> Vec<Vec<bool>> {
    let b = &spec.body;
    let act = super::activity(b, needs);
    let input_node: Vec<usize> = (0..b.inputs.len())
        .map(|k| b.nodes.iter().position(|n| n.op == NodeOp::Input(k)).expect("every input has a node"))
        .collect();
    // Within one trip.
    let direct: Vec<Vec<bool>> = (b.outputs.iter())
        .map(|o| {
            let reached = super::differentiable_ancestors(b, &act, *o);
            input_node.iter().map(|&n| reached[n]).collect()
        })
        .collect();
    // Across trips: output j depends on what the carried inputs it reads depended on.
    let mut all = direct.clone();
    loop {
        let mut changed = false;
        for j in 0..all.len() {
            for (k2, kind) in spec.ins.iter().enumerate() {
                let LoopIn::Carried { from } = *kind else { continue };
                if !direct[j][k2] {
                    continue;
                }
                let reached = all[from].clone();
                for (dep, r) in all[j].iter_mut().zip(reached) {
                    if r && !*dep {
                        *dep = true;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut outs: Vec<Vec<bool>> = (0..spec.finals).map(|j| all[j].clone()).collect();
    outs.extend(spec.stacked.iter().map(|&j| all[j].clone()));
    outs
}

/// Where the backward loop reads one residual of the body.
#[derive(Clone, Copy)]
enum Residual {
    /// The loop's operand for body input `k` (invariant or sliced).
    Operand(usize),
    /// Loop output `o` of the forward loop (a stack).
    Stacked(usize),
}

/// A loop of the forward graph, made to keep what its backward needs.
pub(super) struct LoopGrad {
    /// The forward loop's spec: the body's forward graph, its residuals stacked.
    spec: Arc<LoopSpec>,
    body: Derivative,
    residuals: Vec<Residual>,
    /// Per output of the forward loop, its node (the loop node, then its projections).
    outputs: Vec<NodeId>,
    /// Outputs the loop had before (its cotangents).
    orig_outputs: usize,
    /// Which body inputs are differentiable.
    needs: Vec<bool>,
}

impl LoopGrad {
    /// Outputs the loop had before it kept residuals (those that receive cotangents).
    pub(super) fn orig_outputs(&self) -> usize {
        self.orig_outputs
    }
}

/// `g` with each differentiable loop replaced by one that also stacks its body's residuals
/// (their projections appended at the end, so every node keeps its id); per loop node, what
/// its vector-Jacobian product needs.
pub(super) fn augment(g: &Graph, active: &[bool]) -> (Graph, HashMap<usize, LoopGrad>) {
    let mut out = g.clone();
    let mut loops = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let NodeOp::Loop(spec) = &node.op else { continue };
        let operands: Vec<bool> = node.inputs.iter().map(|a| active[a.index()]).collect();
        let (needs, outs) = activity(spec, &operands);
        if !outs.iter().any(|&a| a) {
            continue;
        }
        let body = crate::eager::uncounted(|| derive(&spec.body, &needs));
        assert!(body.fresh_leaves.is_empty(), "loop bodies with new gradient leaves are not rolled");
        let n_out = spec.body.outputs.len();
        let mut stacked = spec.stacked.clone();
        let mut residuals = Vec::with_capacity(body.num_residuals);
        for r in 0..body.num_residuals {
            let node = body.forward.node(body.forward.outputs[n_out + r]);
            residuals.push(match node.op {
                NodeOp::Input(k) if !matches!(spec.ins[k], LoopIn::Carried { .. }) => Residual::Operand(k),
                _ => {
                    stacked.push(n_out + r);
                    Residual::Stacked(spec.finals + stacked.len() - 1)
                }
            });
        }
        let mut forward = body.forward.clone();
        forward.outputs.truncate(n_out + body.num_residuals);
        let aug = Arc::new(LoopSpec { body: forward, stacked, ..(**spec).clone() });
        let orig_outputs = spec.finals + spec.stacked.len();
        let mut outputs = vec![NodeId(i as u32)];
        outputs.extend((1..orig_outputs).map(|k| {
            let p = g
                .nodes
                .iter()
                .position(|n| n.op == NodeOp::Project(k) && n.inputs.first() == Some(&NodeId(i as u32)));
            NodeId(p.expect("every loop output has a projection") as u32)
        }));
        for (k, ty) in aug.out_types().into_iter().enumerate().skip(orig_outputs) {
            let p = Node { op: NodeOp::Project(k), inputs: smallvec![NodeId(i as u32)], ty, span: None };
            out.nodes.push(p);
            outputs.push(NodeId(out.nodes.len() as u32 - 1));
        }
        out.nodes[i].op = NodeOp::Loop(aug.clone());
        loops.insert(i, LoopGrad { spec: aug, body, residuals, outputs, orig_outputs, needs });
    }
    (out, loops)
}

/// Pushes `op` over `inputs` into the active derivation recording; a symbolic handle of it.
fn push(op: NodeOp, inputs: &[NodeId], ty: TensorType) -> (NodeId, Tensor) {
    crate::trace::with_top(|r| {
        let id =
            r.builder.push(Node { op, inputs: inputs.iter().copied().collect(), ty: ty.clone(), span: None });
        let t = symbolic(&ty, false);
        r.bind(&t, id);
        (id, t)
    })
    .expect("a derivation is recording")
}

fn node_of(t: &Tensor) -> NodeId {
    crate::trace::with_top(|r| r.node_of(t)).flatten().expect("derivation values are recorded")
}

fn zeros(ty: &TensorType) -> NodeOp {
    NodeOp::Op(Op::Full(Full {
        shape: ty.shape.clone(),
        dtype: ty.dtype,
        value: F64Bits::new(0.0),
        device: crate::Device::Cpu,
    }))
}

fn node(b: &mut GraphBuilder, op: NodeOp, inputs: SmallVec<[NodeId; 4]>, ty: TensorType) -> NodeId {
    b.push(Node { op, inputs, ty, span: None })
}

/// The vector-Jacobian product of forward loop `lg` (node `l`) for the cotangents of its
/// outputs (`None`: none reached it): recorded into the active derivation, one gradient per
/// operand (`None` where the operand gets none).
// Long by design: the backward body is assembled in one place, input kinds and outputs side by
// side.
pub(super) fn vjp(lg: &LoopGrad, l: &Node, cts: &[Option<Tensor>]) -> Vec<Option<Tensor>> {
    let spec = &*lg.spec;
    let d = &lg.body;
    let body = &spec.body;
    let ty = |j: usize| body.node(body.outputs[j]).ty.clone();
    let in_ty = |k: usize| body.inputs[k].ty.clone();
    // Targets: body inputs that get a gradient, and where it is among the backward outputs.
    let mut at = 0;
    let targets: Vec<(usize, bool, usize)> = (d.grad_inputs.iter().zip(&d.outer))
        .map(|(&k, &outer)| {
            let t = (k, outer, at);
            at += if outer { 2 } else { 1 };
            t
        })
        .collect();

    let mut bb = GraphBuilder::new();
    let mut kinds: Vec<LoopIn> = Vec::new();
    let mut operands: Vec<NodeId> = Vec::new();
    // (a) Each differentiable output's cotangent, carried backwards.
    let ct_in: Vec<NodeId> = (d.diff_outputs.iter().enumerate())
        .map(|(dj, &j)| {
            kinds.push(LoopIn::Carried { from: dj });
            let last = cts.get(j).filter(|_| j < spec.finals).cloned().flatten();
            operands.push(match last {
                Some(c) => node_of(&c),
                None => push(zeros(&ty(j)), &[], ty(j)).0,
            });
            bb.input(format!("cotangent {j}"), ty(j))
        })
        .collect();
    // (b) Per-trip cotangents of stacked outputs.
    let mut per_trip: Vec<(usize, NodeId)> = Vec::new();
    for (m, &j) in spec.stacked.iter().enumerate().take(lg.orig_outputs - spec.finals) {
        if let Some(c) = &cts[spec.finals + m]
            && d.diff_outputs.contains(&j)
        {
            kinds.push(LoopIn::Sliced);
            operands.push(node_of(c));
            per_trip.push((j, bb.input(format!("stacked cotangent {j}"), ty(j))));
        }
    }
    // (c) Residuals.
    let res_in: Vec<NodeId> = (lg.residuals.iter().enumerate())
        .map(|(r, res)| {
            let (kind, operand) = match *res {
                Residual::Operand(k) => (spec.ins[k], l.inputs[k]),
                Residual::Stacked(o) => (LoopIn::Sliced, lg.outputs[o]),
            };
            kinds.push(kind);
            operands.push(operand);
            let n = body.outputs[d.num_outputs + r];
            bb.input(format!("residual {r}"), body.node(n).ty.clone())
        })
        .collect();
    // (d) Sums of invariant inputs' gradients (those not kept as factors).
    let accumulated: Vec<(usize, NodeId)> = (targets.iter())
        .filter(|&&(k, outer, _)| spec.ins[k] == LoopIn::Invariant && !outer)
        .map(|&(k, _, _)| {
            kinds.push(LoopIn::Invariant); // fixed below, once the output is known
            operands.push(push(zeros(&in_ty(k)), &[], in_ty(k)).0);
            (k, bb.input(format!("gradient sum {k}"), in_ty(k)))
        })
        .collect();

    // The body's backward graph, its inputs bound.
    let bw = &d.backward;
    let n_res = d.num_residuals;
    let mut map: Vec<NodeId> = Vec::with_capacity(bw.nodes.len());
    for n in &bw.nodes {
        let id = match n.op {
            NodeOp::Input(i) if i < n_res => res_in[i],
            NodeOp::Input(i) => {
                let dj = i - n_res;
                let j = d.diff_outputs[dj];
                let mut ct = ct_in[dj];
                for &(_, p) in per_trip.iter().filter(|(pj, _)| *pj == j) {
                    let add = NodeOp::Op(Op::Binary(BinaryOp::Add));
                    ct = node(&mut bb, add, smallvec![ct, p], ty(j));
                }
                ct
            }
            _ => {
                let inputs = n.inputs.iter().map(|a| map[a.index()]).collect();
                bb.push(Node { op: n.op.clone(), inputs, ty: n.ty.clone(), span: n.span })
            }
        };
        map.push(id);
    }
    let out = |i: usize| map[bw.outputs[i].index()];
    // A target's gradient as one value (factors multiplied out, per trip).
    let dense = |bb: &mut GraphBuilder, k: usize, outer: bool, at: usize| -> NodeId {
        if !outer {
            return out(at);
        }
        let (a, g) = (out(at), out(at + 1));
        let (at_ty, g_ty) = (bb.node(a).ty.clone(), bb.node(g).ty.clone());
        let tr = TensorType { shape: [at_ty.shape[1], at_ty.shape[0]].into(), dtype: at_ty.dtype };
        let a_t = node(bb, NodeOp::Op(Op::Permute(Permute { perm: smallvec![1, 0] })), smallvec![a], tr);
        let prod = TensorType { shape: [at_ty.shape[1], g_ty.shape[1]].into(), dtype: g_ty.dtype };
        debug_assert_eq!(prod, in_ty(k));
        node(bb, NodeOp::Op(Op::MatMul), smallvec![a_t, g], prod)
    };
    let grad_of: HashMap<usize, (bool, usize)> = targets.iter().map(|&(k, o, at)| (k, (o, at))).collect();

    // Outputs: carried cotangents, carried inputs' gradients, gradient sums (the finals), then
    // the stacks: sliced inputs' gradients and invariant gradients' factors.
    let mut outputs: Vec<NodeId> = Vec::new();
    for &j in &d.diff_outputs {
        let mut sum: Option<NodeId> = None;
        for (k, kind) in spec.ins.iter().enumerate() {
            if *kind == (LoopIn::Carried { from: j })
                && let Some(&(outer, at)) = grad_of.get(&k)
            {
                let g = dense(&mut bb, k, outer, at);
                let add = NodeOp::Op(Op::Binary(BinaryOp::Add));
                sum = Some(match sum {
                    None => g,
                    Some(s) => node(&mut bb, add, smallvec![s, g], ty(j)),
                });
            }
        }
        outputs.push(sum.unwrap_or_else(|| node(&mut bb, zeros(&ty(j)), smallvec![], ty(j))));
    }
    let carried: Vec<usize> =
        (targets.iter()).filter(|t| matches!(spec.ins[t.0], LoopIn::Carried { .. })).map(|t| t.0).collect();
    for &k in &carried {
        let (outer, at) = grad_of[&k];
        let g = dense(&mut bb, k, outer, at);
        outputs.push(g);
    }
    let first_sum = kinds.len() - accumulated.len();
    for (a, &(k, acc)) in accumulated.iter().enumerate() {
        kinds[first_sum + a] = LoopIn::Carried { from: outputs.len() };
        let g = out(grad_of[&k].1);
        let add = NodeOp::Op(Op::Binary(BinaryOp::Add));
        outputs.push(node(&mut bb, add, smallvec![acc, g], in_ty(k)));
    }
    let finals = outputs.len();
    let mut stacked = Vec::new();
    let sliced: Vec<usize> =
        (targets.iter()).filter(|t| spec.ins[t.0] == LoopIn::Sliced).map(|t| t.0).collect();
    for &k in &sliced {
        let (outer, at) = grad_of[&k];
        let g = dense(&mut bb, k, outer, at);
        stacked.push(outputs.len());
        outputs.push(g);
    }
    let factored: Vec<(usize, usize)> =
        (targets.iter()).filter(|t| spec.ins[t.0] == LoopIn::Invariant && t.1).map(|t| (t.0, t.2)).collect();
    for &(_, at) in &factored {
        stacked.extend([outputs.len(), outputs.len() + 1]);
        outputs.extend([out(at), out(at + 1)]);
    }
    let bspec = LoopSpec {
        body: bb.finish(outputs),
        trips: spec.trips,
        ins: kinds,
        finals,
        stacked,
        reverse: !spec.reverse,
    };
    let types = bspec.out_types();
    let (lb, first) = push(NodeOp::Loop(Arc::new(bspec)), &operands, types[0].clone());
    let results: Vec<Tensor> = std::iter::once(first)
        .chain(types.iter().enumerate().skip(1).map(|(k, t)| push(NodeOp::Project(k), &[lb], t.clone()).1))
        .collect();

    // Gradients of the operands.
    let mut grads: Vec<Option<Tensor>> = vec![None; spec.ins.len()];
    let n_ct = d.diff_outputs.len();
    for (c, &k) in carried.iter().enumerate() {
        grads[k] = Some(results[n_ct + c].clone());
    }
    for (a, &(k, _)) in accumulated.iter().enumerate() {
        grads[k] = Some(results[n_ct + carried.len() + a].clone());
    }
    for (s, &k) in sliced.iter().enumerate() {
        grads[k] = Some(results[finals + s].clone());
    }
    for (f, &(k, _)) in factored.iter().enumerate() {
        let (a, g) = (&results[finals + sliced.len() + 2 * f], &results[finals + sliced.len() + 2 * f + 1]);
        let rows = |t: &Tensor| -> Tensor {
            let s = t.sizes();
            t.reshape([(s[0] * s[1]) as isize, s[2] as isize])
        };
        grads[k] = Some(rows(a).t().matmul(&rows(g)));
    }
    debug_assert!(grads.iter().zip(&lg.needs).all(|(g, &n)| g.is_none() || n));
    grads
}
