#[path = "corpus/resnet.rs"]
mod prog;
use janus::prelude::*;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(300);
    let t = Instant::now();
    let e = janus::with_mode(Mode::Eager, || prog::train(n, 1));
    let te = t.elapsed().as_secs_f64();
    janus::reset_stats();
    let t = Instant::now();
    let j = janus::with_mode(Mode::Janus, || prog::train(n, 1));
    let tj = t.elapsed().as_secs_f64();
    println!("eager {te:.2}s janus {tj:.2}s ratio {:.2}x", te / tj);
    let k = 5.min(n);
    println!("eager first {:?}\njanus first {:?}", &e[..k], &j[..k]);
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let w = (n / 10).max(1);
    println!("eager first{w} mean {:.4} last{w} mean {:.4}", avg(&e[..w]), avg(&e[n - w..]));
    println!("janus first{w} mean {:.4} last{w} mean {:.4}", avg(&j[..w]), avg(&j[n - w..]));
    let first_diff = e.iter().zip(&j).position(|(a, b)| (a - b).abs() > 1e-4 * a.abs().max(1.0));
    println!("first step differing >1e-4: {first_diff:?}");
    println!("{}", janus::explain());
    let c = janus::with_mode(Mode::Check, || prog::train(n.min(40), 1));
    println!("check ok: {} steps, last {:.4}", c.len(), c.last().unwrap());
}
