//! Operand layouts for GEMM: a right-hand operand that is a transposed view (column-major) is
//! copied to row-major once, right after the transpose, and every GEMM using it reads the copy.
//! The `gemm` crate packs a column-major right-hand side slowly: `[32x512] @ [512x128]` ran at
//! 62 GFLOP/s from `W^T` against 216 from a row-major copy here, and an RNN uses the same
//! `W^T` at every time step.
//!
//! When the transposed operand is large and used once, `C = A @ B^T` is computed as
//! `(B @ A^T)^T` instead, so that the copy is of `A` rather than of `B`: a convolution's weight
//! gradient `dY [32, 12544] @ cols^T [12544, 144]` copies `dY` (1.6 MB) instead of the im2col
//! matrix (7.2 MB).
//!
//! A transposed product `(A^T @ B)^T` whose product feeds nothing but that transpose is computed
//! as `B^T @ A` instead: a weight gradient `(X^T @ dY)^T` then comes out in the weight's own
//! `[out, in]` layout, so the optimiser's update reads it row by row rather than down its
//! columns (the Transformer's Adam update read every gradient at a stride of 384 to 512 elements
//! and ran at 5-6 ns per element; now about 0.5).

use super::{PassStats, Rewriter};
use crate::graph::{Graph, Node, NodeOp};
use crate::ops::{Op, Permute, Reshape, TensorType};
use smallvec::smallvec;
use std::collections::{HashMap, HashSet};

/// Whether `n` swaps the last two dimensions of its operand.
fn is_transpose(n: &Node) -> bool {
    match &n.op {
        NodeOp::Op(Op::Permute(p)) => {
            let r = p.perm.len();
            r >= 2 && p.perm[r - 1] == r - 2 && p.perm[r - 2] == r - 1 && (0..r - 2).all(|i| p.perm[i] == i)
        }
        _ => false,
    }
}

fn is_gemm(n: &Node) -> bool {
    matches!(n.op, NodeOp::Op(Op::MatMul) | NodeOp::MatMulAdd)
}

thread_local! {
    /// While a loop body is optimised: which of its inputs are the same on every trip (see
    /// [`with_invariant_inputs`]).
    static INVARIANT: std::cell::RefCell<Option<Vec<bool>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` (a loop body's optimisation) knowing that the body's inputs flagged in `invariant`
/// stay the same on every trip. The row-major copy of such an input's transpose is a memo of
/// the body's executor, made once per loop run rather than once per trip, so flipping its
/// products to copy the other operand instead would copy on every trip (an LSTM's `dh = dg @
/// W_h^T` copied `dg` 129 times a step).
pub(crate) fn with_invariant_inputs<R>(invariant: Vec<bool>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Vec<bool>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            INVARIANT.with(|i| *i.borrow_mut() = self.0.take());
        }
    }
    let _reset = Reset(INVARIANT.with(|i| i.borrow_mut().replace(invariant)));
    f()
}

/// Whether `t` (a transpose) is of an input that stays the same over the runs that matter.
fn of_invariant_input(g: &Graph, t: usize) -> bool {
    let NodeOp::Input(k) = g.node(g.nodes[t].inputs[0]).op else { return false };
    INVARIANT.with(|i| i.borrow().as_ref().is_some_and(|inv| inv.get(k).copied().unwrap_or(false)))
}

/// The transposed right-hand sides whose copy costs more than copying the left operands of
/// every GEMM using them: rank-2 plain products only, each used by GEMMs alone (not a loop
/// body's invariant inputs, see [`with_invariant_inputs`]).
fn worth_flipping(g: &Graph, rhs: &HashSet<usize>) -> HashSet<usize> {
    let rhs: HashSet<usize> = rhs.iter().copied().filter(|&t| !of_invariant_input(g, t)).collect();
    let mut lhs_elems: HashMap<usize, Option<usize>> = rhs.iter().map(|&t| (t, Some(0))).collect();
    for n in &g.nodes {
        for (k, a) in n.inputs.iter().enumerate() {
            let Some(total) = lhs_elems.get_mut(&a.index()) else { continue };
            let plain = matches!(n.op, NodeOp::Op(Op::MatMul)) && k == 1 && n.ty.shape.rank() == 2;
            *total = total.filter(|_| plain).map(|t| t + g.node(n.inputs[0]).ty.shape.elems());
        }
    }
    lhs_elems
        .into_iter()
        .filter(|&(t, total)| total.is_some_and(|e| 2 * e < g.nodes[t].ty.shape.elems()))
        .map(|(t, _)| t)
        .collect()
}

fn transposed(ty: &TensorType) -> TensorType {
    let d = ty.shape.sizes();
    TensorType { shape: [d[1], d[0]].into(), dtype: ty.dtype }
}

/// Rank-2 plain products `P = A^T @ B` (`A^T` a transpose node) whose only use is a transpose
/// `P^T`: each maps the transpose's index to the product's.
fn transposed_products(g: &Graph) -> HashMap<usize, usize> {
    let uses = g.use_counts();
    g.nodes
        .iter()
        .enumerate()
        .filter(|(_, t)| is_transpose(t) && t.ty.shape.rank() == 2)
        .filter_map(|(i, t)| {
            let p = t.inputs[0].index();
            let prod = &g.nodes[p];
            let plain = matches!(prod.op, NodeOp::Op(Op::MatMul)) && prod.ty.shape.rank() == 2;
            (plain && uses[p] == 1 && is_transpose(g.node(prod.inputs[0]))).then_some((i, p))
        })
        .collect()
}

/// Pushes `(A^T @ B)^T` (old transpose node `t` of old product `p`) as `B^T @ A`: `A` is read
/// as is, `B^T` as a transposed view (a left operand's layout costs the GEMM nothing).
fn push_untransposed(g: &Graph, r: &mut Rewriter, t: usize, p: usize) -> crate::graph::NodeId {
    let (prod, span) = (&g.nodes[p], g.nodes[t].span);
    let a = r.get(g.node(prod.inputs[0]).inputs[0]);
    let b = prod.inputs[1];
    let bt = match is_transpose(g.node(b)) {
        true => r.get(g.node(b).inputs[0]),
        false => {
            let op = NodeOp::Op(Op::Permute(Permute { perm: smallvec![1, 0] }));
            r.b.push(Node { op, inputs: smallvec![r.get(b)], ty: transposed(&g.node(b).ty), span })
        }
    };
    r.b.push(Node { op: prod.op.clone(), inputs: smallvec![bt, a], ty: g.nodes[t].ty.clone(), span })
}

pub(crate) fn run(g: Graph, stats: &mut PassStats) -> Graph {
    let untranspose = transposed_products(&g);
    let absorbed: HashSet<usize> = untranspose.values().copied().collect();
    let rhs: HashSet<usize> = g
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| !absorbed.contains(&i) && is_gemm(n) && is_transpose(g.node(n.inputs[1])))
        .map(|(_, n)| n.inputs[1].index())
        .collect();
    if rhs.is_empty() && untranspose.is_empty() {
        return g;
    }
    let flip = worth_flipping(&g, &rhs);
    let mut r = Rewriter::new(&g);
    let mut dense = HashMap::new();
    let mut flipped = 0;
    for i in 0..g.nodes.len() {
        if absorbed.contains(&i) {
            continue; // computed transposed at its transpose, below
        }
        if let Some(&p) = untranspose.get(&i) {
            r.map[i] = Some(push_untransposed(&g, &mut r, i, p));
            continue;
        }
        if is_gemm(&g.nodes[i]) && flip.contains(&g.nodes[i].inputs[1].index()) {
            // `A @ B^T` as `(B @ dense(A^T))^T`.
            let (n, a) = (&g.nodes[i], g.nodes[i].inputs[0]);
            let b = r.get(g.node(n.inputs[1]).inputs[0]);
            let at_ty = transposed(&g.node(a).ty);
            let swap = || NodeOp::Op(Op::Permute(Permute { perm: smallvec![1, 0] }));
            let at =
                r.b.push(Node { op: swap(), inputs: smallvec![r.get(a)], ty: at_ty.clone(), span: n.span });
            let reshape = NodeOp::Op(Op::Reshape(Reshape { shape: at_ty.shape.clone() }));
            let at = r.b.push(Node { op: reshape, inputs: smallvec![at], ty: at_ty, span: n.span });
            let prod =
                Node { op: n.op.clone(), inputs: smallvec![b, at], ty: transposed(&n.ty), span: n.span };
            let prod = r.b.push(prod);
            let id = r.b.push(Node { op: swap(), inputs: smallvec![prod], ty: n.ty.clone(), span: n.span });
            r.map[i] = Some(id);
            flipped += 1;
            continue;
        }
        let mut node = r.remapped(i);
        if is_gemm(&node)
            && let Some(&d) = dense.get(&g.nodes[i].inputs[1].index())
        {
            node.inputs[1] = d;
        }
        let id = r.b.push(node);
        r.map[i] = Some(id);
        if rhs.contains(&i) && !flip.contains(&i) {
            // A reshape to the same shape of a non-contiguous value lowers to a copy.
            let ty = g.nodes[i].ty.clone();
            let copy = Node {
                op: NodeOp::Op(Op::Reshape(Reshape { shape: ty.shape.clone() })),
                inputs: smallvec![id],
                ty,
                span: g.nodes[i].span,
            };
            dense.insert(i, r.b.push(copy));
        }
    }
    stats.add("layout.dense_rhs", dense.len());
    stats.add("layout.flipped", flipped);
    stats.add("layout.untransposed", untranspose.len());
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::passes::testing::{count, trace};

    #[test]
    fn shared_transposed_rhs_is_copied_once() {
        let g = trace(&[Tensor::ones([4, 8]), Tensor::ones([6, 8])], |x| {
            let wt = x[1].t();
            vec![x[0].matmul(&wt), (&x[0] * 2.0).matmul(&wt)]
        });
        let mut s = PassStats::default();
        let out = run(crate::passes::cse::run(g, &mut s), &mut s);
        assert_eq!((s.get("layout.dense_rhs"), count(&out, "reshape")), (1, 1), "{out}");
    }

    #[test]
    fn a_large_transposed_rhs_used_once_is_flipped() {
        // dW = dY @ cols^T with cols much larger than dY: dY^T is copied, not cols^T.
        let g = trace(&[Tensor::ones([4, 50]), Tensor::ones([30, 50])], |x| vec![x[0].matmul(&x[1].t())]);
        let mut s = PassStats::default();
        let out = run(g, &mut s);
        assert_eq!((s.get("layout.flipped"), s.get("layout.dense_rhs")), (1, 0), "{out}");
        let copies: Vec<_> = out.nodes.iter().filter(|n| n.op.name() == "reshape").collect();
        assert_eq!(copies.len(), 1, "{out}");
        assert_eq!(copies[0].ty.shape.sizes(), [50, 4], "the copy is of the small operand: {out}");
        // A small transposed operand is still copied, not flipped.
        let g = trace(&[Tensor::ones([30, 50]), Tensor::ones([4, 50])], |x| vec![x[0].matmul(&x[1].t())]);
        let mut s = PassStats::default();
        run(g, &mut s);
        assert_eq!((s.get("layout.flipped"), s.get("layout.dense_rhs")), (0, 1));
    }

    #[test]
    fn a_loop_bodys_invariant_weight_is_copied_not_flipped() {
        // dh = dg @ W^T with W an input the same on every trip: W^T's copy is a memo of the
        // body's executor, so it is copied rather than flipped, however small dg is.
        let g = trace(&[Tensor::ones([4, 50]), Tensor::ones([30, 50])], |x| vec![x[0].matmul(&x[1].t())]);
        let mut s = PassStats::default();
        with_invariant_inputs(vec![false, true], || run(g.clone(), &mut s));
        assert_eq!((s.get("layout.flipped"), s.get("layout.dense_rhs")), (0, 1));
        // A per-trip input is flipped as anywhere else.
        let mut s = PassStats::default();
        with_invariant_inputs(vec![true, false], || run(g, &mut s));
        assert_eq!(s.get("layout.flipped"), 1);
    }

    /// A weight gradient `(X^T @ dY)^T` becomes `dY^T @ X`: no transpose of the product is left,
    /// and the product is not rewritten when something else reads it too.
    #[test]
    fn a_transposed_weight_gradient_is_computed_in_place() {
        let inputs = [Tensor::ones([16, 4]), Tensor::ones([16, 6])];
        let g = trace(&inputs, |x| vec![x[0].t().matmul(&x[1]).t()]);
        let (out, s) = crate::passes::optimize(g);
        assert_eq!(s.get("layout.untransposed"), 1, "{out}");
        let prods: Vec<_> = out.nodes.iter().filter(|n| n.op.name() == "matmul").collect();
        assert_eq!(prods.len(), 1, "{out}");
        assert_eq!(prods[0].ty.shape.sizes(), [6, 4], "{out}");
        assert_eq!(count(&out, "permute"), 1, "only dY's transposed view: {out}");
        let g = trace(&inputs, |x| {
            let p = x[0].t().matmul(&x[1]);
            vec![p.t(), &p * 2.0]
        });
        let (_, s) = crate::passes::optimize(g);
        assert_eq!(s.get("layout.untransposed"), 0);
    }

    /// `dY^T @ X` equals eager's `(X^T @ dY)^T` on random values, with `dY` plain or itself a
    /// transposed view: to the last bits in f64, within GEMM rounding in f32.
    #[test]
    fn an_untransposed_product_matches_eager() {
        type Build = fn(&[Tensor]) -> Tensor;
        let cases: [Build; 2] = [|x| x[0].t().matmul(&x[1]).t(), |x| x[0].t().matmul(&x[2].t()).t()];
        for (dtype, tol) in [(crate::DType::F64, 1e-12), (crate::DType::F32, 1e-5)] {
            crate::random::manual_seed(4);
            let x = [
                Tensor::randn_dtype([37, 5], dtype),
                Tensor::randn_dtype([37, 9], dtype),
                Tensor::randn_dtype([9, 37], dtype),
            ];
            for build in cases {
                let want = build(&x).to_dtype(crate::DType::F64).to_vec::<f64>();
                let (g, stats) = crate::passes::optimize(trace(&x, |x| vec![build(x)]));
                assert_eq!(stats.get("layout.untransposed"), 1);
                let got = crate::exec::Executor::compile(g).run(&x)[0].clone();
                assert_eq!(got.sizes(), [9, 5]);
                let got = got.to_dtype(crate::DType::F64).to_vec::<f64>();
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{dtype} [{i}]: {a} vs eager {b}");
                }
            }
        }
    }

    /// The flipped product, `(B @ A^T)^T`, gives eager's `A @ B^T` on random values: to the last
    /// bits in f64, and within GEMM rounding in f32.
    #[test]
    fn a_flipped_product_matches_eager() {
        for (dtype, tol) in [(crate::DType::F64, 1e-12), (crate::DType::F32, 1e-5)] {
            crate::random::manual_seed(3);
            let x = [Tensor::randn_dtype([4, 50], dtype), Tensor::randn_dtype([30, 50], dtype)];
            let want = x[0].matmul(&x[1].t()).to_dtype(crate::DType::F64).to_vec::<f64>();
            let g = trace(&x, |x| vec![x[0].matmul(&x[1].t())]);
            let (g, stats) = crate::passes::optimize(g);
            assert_eq!(stats.get("layout.flipped"), 1);
            let got =
                crate::exec::Executor::compile(g).run(&x)[0].to_dtype(crate::DType::F64).to_vec::<f64>();
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{dtype} [{i}]: flipped {a} vs eager {b}");
            }
        }
    }
}
