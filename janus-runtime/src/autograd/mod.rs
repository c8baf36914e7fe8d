//! Reverse-mode autograd. The graph is owned by the tensors (see docs/design.md, "Autograd
//! across host and graph"): a tensor that needs gradients holds an `Arc` to the node that
//! produced it, and a node holds its inputs. There is no global tape, so a forward pass that is
//! never differentiated just drops.
//!
//! `backward()` walks the nodes in reverse topological order and runs each node's VJP. Op nodes
//! use the VJP rules of [`crate::ops`], written once in terms of `Tensor` ops; custom nodes (a
//! compiled fragment) bring their own backward.

mod grads;
pub(crate) mod sum;

pub use grads::Grads;

use crate::autograd::sum::{GradPart, GradSum};
use crate::error::bail;
use crate::ops::Op;
pub(crate) use crate::tensor::GradMeta;
use crate::tensor::{NodeRef, Tensor};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One recorded computation: its inputs (the edges to earlier nodes) and how to differentiate it.
pub(crate) struct GradNode {
    pub(crate) id: u64,
    pub(crate) inputs: Vec<Tensor>,
    pub(crate) backward: NodeBackward,
}

pub(crate) enum NodeBackward {
    /// A primitive op with a single output, saved without its own grad history (no cycle).
    Op { op: Op, output: Tensor },
    /// A multi-output computation with its own backward (e.g. a compiled fragment).
    #[allow(dead_code)] // constructed once compiled fragments record autograd nodes
    Custom(Box<dyn CustomBackward>),
}

/// The backward of a multi-output node.
pub(crate) trait CustomBackward:
    Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe
{
    /// Number of outputs.
    fn num_outputs(&self) -> usize;
    /// Input gradients (one slot per node input) from output cotangents (`None` = zero).
    fn backward(&self, inputs: &[Tensor], grads: &[Option<Tensor>]) -> Vec<Option<GradPart>>;
}

impl NodeRef {
    /// A new autograd node over `inputs` (the edges to earlier nodes).
    pub(crate) fn new(inputs: Vec<Tensor>, backward: NodeBackward) -> NodeRef {
        NodeRef(Arc::new(GradNode { id: NEXT_NODE.fetch_add(1, Ordering::Relaxed), inputs, backward }))
    }
}

impl std::ops::Deref for NodeRef {
    type Target = GradNode;

    fn deref(&self) -> &GradNode {
        let any: &(dyn std::any::Any + Send + Sync) = &*self.0;
        any.downcast_ref().expect("a tensor's autograd node is a GradNode")
    }
}

static NEXT_NODE: AtomicU64 = AtomicU64::new(1);

impl GradNode {
    fn num_outputs(&self) -> usize {
        match &self.backward {
            NodeBackward::Op { .. } => 1,
            NodeBackward::Custom(c) => c.num_outputs(),
        }
    }
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread currently record autograd nodes.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Runs `f` with gradient recording disabled on this thread (like `torch.no_grad()`); results
/// computed inside have no autograd history. Restores the previous mode even if `f` panics.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _restore = Restore(GRAD_ENABLED.with(|g| g.replace(false)));
    f()
}

impl Tensor {
    /// This tensor as a gradient leaf: a new handle (new id) over the same storage whose
    /// gradient `backward()` reports. Like PyTorch's `requires_grad_()`, for floats only.
    #[track_caller]
    pub fn requires_grad(self) -> Tensor {
        if !self.dtype().is_float() {
            bail!(
                "requires_grad",
                "only float tensors can require gradients, got {} {:?}",
                self.dtype(),
                self.shape_ref()
            );
        }
        let leaf =
            Tensor::from_parts(self.shape_ref().clone(), self.dtype(), self.0.data.clone(), GradMeta::Leaf);
        crate::recorder::fresh_leaf(&leaf, &self);
        leaf
    }

    /// A new handle over the same storage without autograd history.
    pub fn detach(&self) -> Tensor {
        if matches!(self.0.grad, GradMeta::None) {
            return self.clone();
        }
        let d =
            Tensor::from_parts(self.shape_ref().clone(), self.dtype(), self.0.data.clone(), GradMeta::None);
        crate::recorder::detached(&d, self);
        d
    }

    /// Whether gradients flow to this tensor: a leaf that requires grad, or a result with
    /// autograd history.
    pub fn needs_grad(&self) -> bool {
        !matches!(self.0.grad, GradMeta::None)
    }

    /// Whether this tensor is a gradient leaf created by [`requires_grad`](Tensor::requires_grad).
    pub fn is_leaf(&self) -> bool {
        matches!(self.0.grad, GradMeta::Leaf)
    }

    /// Gradients of this scalar with respect to every leaf it depends on.
    ///
    /// Panics if the tensor has more than one element or no autograd history.
    #[track_caller]
    pub fn backward(&self) -> Grads {
        if self.elems() != 1 {
            bail!(
                "backward",
                "gradients can only be implicitly seeded for a one-element tensor, got shape {:?}; use backward_with",
                self.shape_ref()
            );
        }
        let seed = Tensor::ones_like(self);
        self.backward_with(&seed)
    }

    /// Gradients of `sum(self * seed)` with respect to every leaf it depends on.
    #[track_caller]
    pub fn backward_with(&self, seed: &Tensor) -> Grads {
        if !self.needs_grad() {
            bail!(
                "backward",
                "tensor {:?} does not require grad: no leaf it depends on was created with requires_grad()",
                self.shape_ref()
            );
        }
        if seed.shape_ref() != self.shape_ref() || seed.dtype() != self.dtype() {
            bail!(
                "backward",
                "seed {} {:?} does not match the tensor's {} {:?}",
                seed.dtype(),
                seed.shape_ref(),
                self.dtype(),
                self.shape_ref()
            );
        }
        crate::recorder::backward(self);
        no_grad(|| run_backward(self, seed.clone()))
    }
}

/// Post-order of the nodes reachable from `root` (inputs before the nodes that use them).
fn topo_order(root: &NodeRef) -> Vec<NodeRef> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    // Iterative DFS: (node, next input to visit).
    let mut stack: Vec<(NodeRef, usize)> = vec![(root.clone(), 0)];
    seen.insert(root.id);
    while let Some((node, i)) = stack.pop() {
        if i < node.inputs.len() {
            let next = node.inputs[i].0.grad.clone();
            stack.push((node, i + 1));
            if let GradMeta::Node(child, _) = next
                && seen.insert(child.id)
            {
                stack.push((child, 0));
            }
        } else {
            order.push(node);
        }
    }
    order
}

/// Input gradients of a primitive op. A 2-D matmul's right operand gets its gradient as the
/// deferred factors `(a, g)` (see [`crate::autograd::sum`]), so a weight used at many time steps is
/// summed by one GEMM.
fn op_backward(op: &Op, inputs: &[Tensor], output: &Tensor, g: &Tensor) -> Vec<Option<GradPart>> {
    if let Op::MatMul = op {
        let (a, b) = (&inputs[0], &inputs[1]);
        if b.rank() == 2 && (a.rank() == 2 || a.rank() == 3) {
            let da = a.needs_grad().then(|| GradPart::Dense(g.matmul(&b.t())));
            let db = b.needs_grad().then(|| {
                if a.rank() == 3 {
                    let rows = a.sizes()[0] * a.sizes()[1];
                    GradPart::Outer(a.reshape([rows, a.sizes()[2]]), g.reshape([rows, g.sizes()[2]]))
                } else {
                    GradPart::Outer(a.clone(), g.clone())
                }
            });
            return vec![da, db];
        }
    }
    op.vjp(inputs, output, g).into_iter().map(|x| x.map(GradPart::Dense)).collect()
}

/// The input gradients of `node` from its outputs' summed cotangents; `None` when a
/// single-output op received none.
fn node_backward(node: &GradNode, sums: Vec<GradSum>) -> Option<Vec<Option<GradPart>>> {
    let outs: Vec<Option<Tensor>> = sums.into_iter().map(GradSum::finish).collect();
    Some(match &node.backward {
        NodeBackward::Op { op, output } => op_backward(op, &node.inputs, output, outs[0].as_ref()?),
        NodeBackward::Custom(c) => c.backward(&node.inputs, &outs),
    })
}

fn run_backward(root: &Tensor, seed: Tensor) -> Grads {
    let mut leaves: HashMap<u64, GradSum> = HashMap::new();
    let (root_node, root_index) = match &root.0.grad {
        GradMeta::Leaf => {
            let mut one = GradSum::default();
            one.add(GradPart::Dense(seed));
            leaves.insert(root.id(), one);
            return finish_leaves(leaves);
        }
        GradMeta::Node(n, i) => (n.clone(), *i),
        GradMeta::None => unreachable!("checked by backward_with"),
    };
    let order = topo_order(&root_node);
    let mut pending: HashMap<u64, Vec<GradSum>> = HashMap::new();
    let mut root_grads: Vec<GradSum> = (0..root_node.num_outputs()).map(|_| GradSum::default()).collect();
    root_grads[root_index].add(GradPart::Dense(seed));
    pending.insert(root_node.id, root_grads);
    for node in order.iter().rev() {
        let Some(sums) = pending.remove(&node.id) else { continue };
        let Some(input_grads) = node_backward(node, sums) else { continue };
        for (input, g) in node.inputs.iter().zip(input_grads) {
            let Some(g) = g else { continue };
            match &input.0.grad {
                GradMeta::None => {}
                GradMeta::Leaf => leaves.entry(input.id()).or_default().add(g),
                GradMeta::Node(n, i) => {
                    let slots = pending
                        .entry(n.id)
                        .or_insert_with(|| (0..n.num_outputs()).map(|_| GradSum::default()).collect());
                    slots[*i].add(g);
                }
            }
        }
    }
    finish_leaves(leaves)
}

/// The gradients of `sum_k sum(root_k * seed_k)` with respect to each of `targets` (tensors
/// anywhere in the graph, not only leaves), walking only the graph above them: a target's own
/// history is not entered. `None` where no gradient reaches a target. For checks of one block's
/// backward (`JANUS_MODE=check`): its outputs are the roots, its inputs the targets.
pub(crate) fn vjp_at(roots: &[(&Tensor, Tensor)], targets: &[Tensor]) -> Vec<Option<Tensor>> {
    let mut at: Vec<GradSum> = targets.iter().map(|_| GradSum::default()).collect();
    // A target by its place: a leaf by its id, an op output by (node, index).
    let place = |t: &Tensor| match &t.0.grad {
        GradMeta::Node(n, i) => Some((n.id, *i)),
        GradMeta::Leaf => Some((0, t.id() as usize)),
        GradMeta::None => None,
    };
    let places: Vec<Option<(u64, usize)>> = targets.iter().map(place).collect();
    let find = |t: &Tensor| place(t).and_then(|p| places.iter().position(|q| *q == Some(p)));
    let mut pending: HashMap<u64, Vec<GradSum>> = HashMap::new();
    let mut order: Vec<NodeRef> = Vec::new();
    let mut seen = HashSet::new();
    let mut deliver = |t: &Tensor, g: GradPart, pending: &mut HashMap<u64, Vec<GradSum>>| {
        if let Some(k) = find(t) {
            at[k].add(g);
        } else if let GradMeta::Node(n, i) = &t.0.grad {
            let slots = pending
                .entry(n.id)
                .or_insert_with(|| (0..n.num_outputs()).map(|_| GradSum::default()).collect());
            slots[*i].add(g);
        }
    };
    for (root, seed) in roots {
        deliver(root, GradPart::Dense(seed.clone()), &mut pending);
    }
    // Nodes to walk: reachable from the roots without passing through a target.
    for (root, _) in roots {
        if let GradMeta::Node(n, _) = &root.0.grad
            && find(root).is_none()
            && seen.insert(n.id)
        {
            let mut stack: Vec<(NodeRef, usize)> = vec![(n.clone(), 0)];
            while let Some((node, i)) = stack.pop() {
                if i < node.inputs.len() {
                    let input = &node.inputs[i];
                    stack.push((node.clone(), i + 1));
                    if let GradMeta::Node(child, _) = &input.0.grad
                        && find(input).is_none()
                        && seen.insert(child.id)
                    {
                        stack.push((child.clone(), 0));
                    }
                } else {
                    order.push(node);
                }
            }
        }
    }
    for node in order.iter().rev() {
        let Some(sums) = pending.remove(&node.id) else { continue };
        let Some(input_grads) = node_backward(node, sums) else { continue };
        for (input, g) in node.inputs.iter().zip(input_grads) {
            if let Some(g) = g {
                deliver(input, g, &mut pending);
            }
        }
    }
    at.into_iter().map(GradSum::finish).collect()
}

/// The leaves' gradients, summed in the order the leaves were created (by id), not in hash
/// order: summing runs ops (the GEMM over deferred weight-gradient factors), and a recording of
/// a block that calls `backward()` must come out the same on every call, in a graph whose
/// step order does not change from one process to the next.
fn finish_leaves(leaves: HashMap<u64, GradSum>) -> Grads {
    let mut sums: Vec<(u64, GradSum)> = leaves.into_iter().collect();
    sums.sort_unstable_by_key(|(id, _)| *id);
    Grads { leaves: sums.into_iter().filter_map(|(k, v)| v.finish().map(|t| (k, t))).collect() }
}
