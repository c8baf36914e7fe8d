//! Valid code the macro used to reject or break (issue 9, item 6), and the silent wrong answers
//! found while fixing it: raw identifiers, `&mut` and shared borrows held across a host
//! statement, places in lazily evaluated positions, writes through `&mut` places that are not
//! whole locals, and places whose index the block changes. Every test runs a function over 8 or
//! more calls with several keys, in janus mode and eagerly, compares the results bit for bit,
//! and checks that compiled graphs replayed, so none can pass by running everything eagerly.
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// A host statement: its receiver is a static, so it runs on every call and splits the
/// statements around it into two blocks.
static HOST: AtomicU64 = AtomicU64::new(0);

/// A `[rows, 3]` f64 tensor whose values depend on `seed`.
fn input(rows: usize, seed: usize) -> Tensor {
    let v: Vec<f64> = (0..rows * 3).map(|i| ((i * 7 + seed * 13) % 11) as f64 / 11.0 - 0.4).collect();
    Tensor::from_vec(v, [rows, 3])
}

/// Runs `call(k)` for `calls` calls in janus mode and eagerly; the results must be identical,
/// and the blocks of `function` must have replayed at least `min_hits` times.
fn agree(function: &str, calls: usize, min_hits: u64, call: impl Fn(usize) -> Vec<Tensor>) {
    for k in 0..calls {
        let got = call(k);
        let want = janus::with_mode(Mode::Eager, || call(k));
        assert_eq!(got.len(), want.len(), "{function}, call {k}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.dims(), w.dims(), "{function}, call {k}, result {i}");
            assert_eq!(
                g.to_vec::<f64>(),
                w.to_vec::<f64>(),
                "{function}, call {k}, result {i}\n{}",
                janus::explain()
            );
        }
    }
    let hits: u64 = janus::stats().function(function).map(|f| f.hits).sum();
    assert!(hits >= min_hits, "{function}: {hits} replays\n{}", janus::explain());
}

/// Three keys: two shapes, and a third call pattern of the first shape.
fn rows(k: usize) -> usize {
    [2, 3, 2][k % 3]
}

#[janus(min_ops = 1, dynamic(r#as), speculate = false)]
fn raw_names(r#in: &Tensor, r#mut: &mut Tensor, r#as: f64) -> Tensor {
    let r#fn = |t: &Tensor| t.tanh() * 0.5;
    let r#type = r#fn(r#in) * 2.0;
    let r#loop = &r#type + r#in * r#as;
    *r#mut = &*r#mut + &r#loop;
    HOST.fetch_add(1, Ordering::Relaxed);
    let r#match = r#loop.sigmoid() - &*r#mut;
    r#match * r#type
}

#[test]
fn raw_identifiers_as_parameters_locals_closures_and_dynamic_scalars() {
    agree("raw_names", 12, 12, |k| {
        let mut acc = input(rows(k), k + 1);
        let y = raw_names(&input(rows(k), k), &mut acc, 0.25 * k as f64);
        vec![y, acc]
    });
}

#[janus(min_ops = 1, speculate = false)]
fn last_mut_held(x: &Tensor) -> Vec<Tensor> {
    let mut v = vec![x.clone(), x * 2.0];
    let s = v.last_mut().unwrap();
    let y = (x * 3.0).tanh();
    HOST.fetch_add(1, Ordering::Relaxed);
    *s = &*s + y * 0.5;
    v
}

#[janus(min_ops = 1, speculate = false)]
fn split_at_mut_held(x: &Tensor) -> Vec<Tensor> {
    let mut v = vec![x.clone(), x.exp()];
    let (a, b) = v.split_at_mut(1);
    let y = (x * 3.0).tanh();
    HOST.fetch_add(1, Ordering::Relaxed);
    a[0] = &b[0] + y * 0.5;
    b[0] = b[0].sigmoid();
    v
}

#[test]
fn mutable_borrows_from_accessors_held_across_a_host_statement() {
    agree("last_mut_held", 10, 10, |k| last_mut_held(&input(rows(k), k)));
    agree("split_at_mut_held", 10, 10, |k| split_at_mut_held(&input(rows(k), k)));
}

#[janus(min_ops = 1, speculate = false)]
fn element_ref_held(x: &Tensor, v: &mut Vec<Tensor>) -> Tensor {
    let s = &mut v[0];
    let y = (x * 3.0).tanh();
    HOST.fetch_add(1, Ordering::Relaxed);
    *s = &*s + &y;
    y * 2.0
}

#[janus(min_ops = 1, speculate = false)]
fn element_ref_in_block(x: &Tensor, v: &mut Vec<Tensor>) -> Tensor {
    // The borrow ends inside the block, so the block stages whole; the write through it
    // changes `v`, which the replay must restore.
    let s = &mut v[1];
    *s = (&*s + x).tanh();
    x * 2.0 + 1.0
}

#[test]
fn mutable_references_to_elements_are_written_on_replay() {
    agree("element_ref_held", 10, 10, |k| {
        let mut v = vec![input(rows(k), k + 2), input(rows(k), k + 3)];
        let y = element_ref_held(&input(rows(k), k), &mut v);
        vec![y, v[0].clone(), v[1].clone()]
    });
    agree("element_ref_in_block", 10, 5, |k| {
        let mut v = vec![input(rows(k), k + 2), input(rows(k), k + 3)];
        let y = element_ref_in_block(&input(rows(k), k), &mut v);
        vec![y, v[0].clone(), v[1].clone()]
    });
}

#[janus(min_ops = 1, speculate = false)]
fn shared_borrows_held(x: &Tensor) -> Tensor {
    let a = x.tanh() * 2.0;
    let r = &a;
    let parts = [x.exp(), x * 2.0];
    let refs: Vec<&Tensor> = parts.iter().collect();
    HOST.fetch_add(1, Ordering::Relaxed);
    Tensor::cat(&refs, 0).sum(0) + r + &a
}

#[janus(min_ops = 1, speculate = false)]
fn borrowed_receiver(x: &Tensor) -> Tensor {
    let a = x.tanh();
    let r = &a;
    HOST.fetch_add(1, Ordering::Relaxed);
    // `a` is a method receiver while `r` borrows it and is used later: it is checked, not
    // restored (restoring it would conflict with the borrow, and nothing can have changed it).
    let y = a.exp() + r;
    HOST.fetch_add(1, Ordering::Relaxed);
    y * r.sum_all()
}

#[test]
fn shared_borrows_held_across_a_host_statement() {
    agree("shared_borrows_held", 10, 5, |k| vec![shared_borrows_held(&input(rows(k), k))]);
    agree("borrowed_receiver", 10, 5, |k| vec![borrowed_receiver(&input(rows(k), k))]);
}

#[janus(min_ops = 1, speculate = false)]
fn lazy_places(init: &Option<Tensor>, hs: &[Tensor], x: &Tensor, n: usize) -> Tensor {
    let h = init.clone().unwrap_or_else(|| hs[0].clone());
    let wide = n > 0 && hs[n - 1].dims()[0] > 2;
    let mut y = h * x + 1.0;
    for _ in 0..n {
        y = &y + &hs[0];
    }
    if wide { y * 2.0 } else { y }
}

#[test]
fn places_in_lazily_evaluated_positions_are_not_read_before_the_block() {
    // With `hs` empty, eager mode never evaluates `hs[0]` or `hs[n - 1]`.
    agree("lazy_places", 12, 3, |k| {
        let x = input(rows(k), k);
        let hs: Vec<Tensor> = if k % 2 == 0 { Vec::new() } else { vec![input(rows(k), k + 5)] };
        let init = (k % 2 == 0).then(|| input(rows(k), k + 1));
        vec![lazy_places(&init, &hs, &x, k % 2)]
    });
}

#[janus(min_ops = 1, speculate = false)]
fn copied_closure(x: &Tensor, s: f64) -> Tensor {
    let f = |t: &Tensor| (t * s).tanh();
    let y = f(x) + f(&x.exp());
    y
}

#[test]
fn a_copied_closure_stages_with_the_block_that_calls_it() {
    // `ui-tests/pass/copied_closure_no_warning.rs` checks the expansion draws no warning.
    agree("copied_closure", 9, 4, |k| vec![copied_closure(&input(rows(k), k), 0.5)]);
}

#[derive(Module)]
struct Net {
    w: Tensor,
}

#[derive(Module)]
struct Trainer {
    net: Net,
    seen: Tensor,
    params: Vec<Tensor>,
}

fn sgd(net: &mut Net, g: &Tensor) {
    net.w = &net.w - g;
}

impl Trainer {
    /// `&mut self.net` and `self.params.iter_mut()` mutate places that are not whole locals.
    #[janus(min_ops = 1, speculate = false)]
    fn train(&mut self, g: &Tensor) {
        let g2 = g * 2.0;
        sgd(&mut self.net, &g2);
        for (p, q) in self.params.iter_mut().zip([&g2, g]) {
            *p = &*p - q * 0.5;
        }
        self.seen = &self.seen + 1.0;
    }
}

#[test]
fn writes_through_fields_and_iter_mut_are_restored_on_replay() {
    agree("train", 10, 8, |k| {
        let r = rows(k);
        let mut t = Trainer {
            net: Net { w: input(r, k) },
            seen: input(r, k + 1),
            params: vec![input(r, 2), input(r, 3)],
        };
        for _ in 0..3 {
            t.train(&input(r, k + 4));
        }
        vec![t.net.w, t.seen, t.params[0].clone(), t.params[1].clone()]
    });
}

fn pick(v: &mut [Tensor]) -> &mut Tensor {
    &mut v[0]
}

#[janus(min_ops = 1, speculate = false)]
fn write_through_later(v: &mut Vec<Tensor>, x: &Tensor) -> Tensor {
    // `&mut *` marks a reference from a function the macro does not know (README).
    let s = &mut *pick(v);
    HOST.fetch_add(1, Ordering::Relaxed);
    *s = &*s + x.tanh() * 2.0;
    HOST.fetch_add(1, Ordering::Relaxed);
    x * 2.0
}

#[janus(min_ops = 1, speculate = false)]
fn index_moves(hs: &mut Vec<Tensor>, x: &Tensor) -> usize {
    let mut k = 0;
    HOST.fetch_add(1, Ordering::Relaxed);
    hs[k] = x.tanh() * 2.0;
    k += 1;
    hs[k] = &hs[k] + x;
    HOST.fetch_add(1, Ordering::Relaxed);
    k
}

#[test]
fn writes_through_a_reference_bound_earlier_and_through_moving_indices() {
    agree("write_through_later", 10, 10, |k| {
        let mut v = vec![input(rows(k), k + 1), input(rows(k), k + 2)];
        let y = write_through_later(&mut v, &input(rows(k), k));
        vec![y, v[0].clone(), v[1].clone()]
    });
    agree("index_moves", 10, 5, |k| {
        let mut hs = vec![input(rows(k), k + 1), input(rows(k), k + 2), input(rows(k), k + 3)];
        let n = index_moves(&mut hs, &input(rows(k), k));
        assert_eq!(n, 1);
        hs
    });
}
