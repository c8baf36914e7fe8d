//! Throwaway driver for examples/corpus/seq2seq.rs.
#[path = "corpus/seq2seq.rs"]
mod prog;

use janus::prelude::*;
use std::time::Instant;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-12)
}

fn main() {
    let steps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let t0 = Instant::now();
    let eager = janus::with_mode(Mode::Eager, || prog::train(steps, 1));
    let te = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let jan = janus::with_mode(Mode::Janus, || prog::train(steps, 1));
    let tj = t1.elapsed().as_secs_f64();
    println!("eager: {te:.2}s  janus: {tj:.2}s  (janus/eager speed-up {:.2}x)", te / tj);
    let n = eager.len();
    let avg = |v: &[f64], a: usize, b: usize| v[a..b].iter().sum::<f64>() / (b - a) as f64;
    println!("eager first {:.4} last {:.4} | mean first10 {:.4} last10 {:.4}", eager[0], eager[n - 1], avg(&eager, 0, 10.min(n)), avg(&eager, n.saturating_sub(10), n));
    println!("janus first {:.4} last {:.4} | mean first10 {:.4} last10 {:.4}", jan[0], jan[n - 1], avg(&jan, 0, 10.min(n)), avg(&jan, n.saturating_sub(10), n));
    let mut first_bad = None;
    let mut max_early = 0.0f64;
    for i in 0..n {
        let r = rel(eager[i], jan[i]);
        if i < 20 { max_early = max_early.max(r); }
        if r > 1e-3 && first_bad.is_none() { first_bad = Some(i); }
    }
    println!("max rel diff steps 0..20: {max_early:.2e}; first step with rel diff > 1e-3: {first_bad:?}");
    for i in [0, 1, 2, 5, 10, 20, 50, 99, 100, 101, 150, n - 1] {
        if i < n { println!("  step {i:3}: eager {:.6} janus {:.6} rel {:.1e}", eager[i], jan[i], rel(eager[i], jan[i])); }
    }
    println!("{}", janus::explain());
    let t2 = Instant::now();
    let chk = janus::with_mode(Mode::Check, || prog::train(6, 2));
    println!("check mode train(6, 2) ok in {:.2}s: {:?}", t2.elapsed().as_secs_f64(), chk);
}
