//! Fused elementwise programs: a small register machine run tile by tile (the numexpr idea).
//! Each instruction is one tight loop over a tile of registers that the compiler vectorises, so
//! a chain of elementwise ops reads its inputs and writes its outputs once, with intermediates
//! staying in cache. Tiles run in parallel with rayon when the output is large.
//!
//! Registers hold the group's float type; boolean values live in registers as 0 or 1.

use crate::dtype::Float;
use crate::elementwise::{BinaryOp, CmpOp, UnaryOp};
use crate::simd_math::with_best_simd;
use crate::strided::{RowSum, Src, StridedReader, SumPlan, combine_parts};
use rayon::prelude::*;
use smallvec::SmallVec;
use std::cell::RefCell;

/// Elements per tile: a few registers of this size stay in L1.
pub const TILE: usize = 512;

/// A register index.
pub type Reg = u16;

/// Unary functions of a fused program: the op vocabulary's [`UnaryOp`]s, and the forms that
/// only fused programs need (constant exponents, clamps, the float side of casts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FUnary {
    /// An elementwise function of the op table.
    Op(UnaryOp),
    /// `x^p`, `p` by its `f64` bits
    Powf(u64),
    /// clamp into `[lo, hi]`, by `f64` bits
    Clamp(u64, u64),
    /// Round toward zero (a cast to an integer type held in a float register).
    Trunc,
    /// `x != 0` as 0/1 (a cast to bool).
    NonZero,
}

/// Above this, `softplus(x)` is `x` (PyTorch's default `threshold`).
pub const SOFTPLUS_THRESHOLD: f64 = 20.0;

/// Binary functions of a fused program; comparisons and logic produce 0/1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FBinary {
    /// Broadcasting arithmetic or logic.
    Op(BinaryOp),
    /// A comparison.
    Cmp(CmpOp),
}

/// One instruction writing register `dst` (never one of its own operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    /// `dst = input[k]` at each position.
    Load {
        /// Destination register.
        dst: Reg,
        /// Input index.
        input: u16,
    },
    /// `dst = f(a)`.
    Unary {
        /// Destination register.
        dst: Reg,
        /// Function.
        f: FUnary,
        /// Operand.
        a: Reg,
    },
    /// `dst = f(a, b)`.
    Binary {
        /// Destination register.
        dst: Reg,
        /// Function.
        f: FBinary,
        /// Left operand.
        a: Reg,
        /// Right operand.
        b: Reg,
    },
    /// `dst = f(a, c)`, or `f(c, a)` when `const_left`, with a constant `c` (by `f64` bits).
    BinaryConst {
        /// Destination register.
        dst: Reg,
        /// Function.
        f: FBinary,
        /// Register operand.
        a: Reg,
        /// The constant, by `f64` bits.
        c: u64,
        /// Whether the constant is the left operand.
        const_left: bool,
    },
    /// `dst = c != 0 ? a : b`.
    Select {
        /// Destination register.
        dst: Reg,
        /// Condition register (0/1).
        c: Reg,
        /// Value where true.
        a: Reg,
        /// Value where false.
        b: Reg,
    },
}

/// A fused program: instructions, register count, and which registers are the outputs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// Instructions in execution order.
    pub instrs: Vec<Instr>,
    /// Registers used.
    pub num_regs: u16,
    /// Register holding each output.
    pub outputs: Vec<Reg>,
}

/// An input operand: float values of the program's type, or bools (read as 0/1).
pub enum Input<'a, T> {
    /// A float operand.
    Float(Src<'a, T>),
    /// A bool operand.
    Bool(Src<'a, bool>),
}

/// An output buffer, contiguous over the output shape.
pub enum Output<'a, T> {
    /// Float values.
    Float(&'a mut [T]),
    /// 0/1 registers stored as bools.
    Bool(&'a mut [bool]),
    /// Registers stored truncated as integers.
    Int(&'a mut [i64]),
}

/// A fused kernel's destinations (inline for the usual one to four).
pub type Outputs<'a, T> = SmallVec<[Output<'a, T>; 4]>;

impl<T> Output<'_, T> {
    fn len(&self) -> usize {
        match self {
            Output::Float(s) => s.len(),
            Output::Bool(s) => s.len(),
            Output::Int(s) => s.len(),
        }
    }
}

enum Reader<'a, T> {
    Float(StridedReader<'a, T>),
    Bool(StridedReader<'a, bool>),
}

/// Thread-local register files, reused across calls so running a program allocates nothing.
pub trait Scratch: Float {
    /// Runs `f` with this thread's scratch buffer of at least `len` elements.
    fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R;
}

macro_rules! scratch {
    ($t:ty, $name:ident) => {
        thread_local! {
            static $name: RefCell<Vec<$t>> = const { RefCell::new(Vec::new()) };
        }
        impl Scratch for $t {
            fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [Self]) -> R) -> R {
                $name.with(|s| {
                    // A nested use (re-entrancy) falls back to a fresh buffer.
                    match s.try_borrow_mut() {
                        Ok(mut v) => {
                            if v.len() < len {
                                v.resize(len, 0.0);
                            }
                            f(&mut v[..len])
                        }
                        Err(_) => f(&mut vec![0.0; len]),
                    }
                })
            }
        }
    };
}
scratch!(f32, SCRATCH_F32);
scratch!(f64, SCRATCH_F64);

/// Below this many elements a program runs on the calling thread (as for the strided maps:
/// waking rayon's threads costs more than a mid-size program saves, see
/// `strided::PARALLEL_MIN_ELEMS`).
const PARALLEL_MIN: usize = 1 << 18;

/// A reader of each input over `shape`.
fn readers<'a, T: Copy>(shape: &[usize], inputs: &[Input<'a, T>]) -> SmallVec<[Reader<'a, T>; 4]> {
    inputs
        .iter()
        .map(|i| match i {
            Input::Float(s) => Reader::Float(StridedReader::new(shape, *s)),
            Input::Bool(s) => Reader::Bool(StridedReader::new(shape, *s)),
        })
        .collect()
}

/// Runs `prog` over `shape`; `outputs[i]` receives register `prog.outputs[i]`.
pub fn run<T: Scratch>(prog: &Program, shape: &[usize], inputs: &[Input<T>], outputs: Outputs<'_, T>) {
    let n: usize = shape.iter().product();
    assert!(outputs.iter().all(|o| o.len() == n), "fused: output length mismatch");
    assert_eq!(outputs.len(), prog.outputs.len(), "fused: output count mismatch");
    if n == 0 {
        return;
    }
    let readers = readers(shape, inputs);
    if n < PARALLEL_MIN || !crate::parallel::allowed() {
        run_range(prog, &readers, 0, outputs);
        return;
    }
    // Split every output identically into per-task chunks of whole tiles.
    let tasks = (n / (PARALLEL_MIN / 2)).clamp(2, 4 * rayon::current_num_threads());
    let chunk = n.div_ceil(tasks).div_ceil(TILE) * TILE;
    let mut per_task: Vec<Outputs<T>> = (0..n.div_ceil(chunk)).map(|_| SmallVec::new()).collect();
    for o in outputs {
        match o {
            Output::Float(s) => {
                s.chunks_mut(chunk).zip(&mut per_task).for_each(|(c, t)| t.push(Output::Float(c)))
            }
            Output::Bool(s) => {
                s.chunks_mut(chunk).zip(&mut per_task).for_each(|(c, t)| t.push(Output::Bool(c)))
            }
            Output::Int(s) => {
                s.chunks_mut(chunk).zip(&mut per_task).for_each(|(c, t)| t.push(Output::Int(c)))
            }
        }
    }
    per_task.into_par_iter().enumerate().for_each(|(i, outs)| run_range(prog, &readers, i * chunk, outs));
}

/// Runs the program over positions `start..start + len(outputs)`, tile by tile.
fn run_range<'a, T: Scratch>(
    prog: &Program,
    readers: &[Reader<'a, T>],
    start: usize,
    mut outputs: Outputs<T>,
) {
    let n = outputs.first().map_or(0, |o| o.len());
    with_frame(prog, readers, n, |frame| {
        let mut done = 0;
        while done < n {
            let len = TILE.min(n - done);
            run_tile(prog, readers, frame, start + done, len);
            store(prog, frame, &mut outputs, done, len);
            done += len;
        }
    });
}

/// Runs shorter than this copy every load, with no views (see [`with_frame`]).
const DIRECT_MIN: usize = 64;

/// How a `Load` gets its input during one run.
#[derive(Clone, Copy)]
enum Source {
    /// Copied into the register, tile by tile (strided, partly broadcast, or bool).
    Copy,
    /// Read in place: a float input dense over the whole output.
    Dense,
    /// Read from fill tile `k`: an input broadcast from one value, filled once per run.
    Fill(usize),
}

/// One run's registers. A register written by a `Load` may be a view instead of a tile of
/// `regs`: of a dense input's own buffer, or of a fill tile. Each instruction is a pass over
/// its tile, bound by stores to L1, so a load that copies nothing saves a pass: the Adam
/// update's program (four dense tensors, seven scalars, 13 ops) copied 11 tiles per 13 ops.
struct Frame<'s, 'a: 's, T> {
    regs: &'s mut [T],
    /// Ties the inputs' lifetime to the frame's (dense views borrow the inputs).
    _inputs: std::marker::PhantomData<&'s &'a ()>,
    views: SmallVec<[Option<&'s [T]>; 24]>,
    sources: SmallVec<[Source; 12]>,
    /// Fill tile `k` is `fills[k * fill_len..][..fill_len]`.
    fills: &'s [T],
    fill_len: usize,
}

impl<'s, 'a: 's, T: Float> Frame<'s, 'a, T> {
    /// The destination register (mutable, no longer a view) and up to three operands.
    #[inline(always)]
    fn operands(&mut self, len: usize, dst: Reg, ops: [Reg; 3]) -> (&mut [T], [&[T]; 3]) {
        if self.views.is_empty() {
            return split(self.regs, len, dst, ops);
        }
        self.views[dst as usize] = None;
        let views = ops.map(|r| self.views[r as usize]);
        let (out, regs) = split(self.regs, len, dst, ops);
        (out, [0, 1, 2].map(|k| views[k].unwrap_or(regs[k])))
    }

    /// Register `r`'s first `len` values.
    fn reg(&self, r: Reg, len: usize) -> &[T] {
        match self.views.get(r as usize) {
            Some(Some(v)) => v,
            _ => &self.regs[r as usize * TILE..r as usize * TILE + len],
        }
    }
}

/// Runs `body` with a frame over this thread's scratch for a run of `n` positions: the loads'
/// sources decided, and the fill tiles (at most `n` long) filled.
fn with_frame<'a, T: Scratch, R>(
    prog: &Program,
    readers: &[Reader<'a, T>],
    n: usize,
    body: impl FnOnce(&mut Frame<'_, 'a, T>) -> R,
) -> R {
    let nregs = prog.num_regs as usize;
    if n < DIRECT_MIN {
        // A short run copies its few elements: no views, no sources (the hit path's
        // one-element programs pay nothing for them).
        return T::with_scratch(nregs * TILE, |regs| {
            let views = SmallVec::new();
            let sources = SmallVec::new();
            body(&mut Frame {
                regs,
                _inputs: std::marker::PhantomData,
                views,
                sources,
                fills: &[],
                fill_len: 0,
            })
        });
    }
    let fill_len = TILE.min(n);
    let mut values: SmallVec<[T; 8]> = SmallVec::new();
    let sources: SmallVec<[Source; 12]> = readers
        .iter()
        .map(|r| match r {
            Reader::Float(r) if r.dense(0..0).is_some() => Source::Dense,
            Reader::Float(r) if r.constant().is_some() => {
                values.push(r.constant().unwrap());
                Source::Fill(values.len() - 1)
            }
            Reader::Bool(r) if r.constant().is_some() => {
                values.push(bit(r.constant().unwrap()));
                Source::Fill(values.len() - 1)
            }
            _ => Source::Copy,
        })
        .collect();
    T::with_scratch(nregs * TILE + values.len() * fill_len, |scratch| {
        let (regs, fills) = scratch.split_at_mut(nregs * TILE);
        for (tile, &v) in fills.chunks_exact_mut(fill_len.max(1)).zip(&values) {
            tile.fill(v);
        }
        let views = SmallVec::from_elem(None, nregs);
        let mut frame = Frame { regs, _inputs: std::marker::PhantomData, views, sources, fills, fill_len };
        body(&mut frame)
    })
}

/// Copies a tile's output registers into positions `at..at + len` of the outputs.
fn store<T: Float>(
    prog: &Program,
    frame: &Frame<'_, '_, T>,
    outputs: &mut Outputs<T>,
    at: usize,
    len: usize,
) {
    for (o, &r) in outputs.iter_mut().zip(&prog.outputs) {
        let src = frame.reg(r, len);
        match o {
            Output::Float(s) => s[at..at + len].copy_from_slice(src),
            Output::Bool(s) => {
                s[at..at + len].iter_mut().zip(src).for_each(|(d, &v)| *d = v != T::ZERO);
            }
            Output::Int(s) => {
                s[at..at + len].iter_mut().zip(src).for_each(|(d, &v)| *d = v.to_f64() as i64);
            }
        }
    }
}

/// A sum of one register over the program's shape, accumulated while the program runs (a
/// reduction fused into the elementwise group that feeds it, so the summed values are never
/// stored). `out` is contiguous over the kept dimensions; `strides` maps each dimension of
/// the program's shape into it, 0 where summed.
pub struct SumOut<'a, T> {
    /// The register summed.
    pub reg: Reg,
    /// Per program dimension, the stride into `out` (0 where summed).
    pub strides: &'a [usize],
    /// The sums (overwritten).
    pub out: &'a mut [T],
}

/// [`run`], also summing registers into `sums`, in [`sum_dims`](crate::strided::sum_dims)'s
/// order (the same bits as an eager sum of the stored result). The fixed parts of the sums
/// ([`SumPlan::parts`]) run in parallel when allowed, each with its own accumulators, added
/// pairwise ([`combine_parts`]).
///
/// `span` runs only some of the parts (an executor's half of the step): the outputs then hold
/// the positions of those parts only, and each sum the pairwise total of its parts.
pub fn run_summing<T: Scratch>(
    prog: &Program,
    shape: &[usize],
    inputs: &[Input<T>],
    outputs: Outputs<'_, T>,
    sums: &mut [SumOut<'_, T>],
    span: Option<std::ops::Range<usize>>,
) {
    let n: usize = shape.iter().product();
    if n == 0 {
        // Nothing to run; sums over an empty dimension are zeros.
        sums.iter_mut().for_each(|s| s.out.fill(T::ZERO));
        return;
    }
    // Every sum keeps the first dimension, or every sum reduces it (see `SumPlan::parts`).
    let keeps_rows = |s: &SumOut<T>| s.strides.first().is_none_or(|&st| st != 0);
    let rows = sums.iter().all(keeps_rows).then(|| shape.first().copied().unwrap_or(1));
    assert!(rows.is_some() || !sums.iter().any(keeps_rows), "fused: sums that keep and reduce dim 0");
    let (count, chunk) = SumPlan::parts(n, rows);
    let span = span.unwrap_or(0..count);
    assert!(span.end <= count && !span.is_empty(), "fused: parts {span:?} of {count}");
    let (lo, hi) = ((span.start * chunk).min(n), (span.end * chunk).min(n));
    if sums.is_empty() && span.len() == count {
        return run(prog, shape, inputs, outputs);
    }
    assert!(outputs.iter().all(|o| o.len() == hi - lo), "fused: output length mismatch");
    assert_eq!(outputs.len(), prog.outputs.len(), "fused: output count mismatch");
    let plans: SmallVec<[(Reg, SumPlan); 2]> = sums
        .iter_mut()
        .map(|s| {
            assert_eq!(s.strides.len(), shape.len(), "fused: one sum stride per dimension");
            s.out.fill(T::ZERO);
            (s.reg, SumPlan::new(shape, s.strides))
        })
        .collect();
    let readers = readers(shape, inputs);
    if count == 1 {
        // One part accumulates straight into the results, as `sum_dims` does.
        let mut accs: SmallVec<[&mut [T]; 2]> = sums.iter_mut().map(|s| &mut *s.out).collect();
        sum_part(prog, &readers, &plans, 0..n, outputs, &mut accs);
        return;
    }
    // Per part: its slices of the stored results, and accumulators of its own.
    type Task<'o, T> = (usize, Outputs<'o, T>, Vec<Vec<T>>);
    let mut tasks: Vec<Task<T>> = span
        .clone()
        .map(|k| (k, SmallVec::new(), sums.iter().map(|s| vec![T::ZERO; s.out.len()]).collect()))
        .collect();
    for o in outputs {
        match o {
            Output::Float(s) => {
                s.chunks_mut(chunk).zip(&mut tasks).for_each(|(c, t)| t.1.push(Output::Float(c)))
            }
            Output::Bool(s) => {
                s.chunks_mut(chunk).zip(&mut tasks).for_each(|(c, t)| t.1.push(Output::Bool(c)))
            }
            Output::Int(s) => s.chunks_mut(chunk).zip(&mut tasks).for_each(|(c, t)| t.1.push(Output::Int(c))),
        }
    }
    let work = |(k, outs, accs): &mut Task<T>| {
        let mut accs: SmallVec<[&mut [T]; 2]> = accs.iter_mut().map(|a| &mut a[..]).collect();
        let part = *k * chunk..((*k + 1) * chunk).min(n);
        sum_part(prog, &readers, &plans, part, std::mem::take(outs), &mut accs);
    };
    if crate::parallel::allowed() {
        tasks.par_iter_mut().for_each(work);
    } else {
        tasks.iter_mut().for_each(work);
    }
    for (j, s) in sums.iter_mut().enumerate() {
        let parts: SmallVec<[&[T]; 4]> = tasks.iter().map(|t| &t.2[j][..]).collect();
        combine_parts(&parts, s.out);
    }
}

/// Runs positions `part` of the program, storing into `outs` (which start at `part.start`) and
/// summing into `accs`, one per plan.
fn sum_part<'a, T: Scratch>(
    prog: &Program,
    readers: &[Reader<'a, T>],
    plans: &[(Reg, SumPlan)],
    part: std::ops::Range<usize>,
    mut outs: Outputs<'_, T>,
    accs: &mut [&mut [T]],
) {
    let mut states: SmallVec<[RowSum<T>; 2]> = SmallVec::from_elem(RowSum::default(), plans.len());
    with_frame(prog, readers, part.len(), |frame| {
        let mut done = part.start;
        while done < part.end {
            let len = TILE.min(part.end - done);
            run_tile(prog, readers, frame, done, len);
            store(prog, frame, &mut outs, done - part.start, len);
            for (((reg, plan), acc), state) in plans.iter().zip(accs.iter_mut()).zip(&mut states) {
                plan.add(part.clone(), done, frame.reg(*reg, len), acc, state);
            }
            done += len;
        }
    });
}

/// The destination register (mutable) and up to three operand registers (shared).
#[inline(always)]
fn split<T>(regs: &mut [T], len: usize, dst: Reg, ops: [Reg; 3]) -> (&mut [T], [&[T]; 3]) {
    let d = dst as usize * TILE;
    let (lo, rest) = regs.split_at_mut(d);
    let (out, hi) = rest.split_at_mut(TILE);
    let pick = |r: Reg| -> &[T] {
        let r = r as usize * TILE;
        if r < d { &lo[r..r + len] } else { &hi[r - d - TILE..r - d - TILE + len] }
    };
    (&mut out[..len], [pick(ops[0]), pick(ops[1]), pick(ops[2])])
}

fn bit<T: Float>(b: bool) -> T {
    if b { T::ONE } else { T::ZERO }
}

/// `f` applied to one element: the single definition of each unary function, shared by fused
/// programs and eager kernels so both give bit-identical results. Inlined, so a constant `f`
/// leaves no `match` in a caller's loop.
#[inline(always)]
pub fn unary<T: Float>(f: FUnary, x: T) -> T {
    match f {
        FUnary::Op(UnaryOp::Neg) => -x,
        FUnary::Op(UnaryOp::Exp) => x.fast_exp(),
        FUnary::Op(UnaryOp::Log) => x.fast_ln(),
        FUnary::Op(UnaryOp::Sqrt) => x.sqrt(),
        FUnary::Op(UnaryOp::Abs) => x.abs(),
        FUnary::Op(UnaryOp::Tanh) => x.fast_tanh(),
        FUnary::Op(UnaryOp::Sigmoid) => x.fast_sigmoid(),
        FUnary::Op(UnaryOp::Relu) => {
            if x < T::ZERO {
                T::ZERO
            } else {
                x
            }
        }
        FUnary::Op(UnaryOp::Square) => x * x,
        FUnary::Op(UnaryOp::Recip) => T::ONE / x,
        FUnary::Op(UnaryOp::Sign) => {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                -T::ONE
            } else {
                x
            }
        }
        FUnary::Op(UnaryOp::Not) => bit(x == T::ZERO),
        FUnary::Powf(p) => x.powf(T::from_f64(f64::from_bits(p))),
        FUnary::Clamp(lo, hi) => {
            let (lo, hi) = (T::from_f64(f64::from_bits(lo)), T::from_f64(f64::from_bits(hi)));
            if x < lo {
                lo
            } else if x > hi {
                hi
            } else {
                x
            }
        }
        FUnary::Trunc => T::from_f64(x.to_f64().trunc()),
        FUnary::NonZero => bit(x != T::ZERO),
        FUnary::Op(UnaryOp::Sin) => x.sin(),
        FUnary::Op(UnaryOp::Cos) => x.cos(),
        FUnary::Op(UnaryOp::Tan) => x.tan(),
        FUnary::Op(UnaryOp::Exp2) => x.exp2(),
        FUnary::Op(UnaryOp::Log2) => x.log2(),
        FUnary::Op(UnaryOp::Log1p) => x.ln_1p(),
        FUnary::Op(UnaryOp::Expm1) => x.exp_m1(),
        FUnary::Op(UnaryOp::Erf) => x.erf(),
        // The CUDA code generator writes these with the same operations in the same order.
        FUnary::Op(UnaryOp::Gelu) => {
            let half = T::from_f64(0.5);
            x * half * (T::ONE + (x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf())
        }
        FUnary::Op(UnaryOp::Silu) => x * x.fast_sigmoid(),
        FUnary::Op(UnaryOp::Softplus) => {
            if x > T::from_f64(SOFTPLUS_THRESHOLD) {
                x
            } else {
                x.fast_exp().ln_1p()
            }
        }
        FUnary::Op(UnaryOp::Floor) => x.floor(),
        FUnary::Op(UnaryOp::Ceil) => x.ceil(),
        FUnary::Op(UnaryOp::Round) => x.round_ties_even(),
        FUnary::Op(UnaryOp::Rsqrt) => T::ONE / x.sqrt(),
    }
}

/// `f` applied to one pair of elements: the single definition of each binary function, shared by
/// fused programs and eager kernels (see [`unary`]).
#[inline(always)]
pub fn binary<T: Float>(f: FBinary, a: T, b: T) -> T {
    match f {
        FBinary::Op(BinaryOp::Add) => a + b,
        FBinary::Op(BinaryOp::Sub) => a - b,
        FBinary::Op(BinaryOp::Mul) => a * b,
        FBinary::Op(BinaryOp::Div) => a / b,
        FBinary::Op(BinaryOp::Maximum) => a.max_nan(b),
        FBinary::Op(BinaryOp::Minimum) => a.min_nan(b),
        FBinary::Op(BinaryOp::And) => bit(a != T::ZERO && b != T::ZERO),
        FBinary::Op(BinaryOp::Or) => bit(a != T::ZERO || b != T::ZERO),
        FBinary::Cmp(CmpOp::Gt) => bit(a > b),
        FBinary::Cmp(CmpOp::Ge) => bit(a >= b),
        FBinary::Cmp(CmpOp::Lt) => bit(a < b),
        FBinary::Cmp(CmpOp::Le) => bit(a <= b),
        FBinary::Cmp(CmpOp::Eq) => bit(a == b),
        FBinary::Cmp(CmpOp::Ne) => bit(a != b),
        FBinary::Op(BinaryOp::Atan2) => a.atan2(b),
    }
}

/// `out[i] = f(x[i])` as a straight loop the compiler vectorises.
#[inline(always)]
fn map1<T: Copy>(out: &mut [T], x: &[T], f: impl Fn(T) -> T) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
}

/// `out[i] = f(x[i], y[i])` as a straight loop.
#[inline(always)]
fn map2<T: Copy>(out: &mut [T], x: &[T], y: &[T], f: impl Fn(T, T) -> T) {
    for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
        *o = f(a, b);
    }
}

/// One specialised loop per unary function, so no `match` runs per element.
#[inline(always)]
fn each_unary<T: Float>(f: FUnary, out: &mut [T], x: &[T]) {
    match f {
        FUnary::Op(UnaryOp::Neg) => map1(out, x, |v| -v),
        FUnary::Op(UnaryOp::Exp) => map1(out, x, T::fast_exp),
        FUnary::Op(UnaryOp::Log) => map1(out, x, T::fast_ln),
        FUnary::Op(UnaryOp::Sqrt) => map1(out, x, T::sqrt),
        FUnary::Op(UnaryOp::Abs) => map1(out, x, T::abs),
        FUnary::Op(UnaryOp::Tanh) => map1(out, x, T::fast_tanh),
        FUnary::Op(UnaryOp::Sigmoid) => map1(out, x, T::fast_sigmoid),
        FUnary::Op(UnaryOp::Relu) => map1(out, x, |v| if v < T::ZERO { T::ZERO } else { v }),
        FUnary::Op(UnaryOp::Square) => map1(out, x, |v| v * v),
        FUnary::Op(UnaryOp::Recip) => map1(out, x, |v| T::ONE / v),
        FUnary::Op(UnaryOp::Not) => map1(out, x, |v| bit(v == T::ZERO)),
        FUnary::NonZero => map1(out, x, |v| bit(v != T::ZERO)),
        FUnary::Op(UnaryOp::Erf) => map1(out, x, T::erf),
        FUnary::Op(UnaryOp::Rsqrt) => map1(out, x, |v| T::ONE / v.sqrt()),
        f @ FUnary::Op(UnaryOp::Gelu | UnaryOp::Silu) => {
            // `unary` with `f` fixed per arm, so the loop has no `match` and vectorises.
            if f == FUnary::Op(UnaryOp::Gelu) {
                map1(out, x, |v| unary(FUnary::Op(UnaryOp::Gelu), v))
            } else {
                map1(out, x, |v| unary(FUnary::Op(UnaryOp::Silu), v))
            }
        }
        f => map1(out, x, |v| unary(f, v)),
    }
}

/// One specialised loop per binary function; `c` on the left or right when `consts` is set.
#[inline(always)]
fn each_binary<T: Float>(f: FBinary, out: &mut [T], x: &[T], y: &[T]) {
    match f {
        FBinary::Op(BinaryOp::Add) => map2(out, x, y, |a, b| a + b),
        FBinary::Op(BinaryOp::Sub) => map2(out, x, y, |a, b| a - b),
        FBinary::Op(BinaryOp::Mul) => map2(out, x, y, |a, b| a * b),
        FBinary::Op(BinaryOp::Div) => map2(out, x, y, |a, b| a / b),
        FBinary::Op(BinaryOp::Maximum) => map2(out, x, y, T::max_nan),
        FBinary::Op(BinaryOp::Minimum) => map2(out, x, y, T::min_nan),
        FBinary::Cmp(CmpOp::Gt) => map2(out, x, y, |a, b| bit(a > b)),
        FBinary::Cmp(CmpOp::Lt) => map2(out, x, y, |a, b| bit(a < b)),
        FBinary::Cmp(CmpOp::Ge) => map2(out, x, y, |a, b| bit(a >= b)),
        FBinary::Cmp(CmpOp::Le) => map2(out, x, y, |a, b| bit(a <= b)),
        FBinary::Cmp(CmpOp::Eq) => map2(out, x, y, |a, b| bit(a == b)),
        f => map2(out, x, y, |a, b| binary(f, a, b)),
    }
}

/// `f(x[i], c)` (or `f(c, x[i])`), one specialised loop per function.
#[inline(always)]
fn each_binary_const<T: Float>(f: FBinary, out: &mut [T], x: &[T], c: T, const_left: bool) {
    match (f, const_left) {
        (FBinary::Op(BinaryOp::Add), _) => map1(out, x, |v| v + c),
        (FBinary::Op(BinaryOp::Mul), _) => map1(out, x, |v| v * c),
        (FBinary::Op(BinaryOp::Sub), false) => map1(out, x, |v| v - c),
        (FBinary::Op(BinaryOp::Sub), true) => map1(out, x, |v| c - v),
        (FBinary::Op(BinaryOp::Div), false) => map1(out, x, |v| v / c),
        (FBinary::Op(BinaryOp::Div), true) => map1(out, x, |v| c / v),
        (FBinary::Op(BinaryOp::Maximum), false) => map1(out, x, |v| v.max_nan(c)),
        (FBinary::Op(BinaryOp::Maximum), true) => map1(out, x, |v| c.max_nan(v)),
        (FBinary::Op(BinaryOp::Minimum), false) => map1(out, x, |v| v.min_nan(c)),
        (FBinary::Op(BinaryOp::Minimum), true) => map1(out, x, |v| c.min_nan(v)),
        (FBinary::Cmp(CmpOp::Gt), false) => map1(out, x, |v| bit(v > c)),
        (FBinary::Cmp(CmpOp::Lt), false) => map1(out, x, |v| bit(v < c)),
        (f, false) => map1(out, x, |v| binary(f, v, c)),
        (f, true) => map1(out, x, |v| binary(f, c, v)),
    }
}

fn run_tile<'s, 'a: 's, T: Scratch>(
    prog: &Program,
    readers: &[Reader<'a, T>],
    frame: &mut Frame<'s, 'a, T>,
    start: usize,
    len: usize,
) {
    for ins in &prog.instrs {
        match *ins {
            Instr::Load { dst, input } => {
                let source = frame.sources.get(input as usize).copied().unwrap_or(Source::Copy);
                let view = match (source, &readers[input as usize]) {
                    (Source::Dense, Reader::Float(r)) => r.dense(start..start + len),
                    (Source::Fill(k), _) => {
                        let fills: &'s [T] = frame.fills;
                        Some(&fills[k * frame.fill_len..][..len])
                    }
                    _ => None,
                };
                if let Some(slot) = frame.views.get_mut(dst as usize) {
                    *slot = view;
                }
                if view.is_none() {
                    let out = &mut frame.regs[dst as usize * TILE..dst as usize * TILE + len];
                    match &readers[input as usize] {
                        Reader::Float(r) => r.read(start, out, |x| x),
                        Reader::Bool(r) => r.read(start, out, bit::<T>),
                    }
                }
            }
            Instr::Unary { dst, f, a } => {
                let (out, [x, _, _]) = frame.operands(len, dst, [a, a, a]);
                with_best_simd(
                    #[inline(always)]
                    || each_unary(f, out, x),
                );
            }
            Instr::Binary { dst, f, a, b } => {
                let (out, [x, y, _]) = frame.operands(len, dst, [a, b, a]);
                with_best_simd(
                    #[inline(always)]
                    || each_binary(f, out, x, y),
                );
            }
            Instr::BinaryConst { dst, f, a, c, const_left } => {
                let (out, [x, _, _]) = frame.operands(len, dst, [a, a, a]);
                let c = T::from_f64(f64::from_bits(c));
                with_best_simd(
                    #[inline(always)]
                    || each_binary_const(f, out, x, c, const_left),
                );
            }
            Instr::Select { dst, c, a, b } => {
                let (out, [k, x, y]) = frame.operands(len, dst, [c, a, b]);
                with_best_simd(
                    #[inline(always)]
                    || {
                        // Zipped, not indexed: no bounds checks, so the loop vectorises into
                        // compare-and-blend instead of a branch per element.
                        for (((o, &k), &a), &b) in out.iter_mut().zip(k).zip(x).zip(y) {
                            *o = if k != T::ZERO { a } else { b };
                        }
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
                Instr::BinaryConst {
                    dst: 0,
                    f: FBinary::Op(Add),
                    a: 2,
                    c: 1f64.to_bits(),
                    const_left: false,
                },
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
    /// runs, for small and large shapes whose rows cross tiles and parts.
    #[test]
    fn sums_give_the_bits_of_sum_dims_on_the_stored_result() {
        let prog = Program { instrs: twice_a_plus_b().to_vec(), num_regs: 4, outputs: vec![3] };
        for shape in [[3, 5, 7], [7, 5, 301], [2, 1, 33], [64, 16, 97], [5, 3, 5000], [1, 1, 70_001]] {
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
                                &[
                                    Input::Float(Src::new(&a, &sa, r0 * row)),
                                    Input::Float(Src::new(&b, &sb, 0)),
                                ],
                                smallvec::smallvec![Output::Float(&mut out)],
                                &mut [SumOut { reg: 3, strides: &strides, out: &mut part }],
                                None,
                            );
                            let whole = &want[r0 * per_row..(r0 + rows) * per_row];
                            assert_eq!(
                                bits(&part),
                                bits(whole),
                                "{shape:?} reduce {reduce:?}: rows from {r0}"
                            );
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
        run(
            &prog,
            &[n],
            &[Input::Float(Src::new(&a, &[1], 0))],
            smallvec::smallvec![Output::Float(&mut out)],
        );
        assert!(out.iter().enumerate().all(|(i, &v)| v == 1.0 - i as f64));
    }
}
