//! 8 threads x 500 calls on the same fragments give results identical to one thread. The
//! sampled self-check is off: a checked call returns the eager result, which may differ from a
//! replay in the last bits, and which calls are checked depends on how the threads interleave.

use janus::prelude::*;

#[derive(Module, Clone)]
struct Cell {
    w: Tensor,
    u: Tensor,
    b: Tensor,
}

#[janus]
fn step(c: &Cell, x: &Tensor, h: &Tensor) -> Tensor {
    let z = (x.matmul(&c.w) + h.matmul(&c.u) + &c.b).tanh();
    let out = &z * 0.5 + h * 0.5;
    out
}

fn run(c: &Cell, xs: &[Tensor]) -> Vec<f32> {
    let mut h = Tensor::zeros([2, 6]);
    for x in xs {
        h = step(c, x, &h);
    }
    h.to_vec::<f32>()
}

#[test]
fn eight_threads_agree_with_one() {
    janus::set_self_check(false);
    janus::manual_seed(21);
    let c = Cell { w: Tensor::randn([3, 6]) * 0.5, u: Tensor::randn([6, 6]) * 0.5, b: Tensor::randn([6]) };
    let xs: Vec<Tensor> = (0..5).map(|_| Tensor::randn([2, 3])).collect();
    let eager = janus::with_mode(Mode::Eager, || run(&c, &xs));
    for _ in 0..3 {
        run(&c, &xs); // profile, record and compile on this thread
    }
    let want = run(&c, &xs);
    assert!(want.iter().zip(&eager).all(|(a, b)| (a - b).abs() < 1e-5));
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for call in 0..500 {
                    assert_eq!(run(&c, &xs), want, "call {call}");
                }
            });
        }
    });
    let f = janus::stats().function("step").cloned().collect::<Vec<_>>();
    assert!(f[0].hits > 8 * 500 * 4, "{}", janus::explain());
}
