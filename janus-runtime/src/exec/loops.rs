//! Running a loop node (`graph::loops`): its body, lowered once into an executor of its own,
//! runs once per trip on tensors: carried values are the previous trip's outputs (no copy),
//! sliced operands are views of their stacked operand, invariant ones are passed as they are.
//! The backends write the loop's outputs into their own buffers.

use super::Executor;
use crate::graph::loops::{LoopIn, LoopSpec};
use crate::tensor::Tensor;
use std::sync::Arc;

/// A loop node, ready to run.
pub(crate) struct LoopRun {
    pub(crate) spec: Arc<LoopSpec>,
    body: Executor,
}

impl std::fmt::Debug for LoopRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoopRun {}", crate::graph::loops::describe(&self.spec))
    }
}

impl LoopRun {
    /// Lowers the (already optimised) body.
    pub(crate) fn new(spec: Arc<LoopSpec>) -> LoopRun {
        let body = Executor::compile(spec.body.clone());
        LoopRun { spec, body }
    }

    /// Runs every trip on `operands` (one per body input, as the node's operands); after each
    /// trip calls `each(t, outputs)` with the body's outputs, and returns the final values of
    /// the first `finals` outputs.
    pub(crate) fn run(&self, operands: &[Tensor], mut each: impl FnMut(usize, &[Tensor])) -> Vec<Tensor> {
        let s = &*self.spec;
        let mut prev: Vec<Tensor> = Vec::new();
        let mut ins: Vec<Tensor> = Vec::with_capacity(s.ins.len());
        for step in 0..s.trips {
            let t = if s.reverse { s.trips - 1 - step } else { step };
            ins.clear();
            for (k, kind) in s.ins.iter().enumerate() {
                ins.push(match *kind {
                    LoopIn::Invariant => operands[k].clone(),
                    LoopIn::Carried { .. } if step == 0 => operands[k].clone(),
                    LoopIn::Carried { from } => prev[from].clone(),
                    LoopIn::Sliced => slice(&operands[k], t),
                });
            }
            prev = self.body.run(&ins);
            each(t, &prev);
        }
        prev.truncate(s.finals);
        prev
    }
}

/// `t[i]`: the view of slice `i` along the first dimension (no copy).
pub(crate) fn slice(t: &Tensor, i: usize) -> Tensor {
    let d = t.data();
    let shape: crate::shape::Shape = t.sizes()[1..].to_vec().into();
    let strides = crate::shape::Strides::from_slice(&d.strides[1..]);
    let offset = d.offset + i * d.strides[0];
    Tensor::from_parts(shape, t.dtype(), Some(d.view(strides, offset)), Default::default())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::graph::loops::stacked_type;
    use crate::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
    use crate::ops::TensorType;
    use smallvec::SmallVec;

    fn ty(t: &Tensor) -> TensorType {
        TensorType { shape: t.shape_ref().clone(), dtype: t.dtype() }
    }

    /// A graph of one loop node over `body` with these operands (graph inputs, in order),
    /// returning every loop output.
    pub(crate) fn loop_graph(spec: LoopSpec, operands: &[Tensor]) -> Graph {
        let mut b = GraphBuilder::new();
        let ins: SmallVec<[NodeId; 4]> =
            operands.iter().enumerate().map(|(k, t)| b.input(format!("x{k}"), ty(t))).collect();
        let outs = spec.out_types();
        let l =
            b.push(Node { op: NodeOp::Loop(Arc::new(spec)), inputs: ins, ty: outs[0].clone(), span: None });
        let mut results = vec![l];
        for (k, t) in outs.iter().enumerate().skip(1) {
            let mut a = SmallVec::new();
            a.push(l);
            results.push(b.push(Node { op: NodeOp::Project(k), inputs: a, ty: t.clone(), span: None }));
        }
        b.finish(results)
    }

    /// An RNN body `h' = tanh(h @ w + x)` over inputs `(h, w, x)`, outputs `(h', sum(h'))`.
    pub(crate) fn rnn_body(h: &Tensor, w: &Tensor, x: &Tensor) -> Graph {
        crate::passes::testing::trace(&[h.clone(), w.clone(), x.clone()], |v| {
            let h2 = (v[0].matmul(&v[1]) + &v[2]).tanh();
            let s = h2.sum_all();
            vec![h2, s]
        })
    }

    #[test]
    fn a_loop_runs_its_body_per_trip_with_carried_invariant_and_sliced_inputs() {
        crate::manual_seed(3);
        let (t, b, n) = (5, 3, 4);
        let h0 = Tensor::randn([b, n]);
        let w = Tensor::randn([n, n]) * 0.5f32;
        let xs = Tensor::randn([t, b, n]);
        let body = rnn_body(&h0, &w, &xs.narrow(0, 0, 1).squeeze(0));
        for reverse in [false, true] {
            let spec = LoopSpec {
                body: body.clone(),
                trips: t,
                ins: vec![LoopIn::Carried { from: 0 }, LoopIn::Invariant, LoopIn::Sliced],
                finals: 1,
                stacked: vec![0, 1],
                reverse,
            };
            assert_eq!(spec.out_types()[2], stacked_type(&ty(&Tensor::scalar(0.0f32)), t));
            let g = loop_graph(spec, &[h0.clone(), w.clone(), xs.clone()]);
            crate::graph::verify(&g).unwrap();
            let out = Executor::compile(g).run(&[h0.clone(), w.clone(), xs.clone()]);
            // The same recurrence, eagerly.
            let mut h = h0.clone();
            let mut hs = vec![Tensor::scalar(0.0f32); t];
            let mut sums = vec![Tensor::scalar(0.0f32); t];
            for step in 0..t {
                let k = if reverse { t - 1 - step } else { step };
                h = (h.matmul(&w) + xs.narrow(0, k, 1).squeeze(0)).tanh();
                hs[k] = h.clone();
                sums[k] = h.sum_all();
            }
            assert_eq!(out[0].to_vec::<f32>(), h.to_vec::<f32>(), "final h (reverse {reverse})");
            let hs: Vec<&Tensor> = hs.iter().collect();
            assert_eq!(out[1].to_vec::<f32>(), Tensor::stack(&hs, 0).to_vec::<f32>());
            let sums: Vec<&Tensor> = sums.iter().collect();
            assert_eq!(out[2].to_vec::<f32>(), Tensor::stack(&sums, 0).to_vec::<f32>());
        }
    }

    #[test]
    fn a_loop_with_a_bad_operand_fails_verification() {
        let (h0, w, xs) = (Tensor::zeros([2, 3]), Tensor::zeros([3, 3]), Tensor::zeros([4, 2, 3]));
        let body = rnn_body(&h0, &w, &xs.narrow(0, 0, 1).squeeze(0));
        let spec = LoopSpec {
            body,
            trips: 5, // the sliced operand has 4
            ins: vec![LoopIn::Carried { from: 0 }, LoopIn::Invariant, LoopIn::Sliced],
            finals: 2,
            stacked: vec![],
            reverse: false,
        };
        let err = crate::graph::verify(&loop_graph(spec, &[h0, w, xs])).unwrap_err();
        assert!(err.contains("loop operand 2"), "{err}");
    }

    /// Runs `d`'s forward and backward graphs (optimised) on `inputs` with cotangents `cts`
    /// (one per differentiable output); the gradient of each target, factors multiplied out.
    pub(crate) fn run_derivative(
        d: &crate::grad_graph::Derivative,
        inputs: &[Tensor],
        cts: &[Tensor],
    ) -> (Vec<Tensor>, Vec<Tensor>) {
        let opt = |g: &Graph| Executor::compile(crate::passes::optimize(g.clone()).0);
        let mut fwd = opt(&d.forward).run(inputs);
        let residuals = fwd.split_off(d.num_outputs);
        let mut args = residuals[..d.num_residuals].to_vec();
        args.extend(cts.iter().cloned());
        let mut outs = opt(&d.backward).run(&args).into_iter();
        let grads = d
            .outer
            .iter()
            .map(|&o| {
                let a = outs.next().unwrap();
                if o { a.t().matmul(&outs.next().unwrap()) } else { a }
            })
            .collect();
        (fwd, grads)
    }

    fn close(a: &Tensor, b: &Tensor, what: &str) {
        let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
        assert_eq!(a.len(), b.len(), "{what}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{what}: {x} vs {y}");
        }
    }

    #[test]
    fn gradients_through_a_loop_match_the_unrolled_recurrence() {
        crate::manual_seed(5);
        let f64s = |t: Tensor| t.to_dtype(crate::DType::F64);
        let (t, b, n) = (4, 2, 3);
        let h0 = f64s(Tensor::randn([b, n]));
        let w = f64s(Tensor::randn([n, n]) * 0.5f32);
        let xs = f64s(Tensor::randn([t, b, n]));
        let body = rnn_body(&h0, &w, &xs.narrow(0, 0, 1).squeeze(0));
        let spec = LoopSpec {
            body,
            trips: t,
            ins: vec![LoopIn::Carried { from: 0 }, LoopIn::Invariant, LoopIn::Sliced],
            finals: 1,
            stacked: vec![0, 1],
            reverse: false,
        };
        let g = loop_graph(spec, &[h0.clone(), w.clone(), xs.clone()]);
        for needs in [[true, true, true], [false, true, false], [true, false, true]] {
            let d = crate::grad_graph::derive(&g, &needs);
            assert_eq!(d.diff_outputs, [0, 1, 2]);
            let cts: Vec<Tensor> = (d.diff_outputs.iter())
                .map(|&k| f64s(Tensor::randn(g.node(g.outputs[k]).ty.shape.clone())))
                .collect();
            let (outs, grads) = run_derivative(&d, &[h0.clone(), w.clone(), xs.clone()], &cts);
            // The same, unrolled and eagerly differentiated.
            let leaf = |x: &Tensor, on: bool| if on { x.detach().requires_grad() } else { x.detach() };
            let (h0l, wl, xsl) = (leaf(&h0, needs[0]), leaf(&w, needs[1]), leaf(&xs, needs[2]));
            let mut h = h0l.clone();
            let (mut hs, mut sums) = (Vec::new(), Vec::new());
            for k in 0..t {
                h = (h.matmul(&wl) + xsl.narrow(0, k, 1).squeeze(0)).tanh();
                hs.push(h.clone());
                sums.push(h.sum_all());
            }
            let hs: Vec<&Tensor> = hs.iter().collect();
            let sums: Vec<&Tensor> = sums.iter().collect();
            let eager = [h, Tensor::stack(&hs, 0), Tensor::stack(&sums, 0)];
            for (k, e) in eager.iter().enumerate() {
                close(&outs[k], e, &format!("output {k}"));
            }
            let loss = (eager.iter().zip(&cts))
                .map(|(e, c)| (e * c).sum_all())
                .fold(Tensor::scalar_dtype(0.0, crate::DType::F64), |a, b| &a + &b);
            let eg = loss.backward();
            let targets: Vec<&Tensor> =
                [&h0l, &wl, &xsl].into_iter().zip(needs).filter(|(_, n)| *n).map(|(x, _)| x).collect();
            assert_eq!(d.grad_inputs.len(), targets.len());
            for (p, x) in targets.iter().enumerate() {
                close(&grads[p], eg.get(x).unwrap(), &format!("gradient {p} with needs {needs:?}"));
            }
        }
    }
}
