//! `argsort`, `sort`, `topk` and `randperm`: against host sorting, PyTorch's NaN and tie rules,
//! finite-difference gradients of the sorted values, and `#[janus]` replays equal to eager.

use super::{assert_close, here, panic_message};
use crate::common::{assert_grads, rand64, values};
use janus::prelude::*;

/// Host reference: each lane of a row-major `[rows, cols]` matrix sorted along `dim`.
fn host_sort(v: &[f64], rows: usize, cols: usize, dim: usize, descending: bool) -> (Vec<f64>, Vec<i64>) {
    let (lanes, n) = if dim == 1 { (rows, cols) } else { (cols, rows) };
    let at = |lane: usize, k: usize| if dim == 1 { lane * cols + k } else { k * cols + lane };
    let (mut vals, mut idx) = (vec![0.0; v.len()], vec![0i64; v.len()]);
    for lane in 0..lanes {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| {
            let o = v[at(lane, a)].total_cmp(&v[at(lane, b)]);
            if descending { o.reverse() } else { o }
        });
        for (k, &src) in order.iter().enumerate() {
            vals[at(lane, k)] = v[at(lane, src)];
            idx[at(lane, k)] = src as i64;
        }
    }
    (vals, idx)
}

#[test]
fn sort_matches_host_sorting_along_each_dim() {
    for (seed, (rows, cols)) in [(4usize, 7usize), (5, 1), (3, 9)].into_iter().enumerate() {
        let v = values(rows * cols, seed as u64, -3.0, 3.0);
        for dtype in [DType::F32, DType::F64] {
            let x = Tensor::from_vec(v.clone(), [rows, cols]).to_dtype(dtype);
            let v = x.to_vec::<f64>();
            for dim in [0usize, 1] {
                for descending in [false, true] {
                    let (vals, idx) = x.sort(dim, descending);
                    let (want_v, want_i) = host_sort(&v, rows, cols, dim, descending);
                    assert_eq!(vals.to_vec::<f64>(), want_v, "{dtype} dim {dim} desc {descending}");
                    assert_eq!(idx.to_vec::<i64>(), want_i, "{dtype} dim {dim} desc {descending}");
                    assert_eq!((vals.dtype(), idx.dtype()), (dtype, DType::I64));
                }
            }
        }
    }
    let ints = Tensor::from_vec(vec![5i64, -2, 9, 0], [4]);
    assert_eq!(ints.sort(-1, false).0.to_vec::<i64>(), vec![-2, 0, 5, 9]);
}

#[test]
fn nan_sorts_largest_and_ties_keep_their_order() {
    let x = Tensor::from_vec(vec![1.0f32, f32::NAN, -1.0, 1.0, 0.0, -0.0], [6]);
    assert_eq!(x.argsort(0, false).to_vec::<i64>(), vec![2, 4, 5, 0, 3, 1]);
    assert_eq!(x.argsort(0, true).to_vec::<i64>(), vec![1, 0, 3, 4, 5, 2]);
    let (v, i) = x.topk(2, 0, false);
    assert_eq!((v.to_vec::<f32>(), i.to_vec::<i64>()), (vec![-1.0, 0.0], vec![2, 4]));
}

#[test]
fn topk_takes_the_first_k_of_the_sort() {
    let x = Tensor::from_vec(values(24, 9, -1.0, 1.0), [2, 3, 4]);
    for dim in [0usize, 1, 2] {
        let n = x.dims()[dim];
        for k in 0..=n {
            for largest in [true, false] {
                let (v, i) = x.topk(k, dim, largest);
                let (sv, si) = x.sort(dim, largest);
                assert_eq!(v.to_vec::<f64>(), sv.narrow(dim, 0, k).to_vec::<f64>());
                assert_eq!(i.to_vec::<i64>(), si.narrow(dim, 0, k).to_vec::<i64>());
            }
        }
    }
    let (msg, line) = (panic_message(|| drop(x.topk(5, 1, true))), line!());
    assert!(
        msg.contains("janus::topk") && msg.contains("[2, 3, 4]") && msg.contains(&here(file!(), line)),
        "{msg}"
    );
    let (msg, line) = (panic_message(|| drop(x.sort(3, true))), line!());
    assert!(msg.contains("janus::sort") && msg.contains(&here(file!(), line)), "{msg}");
}

#[test]
fn gradients_flow_to_the_selected_inputs() {
    let x = rand64(&[3, 5], 11, -2.0, 2.0);
    assert_grads("sort values dim 1", std::slice::from_ref(&x), &|t| t[0].sort(1, false).0);
    assert_grads("sort values dim 0 descending", std::slice::from_ref(&x), &|t| t[0].sort(0, true).0);
    assert_grads("topk values", std::slice::from_ref(&x), &|t| t[0].topk(2, 1, true).0);
    assert_grads("bottom-k values", std::slice::from_ref(&x), &|t| t[0].topk(3, 0, false).0 * 2.0);
    // Unselected inputs get exactly zero, as in PyTorch.
    let w = Tensor::from_vec(vec![0.5f64, 3.0, -1.0, 2.0], [4]).requires_grad();
    let g = w.topk(2, 0, true).0.sum_all().backward();
    assert_eq!(g.get(&w).unwrap().to_vec::<f64>(), vec![0.0, 1.0, 0.0, 1.0]);
}

#[test]
fn randperm_is_a_seeded_permutation() {
    janus::manual_seed(5);
    let a = Tensor::randperm(50).to_vec::<i64>();
    janus::manual_seed(5);
    let b = Tensor::randperm(50).to_vec::<i64>();
    let c = Tensor::randperm(50).to_vec::<i64>();
    assert_eq!(a, b);
    assert_ne!(a, c, "the stream moves on");
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(sorted, (0..50).collect::<Vec<i64>>());
    assert_ne!(a, sorted, "50 elements left in order by chance");
    assert_eq!(Tensor::randperm(0).numel(), 0);
}

/// Sorting, top-k and a permutation inside one staged block, with gradients.
#[janus(min_ops = 1)]
fn ranked(x: &Tensor) -> (Tensor, Tensor, Tensor, Tensor) {
    let (top, idx) = x.topk(2, 1, true);
    let perm = Tensor::randperm(x.dims()[0]);
    let loss =
        (top.square().sum_all() + x.sort(0, false).0.index_select(0, &perm).sum(0).exp().sum_all()) * 0.5;
    let grads = loss.backward();
    let g = grads.get(x).unwrap().clone();
    (loss, idx, perm, g)
}

#[test]
fn janus_replays_equal_eager() {
    janus::set_self_check(false);
    for call in 0..16 {
        let rows = [3, 4][call % 2];
        let x = Tensor::from_vec(values(rows * 5, call as u64, -1.0, 1.0), [rows, 5]).requires_grad();
        janus::manual_seed(call as u64);
        let want = janus::with_mode(Mode::Eager, || ranked(&x));
        janus::manual_seed(call as u64);
        let got = ranked(&x);
        assert_close(&format!("call {call} loss"), &got.0, &want.0, 1e-12);
        assert_eq!(got.1.to_vec::<i64>(), want.1.to_vec::<i64>(), "call {call} indices");
        assert_eq!(got.2.to_vec::<i64>(), want.2.to_vec::<i64>(), "call {call} permutation");
        assert_close(&format!("call {call} gradient"), &got.3, &want.3, 1e-12);
    }
    let f = janus::stats().function("ranked").next().cloned().unwrap();
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
}
