//! The graph verifier: operands precede users, every primitive node's recorded type is what its
//! shape rule infers from its operands, inputs and outputs are in range. Run between passes in
//! debug and test builds; a failure prints the IR around the offending node.

use super::{Graph, NodeOp};
use crate::autograd::GradMeta;
use crate::tensor::Tensor;

/// Checks `g`; on failure returns a message naming the node and showing the IR around it.
pub fn verify(g: &Graph) -> Result<(), String> {
    for (i, n) in g.nodes.iter().enumerate() {
        let fail = |why: String| Err(context(g, i, &why));
        if let Some(bad) = n.inputs.iter().find(|a| a.index() >= i) {
            return fail(format!("operand %{} does not precede its user", bad.0));
        }
        match &n.op {
            NodeOp::Input(k) => {
                if *k >= g.inputs.len() || g.inputs[*k].ty != n.ty {
                    return fail(format!("input #{k} does not match the graph's input list"));
                }
            }
            NodeOp::Op(op) => {
                let args: Vec<Tensor> = n
                    .inputs
                    .iter()
                    .map(|a| {
                        let t = &g.node(*a).ty;
                        Tensor::from_parts(t.shape.clone(), t.dtype, None, GradMeta::None)
                    })
                    .collect();
                let refs: Vec<&Tensor> = args.iter().collect();
                let inferred = crate::panics::catch_quietly(|| op.infer(&refs));
                if let crate::ops::Op::Reshape(r) = op
                    && args.first().is_some_and(|a| a.elems() != r.shape.elems())
                {
                    return fail(format!("reshape to {:?} changes the number of elements", r.shape));
                }
                match inferred {
                    Ok(t) if t == n.ty => {}
                    Ok(t) => {
                        return fail(format!("recorded type {:?} but the shape rule infers {:?}", n.ty, t));
                    }
                    Err(_) => return fail("the shape rule rejects the operands".into()),
                }
            }
            NodeOp::RngState { .. } => {
                if g.rng.is_none() {
                    return fail("rng_state in a graph without a random-stream input".into());
                }
            }
            NodeOp::Fused(p) => {
                if let Err(why) = p.check(n, g) {
                    return fail(why);
                }
            }
            NodeOp::MatMulAdd => {
                let ok = n.inputs.len() == 3
                    && {
                        let t = |i: usize| &g.node(n.inputs[i]).ty;
                        let probe = |t: &crate::ops::TensorType| {
                            Tensor::from_parts(t.shape.clone(), t.dtype, None, GradMeta::None)
                        };
                        let (a, b) = (probe(t(0)), probe(t(1)));
                        let product =
                            crate::panics::catch_quietly(|| crate::ops::Op::MatMul.infer(&[&a, &b]));
                        matches!(product, Ok(p) if p == n.ty
                        && t(2).dtype == n.ty.dtype
                        && crate::shape::broadcast_shapes(&t(2).shape, &n.ty.shape).as_ref() == Some(&n.ty.shape))
                    };
                if !ok {
                    return fail(
                        "matmul_add operands do not form a product plus a broadcastable addend".into(),
                    );
                }
            }
            NodeOp::Loop(spec) => {
                if let Err(why) = spec.check(n, g) {
                    return fail(why);
                }
            }
            NodeOp::Project(k) => {
                let ok = n.inputs.len() == 1
                    && match &g.node(n.inputs[0]).op {
                        NodeOp::Fused(p) => *k >= 1 && *k < p.outputs.len() && p.outputs[*k] == n.ty,
                        NodeOp::Loop(l) => *k >= 1 && l.out_types().get(*k) == Some(&n.ty),
                        _ => false,
                    };
                if !ok {
                    return fail(format!("project {k} does not match an output of its operand"));
                }
            }
        }
    }
    if let Some(o) = g.outputs.iter().find(|o| o.index() >= g.nodes.len()) {
        return Err(format!("output %{} does not exist\n{g}", o.0));
    }
    Ok(())
}

fn context(g: &Graph, at: usize, why: &str) -> String {
    let text = g.to_string();
    let lines: Vec<&str> = text.lines().collect();
    // Line 0 is the header; node i is on line i + 1.
    let from = at.saturating_sub(3) + 1;
    let to = (at + 4).min(lines.len().saturating_sub(1));
    let mut s = format!("graph verification failed at %{at}: {why}\n");
    for (k, l) in lines.iter().enumerate().take(to).skip(from) {
        let mark = if k == at + 1 { ">>" } else { "  " };
        s.push_str(&format!("{mark}{l}\n"));
    }
    s
}
