//! Control flow stays host code around staged blocks: branches on tensor values read by
//! `item()`/`to_bool()`, loops with data-dependent trip counts, early `return` and `?`,
//! recursion over a tree (TreeRNN-style) with gradients, and generic functions.
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;

fn close(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-6 * (1.0 + q.abs()))
}

/// Calls `f` eagerly and staged (several times, so profiling, recording and replay all run) on
/// each argument and requires equal results.
fn same<A, R: std::fmt::Debug>(args: &[A], f: impl Fn(&A) -> R, eq: impl Fn(&R, &R) -> bool) {
    for (i, a) in args.iter().enumerate() {
        let want = janus::with_mode(Mode::Eager, || f(a));
        for call in 0..4 {
            let got = f(a);
            assert!(eq(&got, &want), "argument {i}, call {call}: {got:?} vs eager {want:?}");
        }
    }
}

#[janus(min_ops = 1, speculate = false)]
fn normalize(x: &Tensor) -> Tensor {
    let n = x.square().sum_all().sqrt();
    let big = n.gt_scalar(1.0).to_bool();
    if big {
        let y = x / &n;
        y.tanh()
    } else {
        x * 2.0
    }
}

#[janus(min_ops = 1, speculate = false)]
fn halve_until_small(x: &Tensor) -> (Tensor, usize) {
    let mut y = x.clone();
    let mut steps = 0;
    while y.abs().max_all().item() > 1.0 {
        y = &y * 0.5 + 0.01;
        steps += 1;
    }
    (y, steps)
}

fn validate(t: &Tensor) -> Result<Tensor, String> {
    if t.max_all().item() > 100.0 { Err("too large".into()) } else { Ok(t.clone()) }
}

#[janus(min_ops = 1, speculate = false)]
fn checked(x: &Tensor) -> Result<Tensor, String> {
    let m = x.min_all();
    if m.item() < 0.0 {
        return Err("negative".into());
    }
    let y = x.sqrt() * 2.0;
    let z = validate(&y)?;
    Ok(z + 1.0)
}

/// Shadows reference parameters that a call receives bare (so they are in-outs of the block),
/// and assigns a local before shadowing it.
#[janus(min_ops = 1, speculate = false)]
fn shadowing(x: &Tensor, h: &Tensor) -> (Tensor, Tensor, Tensor) {
    let (h, x) = (Tensor::tanh(h) + x, Tensor::exp(x));
    let mut a = &x * 2.0;
    a += 1.0;
    let a = a * &h;
    (x, h, a)
}

fn rotate(a: &Tensor, b: &Tensor) -> (Tensor, Tensor) {
    (b.tanh(), a + b)
}

/// Destructuring assignments in a loop body carry state to the next iteration.
#[janus(min_ops = 1, speculate = false)]
fn destructure(x: &Tensor, n: usize) -> Tensor {
    let (mut a, mut b) = (x.clone(), x * 0.5);
    let mut arr = [x.clone(), x.clone()];
    for _ in 0..n {
        (a, b) = rotate(&a, &b);
        [arr[0], _] = [&arr[0] + &a, x.clone()];
    }
    a + b * 2.0 + &arr[0]
}

fn second(n: usize) -> usize {
    n - 1
}

/// Writes through places the block cannot name before it runs.
#[janus(min_ops = 1, speculate = false)]
fn write_through(hs: &mut Vec<Tensor>, x: &Tensor) -> Tensor {
    hs[second(2)] = (&hs[1] * 0.5 + x).tanh();
    let k = hs.len() - 2;
    hs[k] += x * 0.25;
    x * 2.0
}

#[test]
fn writes_through_computed_indices_are_restored() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::from_vec(vec![0.3f32, -0.7], [2]);
    let start = || vec![Tensor::from_vec(vec![1.0f32, 2.0], [2]), Tensor::from_vec(vec![-1.0f32, 0.5], [2])];
    let mut want = start();
    janus::with_mode(Mode::Eager, || (0..5).for_each(|_| drop(write_through(&mut want, &x))));
    let mut got = start();
    (0..5).for_each(|_| drop(write_through(&mut got, &x)));
    for (g, w) in got.iter().zip(&want) {
        assert!(close(g, w), "{g:?} vs eager {w:?}");
    }
    assert!(janus::stats().function("write_through").any(|f| f.hits > 0), "{}", janus::explain());
}

/// Locals and parameters captured by a closure that is used after a block that calls their
/// methods: the block cannot have mutated them, and must not borrow them mutably.
#[janus(min_ops = 1, speculate = false)]
fn captured(x: &Tensor) -> Tensor {
    let v = x * 2.0;
    let g = |t: &Tensor| t * &v + x;
    let a = v.tanh() + x.sigmoid();
    let b = g(&a).exp();
    g(&b)
}

#[test]
fn closures_capturing_block_receivers_compile_and_agree() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let args = [Tensor::from_vec(vec![0.2f32, -0.4, 0.9], [3])];
    same(&args, captured, close);
    assert!(janus::stats().function("captured").any(|f| f.hits > 0), "{}", janus::explain());
}

#[test]
fn destructuring_assignments_update_outer_state() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let args = [(Tensor::from_vec(vec![0.3f32, -0.7], [2]), 5usize)];
    same(&args, |(x, n)| destructure(x, *n), close);
}

#[test]
fn shadowed_in_outs_keep_their_outer_binding() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let args = [(Tensor::from_vec(vec![0.5f32, -1.0], [2]), Tensor::from_vec(vec![2.0f32, 0.25], [2]))];
    same(&args, |(x, h)| shadowing(x, h), |a, b| close(&a.0, &b.0) && close(&a.1, &b.1) && close(&a.2, &b.2));
    assert!(janus::stats().function("shadowing").any(|f| f.hits > 0), "{}", janus::explain());
}

#[test]
fn branches_loops_return_and_question_mark() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let xs = [Tensor::from_vec(vec![0.1f32, 0.2, 0.1], [3]), Tensor::from_vec(vec![3.0f32, -4.0, 1.0], [3])];
    same(&xs, normalize, close);
    let big = [
        Tensor::from_vec(vec![5.0f32, -9.0], [2]),
        Tensor::from_vec(vec![40.0f32, 3.0], [2]),
        Tensor::from_vec(vec![0.5f32, 0.2], [2]),
    ];
    same(&big, halve_until_small, |a, b| close(&a.0, &b.0) && a.1 == b.1);
    let inputs = [
        Tensor::from_vec(vec![1.0f32, 4.0], [2]),
        Tensor::from_vec(vec![-1.0f32, 4.0], [2]),
        Tensor::from_vec(vec![1.0e6f32, 4.0], [2]),
    ];
    same(&inputs, checked, |a, b| match (a, b) {
        (Ok(x), Ok(y)) => close(x, y),
        (Err(x), Err(y)) => x == y,
        _ => false,
    });
    let s = janus::stats();
    assert!(s.function("normalize").any(|f| f.hits > 0), "{}", janus::explain());
    assert!(s.function("checked").any(|f| f.hits > 0), "{}", janus::explain());
}

/// A binary tree of word ids.
enum Tree {
    Leaf(i64),
    Node(Box<Tree>, Box<Tree>),
}

#[derive(Module)]
struct TreeRnn {
    emb: Tensor,
    wl: Tensor,
    wr: Tensor,
    b: Tensor,
}

#[janus(min_ops = 1, speculate = false)]
fn encode(t: &Tree, p: &TreeRnn) -> Tensor {
    match t {
        Tree::Leaf(w) => {
            let idx = Tensor::from_vec(vec![*w], [1]);
            p.emb.index_select(0, &idx).tanh()
        }
        Tree::Node(l, r) => {
            let a = encode(l, p);
            let b = encode(r, p);
            (a.matmul(&p.wl) + b.matmul(&p.wr) + &p.b).tanh()
        }
    }
}

fn tree(seed: u64, depth: u32) -> Tree {
    if depth == 0 || seed.is_multiple_of(3) {
        Tree::Leaf((seed % 7) as i64)
    } else {
        Tree::Node(Box::new(tree(seed / 3 + 11, depth - 1)), Box::new(tree(seed * 7 + 5, depth - 1)))
    }
}

#[test]
fn recursion_over_a_tree_with_gradients() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    janus::manual_seed(9);
    let p = TreeRnn {
        emb: (Tensor::randn([7, 5]) * 0.5).requires_grad(),
        wl: (Tensor::randn([5, 5]) * 0.5).requires_grad(),
        wr: (Tensor::randn([5, 5]) * 0.5).requires_grad(),
        b: Tensor::zeros([5]).requires_grad(),
    };
    for seed in [4u64, 17, 29, 101, 4, 17] {
        let t = tree(seed, 4);
        let loss = |h: Tensor| h.square().sum_all();
        let (ge, le) = janus::with_mode(Mode::Eager, || {
            let l = loss(encode(&t, &p));
            (l.backward(), l.item())
        });
        let l = loss(encode(&t, &p));
        let g = l.backward();
        assert!((l.item() - le).abs() <= 1e-5 * le.abs().max(1.0));
        for w in p.tensors() {
            match (g.get(&w), ge.get(&w)) {
                (Some(a), Some(b)) => assert!(close(a, b), "seed {seed}"),
                (a, b) => assert_eq!(a.is_some(), b.is_some(), "seed {seed}"),
            }
        }
    }
    assert!(janus::stats().function("encode").any(|f| f.hits > 0), "{}", janus::explain());
}

trait Activation: Default {
    fn apply(&self, x: &Tensor) -> Tensor;
}

#[derive(Default)]
struct TanhAct;
impl Activation for TanhAct {
    fn apply(&self, x: &Tensor) -> Tensor {
        x.tanh()
    }
}

#[derive(Default)]
struct ReluAct;
impl Activation for ReluAct {
    fn apply(&self, x: &Tensor) -> Tensor {
        x.relu()
    }
}

#[janus(min_ops = 1, speculate = false)]
fn activate<A: Activation>(x: &Tensor) -> Tensor {
    let y = A::default().apply(x);
    y * 2.0 + 1.0
}

#[test]
fn generic_function_caches_do_not_cross_types() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::from_vec(vec![-1.0f32, 0.5, 2.0], [3]);
    for _ in 0..5 {
        assert!(close(&activate::<TanhAct>(&x), &(x.tanh() * 2.0 + 1.0)));
        assert!(close(&activate::<ReluAct>(&x), &(x.relu() * 2.0 + 1.0)));
    }
    let f: Vec<_> = janus::stats().function("activate").cloned().collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].variants, 2, "{}", janus::explain());
}

/// A staged loop whose unrolled recording would be too large to compile.
#[janus(speculate = false)]
fn count_up(x: &Tensor, n: usize) -> Tensor {
    let mut h = x.tanh();
    for _ in 0..n {
        h = &h + 1.0;
    }
    h * 0.5
}

/// The same, but each trip adds another constant: its trips differ, so it cannot roll.
#[janus(speculate = false)]
fn count_up_by_trip(x: &Tensor, n: usize) -> Tensor {
    let mut h = x.tanh();
    for k in 0..n {
        h = &h + k as f64;
    }
    h * 0.5
}

#[test]
fn a_loop_too_large_to_unroll_compiles_rolled_or_runs_its_statements() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let x = Tensor::from_vec(vec![0.25f64, -0.5], [2]);
    let n = 210_000; // one node per trip: past the 200,000-node limit
    for f in [count_up, count_up_by_trip] {
        let want = janus::with_mode(Mode::Eager, || f(&x, n));
        for _ in 0..3 {
            assert!(close(&f(&x, n), &want));
        }
    }
    let explain = janus::explain();
    let block = |name: &str| janus::stats().function(name).find(|f| f.name.ends_with("#1")).cloned().unwrap();
    // Its trips agree: one loop node, compiled once.
    let rolled = block("count_up");
    assert_eq!((rolled.variants, rolled.hits), (1, 1), "{explain}");
    assert!(rolled.staged_ops >= n as u64, "{explain}");
    let unrolled = block("count_up_by_trip");
    assert_eq!(unrolled.variants, 0, "{explain}");
    assert!(unrolled.eager.keys().any(|r| r.contains("loop too long to unroll")), "{explain}");
}
