//! Graphs: unusable recordings, exports and the verifier, memory planning (planned peak and no
//! per-call intermediate allocations), concurrent executors, and `JANUS_DUMP`.

use janus::graph::{Graph, GraphBuilder, Node, NodeId, NodeOp};
use janus::ops::{Op, TensorType};
use janus::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the bytes and the large blocks (>= 4 KiB) allocated by the current thread.
struct Counting;

thread_local! {
    static BYTES: Cell<usize> = const { Cell::new(0) };
    static LARGE: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counters are const-initialised thread-locals
// that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = BYTES.try_with(|b| b.set(b.get() + l.size()));
        if l.size() >= 4096 {
            let _ = LARGE.try_with(|b| b.set(b.get() + 1));
        }
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let _ = BYTES.try_with(|b| b.set(b.get() + l.size()));
        if l.size() >= 4096 {
            let _ = LARGE.try_with(|b| b.set(b.get() + 1));
        }
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from this allocator with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn mlp_forward(x: &[Tensor]) -> Vec<Tensor> {
    let mut h = x[0].clone();
    for w in &x[1..] {
        h = (h.matmul(w) + 0.1).relu();
    }
    vec![h]
}

#[test]
fn mlp_memory_plan_reuses_buffers_and_allocates_no_intermediates() {
    let (batch, width, layers) = (64, 256, 16);
    janus::manual_seed(1);
    let mut args = vec![Tensor::randn([batch, width])];
    args.extend((0..layers).map(|_| Tensor::randn([width, width]) * (1.0 / 16.0)));
    let traced = trace(mlp_forward);
    let out = no_grad(|| traced.run(&args));
    let c = traced.compiled().unwrap();
    let plan = c.memory_plan();
    assert!(
        plan.planned_bytes * 4 <= plan.naive_bytes,
        "planned {} > 25% of {} naive",
        plan.planned_bytes,
        plan.naive_bytes
    );
    assert!(plan.buffers_reused > 0);
    no_grad(|| traced.run(&args)); // the first replay fills the arena pool
    let (b0, l0) = (BYTES.with(Cell::get), LARGE.with(Cell::get));
    let again = no_grad(|| traced.run(&args));
    let (bytes, large) = (BYTES.with(Cell::get) - b0, LARGE.with(Cell::get) - l0);
    let output_bytes = batch * width * 4;
    eprintln!("plan {plan:?}; per run: {bytes} bytes, {large} large allocations");
    assert_eq!(large, 1, "only the output buffer is a large allocation");
    assert!(bytes <= output_bytes + 32 * 1024, "{bytes} bytes allocated per run");
    assert_eq!(again[0].to_vec::<f32>(), out[0].to_vec::<f32>());
    assert_eq!(out[0].to_vec::<f32>(), mlp_forward(&args)[0].to_vec::<f32>());
}

#[test]
fn host_reads_and_unregistered_tensors_fall_back_to_eager_with_a_reason() {
    let outside = Tensor::ones([3]);
    let uses_global = trace(|x: &[Tensor]| vec![&x[0] + &outside]);
    let reads_host = trace(|x: &[Tensor]| {
        let s = x[0].sum_all().item();
        vec![&x[0] * s as f64]
    });
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]);
    for _ in 0..3 {
        assert_eq!(uses_global.run(std::slice::from_ref(&x))[0].to_vec::<f32>(), [2.0, 3.0, 4.0]);
        assert_eq!(reads_host.run(std::slice::from_ref(&x))[0].to_vec::<f32>(), [6.0, 12.0, 18.0]);
    }
    let why = uses_global.eager_reason(std::slice::from_ref(&x)).unwrap();
    assert!(
        why.contains("`add`") && why.contains("not an input") && why.contains("tests/graphs.rs"),
        "{why}"
    );
    let why = reads_host.eager_reason(std::slice::from_ref(&x)).unwrap();
    assert!(why.contains("host read `item()`"), "{why}");
    assert!(uses_global.compiled().is_none());
}

#[test]
fn exports_describe_the_graph() {
    let traced = trace(|x: &[Tensor]| vec![(x[0].matmul(&x[1]) + 1.0).tanh()]);
    traced.run(&[Tensor::ones([2, 3]), Tensor::ones([3, 4])]);
    let c = traced.compiled().unwrap();
    let text = c.recorded_graph().to_string();
    assert!(text.contains("matmul(%0, %1)") && text.contains("tanh") && text.contains("f32[2, 4]"), "{text}");
    let dot = traced.dot().unwrap();
    assert!(dot.starts_with("digraph janus") && dot.contains("->") && dot.contains("fused"), "{dot}");
    let json = c.graph().to_json();
    assert!(
        json.contains("\"op\": \"fused\"")
            && json.contains("\"shape\": [2, 4]")
            && json.contains("\"outputs\""),
        "{json}"
    );
}

#[test]
fn verifier_names_the_bad_node() {
    let ty = |s: &[usize]| TensorType { shape: s.into(), dtype: DType::F32 };
    let mut b = GraphBuilder::new();
    let x = b.input("x", ty(&[2, 3]));
    let y = b.input("y", ty(&[4, 5]));
    // A matmul of incompatible operands, with a made-up result type.
    let bad = b.push(Node {
        op: NodeOp::Op(Op::MatMul),
        inputs: [x, y].into_iter().collect(),
        ty: ty(&[2, 5]),
        span: None,
    });
    let g: Graph = b.finish(vec![bad]);
    let err = janus::graph::verify(&g).unwrap_err();
    assert!(err.contains("at %2") && err.contains(">>  %2: f32[2, 5] = matmul(%0, %1)"), "{err}");
    let g2: Graph = GraphBuilder::new().finish(vec![NodeId(7)]);
    assert!(janus::graph::verify(&g2).unwrap_err().contains("output %7"));
}

#[test]
fn one_executor_serves_many_threads() {
    let traced = trace(|x: &[Tensor]| vec![(x[0].matmul(&x[1]).tanh() * 2.0).sum(1)]);
    let a = Tensor::randn([16, 32]);
    let b = Tensor::randn([32, 8]);
    let want = traced.run(&[a.clone(), b.clone()])[0].to_vec::<f32>();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    assert_eq!(traced.run(&[a.clone(), b.clone()])[0].to_vec::<f32>(), want);
                }
            });
        }
    });
}

#[test]
fn random_ops_draw_the_same_numbers_compiled_and_eager() {
    let f = |x: &[Tensor]| vec![&x[0] + Tensor::randn([4]), Tensor::rand([3]) * 2.0];
    let traced = trace(f);
    let x = Tensor::zeros([4]);
    janus::manual_seed(3);
    traced.run(std::slice::from_ref(&x)); // records
    for _ in 0..3 {
        janus::manual_seed(11);
        let c = traced.run(std::slice::from_ref(&x));
        let after_compiled = Tensor::rand([2]).to_vec::<f32>();
        janus::manual_seed(11);
        let e = f(std::slice::from_ref(&x));
        let after_eager = Tensor::rand([2]).to_vec::<f32>();
        assert_eq!(c[0].to_vec::<f32>(), e[0].to_vec::<f32>());
        assert_eq!(c[1].to_vec::<f32>(), e[1].to_vec::<f32>());
        assert_eq!(after_compiled, after_eager, "the replay advances the stream like eager");
    }
    assert!(traced.compiled().unwrap().graph().rng.is_some());
}
