//! Every op of the op table (see docs/design.md, "Ops and gradients") on CUDA against the CPU:
//! values, and gradients of a weighted sum.

use super::{cuda, rel_error, tol};
use janus::prelude::*;

fn rand(shape: &[usize], seed: u64, lo: f64, hi: f64, dtype: DType) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    Tensor::from_vec(v, shape).to_dtype(dtype)
}

type Case = (&'static str, Vec<Tensor>, Box<dyn Fn(&[Tensor]) -> Tensor>);

fn cases(d: DType) -> Vec<Case> {
    let x = rand(&[5, 7], 1, -2.0, 2.0, d);
    let y = rand(&[5, 7], 2, -2.0, 2.0, d);
    let row = rand(&[7], 3, 0.5, 2.0, d);
    let pos = rand(&[5, 7], 4, 0.5, 3.0, d);
    let a3 = rand(&[3, 4, 6], 5, -1.0, 1.0, d);
    let b3 = rand(&[3, 6, 5], 6, -1.0, 1.0, d);
    let m = rand(&[33, 40], 7, -1.0, 1.0, d);
    let w = rand(&[40, 17], 8, -1.0, 1.0, d);
    let big = rand(&[3, 70, 9], 9, -3.0, 3.0, d);
    let idx = Tensor::from_vec(vec![4i64, 0, 2, 2, 1], [5]);
    let gidx = Tensor::from_vec(vec![0i64, 6, 3, 1, 1, 2, 0, 5, 4, 4], [5, 2]);
    let targets = Tensor::from_vec(vec![3i64, 0, 6, 6, 1], [5]);
    let mut v: Vec<Case> = vec![
        ("neg", vec![x.clone()], Box::new(|t| t[0].neg())),
        ("exp", vec![x.clone()], Box::new(|t| t[0].exp())),
        ("log", vec![pos.clone()], Box::new(|t| t[0].log())),
        ("sqrt", vec![pos.clone()], Box::new(|t| t[0].sqrt())),
        ("abs", vec![x.clone()], Box::new(|t| t[0].abs())),
        ("tanh", vec![x.clone()], Box::new(|t| t[0].tanh())),
        ("sigmoid", vec![x.clone()], Box::new(|t| t[0].sigmoid())),
        ("relu", vec![x.clone()], Box::new(|t| t[0].relu())),
        ("square", vec![x.clone()], Box::new(|t| t[0].square())),
        ("recip", vec![pos.clone()], Box::new(|t| t[0].recip())),
        ("powf", vec![pos.clone()], Box::new(|t| t[0].powf(2.5))),
        ("clamp", vec![x.clone()], Box::new(|t| t[0].clamp(-1.0, 1.0))),
        ("sign", vec![x.clone()], Box::new(|t| t[0].sign() * &t[0])),
        ("add bcast", vec![x.clone(), row.clone()], Box::new(|t| &t[0] + &t[1])),
        ("sub", vec![x.clone(), y.clone()], Box::new(|t| &t[0] - &t[1])),
        ("mul bcast", vec![x.clone(), row.clone()], Box::new(|t| &t[0] * &t[1])),
        ("div", vec![x.clone(), pos.clone()], Box::new(|t| &t[0] / &t[1])),
        ("scalar ops", vec![x.clone()], Box::new(|t| (2.0 - &t[0]) * 0.5 + 1.0 / (t[0].abs() + 1.0))),
        ("maximum", vec![x.clone(), y.clone()], Box::new(|t| t[0].maximum(&t[1]))),
        ("minimum", vec![x.clone(), y.clone()], Box::new(|t| t[0].minimum(&t[1]))),
        ("where/gt", vec![x.clone(), y.clone()], Box::new(|t| t[0].gt(&t[1]).where_cond(&t[0], &t[1]))),
        (
            "compare mix",
            vec![x.clone(), y.clone()],
            Box::new(|t| {
                let m = t[0].ge(&t[1]).logical_or(&t[0].lt_scalar(0.0)).logical_and(&t[1].ne(&t[0]));
                m.to_dtype(t[0].dtype()) * &t[0]
            }),
        ),
        (
            "cast",
            vec![x.clone()],
            Box::new(|t| {
                let o = if t[0].dtype() == DType::F32 { DType::F64 } else { DType::F32 };
                t[0].to_dtype(o).to_dtype(t[0].dtype()) + t[0].to_dtype(DType::I64).to_dtype(t[0].dtype())
            }),
        ),
        ("sum dims", vec![big.clone()], Box::new(|t| t[0].sum(1))),
        ("sum outer", vec![big.clone()], Box::new(|t| t[0].sum(0))),
        ("sum all", vec![big.clone()], Box::new(|t| t[0].sum_all())),
        ("mean keepdim", vec![big.clone()], Box::new(|t| t[0].mean(-1))),
        ("max", vec![big.clone()], Box::new(|t| t[0].max(1))),
        ("min", vec![big.clone()], Box::new(|t| t[0].min(0))),
        ("argmax", vec![big.clone()], Box::new(|t| t[0].argmax(1).to_dtype(t[0].dtype()))),
        ("logsumexp", vec![big.clone()], Box::new(|t| t[0].logsumexp(1))),
        ("softmax last", vec![big.clone()], Box::new(|t| t[0].softmax(-1))),
        ("softmax mid", vec![big.clone()], Box::new(|t| t[0].softmax(1))),
        ("log_softmax", vec![big.clone()], Box::new(|t| t[0].log_softmax(1))),
        ("matmul", vec![m.clone(), w.clone()], Box::new(|t| t[0].matmul(&t[1]))),
        ("matmul transposed", vec![w.clone(), m.clone()], Box::new(|t| t[0].t().matmul(&t[1].t()))),
        // The gradient of a sum is a stride-0 broadcast: cuBLAS must not read it as a matrix.
        (
            "matmul then sum",
            vec![rand(&[1, 16], 11, -1.0, 1.0, d), rand(&[16, 8], 12, -1.0, 1.0, d)],
            Box::new(|t| t[0].matmul(&t[1]).sum_all()),
        ),
        ("matmul then row sums", vec![m.clone(), w.clone()], Box::new(|t| t[0].matmul(&t[1]).sum(1))),
        ("matmul batched", vec![a3.clone(), b3.clone()], Box::new(|t| t[0].matmul(&t[1]))),
        // Empty products: zeros when the summed dimension is empty, nothing when a result one is.
        (
            "matmul empty",
            vec![
                rand(&[3, 0], 13, -1.0, 1.0, d),
                rand(&[0, 4], 14, -1.0, 1.0, d),
                rand(&[5, 0], 15, -1.0, 1.0, d),
            ],
            Box::new(|t| t[0].matmul(&t[1]).sum(0) + t[1].t().matmul(&t[2].t()).sum(1).sum_all()),
        ),
        (
            "matmul bcast batch",
            vec![a3.clone(), rand(&[6, 2], 10, -1.0, 1.0, d)],
            Box::new(|t| t[0].matmul(&t[1])),
        ),
        ("reshape", vec![a3.clone()], Box::new(|t| t[0].permute(&[2, 0, 1]).reshape([6, 12]).exp())),
        ("narrow pad", vec![x.clone()], Box::new(|t| t[0].narrow(1, 2, 3).pad(0, 1, 2))),
        ("broadcast", vec![row.clone()], Box::new(|t| t[0].broadcast_to([4, 7]).square())),
        (
            "cat stack",
            vec![x.clone(), y.clone()],
            Box::new(|t| {
                Tensor::cat(&[&t[0], &t[1].t().reshape([5, 7])], 1)
                    + Tensor::stack(&[&t[1], &t[0]], 1).reshape([5, 14])
            }),
        ),
        (
            "chunk",
            vec![big.clone()],
            Box::new(|t| {
                let [a, b, c] = t[0].chunk::<3>(2);
                a.sigmoid() * b + c.tanh()
            }),
        ),
        (
            "index_select",
            vec![x.clone()],
            Box::new(move |t| t[0].index_select(0, &idx.to_device(t[0].device()))),
        ),
        ("gather", vec![x.clone()], Box::new(move |t| t[0].gather(1, &gidx.to_device(t[0].device())))),
        (
            "cross_entropy",
            vec![x.clone()],
            Box::new(move |t| t[0].cross_entropy(&targets.to_device(t[0].device()))),
        ),
        ("mse", vec![x.clone(), y.clone()], Box::new(|t| t[0].mse(&t[1]))),
        (
            "one_hot",
            vec![x.clone()],
            Box::new(|t| {
                let ids = t[0].argmax(1);
                ids.one_hot_dtype(7, t[0].dtype()) * &t[0]
            }),
        ),
    ];
    v.sort_by_key(|c| c.0);
    v
}

/// Values and gradients of `case` on the CPU and on `dev`; mismatches are appended to
/// `failures`.
fn check_case(dev: Device, d: DType, (name, ins, f): Case, failures: &mut Vec<String>) {
    let cpu: Vec<Tensor> = ins.iter().map(|t| t.clone().requires_grad()).collect();
    let gpu: Vec<Tensor> = ins.iter().map(|t| t.to_device(dev).requires_grad()).collect();
    let (oc, og) = (f(&cpu), f(&gpu));
    assert_eq!(og.device(), dev, "{name}: result left the device");
    match rel_error(&og, &oc) {
        Ok(e) if e <= tol(d) => {}
        r => failures.push(format!("{name} {d}: value {r:?}")),
    }
    if !oc.needs_grad() {
        return;
    }
    let wgt = |o: &Tensor| {
        Tensor::from_vec((0..o.numel()).map(|i| 0.5 + (i % 7) as f64 * 0.1).collect::<Vec<_>>(), o.dims())
            .to_dtype(d)
            .to_device(o.device())
    };
    let (gc, gg) = ((&oc * &wgt(&oc)).sum_all().backward(), (&og * &wgt(&og)).sum_all().backward());
    for (k, (c, g)) in cpu.iter().zip(&gpu).enumerate() {
        match (gc.get(c), gg.get(g)) {
            (Some(a), Some(b)) => match rel_error(b, a) {
                Ok(e) if e <= tol(d) => assert_eq!(b.device(), dev),
                r => failures.push(format!("{name} {d}: gradient {k} {r:?}")),
            },
            (None, None) => {}
            (a, b) => {
                failures.push(format!("{name} {d}: gradient {k} cpu {} cuda {}", a.is_some(), b.is_some()))
            }
        }
    }
}

/// Values and gradients agree between devices for every case, in f32 and f64.
#[test]
fn every_op_matches_the_cpu_with_gradients() {
    let Some(dev) = cuda() else { return };
    let mut failures = Vec::new();
    for d in [DType::F32, DType::F64] {
        for case in cases(d) {
            check_case(dev, d, case, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Convolutions and pooling: windows with stride, padding and dilation, the 2x2 halving pool,
/// ties, `-inf` and NaN in a pooled window.
fn window_cases(d: DType) -> Vec<Case> {
    let x = rand(&[2, 3, 7, 6], 21, -2.0, 2.0, d);
    let w = rand(&[4, 3, 3, 2], 22, -1.0, 1.0, d);
    let b = rand(&[4], 23, -1.0, 1.0, d);
    // Ties (rounded values), -inf and NaN inside pooled windows.
    let mut special: Vec<f64> = (0..2 * 3 * 6 * 6).map(|i| ((i * 7 % 11) as f64 / 2.0).round()).collect();
    (special[3], special[40], special[77]) = (f64::NEG_INFINITY, f64::NAN, f64::NEG_INFINITY);
    let special = Tensor::from_vec(special, [2, 3, 6, 6]).to_dtype(d);
    let opts = |s: [usize; 2], p: [usize; 2], dl: [usize; 2]| janus::Conv2dOptions {
        stride: s,
        padding: p,
        dilation: dl,
        groups: 1,
    };
    let mut v: Vec<Case> = vec![
        (
            "conv2d",
            vec![x.clone(), w.clone(), b.clone()],
            Box::new(move |t| t[0].conv2d(&t[1], Some(&t[2]), opts([1, 1], [0, 0], [1, 1]))),
        ),
        (
            "conv2d strided padded dilated",
            vec![x.clone(), w.clone()],
            Box::new(move |t| t[0].conv2d(&t[1], None, opts([2, 1], [1, 2], [2, 1]))),
        ),
        ("avg_pool2d", vec![x.clone()], Box::new(|t| t[0].avg_pool2d([3, 2], [2, 2], [1, 1]))),
        ("max_pool2d 2x2", vec![x.clone()], Box::new(|t| t[0].max_pool2d([2, 2], [2, 2], [0, 0]))),
        ("max_pool2d padded", vec![x.clone()], Box::new(|t| t[0].max_pool2d([3, 3], [2, 1], [1, 1]))),
        ("max_pool2d ties", vec![special.clone()], Box::new(|t| t[0].max_pool2d([3, 3], [1, 1], [1, 1]))),
        ("max_pool2d ties 2x2", vec![special], Box::new(|t| t[0].max_pool2d([2, 2], [2, 2], [0, 0]))),
    ];
    v.sort_by_key(|c| c.0);
    v
}

/// The sliding windows on CUDA tensors, through the host (the default) and as device kernels
/// (`set_windows_on_device`): values and gradients equal the CPU's either way.
#[test]
fn windows_match_the_cpu_on_the_host_and_the_device() {
    let Some(dev) = cuda() else { return };
    let mut failures = Vec::new();
    for on in [false, true] {
        janus::cuda::set_windows_on_device(on);
        let before = failures.len();
        for d in [DType::F32, DType::F64] {
            for case in window_cases(d) {
                check_case(dev, d, case, &mut failures);
            }
        }
        let path = if on { "device kernels" } else { "through the host" };
        failures[before..].iter_mut().for_each(|f| *f = format!("{f} ({path})"));
    }
    janus::cuda::set_windows_on_device(false);
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Integer and bool ops on the device.
#[test]
fn integer_and_bool_ops_match() {
    let Some(dev) = cuda() else { return };
    let a = Tensor::from_vec(vec![3i64, -4, 0, 9, i64::MAX, -7], [2, 3]);
    let b = Tensor::from_vec(vec![1i64, 2, 3], [3]);
    let f = |a: &Tensor, b: &Tensor| {
        vec![
            a + b,
            a * b,
            a - b,
            a.maximum(b),
            a.abs(),
            a.neg(),
            a.gt(b).logical_not().to_dtype(DType::I64),
            a.clamp(-2.0, 5.0),
            Tensor::arange(6).to_device(a.device()).reshape([2, 3]) + a,
            a.to_dtype(DType::F64).to_dtype(DType::I64),
        ]
    };
    let (c, g) = (f(&a, &b), f(&a.to_device(dev), &b.to_device(dev)));
    for (k, (x, y)) in c.iter().zip(&g).enumerate() {
        assert_eq!(x.to_vec::<i64>(), y.to_vec::<i64>(), "case {k}");
    }
}

/// The same seed and counter give the same values on both devices.
#[test]
fn philox_streams_agree_across_devices() {
    let Some(dev) = cuda() else { return };
    for d in [DType::F32, DType::F64] {
        janus::manual_seed(11);
        let (u, n) = (Tensor::rand_dtype([1001], d), Tensor::randn_dtype([37, 3], d));
        let probs = Tensor::rand_dtype([40, 6], d);
        let pick = probs.multinomial();
        janus::manual_seed(11);
        let (ug, ng) = (Tensor::rand_on([1001], d, dev), Tensor::randn_on([37, 3], d, dev));
        let pg = Tensor::rand_on([40, 6], d, dev);
        let pick_g = pg.multinomial();
        assert_eq!(ug.to_vec::<f64>(), u.to_vec::<f64>(), "uniform {d}");
        assert!(rel_error(&ng, &n).unwrap() < 1e-6, "normal {d}");
        assert_eq!(pick_g.to_vec::<i64>(), pick.to_vec::<i64>(), "multinomial {d}");
    }
}

/// A named case on one input.
type OneInput = (&'static str, Tensor, Box<dyn Fn(&Tensor) -> Tensor>);

/// Long reductions into few outputs run in two passes (partials per chunk, then per output):
/// they match the CPU, keep NaN and the extremes, and give the same bits on every run.
#[test]
fn long_reductions_split_match_the_cpu_and_repeat_bit_for_bit() {
    let Some(dev) = cuda() else { return };
    for d in [DType::F32, DType::F64] {
        let mut with_nan = rand(&[70_001], 5, -3.0, 3.0, DType::F64).to_vec::<f64>();
        with_nan[40_000] = f64::NAN;
        let cases: Vec<OneInput> = vec![
            ("sum_all 300k", rand(&[300_000], 1, -1.0, 1.0, d), Box::new(|t| t.sum_all())),
            ("rows of [131072, 128]", rand(&[131_072, 128], 2, -1.0, 1.0, d), Box::new(|t| t.sum(0))),
            ("columns of [3, 200000]", rand(&[3, 200_000], 3, -1.0, 1.0, d), Box::new(|t| t.sum(1))),
            ("max over rows", rand(&[90_000, 5], 4, -9.0, 9.0, d), Box::new(|t| t.max(0))),
            ("min over columns", rand(&[2, 90_000], 6, -9.0, 9.0, d), Box::new(|t| t.min(1))),
            (
                "max with a NaN",
                Tensor::from_vec(with_nan.clone(), [70_001]).to_dtype(d),
                Box::new(|t| t.max(0)),
            ),
            ("mean of a transpose", rand(&[40_000, 3], 7, 0.0, 1.0, d), Box::new(|t| t.t().mean(1))),
        ];
        for (name, x, f) in cases {
            let want = f(&x);
            let xg = x.to_device(dev);
            let (a, b) = (f(&xg), f(&xg));
            let e = rel_error(&a, &want).unwrap_or_else(|m| panic!("{name} {d}: {m}"));
            // A sum of n terms in another order: error grows like sqrt(n) ulps at most.
            assert!(e < tol(d) * 10.0, "{name} {d}: relative error {e:e}");
            assert_eq!(
                a.to_vec::<f64>().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                b.to_vec::<f64>().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{name} {d}: two runs differ"
            );
        }
    }
}
