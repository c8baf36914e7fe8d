//! What the fused-program interpreter costs against compiled code: the LSTM step's two cell
//! programs (as janus lowers them) run by `janus_kernels::fused::run`, against hand-written
//! loops over the same per-element functions, which give the same bits (checked here). The
//! loops keep every value in registers; the interpreter makes one pass over a tile per
//! instruction, so the gap is what compiling fused programs to machine code would save.

use super::median::median;
use janus_kernels::fused::{self, FBinary, FUnary, Input, Instr, Output, Program, SumOut};
use janus_kernels::simd_math::{exp_lane, sigmoid_lane, tanh_lane, with_best_simd};
use janus_kernels::strided::Src;
use janus_kernels::{BinaryOp, UnaryOp};
use std::time::Instant;

/// Rows and hidden width of one worker's half of the bench's LSTM step.
const M: usize = 16;
const H: usize = 128;

/// The forward cell: gates `[i | f | g | o]` as four strided `[16, 128]` column blocks of a
/// `[16, 512]` pre-activation, and the previous cell state. Outputs the saved activations,
/// the new cell state and `h`.
fn forward_cell() -> Program {
    use Instr::*;
    let (sig, tanh) = (FUnary::Op(UnaryOp::Sigmoid), FUnary::Op(UnaryOp::Tanh));
    let (mul, add) = (FBinary::Op(BinaryOp::Mul), FBinary::Op(BinaryOp::Add));
    Program {
        instrs: vec![
            Load { dst: 0, input: 0 },
            Unary { dst: 1, f: sig, a: 0 },
            Load { dst: 0, input: 1 },
            Binary { dst: 2, f: mul, a: 1, b: 0 },
            Load { dst: 0, input: 2 },
            Unary { dst: 3, f: sig, a: 0 },
            Load { dst: 0, input: 3 },
            Unary { dst: 4, f: tanh, a: 0 },
            Binary { dst: 0, f: mul, a: 3, b: 4 },
            Binary { dst: 5, f: add, a: 2, b: 0 },
            Load { dst: 0, input: 4 },
            Unary { dst: 2, f: sig, a: 0 },
            Unary { dst: 0, f: tanh, a: 5 },
            Binary { dst: 6, f: mul, a: 2, b: 0 },
        ],
        num_regs: 7,
        outputs: vec![1, 3, 4, 5, 2, 0, 6],
    }
}

/// The forward cell as one loop: inputs in the program's order (`f` gate, `c`, `i`, `g`, `o`
/// blocks of `gates`, row stride `4 H`), outputs in its output order.
fn forward_by_hand(gates: &[f32], c: &[f32], outs: &mut [Vec<f32>]) {
    let [o0, o1, o2, o3, o4, o5, o6] = outs else { unreachable!("seven outputs") };
    with_best_simd(
        #[inline(always)]
        || {
            for r in 0..M {
                let g = &gates[r * 4 * H..][..4 * H];
                let (gi, gf, gg, go) = (&g[..H], &g[H..2 * H], &g[2 * H..3 * H], &g[3 * H..]);
                let c = &c[r * H..][..H];
                let at = r * H..(r + 1) * H;
                let (o0, o1, o2, o3) =
                    (&mut o0[at.clone()], &mut o1[at.clone()], &mut o2[at.clone()], &mut o3[at.clone()]);
                let (o4, o5, o6) = (&mut o4[at.clone()], &mut o5[at.clone()], &mut o6[at]);
                for j in 0..H {
                    let f = sigmoid_lane(gf[j]);
                    let fc = f * c[j];
                    let i = sigmoid_lane(gi[j]);
                    let g = tanh_lane(gg[j]);
                    let c_new = fc + i * g;
                    let o = sigmoid_lane(go[j]);
                    let tc = tanh_lane(c_new);
                    (o0[j], o1[j], o2[j], o3[j]) = (f, i, g, c_new);
                    (o4[j], o5[j], o6[j]) = (o, tc, o * tc);
                }
            }
        },
    )
}

/// The backward cell: 34 instructions over eight dense `[16, 128]` inputs (the incoming
/// gradients and the forward's saved activations), five outputs.
fn backward_cell() -> Program {
    use Instr::*;
    let (mul, add, sub) =
        (FBinary::Op(BinaryOp::Mul), FBinary::Op(BinaryOp::Add), FBinary::Op(BinaryOp::Sub));
    let sq = FUnary::Op(UnaryOp::Square);
    let (one, zero) = (1f64.to_bits(), 0f64.to_bits());
    let one_minus = |dst, a| BinaryConst { dst, f: sub, a, c: one, const_left: true };
    let plus_zero = |dst, a| BinaryConst { dst, f: add, a, c: zero, const_left: false };
    let b = |dst, f, a, b| Binary { dst, f, a, b };
    Program {
        instrs: vec![
            Load { dst: 0, input: 0 },
            Load { dst: 1, input: 1 },
            b(2, mul, 0, 1),
            Load { dst: 3, input: 2 },
            b(4, mul, 0, 3),
            Unary { dst: 0, f: sq, a: 1 },
            one_minus(1, 0),
            b(0, mul, 4, 1),
            Load { dst: 1, input: 3 },
            b(4, add, 1, 0),
            Load { dst: 0, input: 4 },
            b(1, mul, 4, 0),
            Load { dst: 5, input: 5 },
            b(6, mul, 4, 5),
            Unary { dst: 7, f: sq, a: 0 },
            one_minus(0, 7),
            b(7, mul, 6, 0),
            b(0, mul, 1, 5),
            one_minus(1, 5),
            b(5, mul, 0, 1),
            plus_zero(1, 5),
            plus_zero(5, 7),
            Load { dst: 7, input: 6 },
            b(0, mul, 4, 7),
            Load { dst: 7, input: 7 },
            b(6, mul, 4, 7),
            b(4, mul, 0, 7),
            one_minus(0, 7),
            b(7, mul, 4, 0),
            plus_zero(0, 7),
            b(7, mul, 2, 3),
            one_minus(2, 3),
            b(3, mul, 7, 2),
            plus_zero(2, 3),
        ],
        num_regs: 8,
        outputs: vec![1, 5, 6, 0, 2],
    }
}

/// The backward cell as one loop, register by register as the program writes them.
fn backward_by_hand(x: [&[f32]; 8], outs: [&mut [f32]; 5]) {
    let n = M * H;
    // Separate slices of one length, so the loop has no bounds checks and vectorises.
    let [x0, x1, x2, x3, x4, x5, x6, x7] = x.map(|s| &s[..n]);
    let [o1, o5, o6, o0, o2] = outs.map(|s| &mut s[..n]);
    with_best_simd(
        #[inline(always)]
        || {
            for j in 0..n {
                let (r0, r1) = (x0[j], x1[j]);
                let r2 = r0 * r1;
                let r3 = x2[j];
                let r4 = r0 * r3;
                let r1 = 1.0 - r1 * r1;
                let r4 = x3[j] + r4 * r1;
                let r0 = x4[j];
                let r1 = r4 * r0;
                let r5 = x5[j];
                let r6 = r4 * r5;
                let r7 = r6 * (1.0 - r0 * r0);
                let r5 = (r1 * r5) * (1.0 - r5);
                let (out1, out5) = (r5 + 0.0, r7 + 0.0);
                let r7 = x6[j];
                let r0 = r4 * r7;
                let r7 = x7[j];
                let out6 = r4 * r7;
                let r7 = (r0 * r7) * (1.0 - r7);
                let out0 = r7 + 0.0;
                let r3 = (r2 * r3) * (1.0 - r3);
                (o1[j], o5[j], o6[j], o0[j], o2[j]) = (out1, out5, out6, out0, r3 + 0.0);
            }
        },
    )
}

/// CartPole's log-softmax backward over its 500-step episode, `y - exp(x) * g` on `[500, 2]`,
/// with the column sum of the result (its bias gradient) fused in.
fn softmax_backward_sum() -> Program {
    use Instr::*;
    Program {
        instrs: vec![
            Load { dst: 0, input: 0 },
            Unary { dst: 1, f: FUnary::Op(UnaryOp::Exp), a: 0 },
            Load { dst: 0, input: 1 },
            Binary { dst: 2, f: FBinary::Op(BinaryOp::Mul), a: 1, b: 0 },
            Load { dst: 0, input: 2 },
            Binary { dst: 1, f: FBinary::Op(BinaryOp::Sub), a: 0, b: 2 },
        ],
        num_regs: 3,
        outputs: vec![1],
    }
}

/// The same as one loop: the column sums add row by row, in the order of the fused sum.
fn softmax_backward_sum_by_hand(x: &[f32], g: &[f32], y: &[f32], out: &mut [f32], sums: &mut [f32; 2]) {
    *sums = [0.0; 2];
    with_best_simd(
        #[inline(always)]
        || {
            for (((o, &x), &g), &y) in out.iter_mut().zip(x).zip(g).zip(y) {
                *o = y - exp_lane(x) * g;
            }
            for row in out.chunks_exact(2) {
                (sums[0], sums[1]) = (sums[0] + row[0], sums[1] + row[1]);
            }
        },
    )
}

/// CartPole's ReLU backward over a worker's half of its 500-step episode, `(x > 0) * g` on
/// `[250, 128]`, as the update's graph fuses it (`gt`, `to_dtype`, `mul`; the fuse pass then
/// runs the mask and the product as one pass, `Program::adjoin_masks`).
fn relu_backward() -> Program {
    use Instr::*;
    let mut p = Program {
        instrs: vec![
            Load { dst: 0, input: 0 },
            BinaryConst {
                dst: 1,
                f: FBinary::Cmp(janus_kernels::CmpOp::Gt),
                a: 0,
                c: 0f64.to_bits(),
                const_left: false,
            },
            Load { dst: 0, input: 1 },
            Binary { dst: 2, f: FBinary::Op(BinaryOp::Mul), a: 1, b: 0 },
        ],
        num_regs: 3,
        outputs: vec![2],
    };
    p.adjoin_masks();
    p
}

/// The same as one loop.
fn relu_backward_by_hand(x: &[f32], g: &[f32], out: &mut [f32]) {
    with_best_simd(
        #[inline(always)]
        || {
            for ((o, &x), &g) in out.iter_mut().zip(x).zip(g) {
                *o = if x > 0.0 { 1.0 } else { 0.0 } * g;
            }
        },
    )
}

/// Microseconds per call of `f`, the median of `rounds` rounds of `calls` calls each.
fn per_call(rounds: usize, calls: usize, mut f: impl FnMut()) -> Vec<f64> {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            (0..calls).for_each(|_| f());
            t.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect()
}

/// Prints the table: each program interpreted and by hand, alternating round by round.
pub fn fused_cost(quick: bool) {
    let (rounds, calls) = if quick { (3, 50) } else { (15, 4000) };
    let n = M * H;
    let value = |i: usize, k: usize| ((i * 7919 + k * 104_729) % 2001) as f32 / 500.0 - 2.0;
    // Forward: the gates as a [16, 512] matrix, read in four column blocks.
    let gates: Vec<f32> = (0..4 * n).map(|i| value(i, 0)).collect();
    let c: Vec<f32> = (0..n).map(|i| value(i, 1)).collect();
    let fwd = forward_cell();
    let (gs, cs) = ([4 * H, 1], [H, 1]);
    let mut interp: Vec<Vec<f32>> = vec![vec![0.0; n]; 7];
    let mut hand = interp.clone();
    let run_fwd = |outs: &mut [Vec<f32>]| {
        let block = |k: usize| Input::Float(Src::new(&gates, &gs, k * H));
        let inputs = [block(1), Input::Float(Src::new(&c, &cs, 0)), block(0), block(2), block(3)];
        let mut o = fused::Outputs::new();
        outs.iter_mut().for_each(|v| o.push(Output::Float(v)));
        fused::run(&fwd, &[M, H], &inputs, o);
    };
    run_fwd(&mut interp);
    forward_by_hand(&gates, &c, &mut hand);
    assert!(same_bits(&interp, &hand), "the forward cell by hand differs from the interpreter");
    // Backward: eight inputs and five outputs in one buffer, 8 KiB + 64 B apart (as an arena
    // packs [16, 128] values, but off the 4 KiB alignment that puts every stream in the
    // same L1 sets).
    let stride = n + 16;
    let mut arena: Vec<f32> = (0..13 * stride).map(|i| value(i, 2) / 4.0).collect();
    let bwd = backward_cell();
    let run_bwd = |arena: &mut [f32], by_hand: bool| {
        let (ins, outs) = arena.split_at_mut(8 * stride);
        let x: [&[f32]; 8] = std::array::from_fn(|k| &ins[k * stride..][..n]);
        let mut it = outs.chunks_mut(stride);
        let o: [&mut [f32]; 5] = std::array::from_fn(|_| &mut it.next().unwrap()[..n]);
        if by_hand {
            backward_by_hand(x, o);
        } else {
            let inputs = x.map(|s| Input::Float(Src::new(s, &cs, 0)));
            fused::run(&bwd, &[M, H], &inputs, o.into_iter().map(Output::Float).collect());
        }
    };
    run_bwd(&mut arena, false);
    let interp_bwd = arena[8 * stride..].to_vec();
    run_bwd(&mut arena, true);
    assert!(interp_bwd == arena[8 * stride..], "the backward cell by hand differs from the interpreter");
    // CartPole's column sum.
    let (x, g, y): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        (0..1000).map(|i| value(i, 3)).collect(),
        (0..1000).map(|i| value(i, 4)).collect(),
        (0..1000).map(|i| value(i, 5)).collect(),
    );
    let sm = softmax_backward_sum();
    let (ds, sum_strides) = ([2, 1], [0, 1]);
    let (mut sm_out, mut sm_sums) = (vec![0.0f32; 1000], [0.0f32; 2]);
    let run_sm = |out: &mut [f32], sums_out: &mut [f32; 2]| {
        let inputs = [x.as_slice(), &g, &y].map(|v| Input::Float(Src::new(v, &ds, 0)));
        let mut sums = [SumOut { reg: 1, strides: &sum_strides, out: sums_out }];
        fused::run_summing(
            &sm,
            &[500, 2],
            &inputs,
            [Output::Float(out)].into_iter().collect(),
            &mut sums,
            None,
        );
    };
    let (mut hand_out, mut hand_sums) = (vec![0.0f32; 1000], [0.0f32; 2]);
    run_sm(&mut sm_out, &mut sm_sums);
    softmax_backward_sum_by_hand(&x, &g, &y, &mut hand_out, &mut hand_sums);
    assert!(
        same_bits(&[sm_out.clone(), sm_sums.to_vec()], &[hand_out.clone(), hand_sums.to_vec()]),
        "the column sum by hand differs from the interpreter"
    );
    // CartPole's ReLU backward.
    let rn = 250 * 128;
    let (rx, rg): (Vec<f32>, Vec<f32>) =
        ((0..rn).map(|i| value(i, 6)).collect(), (0..rn).map(|i| value(i, 7)).collect());
    let rb = relu_backward();
    let (mut r_interp, mut r_hand) = (vec![0.0f32; rn], vec![0.0f32; rn]);
    let rs = [128, 1];
    let run_rb = |out: &mut [f32]| {
        let inputs = [rx.as_slice(), &rg].map(|v| Input::Float(Src::new(v, &rs, 0)));
        fused::run(&rb, &[250, 128], &inputs, [Output::Float(out)].into_iter().collect());
    };
    run_rb(&mut r_interp);
    relu_backward_by_hand(&rx, &rg, &mut r_hand);
    assert!(same_bits(&[r_interp.clone()], &[r_hand.clone()]), "the ReLU backward by hand differs");
    let mut times: [Vec<f64>; 8] = Default::default();
    for _ in 0..rounds {
        times[6].extend(per_call(1, calls / 4, || run_rb(&mut r_interp)));
        times[7].extend(per_call(1, calls / 4, || relu_backward_by_hand(&rx, &rg, &mut r_hand)));
        times[4].extend(per_call(1, calls, || run_sm(&mut sm_out, &mut sm_sums)));
        times[5].extend(per_call(1, calls, || {
            softmax_backward_sum_by_hand(&x, &g, &y, &mut hand_out, &mut hand_sums)
        }));
        times[0].extend(per_call(1, calls, || run_fwd(&mut interp)));
        times[1].extend(per_call(1, calls, || forward_by_hand(&gates, &c, &mut hand)));
        times[2].extend(per_call(1, calls, || run_bwd(&mut arena, false)));
        times[3].extend(per_call(1, calls, || run_bwd(&mut arena, true)));
    }
    let [a, b, c, d, e, f, g, h] = times.map(|mut t| median(&mut t));
    println!(
        "\nFused programs: the interpreter against one loop over the same functions (same bits), \
         {rounds} alternating rounds of {calls} calls, median µs per call (one worker's [16, 128] half)\n"
    );
    println!("| program | interpreter | one loop | interpreter / loop |");
    println!("|---|---:|---:|---:|");
    println!("| LSTM cell forward (14 instructions, 3 sigmoid + 2 tanh) | {a:.2} | {b:.2} | {:.2}x |", a / b);
    println!("| LSTM cell backward (34 instructions, arithmetic) | {c:.2} | {d:.2} | {:.2}x |", c / d);
    println!(
        "| CartPole log-softmax backward + column sum, [500, 2] (6 instructions) | {e:.2} | {f:.2} | {:.2}x |",
        e / f
    );
    println!("| CartPole ReLU backward, [250, 128] (4 instructions) | {g:.2} | {h:.2} | {:.2}x |", g / h);
    lane_costs(rounds, calls);
}

/// The elementwise functions the cells call, each over the 2048 values of one worker's
/// [16, 128] half spread over [-8, 8], in ns per element (median of `rounds` rounds).
fn lane_costs(rounds: usize, calls: usize) {
    use janus_kernels::simd_math::{exp, sigmoid, tanh};
    let src: Vec<f32> = (0..2048).map(|i| (i as f32 / 2047.0) * 16.0 - 8.0).collect();
    let mut dst = vec![0.0f32; src.len()];
    type Lanes = fn(&[f32], &mut [f32]);
    let fns: [(&str, Lanes); 3] = [("exp", exp), ("sigmoid", sigmoid), ("tanh", tanh)];
    let mut times: [Vec<f64>; 3] = Default::default();
    for _ in 0..rounds {
        for (t, (_, f)) in times.iter_mut().zip(fns) {
            t.extend(per_call(1, calls, || f(std::hint::black_box(&src), &mut dst)));
        }
    }
    let cells: Vec<String> = (times.iter_mut().zip(fns))
        .map(|(t, (name, _))| format!("{name} {:.2}", median(t) * 1e3 / src.len() as f64))
        .collect();
    println!("\nLane functions over 2048 values in [-8, 8], ns per element: {}", cells.join(", "));
}

fn same_bits(a: &[Vec<f32>], b: &[Vec<f32>]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()))
}
