//! Running one step: fused programs, GEMMs (with accumulation), reductions, concatenation,
//! copies, random fills, and a generic path that runs an op's eager kernel.

use super::frame::Frame;
use super::packed_factors::Packs;
use crate::DType;
use crate::exec::lower::{NO_NODE, ReduceKind, Step, StepKind, ValRef};
use crate::ops::TensorType;
use crate::shape::Strides;
use janus_kernels::fused::{Input, Output, SumOut};
use janus_kernels::matmul::{MatLayout, MatmulDims, matmul, matmul_bias, matmul_relu, packed};
use janus_kernels::reduce as red;
use janus_kernels::strided::{Src, copy};
use janus_kernels::{Element, philox, with_any_type, with_float_type};
use smallvec::SmallVec;

/// Strides reading `v` at every index of the (larger or equal) broadcast shape `out`.
pub(crate) fn broadcast_strides(v: &ValRef, out: &[usize]) -> Strides {
    v.layout().broadcast_to(out)
}

/// Whether a GEMM's addend `vc` is one dense row of `n` values added to every result row (a
/// bias): the product adds it in its closing pass, and a split step reads it whole.
pub(crate) fn bias_row(vc: &ValRef, n: usize) -> bool {
    vc.shape.elems() == n
        && vc.shape.iter().last().is_none_or(|&d| d == n)
        && vc.strides.last().is_none_or(|&s| s == 1 || n == 1)
}

/// A product's result, prepared for its addend `vc`: `(dst, bias, accumulate)`. A bias row (one
/// dense row of `n` values, the common case) is returned for the product's closing pass; any
/// other addend is copied into the result (unless the plan put the result in the addend's place)
/// for the product to accumulate onto.
fn product_dst<'a, T: Element>(
    vc: Option<&'a ValRef>,
    vo: &'a ValRef,
    n: usize,
    f: &Frame<'a>,
) -> (&'a mut [T], Option<&'a [T]>, bool) {
    let in_place = vc.is_some_and(|c| c.buf == vo.buf && c.offset == vo.offset);
    // SAFETY: the result is disjoint from the factors; an in-place addend is not read through
    // any other reference (plan).
    let dst = unsafe { f.dst::<T>(vo) };
    match vc.filter(|_| !in_place) {
        Some(vc) if bias_row(vc, n) => (dst, Some(&f.src::<T>(vc).data[..n]), false),
        Some(vc) => {
            let st = broadcast_strides(vc, &vo.shape);
            let sc = f.src::<T>(vc);
            copy(&vo.shape, Src::new(sc.data, &st, sc.offset), dst);
            (dst, None, true)
        }
        None => (dst, None, in_place),
    }
}

/// An `f32` product whose right factor the program packs (`packed_factors.rs`): packed on this run's
/// first use, then the packed kernel.
fn matmul_packed<'a>(
    packs: &Packs,
    slot: usize,
    (va, vb, vc, vo): (&'a ValRef, &'a ValRef, Option<&'a ValRef>, &'a ValRef),
    f: &Frame<'a>,
) {
    let (m, n, k) = (vo.shape[0], vo.shape[1], va.shape[1]);
    let (sa, sb) = (f.src::<f32>(va), f.src::<f32>(vb));
    let (dst, bias, accumulate) = product_dst::<f32>(vc, vo, n, f);
    let fill = |out: &mut Vec<f32>| packed::pack(k, n, sb.data, mat_layout(vb), out);
    packs.with(slot, fill, |p| {
        packed::matmul_packed((m, n, k), sa.data, mat_layout(va), p, dst, accumulate, bias)
    });
}

/// `v`'s matrix layout over the data `Frame::src` gives for it (which starts at `v`'s offset).
fn mat_layout(v: &ValRef) -> MatLayout {
    MatLayout { offset: 0, ..v.layout().matrix() }
}

// Long by design: one arm per step kind.
pub(crate) fn run_step<'a>(step: &Step, vals: &'a [Option<ValRef>], f: &Frame<'a>) {
    let val = |i: usize| vals[i].as_ref().expect("every node read by a step has a value");
    match &step.kind {
        StepKind::Fused { prog, inputs, outputs, reads: strides, sums, span } => {
            with_float_type!(prog.dtype, T => {
            // Pushed one by one: `collect` through the iterator adapters cost a few hundred
            // instructions per step on the hit path (callgrind), more than a one-element
            // program's whole run.
            let mut ins: SmallVec<[Input<T>; 4]> = SmallVec::new();
            for (&i, st) in inputs.iter().zip(strides.iter()) {
                let v = val(i);
                ins.push(match v.dtype {
                    DType::Bool => { let s = f.src::<bool>(v); Input::Bool(Src::new(s.data, st, s.offset)) }
                    _ => { let s = f.src::<T>(v); Input::Float(Src::new(s.data, st, s.offset)) }
                });
            }
            let mut outs: SmallVec<[Output<T>; 4]> = SmallVec::new();
            for &o in outputs {
                let v = val(o);
                // SAFETY: the step's results are disjoint from what it reads (plan).
                outs.push(unsafe {
                    match v.dtype {
                        DType::Bool => Output::Bool(f.dst::<bool>(v)),
                        DType::I64 => Output::Int(f.dst::<i64>(v)),
                        _ if !v.layout().is_dense() => Output::Rows(f.dst_rows::<T>(v)),
                        _ => Output::Float(f.dst::<T>(v)),
                    }
                });
            }
            if sums.is_empty() && span.is_none() {
                janus_kernels::fused::run(&prog.program, &prog.shape, &ins, outs);
            } else {
                let mut sum_outs: SmallVec<[SumOut<T>; 1]> = sums
                    .iter()
                    .map(|s| SumOut {
                        reg: s.reg,
                        strides: &s.strides,
                        // SAFETY: as above.
                        out: unsafe { f.dst::<T>(val(s.out)) },
                    })
                    .collect();
                janus_kernels::fused::run_summing(&prog.program, &prog.shape, &ins, outs, &mut sum_outs, span.clone());
            }
            if crate::exec::faults::fused_broken()
                && let Some(&first) = outputs.first().or(sums.first().map(|s| &s.out))
                && val(first).dtype.is_float()
            {
                // SAFETY: as above; the step is still the only writer of its first result.
                let first = unsafe { f.dst::<T>(val(first)) };
                if let Some(x) = first.first_mut() {
                    *x += 1 as T;
                }
            }
        }, _ => unreachable!("fused programs run in a float type"))
        }
        StepKind::MatMul { a, b, c, out, relu } => {
            // Packs are found by the right factor, which a product with a relu may share with
            // one without: the packed kernel has no relu epilogue.
            if let Some((packs, slot)) = f.packed(*b).filter(|_| !relu) {
                matmul_packed(packs, slot, (val(*a), val(*b), c.map(val), val(*out)), f);
                return;
            }
            with_float_type!(val(*out).dtype, T => {
            let (va, vb, vo) = (val(*a), val(*b), val(*out));
            let r = vo.shape.rank();
            let dims = MatmulDims {
                batch: if r == 3 { vo.shape[0] } else { 1 },
                m: vo.shape[r - 2],
                n: vo.shape[r - 1],
                k: va.shape[va.shape.rank() - 1],
            };
            let (sa, sb) = (f.src::<T>(va), f.src::<T>(vb));
            let (la, lb) = (mat_layout(va), mat_layout(vb));
            match product_dst::<T>(c.map(val), vo, dims.n, f) {
                // Added (and the relu applied) in the product's own closing pass over the result.
                (dst, row, accumulate) if *relu => matmul_relu(dims, sa.data, la, sb.data, lb, row, dst, accumulate),
                (dst, Some(row), _) => matmul_bias(dims, sa.data, la, sb.data, lb, row, dst),
                (dst, None, accumulate) => matmul(dims, sa.data, la, sb.data, lb, dst, accumulate),
            }
            }, _ => unreachable!("matmul runs on floats"))
        }
        StepKind::Reduce { kind, x, dims, out } => with_float_type!(val(*x).dtype, T => {
            let src = f.dense::<T>(val(*x));
            // SAFETY: the result is disjoint from the operand (plan).
            match kind {
                ReduceKind::ArgMax => red::argmax(src, *dims, unsafe { f.dst::<i64>(val(*out)) }),
                ReduceKind::Sum => red::sum(src, *dims, unsafe { f.dst::<T>(val(*out)) }),
                ReduceKind::Max => red::max(src, *dims, unsafe { f.dst::<T>(val(*out)) }),
                ReduceKind::Min => red::min(src, *dims, unsafe { f.dst::<T>(val(*out)) }),
                ReduceKind::LogSumExp => red::logsumexp(src, *dims, unsafe { f.dst::<T>(val(*out)) }),
                ReduceKind::Softmax => red::softmax(src, *dims, unsafe { f.dst::<T>(val(*out)) }),
                ReduceKind::LogSoftmax => red::log_softmax(src, *dims, unsafe { f.dst::<T>(val(*out)) }),
            }
        }, _ => unreachable!("reductions run on floats")),
        StepKind::Cat { dim, parts, out } => {
            with_any_type!(val(*out).dtype, T => cat::<T>(*dim, parts, *out, vals, f))
        }
        StepKind::Copy { x, out } => with_any_type!(val(*out).dtype, T => {
            // SAFETY: the result is disjoint from the operand (plan).
            let dst = unsafe { f.dst::<T>(val(*out)) };
            let vx = val(*x);
            copy(&vx.shape, f.src::<T>(vx), dst);
        }),
        StepKind::RngState { rng, offset, out } => {
            let s = f.dense::<i64>(val(*rng));
            // SAFETY: the result is disjoint from the operand (plan).
            let d = unsafe { f.dst::<i64>(val(*out)) };
            d[0] = s[0];
            d[1] = (s[1] as u64).wrapping_add(*offset) as i64;
        }
        StepKind::Random { normal, state, out } => {
            let s = f.dense::<i64>(val(*state));
            let (key, counter) = (s[0] as u64, s[1] as u64);
            with_float_type!(val(*out).dtype, T => {
                // SAFETY: the result is disjoint from the operand (plan).
                let d = unsafe { f.dst::<T>(val(*out)) };
                if *normal { philox::fill_normal(key, counter, d); } else { philox::fill_uniform(key, counter, d); }
            }, _ => unreachable!("random fills are floats"))
        }
        StepKind::Multinomial { probs, state, out } => {
            let s = f.dense::<i64>(val(*state));
            let vp = val(*probs);
            let cols = vp.shape.iter().last().copied().unwrap_or(1);
            // SAFETY: the result is disjoint from the operands (plan).
            let d = unsafe { f.dst::<i64>(val(*out)) };
            let res = with_float_type!(vp.dtype, T => {
                philox::multinomial(f.dense::<T>(vp), cols, s[0] as u64, s[1] as u64, d)
            }, _ => unreachable!("multinomial weights are floats"));
            if let Err(row) = res {
                crate::error::bail!(
                    "multinomial",
                    "row {row} of {:?} has negative, non-finite or all-zero weights",
                    vp.shape
                );
            }
        }
        StepKind::WindowPart { op, x, out, first } => window_part(op, val(*x), val(*out), *first, f),
        StepKind::Loop { run, inputs, outputs } => {
            let args: Vec<crate::Tensor> = inputs.iter().map(|&i| f.tensor(val(i))).collect();
            let s = &run.spec;
            let finals = run.run(&args, |t, outs| {
                for (m, &j) in s.stacked.iter().enumerate() {
                    if outputs[s.finals + m] == NO_NODE {
                        continue;
                    }
                    let vo = val(outputs[s.finals + m]);
                    let n = outs[j].numel();
                    with_any_type!(vo.dtype, T => {
                        // SAFETY: the loop's results are disjoint from its operands (plan), and
                        // this slice is written once, here.
                        let dst = unsafe { f.dst::<T>(vo) };
                        copy(outs[j].shape_ref(), outs[j].src::<T>(), &mut dst[t * n..(t + 1) * n]);
                    })
                }
            });
            for (t, &o) in finals.iter().zip(outputs.iter()).filter(|(_, o)| **o != NO_NODE) {
                let vo = val(o);
                with_any_type!(vo.dtype, T => {
                    // SAFETY: as above.
                    let dst = unsafe { f.dst::<T>(vo) };
                    copy(&vo.shape, t.src::<T>(), dst);
                })
            }
        }
        StepKind::Generic { op, inputs, out } if direct_step(op, inputs, *out, vals, f) => {}
        StepKind::Generic { op, inputs, out } => {
            let args: Vec<crate::Tensor> = inputs.iter().map(|&i| f.tensor(val(i))).collect();
            let refs: Vec<&crate::Tensor> = args.iter().collect();
            let vo = val(*out);
            let ty = TensorType { shape: vo.shape.clone(), dtype: vo.dtype };
            let data = crate::backend::compute(op, &refs, &ty);
            let result =
                crate::Tensor::from_parts(ty.shape.clone(), ty.dtype, Some(data), Default::default());
            with_any_type!(vo.dtype, T => {
                // SAFETY: the result is disjoint from the operands (plan).
                let dst = unsafe { f.dst::<T>(vo) };
                copy(&vo.shape, result.src::<T>(), dst);
            })
        }
    }
}

/// Ops run by their kernels straight from and into the plan's buffers (the generic path copies
/// operands into tensors and the result back): sums over any dimensions of a strided operand,
/// and the sliding-window ops, `gather` and `scatter_add` on dense operands (a cross-entropy's
/// pick of each row's target and its adjoint: 1.5-1.6 µs per `[32, 65]` step on the generic
/// path, in the LSTM step's timeline). Returns whether it ran the step.
fn direct_step<'a>(
    op: &crate::ops::Op,
    inputs: &[usize],
    out: usize,
    vals: &'a [Option<ValRef>],
    f: &Frame<'a>,
) -> bool {
    use crate::ops::Op;
    use janus_kernels::conv as k;
    let val = |i: usize| vals[i].as_ref().expect("every node read by a step has a value");
    if let Op::Cast(c) = op {
        // Casts the fused programs cannot hold (from integers, between float types): the
        // Adam step's nine scalar casts took 0.6 µs each on the generic path, 5% of CartPole's
        // update (`JANUS_PROFILE=1`). Eager mode's own `cast_into`, so the same bits.
        let (x, o) = (val(inputs[0]), val(out));
        debug_assert_eq!(o.dtype, c.dtype);
        with_any_type!(x.dtype, S => {
            with_any_type!(c.dtype, D => {
                // SAFETY: the result is disjoint from the operand (plan).
                let dst = unsafe { f.dst::<D>(o) };
                crate::ops::elementwise::cast_into(&x.shape, f.src::<S>(x), dst);
            })
        });
        return true;
    }
    if !val(out).dtype.is_float() {
        return false;
    }
    let x = val(inputs[0]);
    if let Op::Sum(p) = op {
        let reduce: SmallVec<[bool; 6]> = (0..x.shape.rank()).map(|d| p.dims.contains(&d)).collect();
        with_float_type!(x.dtype, T => {
            // SAFETY: the result is disjoint from the operand (plan).
            let dst = unsafe { f.dst::<T>(val(out)) };
            janus_kernels::strided::sum_dims(&x.shape, f.src::<T>(x), &reduce, dst);
        }, _ => unreachable!("checked above"));
        return true;
    }
    if !inputs.iter().all(|&i| val(i).layout().is_dense()) {
        return false;
    }
    let d = |v: &ValRef| v.shape.sizes().to_vec();
    let geometry = crate::ops::conv::window;
    with_float_type!(x.dtype, T => {
        // SAFETY: the result is disjoint from the operands (plan).
        let dst = || unsafe { f.dst::<T>(val(out)) };
        match op {
            Op::Unfold(p) => {
                let s = d(x);
                k::unfold(&geometry(&p.window, s[0], s[1], [s[2], s[3]]), f.dense::<T>(x), p.pad_value.get() as T, dst());
            }
            Op::Fold(p) => {
                let s = d(x);
                k::fold(&geometry(&p.window, s[3], s[0], p.size), f.dense::<T>(x), dst());
            }
            Op::MaxPool2d(w) => {
                let s = d(x);
                k::max_pool(&geometry(w, s[0], s[1], [s[2], s[3]]), f.dense::<T>(x), dst());
            }
            Op::MaxPool2dBackward(w) => {
                let s = d(x);
                let g = f.dense::<T>(val(inputs[1]));
                k::max_pool_backward(&geometry(w, s[0], s[1], [s[2], s[3]]), f.dense::<T>(x), g, dst());
            }
            // Index errors return before anything is written: the generic path then raises
            // them with the operands' shapes.
            Op::Gather(p) => {
                let idx = val(inputs[1]);
                let (ids, out) = (f.dense::<i64>(idx), dst());
                let (xs, is) = (x.shape.sizes(), idx.shape.sizes());
                if janus_kernels::index::gather(f.dense::<T>(x), xs, p.dim, ids, is, out).is_err() {
                    return false;
                }
            }
            Op::ScatterAdd(p) => {
                let idx = val(inputs[1]);
                let (ids, out) = (f.dense::<i64>(idx), dst());
                out.fill(0 as T);
                let is = idx.shape.sizes();
                if janus_kernels::index::scatter_add(f.dense::<T>(x), ids, is, p.dim, out, &p.shape).is_err() {
                    return false;
                }
            }
            _ => return false,
        }
    }, _ => return false);
    true
}

/// Rows `first..` of an `unfold`, or image planes `first..` of a `fold`, of the whole input
/// `x`, into `out` (see `StepKind::WindowPart`).
fn window_part<'a>(op: &crate::ops::Op, x: &ValRef, out: &ValRef, first: usize, f: &Frame<'a>) {
    use crate::ops::Op;
    use janus_kernels::conv as k;
    let s = x.shape.sizes();
    let geometry = crate::ops::conv::window;
    with_float_type!(out.dtype, T => {
        // SAFETY: the result is disjoint from the operand (plan).
        let dst = unsafe { f.dst::<T>(out) };
        match op {
            Op::Unfold(p) => k::unfold_part(
                &geometry(&p.window, s[0], s[1], [s[2], s[3]]),
                f.dense::<T>(x),
                p.pad_value.get() as T,
                dst,
                first,
            ),
            Op::Fold(p) => k::fold_part(&geometry(&p.window, s[3], s[0], p.size), f.dense::<T>(x), dst, first),
            _ => unreachable!("only unfold and fold run in parts"),
        }
    }, _ => unreachable!("window parts are float"))
}

fn cat<'a, T: Element>(dim: usize, parts: &[usize], out: usize, vals: &'a [Option<ValRef>], f: &Frame<'a>) {
    let vo = vals[out].as_ref().unwrap();
    let outer: usize = vo.shape[..dim].iter().product();
    let inner: usize = vo.shape[dim + 1..].iter().product();
    let total = vo.shape[dim];
    // SAFETY: the result is disjoint from the parts (plan).
    let dst = unsafe { f.dst::<T>(vo) };
    let mut at = 0;
    for &p in parts {
        let vp = vals[p].as_ref().unwrap();
        let n = vp.shape[dim];
        let src = f.dense::<T>(vp);
        for o in 0..outer {
            let s = o * n * inner;
            let t = (o * total + at) * inner;
            dst[t..t + n * inner].copy_from_slice(&src[s..s + n * inner]);
        }
        at += n;
    }
}
