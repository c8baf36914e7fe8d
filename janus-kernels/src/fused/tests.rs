//! Tests of the fused register machine: programs against scalar references, sums against
//! `sum_dims`' bits, loads in place.
use super::*;

/// Register 3 = input 0 * 2 + input 1 (registers 0 and 1 hold the inputs).
fn twice_a_plus_b() -> [Instr; 4] {
    [
        Instr::Load { dst: 0, input: 0 },
        Instr::Load { dst: 1, input: 1 },
        Instr::BinaryConst {
            dst: 2,
            f: FBinary::Op(BinaryOp::Mul),
            a: 0,
            c: 2f64.to_bits(),
            const_left: false,
        },
        Instr::Binary { dst: 3, f: FBinary::Op(BinaryOp::Add), a: 2, b: 1 },
    ]
}

#[test]
fn chain_with_broadcast_bool_and_constants() {
    // out0 = sigmoid(a * 2 + b_row); out1 = (a > 0) ? a : 0.5 * a ; out2 = (a > 0)
    let prog = Program {
        instrs: [
            &twice_a_plus_b()[..],
            &[
                Instr::Unary { dst: 4, f: FUnary::Op(UnaryOp::Sigmoid), a: 3 },
                Instr::BinaryConst { dst: 5, f: FBinary::Cmp(CmpOp::Gt), a: 0, c: 0, const_left: false },
                Instr::BinaryConst {
                    dst: 6,
                    f: FBinary::Op(BinaryOp::Mul),
                    a: 0,
                    c: 0.5f64.to_bits(),
                    const_left: true,
                },
                Instr::Select { dst: 7, c: 5, a: 0, b: 6 },
            ],
        ]
        .concat(),
        num_regs: 8,
        outputs: vec![4, 7, 5],
    };
    let (rows, cols) = (300, 7); // several tiles, not a multiple of TILE
    let a: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.37).sin()).collect();
    let b: Vec<f32> = (0..cols).map(|j| j as f32 * 0.1).collect();
    let mut o0 = vec![0.0f32; rows * cols];
    let mut o1 = vec![0.0f32; rows * cols];
    let mut o2 = vec![false; rows * cols];
    run(
        &prog,
        &[rows, cols],
        &[Input::Float(Src::new(&a, &[cols, 1], 0)), Input::Float(Src::new(&b, &[0, 1], 0))],
        smallvec::smallvec![Output::Float(&mut o0), Output::Float(&mut o1), Output::Bool(&mut o2)],
    );
    for i in 0..rows * cols {
        let x = a[i];
        let want = 1.0 / (1.0 + (-(x * 2.0 + b[i % cols])).exp());
        assert!((o0[i] - want).abs() < 1e-6);
        assert_eq!(o1[i], if x > 0.0 { x } else { 0.5 * x });
        assert_eq!(o2[i], x > 0.0);
    }
}

/// Loads that read in place (a dense input at an offset, a float and a bool broadcast from one
/// value) and registers reused after them: a view register freed and rewritten by a later
/// instruction must read the new values, over lengths that end mid-tile, whole and in parts.
#[test]
fn loads_read_in_place_and_their_registers_are_reused() {
    use crate::elementwise::BinaryOp::{Add, Mul};
    let prog = Program {
        instrs: vec![
            Instr::Load { dst: 0, input: 0 }, // x (dense, offset 3)
            Instr::Load { dst: 1, input: 1 }, // s (one float)
            Instr::Binary { dst: 2, f: FBinary::Op(Mul), a: 0, b: 1 },
            // registers 0 and 1 are free now: reuse them as destinations and as a new load
            Instr::BinaryConst { dst: 0, f: FBinary::Op(Add), a: 2, c: 1f64.to_bits(), const_left: false },
            Instr::Load { dst: 1, input: 2 }, // k (one bool)
            Instr::Select { dst: 3, c: 1, a: 0, b: 2 },
            Instr::Load { dst: 1, input: 0 }, // x again, into the reused register
            Instr::Binary { dst: 2, f: FBinary::Op(Add), a: 3, b: 1 },
        ],
        num_regs: 4,
        outputs: vec![2, 0],
    };
    for (n, k) in [(1, true), (511, false), (1300, true), (300_001, false)] {
        let x: Vec<f32> = (0..n + 3).map(|i| (i % 17) as f32 - 8.0).collect();
        let (s, kb) = ([0.5f32], [k]);
        let (mut o0, mut o1) = (vec![0.0f32; n], vec![0.0f32; n]);
        let inputs = [
            Input::Float(Src::new(&x, &[1], 3)),
            Input::Float(Src::new(&s, &[0], 0)),
            Input::Bool(Src::new(&kb, &[0], 0)),
        ];
        run(&prog, &[n], &inputs, smallvec::smallvec![Output::Float(&mut o0), Output::Float(&mut o1)]);
        for i in 0..n {
            let xs = x[i + 3] * 0.5;
            assert_eq!(o1[i], xs + 1.0, "n={n} [{i}]");
            assert_eq!(o0[i], if k { xs + 1.0 } else { xs } + x[i + 3], "n={n} [{i}]");
        }
    }
}

/// `x * 2 + b` (b broadcast over dim 0), stored, and summed over every subset of dims:
/// the same bits as `sum_dims` on the stored result (the eager sum), in and out of parallel
/// runs, for small and large shapes whose rows cross tiles and parts (short rows and columns,
/// `[600, 2, 3]`, cross tiles mid-row).
#[test]
fn sums_give_the_bits_of_sum_dims_on_the_stored_result() {
    let prog = Program { instrs: twice_a_plus_b().to_vec(), num_regs: 4, outputs: vec![3] };
    for shape in [[3, 5, 7], [7, 5, 301], [2, 1, 33], [64, 16, 97], [5, 3, 5000], [1, 1, 70_001], [600, 2, 3]]
    {
        let n: usize = shape.iter().product();
        let a: Vec<f32> = (0..n).map(|i| ((i * 7919 % 2003) as f32 - 1000.0) / 97.0).collect();
        let b: Vec<f32> = (0..shape[1] * shape[2]).map(|i| (i % 13) as f32 * 0.37).collect();
        let (sa, sb) = ([shape[1] * shape[2], shape[2], 1], [0, shape[2], 1]);
        for mask in 0..8u32 {
            let reduce: Vec<bool> = (0..3).map(|d| mask & (1 << d) != 0).collect();
            let mut strides = [0usize; 3];
            let mut m = 1;
            for d in (0..3).rev() {
                if !reduce[d] {
                    strides[d] = m;
                    m *= shape[d];
                }
            }
            for parallel in [false, true] {
                let mut stored = vec![0.0f32; n];
                let mut sum = vec![f32::NAN; m];
                let mut go = || {
                    run_summing(
                        &prog,
                        &shape,
                        &[Input::Float(Src::new(&a, &sa, 0)), Input::Float(Src::new(&b, &sb, 0))],
                        smallvec::smallvec![Output::Float(&mut stored)],
                        &mut [SumOut { reg: 3, strides: &strides, out: &mut sum }],
                        None,
                    )
                };
                if parallel {
                    go()
                } else {
                    crate::parallel::serial(go)
                }
                let mut want = vec![0.0f32; m];
                crate::strided::sum_dims(&shape, Src::new(&stored, &sa, 0), &reduce, &mut want);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&sum), bits(&want), "{shape:?} reduce {reduce:?} parallel {parallel}");
                for (i, x) in stored.iter().enumerate() {
                    assert_eq!(*x, a[i] * 2.0 + b[i % (shape[1] * shape[2])]);
                }
                // Two halves of the parts (as an executor splits the step), then their sum.
                let (count, chunk) = SumPlan::parts(n, None);
                if count == 4 && reduce[0] {
                    let mut halves = [vec![0.0f32; m], vec![0.0f32; m]];
                    let mut again = vec![0.0f32; n];
                    let (lo, hi) = again.split_at_mut(2 * chunk);
                    for (h, (out, half)) in [lo, hi].into_iter().zip(&mut halves).enumerate() {
                        run_summing(
                            &prog,
                            &shape,
                            &[Input::Float(Src::new(&a, &sa, 0)), Input::Float(Src::new(&b, &sb, 0))],
                            smallvec::smallvec![Output::Float(out)],
                            &mut [SumOut { reg: 3, strides: &strides, out: half }],
                            Some(2 * h..2 * h + 2),
                        );
                    }
                    let total: Vec<f32> = halves[0].iter().zip(&halves[1]).map(|(x, y)| x + y).collect();
                    assert_eq!(bits(&total), bits(&want), "{shape:?} reduce {reduce:?}: halves");
                    assert_eq!(again, stored);
                }
                // Row halves (as an executor splits a step whose sums keep dim 0).
                if !reduce[0] {
                    let (h, row) = (shape[0] / 2, shape[1] * shape[2]);
                    let per_row = m / shape[0];
                    for (r0, rows) in [(0, h), (h, shape[0] - h)] {
                        let mut part = vec![0.0f32; rows * per_row];
                        let mut out = vec![0.0f32; rows * row];
                        run_summing(
                            &prog,
                            &[rows, shape[1], shape[2]],
                            &[Input::Float(Src::new(&a, &sa, r0 * row)), Input::Float(Src::new(&b, &sb, 0))],
                            smallvec::smallvec![Output::Float(&mut out)],
                            &mut [SumOut { reg: 3, strides: &strides, out: &mut part }],
                            None,
                        );
                        let whole = &want[r0 * per_row..(r0 + rows) * per_row];
                        assert_eq!(bits(&part), bits(whole), "{shape:?} reduce {reduce:?}: rows from {r0}");
                    }
                }
            }
        }
    }
}

#[test]
fn large_outputs_split_across_tasks() {
    let n = 100_003;
    let a: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let prog = Program {
        instrs: vec![
            Instr::Load { dst: 0, input: 0 },
            Instr::BinaryConst {
                dst: 1,
                f: FBinary::Op(BinaryOp::Sub),
                a: 0,
                c: 1f64.to_bits(),
                const_left: true,
            },
        ],
        num_regs: 2,
        outputs: vec![1],
    };
    let mut out = vec![0.0f64; n];
    run(&prog, &[n], &[Input::Float(Src::new(&a, &[1], 0))], smallvec::smallvec![Output::Float(&mut out)]);
    assert!(out.iter().enumerate().all(|(i, &v)| v == 1.0 - i as f64));
}

/// Outputs written in place whose registers later instructions read again (the LSTM cell's
/// gates, each stored and used): the readers see the values just written, tile after tile,
/// including a register written twice (only its last writer goes to the output), with and
/// without sums, whole and in parts.
#[test]
fn outputs_written_in_place_are_read_back_by_later_instructions() {
    use crate::elementwise::BinaryOp::{Add, Mul};
    let prog = Program {
        instrs: vec![
            Instr::Load { dst: 0, input: 0 },
            Instr::Unary { dst: 1, f: FUnary::Op(UnaryOp::Sigmoid), a: 0 }, // out 0, read below
            Instr::Unary { dst: 2, f: FUnary::Op(UnaryOp::Tanh), a: 0 },
            Instr::Binary { dst: 2, f: FBinary::Op(Mul), a: 2, b: 1 }, // out 1: its last writer
            Instr::Binary { dst: 3, f: FBinary::Op(Add), a: 1, b: 2 }, // out 2, reads 1 and 2
            Instr::Binary { dst: 0, f: FBinary::Op(Mul), a: 3, b: 1 }, // out 3, reads 3 and 1
        ],
        num_regs: 4,
        outputs: vec![1, 2, 3, 0],
    };
    let want = |x: f32| {
        let s = crate::simd_math::sigmoid_lane(x);
        let t = crate::simd_math::tanh_lane(x) * s;
        let u = s + t;
        [s, t, u, u * s]
    };
    for n in [64, 513, 1500, 2048 + 7] {
        let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let mut outs = vec![vec![f32::NAN; n]; 4];
        let [o0, o1, o2, o3] = &mut outs[..] else { unreachable!() };
        let input = [Input::Float(Src::new(&a, &[1], 0))];
        run(
            &prog,
            &[n],
            &input,
            smallvec::smallvec![Output::Float(o0), Output::Float(o1), Output::Float(o2), Output::Float(o3)],
        );
        for (i, &x) in a.iter().enumerate() {
            let w = want(x);
            for k in 0..4 {
                assert_eq!(outs[k][i].to_bits(), w[k].to_bits(), "n {n}, output {k}, position {i}");
            }
        }
        // The same with a sum of register 3 over the whole length, run in parts.
        let mut outs2 = vec![vec![f32::NAN; n]; 4];
        let [p0, p1, p2, p3] = &mut outs2[..] else { unreachable!() };
        let mut total = [0.0f32];
        let mut sums = [SumOut { reg: 3, strides: &[0], out: &mut total }];
        run_summing(
            &prog,
            &[n],
            &input,
            smallvec::smallvec![Output::Float(p0), Output::Float(p1), Output::Float(p2), Output::Float(p3)],
            &mut sums,
            None,
        );
        assert_eq!(outs2, outs, "n {n}: summing run");
    }
}

/// Two outputs written as interleaved strided rows of one buffer (the parts of a concatenation
/// along columns) hold what dense outputs would, over several tiles and a partial last row of a
/// tile, and leave the elements between their rows alone.
#[test]
fn strided_row_outputs_interleave_in_one_buffer() {
    let (rows, cols) = (9, 100); // 900 positions: two tiles, rows crossing the tile seam
    let a: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let prog = Program { instrs: twice_a_plus_b().to_vec(), num_regs: 4, outputs: vec![3, 2] };
    let (dense, row0) = ([cols, 1], [0, 1]);
    let ins = [Input::Float(Src::new(&a, &dense, 0)), Input::Float(Src::new(&a, &row0, 0))];
    let (mut d3, mut d2) = (vec![0f32; rows * cols], vec![0f32; rows * cols]);
    run(&prog, &[rows, cols], &ins, smallvec::smallvec![Output::Float(&mut d3), Output::Float(&mut d2)]);
    // The joined buffer: [rows, 2 * cols + 1], register 3 in columns 0..cols, register 2 in
    // cols + 1..2 * cols + 1, column `cols` untouched.
    let stride = 2 * cols + 1;
    let mut joined = vec![-1f32; rows * stride];
    let base = joined.as_mut_ptr();
    // SAFETY: the two outputs' rows are disjoint runs inside `joined`, which outlives the run and
    // is not otherwise borrowed during it.
    let outs = unsafe {
        smallvec::smallvec![
            Output::Rows(Rows::new(base, rows, cols, stride)),
            Output::Rows(Rows::new(base.add(cols + 1), rows, cols, stride)),
        ]
    };
    run(&prog, &[rows, cols], &ins, outs);
    for r in 0..rows {
        let row = &joined[r * stride..(r + 1) * stride];
        assert_eq!(&row[..cols], &d3[r * cols..(r + 1) * cols], "row {r}, first part");
        assert_eq!(row[cols], -1.0, "row {r}: the gap is untouched");
        assert_eq!(&row[cols + 1..], &d2[r * cols..(r + 1) * cols], "row {r}, second part");
    }
}

/// Random programs over at most [`tiny::MAX_POSITIONS`] positions: the stack machine
/// (`tiny.rs`, what `run` takes for them) gives the tiled machine's bits for every function,
/// for dense, offset, transposed, broadcast and bool inputs and float, bool, integer and
/// strided-row outputs, in `f32` and `f64`.
#[test]
fn tiny_programs_give_the_tiled_machines_bits() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |m: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as usize % m
    };
    for case in 0..400 {
        let shapes: [&[usize]; 7] = [&[1], &[1, 1], &[8], &[2, 3], &[3, 2], &[2, 1, 4], &[1, 5]];
        let shape = shapes[next(shapes.len())];
        let prog = random_program(&mut next);
        if case % 2 == 0 {
            tiny_against_tiled::<f32>(case, &prog, shape, &mut next);
        } else {
            tiny_against_tiled::<f64>(case, &prog, shape, &mut next);
        }
    }
}

/// Loads of three float inputs and one bool input, then up to 20 instructions, each writing a
/// fresh register from earlier ones; three registers are the outputs.
fn random_program(next: &mut impl FnMut(usize) -> usize) -> Program {
    use crate::elementwise::{BinaryOp as B, CmpOp as C, UnaryOp as U};
    const UNARY: [U; 27] = [
        U::Neg,
        U::Exp,
        U::Log,
        U::Sqrt,
        U::Abs,
        U::Tanh,
        U::Sigmoid,
        U::Relu,
        U::Square,
        U::Recip,
        U::Sign,
        U::Not,
        U::Sin,
        U::Cos,
        U::Tan,
        U::Exp2,
        U::Log2,
        U::Log1p,
        U::Expm1,
        U::Erf,
        U::Gelu,
        U::Silu,
        U::Softplus,
        U::Floor,
        U::Ceil,
        U::Round,
        U::Rsqrt,
    ];
    const BINARY: [FBinary; 15] = [
        FBinary::Op(B::Add),
        FBinary::Op(B::Sub),
        FBinary::Op(B::Mul),
        FBinary::Op(B::Div),
        FBinary::Op(B::Maximum),
        FBinary::Op(B::Minimum),
        FBinary::Op(B::And),
        FBinary::Op(B::Or),
        FBinary::Op(B::Atan2),
        FBinary::Cmp(C::Gt),
        FBinary::Cmp(C::Ge),
        FBinary::Cmp(C::Lt),
        FBinary::Cmp(C::Le),
        FBinary::Cmp(C::Eq),
        FBinary::Cmp(C::Ne),
    ];
    let mut instrs: Vec<Instr> = (0..4).map(|k| Instr::Load { dst: k, input: k }).collect();
    for _ in 0..1 + next(20) {
        let dst = instrs.len() as Reg;
        let r = |next: &mut dyn FnMut(usize) -> usize| next(dst as usize) as Reg;
        let c = [0.5f64, -2.0, 3.0, 0.0, 1e-3][next(5)].to_bits();
        instrs.push(match next(6) {
            0 => Instr::Unary { dst, f: FUnary::Op(UNARY[next(UNARY.len())]), a: r(next) },
            1 => Instr::Unary {
                dst,
                f: [FUnary::Powf(c), FUnary::Clamp((-0.5f64).to_bits(), c), FUnary::Trunc, FUnary::NonZero]
                    [next(4)],
                a: r(next),
            },
            2 | 3 => Instr::Binary { dst, f: BINARY[next(BINARY.len())], a: r(next), b: r(next) },
            4 => Instr::BinaryConst {
                dst,
                f: BINARY[next(BINARY.len())],
                a: r(next),
                c,
                const_left: next(2) == 0,
            },
            _ => Instr::Select { dst, c: r(next), a: r(next), b: r(next) },
        });
    }
    let last = instrs.len() as Reg - 1;
    Program {
        num_regs: last + 1,
        outputs: vec![last, next(last as usize + 1) as Reg, next(last as usize + 1) as Reg],
        instrs,
    }
}

fn tiny_against_tiled<T: Scratch>(
    case: usize,
    prog: &Program,
    shape: &[usize],
    next: &mut impl FnMut(usize) -> usize,
) {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    let dense = crate::strided::contiguous_strides(shape);
    // Per input: its strides over `shape` and its offset into a buffer of 3 + 2n values.
    let layout = |next: &mut dyn FnMut(usize) -> usize| -> (SmallVec<[usize; 4]>, usize) {
        match next(4) {
            0 => (dense.iter().copied().collect(), next(3)),
            1 => (SmallVec::from_elem(0, rank), next(3)), // one value broadcast
            2 => {
                // Every dimension reversed in order (a transpose for rank 2).
                let mut st: SmallVec<[usize; 4]> = SmallVec::from_elem(0, rank);
                let mut acc = 1;
                for d in 0..rank {
                    st[d] = acc;
                    acc *= shape[d];
                }
                (st, 2)
            }
            _ => {
                // Broadcast along the first dimension.
                let mut st: SmallVec<[usize; 4]> = dense.iter().copied().collect();
                st[0] = 0;
                (st, 1)
            }
        }
    };
    let specials = [0.0, -0.0, 1.0, -1.5, 2.5, 0.3, -7.0, 40.0, -90.0, 1e-3];
    let data: Vec<Vec<T>> = (0..3)
        .map(|_| (0..3 + 2 * n).map(|_| T::from_f64(specials[next(specials.len())])).collect())
        .collect();
    let bools: Vec<bool> = (0..3 + 2 * n).map(|_| next(2) == 0).collect();
    let layouts: Vec<_> = (0..4).map(|_| layout(next)).collect();
    let inputs: Vec<Input<T>> = (0..4)
        .map(|k| {
            let (st, off) = &layouts[k];
            if k < 3 {
                Input::Float(Src::new(&data[k], st, *off))
            } else {
                Input::Bool(Src::new(&bools, st, *off))
            }
        })
        .collect();
    let (mut f0, mut b, mut i) = (vec![T::ZERO; n], vec![false; n], vec![0i64; n]);
    let (mut g0, mut c, mut j) = (vec![T::ZERO; n], vec![false; n], vec![0i64; n]);
    let tiled: Outputs<T> =
        smallvec::smallvec![Output::Float(&mut f0), Output::Bool(&mut b), Output::Int(&mut i)];
    run_range(prog, &readers(shape, &inputs), 0, tiled);
    assert!(tiny::fits(prog, n));
    let mut small: Outputs<T> =
        smallvec::smallvec![Output::Float(&mut g0), Output::Bool(&mut c), Output::Int(&mut j)];
    tiny::run(prog, shape, n, &inputs, &mut small);
    drop(small);
    let same = |x: &[T], y: &[T]| {
        x.iter()
            .zip(y)
            .all(|(a, b)| a.to_f64().to_bits() == b.to_f64().to_bits() || (a.is_nan() && b.is_nan()))
    };
    assert!(same(&f0, &g0), "case {case} {shape:?}: float output {f0:?} against {g0:?}\n{prog:?}");
    assert_eq!(b, c, "case {case} {shape:?}: bool output\n{prog:?}");
    assert_eq!(i, j, "case {case} {shape:?}: integer output\n{prog:?}");
    // Strided rows (the last dimension's runs, one value apart in a wider buffer) hold the
    // same values, and the gaps stay untouched.
    let (rows, row) = (n / shape[rank - 1], shape[rank - 1]);
    let mut wide = vec![T::from_f64(-9.0); rows * (row + 1)];
    // SAFETY: `rows` rows of `row` values, `row + 1` apart, lie inside `wide`, which nothing
    // else borrows while the output lives.
    let mut out: Outputs<T> =
        smallvec::smallvec![Output::Rows(unsafe { Rows::new(wide.as_mut_ptr(), rows, row, row + 1) })];
    let one = Program { outputs: vec![prog.outputs[0]], ..prog.clone() };
    tiny::run(&one, shape, n, &inputs, &mut out);
    drop(out);
    let got: Vec<T> = wide.chunks(row + 1).flat_map(|r| r[..row].to_vec()).collect();
    assert!(same(&f0, &got), "case {case} {shape:?}: row output");
    assert!(wide.chunks(row + 1).all(|r| r[row] == T::from_f64(-9.0)), "case {case}: gaps untouched");
}

/// A comparison with a constant that only a later product reads runs with it as one pass
/// (`masks.rs`), with the bits of the two instructions: next to each other, or with loads
/// between them (moved, the load that reused the comparison's operand register given a fresh
/// one), the mask on either side of the product, the constant on either side of the
/// comparison, the product an output or read again, and signed zeros, infinities and NaNs in
/// the other factor. A mask that is an output is not paired.
#[test]
fn a_mask_and_its_product_run_as_one_pass_with_the_bits_of_two() {
    let n = 3 * TILE + 17;
    let x: Vec<f32> = (0..n).map(|i| [0.5f32, -0.5, 0.0, -0.0, f32::NAN, 2.0][i % 6]).collect();
    let g: Vec<f32> = (0..n)
        .map(|i| [1.5f32, -2.0, 0.0, -0.0, f32::INFINITY, f32::NAN, -3.25][i % 7] * (1.0 + i as f32 * 1e-3))
        .collect();
    let c = 0.0f64;
    let mul = |a: Reg, b: Reg, dst: Reg| Instr::Binary { dst, f: FBinary::Op(BinaryOp::Mul), a, b };
    let cmp = |f: CmpOp, const_left: bool| Instr::BinaryConst {
        dst: 1,
        f: FBinary::Cmp(f),
        a: 0,
        c: c.to_bits(),
        const_left,
    };
    let plus_one = Instr::BinaryConst {
        dst: 4,
        f: FBinary::Op(BinaryOp::Add),
        a: 3,
        c: 1f64.to_bits(),
        const_left: false,
    };
    for (f, const_left, mask_left, apart, read_again) in [
        (CmpOp::Gt, false, true, false, false),
        (CmpOp::Gt, false, false, true, true),
        (CmpOp::Le, true, true, true, false),
        (CmpOp::Ne, false, false, false, true),
    ] {
        // Adjacent: Load x; Load g; cmp; mul. Apart: Load x; cmp; Load g (into x's register); mul.
        let (g_reg, mut instrs) = if apart {
            (0, vec![Instr::Load { dst: 0, input: 0 }, cmp(f, const_left), Instr::Load { dst: 0, input: 1 }])
        } else {
            (2, vec![Instr::Load { dst: 0, input: 0 }, Instr::Load { dst: 2, input: 1 }, cmp(f, const_left)])
        };
        instrs.push(if mask_left { mul(1, g_reg, 3) } else { mul(g_reg, 1, 3) });
        if read_again {
            instrs.push(plus_one);
        }
        let outputs = if read_again { vec![3, 4] } else { vec![3] };
        let mut prog = Program { instrs, num_regs: 5, outputs };
        prog.adjoin_masks();
        assert_eq!(mask_products(&prog, &[]).len(), 1, "the pair is found: {prog:?}");
        let mask_kept = Program { outputs: vec![3, 1], ..prog.clone() };
        assert!(mask_products(&mask_kept, &[]).is_empty(), "a mask that is an output is not paired");
        let (mut o0, mut o1) = (vec![7.0f32; n], vec![7.0f32; n]);
        let mut outs: Outputs<f32> = smallvec::smallvec![Output::Float(&mut o0)];
        if read_again {
            outs.push(Output::Float(&mut o1));
        }
        let dense = [1];
        run(
            &prog,
            &[n],
            &[Input::Float(Src::new(&x, &dense, 0)), Input::Float(Src::new(&g, &dense, 0))],
            outs,
        );
        for i in 0..n {
            let m = if const_left {
                binary(FBinary::Cmp(f), c as f32, x[i])
            } else {
                binary(FBinary::Cmp(f), x[i], c as f32)
            };
            // The program's product either way round (a product is the same bits both ways).
            let want = m * g[i];
            assert_eq!(
                o0[i].to_bits(),
                want.to_bits(),
                "{f:?} const_left {const_left} at {i}: x {} g {}",
                x[i],
                g[i]
            );
            if read_again {
                assert_eq!(o1[i].to_bits(), (want + 1.0).to_bits(), "read again at {i}");
            }
        }
    }
}
