//! Symbolic autodiff: the backward graph of a forward graph, derived from the same VJP rules the
//! eager tape runs (one set of rules, not two). The rules execute over symbolic tensors while a
//! recording seeded with the forward graph is active, so every op they call becomes a node.
//!
//! The result is split into a forward graph that also outputs the residuals the backward needs,
//! and a backward graph from (residuals, output cotangents) to input gradients.
//!
//! Autograd boundaries come from the recording (see [`crate::trace`]): an [`Op::Detach`] is not
//! differentiable, so nothing flows through it; an [`Op::FreshLeaf`] is differentiable from
//! nothing but is a gradient target itself, like an input that needs gradients.

mod loops;

use crate::autograd::{GradMeta, no_grad};
use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use crate::ops::{Op, TensorType};
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::collections::HashMap;

/// A forward graph with residual outputs and its backward graph.
#[derive(Clone, Debug)]
pub struct Derivative {
    /// The original outputs, then the residuals, then the value of each of `fresh_leaves`.
    pub forward: Graph,
    /// Number of original outputs (residuals follow).
    pub num_outputs: usize,
    /// Number of residual outputs (the fresh leaves' values follow).
    pub num_residuals: usize,
    /// Inputs: the residuals, then one cotangent per entry of `diff_outputs`. Outputs: one
    /// gradient per *target*: each entry of `grad_inputs`, then each of `grad_leaves`.
    pub backward: Graph,
    /// Outputs that are differentiable (float, depending on an input that needs gradients or
    /// on a fresh leaf).
    pub diff_outputs: Vec<usize>,
    /// Graph inputs that receive gradients.
    pub grad_inputs: Vec<usize>,
    /// The `FreshLeaf` nodes of the graph, in order (new gradient leaves made inside it).
    pub fresh_leaves: Vec<NodeId>,
    /// Entries of `fresh_leaves` that receive gradients.
    pub grad_leaves: Vec<usize>,
    /// Per target: whether the gradient comes as two outputs `(a, g)` meaning `aᵀ·g`, deferred
    /// so the caller can sum many of them as one GEMM.
    pub outer: Vec<bool>,
    /// `depends[j][k]`: whether differentiable output `diff_outputs[j]` depends differentiably
    /// on target `k`. A target that no output receiving a cotangent depends on gets no gradient
    /// (as in eager mode), not zeros.
    pub depends: Vec<Vec<bool>>,
}

fn symbolic(ty: &TensorType, needs_grad: bool) -> Tensor {
    let grad = if needs_grad { GradMeta::Leaf } else { GradMeta::None };
    Tensor::from_parts(ty.shape.clone(), ty.dtype, None, grad)
}

/// Derives gradients of `g`'s differentiable outputs with respect to the inputs flagged in
/// `needs` (one flag per graph input) and to the graph's fresh leaves.
// Long by design: one reverse sweep whose bookkeeping (cotangents, residuals) is shared.
pub fn derive(g: &Graph, needs: &[bool]) -> Derivative {
    // Loops keep their residuals (new projections at the end: every node keeps its id).
    let (g, loop_grads) = loops::augment(g, &activity(g, needs));
    let g = &g;
    let n = g.nodes.len();
    // Which values depend differentiably on an input that needs gradients.
    let active = activity(g, needs);
    let diff_outputs: Vec<usize> = (0..g.outputs.len())
        .filter(|&k| active[g.outputs[k].index()] && g.node(g.outputs[k]).ty.dtype.is_float())
        .collect();

    let rec = crate::trace::start_derivation(g.to_builder());
    let syms: Vec<Tensor> =
        g.nodes.iter().enumerate().map(|(i, node)| symbolic(&node.ty, active[i])).collect();
    crate::trace::with_top(|r| {
        for (i, t) in syms.iter().enumerate() {
            r.bind(t, NodeId(i as u32));
        }
    });
    let mut grads: HashMap<usize, Tensor> = HashMap::new();
    let accumulate = |grads: &mut HashMap<usize, Tensor>, i: usize, gr: Tensor| {
        let sum = match grads.remove(&i) {
            Some(prev) => &prev + &gr,
            None => gr,
        };
        grads.insert(i, sum);
    };
    let cotangent_nodes: Vec<NodeId> = diff_outputs
        .iter()
        .map(|&k| {
            let o = g.outputs[k];
            let ct =
                crate::trace::with_top(|r| r.builder.input(format!("cotangent {k}"), g.node(o).ty.clone()))
                    .unwrap();
            let t = symbolic(&g.node(o).ty, false);
            crate::trace::with_top(|r| r.bind(&t, ct));
            accumulate(&mut grads, o.index(), t);
            ct
        })
        .collect();
    // Cotangents of loop outputs, gathered from their projections.
    let mut loop_cts: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
    no_grad(|| {
        for i in (0..n).rev() {
            if let Some(lg) = loop_grads.get(&i) {
                let mut cts = loop_cts.remove(&i).unwrap_or_default();
                cts.resize(lg.orig_outputs(), None);
                cts[0] = grads.remove(&i);
                if cts.iter().all(Option::is_none) {
                    continue;
                }
                let node = &g.nodes[i];
                for (a, gin) in node.inputs.iter().zip(loops::vjp(lg, node, &cts)) {
                    if let Some(gin) = gin
                        && active[a.index()]
                    {
                        accumulate(&mut grads, a.index(), gin);
                    }
                }
                continue;
            }
            if let NodeOp::Project(k) = g.nodes[i].op
                && let Some(gout) = grads.remove(&i)
            {
                let cts = loop_cts.entry(g.nodes[i].inputs[0].index()).or_default();
                cts.resize(cts.len().max(k + 1), None);
                cts[k] = Some(gout);
                continue;
            }
            let NodeOp::Op(op) = &g.nodes[i].op else { continue };
            if *op == Op::FreshLeaf {
                continue; // its gradient is a result, and nothing flows past it
            }
            let Some(gout) = grads.remove(&i) else { continue };
            if !active[i] {
                continue;
            }
            let args: Vec<Tensor> = g.nodes[i].inputs.iter().map(|a| syms[a.index()].clone()).collect();
            for (a, gin) in g.nodes[i].inputs.iter().zip(op.vjp(&args, &syms[i], &gout)) {
                if let Some(gin) = gin
                    && active[a.index()]
                {
                    accumulate(&mut grads, a.index(), gin);
                }
            }
        }
    });
    // Inputs that received a gradient (as in eager mode, an input no differentiable output
    // depends on gets none, not zeros).
    let input_node =
        |k: usize| g.nodes.iter().position(|x| x.op == NodeOp::Input(k)).expect("every input has a node");
    let grad_inputs: Vec<usize> =
        (0..g.inputs.len()).filter(|&k| grads.contains_key(&input_node(k))).collect();
    let fresh_leaves: Vec<NodeId> =
        (0..n).filter(|&i| g.nodes[i].op == NodeOp::Op(Op::FreshLeaf)).map(|i| NodeId(i as u32)).collect();
    let grad_leaves: Vec<usize> =
        (0..fresh_leaves.len()).filter(|&j| grads.contains_key(&fresh_leaves[j].index())).collect();
    let targets: Vec<usize> = (grad_inputs.iter().map(|&k| input_node(k)))
        .chain(grad_leaves.iter().map(|&j| fresh_leaves[j].index()))
        .collect();
    let input_grads: Vec<Tensor> = targets.iter().map(|&i| grads.remove(&i).unwrap()).collect();
    // Gradients of the form `aᵀ·g` (a 2-D matmul's right operand) leave as their factors.
    let mut grad_outputs: Vec<Tensor> = Vec::new();
    let mut outer = Vec::new();
    for t in &input_grads {
        match crate::trace::with_top(|r| outer_factors(r, t)).flatten() {
            Some((a, b)) => {
                grad_outputs.extend([a, b]);
                outer.push(true);
            }
            None => {
                grad_outputs.push(t.clone());
                outer.push(false);
            }
        }
    }
    let mut outs: Vec<&Tensor> = Vec::new();
    let orig_outputs: Vec<Tensor> = g.outputs.iter().map(|o| syms[o.index()].clone()).collect();
    outs.extend(orig_outputs.iter());
    outs.extend(grad_outputs.iter());
    let combined = rec.finish(&outs).expect("derivation records only ops on known values");
    let depends = diff_outputs
        .iter()
        .map(|&k| {
            let reached = differentiable_ancestors(g, &active, g.outputs[k]);
            targets.iter().map(|&i| reached[i]).collect()
        })
        .collect();
    let mut d = split(g, &combined, &cotangent_nodes, diff_outputs, grad_inputs);
    d.forward.outputs.extend(fresh_leaves.iter().copied());
    d.fresh_leaves = fresh_leaves;
    d.grad_leaves = grad_leaves;
    d.outer = outer;
    d.depends = depends;
    d
}

/// Per node of `g`: whether its value depends differentiably on an input flagged in `needs`
/// (one flag per graph input) or on a fresh leaf.
pub(crate) fn activity(g: &Graph, needs: &[bool]) -> Vec<bool> {
    let mut active = vec![false; g.nodes.len()];
    let mut loop_outs: HashMap<usize, Vec<bool>> = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        active[i] = match &node.op {
            NodeOp::Input(k) => needs[*k] && node.ty.dtype.is_float(),
            NodeOp::Op(Op::FreshLeaf) => node.ty.dtype.is_float(),
            NodeOp::Op(op) => op.is_differentiable() && node.inputs.iter().any(|a| active[a.index()]),
            NodeOp::Loop(spec) => {
                let operands: Vec<bool> = node.inputs.iter().map(|a| active[a.index()]).collect();
                let outs = loops::activity(spec, &operands).1;
                let first = outs[0];
                loop_outs.insert(i, outs);
                first
            }
            NodeOp::Project(k) => loop_outs.get(&node.inputs[0].index()).is_some_and(|o| o[*k]),
            _ => false,
        };
    }
    active
}

/// The nodes `from` depends on through differentiable ops between active values (through a
/// loop, on the operands its output depends on).
fn differentiable_ancestors(g: &Graph, active: &[bool], from: NodeId) -> Vec<bool> {
    let mut seen = vec![false; g.nodes.len()];
    let mut stack = vec![from.index()];
    seen[from.index()] = true;
    let loop_deps = |l: usize, output: usize| -> Vec<bool> {
        let NodeOp::Loop(spec) = &g.nodes[l].op else { unreachable!("a loop node") };
        let operands: Vec<bool> = g.nodes[l].inputs.iter().map(|a| active[a.index()]).collect();
        let needs = loops::activity(spec, &operands).0;
        loops::deps(spec, &needs).swap_remove(output)
    };
    while let Some(i) = stack.pop() {
        let node = &g.nodes[i];
        let (l, reads): (usize, Vec<bool>) = match &node.op {
            NodeOp::Op(op) if op.is_differentiable() => (i, vec![true; node.inputs.len()]),
            NodeOp::Loop(_) => (i, loop_deps(i, 0)),
            NodeOp::Project(k) if matches!(g.nodes[node.inputs[0].index()].op, NodeOp::Loop(_)) => {
                let l = node.inputs[0].index();
                (l, loop_deps(l, *k))
            }
            _ => continue,
        };
        for (a, _) in g.nodes[l].inputs.iter().zip(reads).filter(|(_, r)| *r) {
            if active[a.index()] && !seen[a.index()] {
                seen[a.index()] = true;
                stack.push(a.index());
            }
        }
    }
    seen
}

/// If `t` was recorded as `matmul(permute[1, 0](a), g)` of 2-D values, symbolic handles of `a`
/// and `g`.
fn outer_factors(r: &mut crate::trace::Recording, t: &Tensor) -> Option<(Tensor, Tensor)> {
    use crate::ops::Op;
    let n = r.node_of(t)?;
    let node = r.builder.node(n).clone();
    if node.op != NodeOp::Op(Op::MatMul) || node.ty.shape.rank() != 2 {
        return None;
    }
    let lhs = r.builder.node(node.inputs[0]).clone();
    let NodeOp::Op(Op::Permute(p)) = &lhs.op else { return None };
    if p.perm.as_slice() != [1, 0] {
        return None;
    }
    let (a_node, g_node) = (lhs.inputs[0], node.inputs[1]);
    let a = symbolic(&r.builder.node(a_node).ty, false);
    let g = symbolic(&r.builder.node(g_node).ty, false);
    r.bind(&a, a_node);
    r.bind(&g, g_node);
    Some((a, g))
}

/// Splits the combined graph: nodes added by the derivation form the backward graph; original
/// forward nodes they read become residual outputs of the forward graph.
fn split(
    g: &Graph,
    c: &Graph,
    cotangents: &[NodeId],
    diff_outputs: Vec<usize>,
    grad_inputs: Vec<usize>,
) -> Derivative {
    let n_fwd = g.nodes.len();
    let num_outputs = g.outputs.len();
    let grad_outs = &c.outputs[num_outputs..];
    // Live backward nodes, from the gradient outputs back.
    let mut live = vec![false; c.nodes.len()];
    for o in grad_outs {
        live[o.index()] = true;
    }
    for i in (0..c.nodes.len()).rev() {
        if live[i] {
            for a in &c.nodes[i].inputs {
                live[a.index()] = true;
            }
        }
    }
    let mut residuals: Vec<usize> = Vec::new();
    for (node, _) in c.nodes.iter().zip(&live).skip(n_fwd).filter(|(_, l)| **l) {
        {
            for a in &node.inputs {
                if a.index() < n_fwd && !residuals.contains(&a.index()) {
                    residuals.push(a.index());
                }
            }
        }
    }
    // Gradients that are forward values themselves (an identity path) are residuals too.
    for o in grad_outs {
        if o.index() < n_fwd && !residuals.contains(&o.index()) {
            residuals.push(o.index());
        }
    }
    let mut forward_outputs = g.outputs.clone();
    forward_outputs.extend(residuals.iter().map(|&r| NodeId(r as u32)));
    let forward = g.to_builder().finish(forward_outputs);

    let mut b = GraphBuilder::new();
    let mut map: HashMap<usize, NodeId> = HashMap::new();
    for (k, &r) in residuals.iter().enumerate() {
        map.insert(r, b.input(format!("residual {k}"), g.nodes[r].ty.clone()));
    }
    for (k, ct) in cotangents.iter().enumerate() {
        map.insert(
            ct.index(),
            b.input(format!("cotangent {}", diff_outputs[k]), c.nodes[ct.index()].ty.clone()),
        );
    }
    for (i, node) in c.nodes.iter().enumerate().skip(n_fwd) {
        if !live[i] || map.contains_key(&i) {
            continue;
        }
        let inputs: SmallVec<[NodeId; 4]> = node.inputs.iter().map(|a| map[&a.index()]).collect();
        let id = b.push(Node { op: node.op.clone(), inputs, ty: node.ty.clone(), span: node.span });
        map.insert(i, id);
    }
    let backward = b.finish(grad_outs.iter().map(|o| map[&o.index()]).collect());
    Derivative {
        forward,
        num_outputs,
        num_residuals: residuals.len(),
        backward,
        diff_outputs,
        grad_inputs,
        fresh_leaves: Vec::new(),
        grad_leaves: Vec::new(),
        outer: Vec::new(),
        depends: Vec::new(),
    }
}
