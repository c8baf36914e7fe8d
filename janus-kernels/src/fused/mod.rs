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

mod elementwise;
mod masks;
mod rows;
mod tiny;
pub use elementwise::{binary, unary};
use elementwise::{bit, each_binary, each_binary_const, each_mask_product, each_unary};
use masks::mask_products;
pub use rows::Rows;

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

impl Instr {
    /// The register it writes.
    pub fn dst(&self) -> Reg {
        match *self {
            Instr::Load { dst, .. }
            | Instr::Unary { dst, .. }
            | Instr::Binary { dst, .. }
            | Instr::BinaryConst { dst, .. }
            | Instr::Select { dst, .. } => dst,
        }
    }

    /// Whether it reads register `r`.
    pub fn reads(&self, r: Reg) -> bool {
        match *self {
            Instr::Load { .. } => false,
            Instr::Unary { a, .. } | Instr::BinaryConst { a, .. } => a == r,
            Instr::Binary { a, b, .. } => a == r || b == r,
            Instr::Select { c, a, b, .. } => c == r || a == r || b == r,
        }
    }
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

impl Program {
    /// `f(input 0, input 1)`: one binary op on two loaded inputs.
    pub fn binary(f: FBinary) -> Program {
        Program {
            instrs: vec![
                Instr::Load { dst: 0, input: 0 },
                Instr::Load { dst: 1, input: 1 },
                Instr::Binary { dst: 2, f, a: 0, b: 1 },
            ],
            num_regs: 3,
            outputs: vec![2],
        }
    }
}

/// An input operand: float values of the program's type, or bools (read as 0/1).
pub enum Input<'a, T> {
    /// A float operand.
    Float(Src<'a, T>),
    /// A bool operand.
    Bool(Src<'a, bool>),
}

/// An output buffer, contiguous over the output shape (or, for `Rows`, in rows of a larger one).
pub enum Output<'a, T> {
    /// Float values.
    Float(&'a mut [T]),
    /// Float values in strided rows (a part of a concatenation; plain [`run`]s only).
    Rows(Rows<'a, T>),
    /// 0/1 registers stored as bools.
    Bool(&'a mut [bool]),
    /// Registers stored truncated as integers.
    Int(&'a mut [i64]),
}

/// A fused kernel's destinations (inline for the usual one to four).
pub type Outputs<'a, T> = SmallVec<[Output<'a, T>; 4]>;

impl<T: Copy> Output<'_, T> {
    fn len(&self) -> usize {
        match self {
            Output::Float(s) => s.len(),
            Output::Rows(r) => r.len(),
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
const PARALLEL_MIN: usize = crate::strided::PARALLEL_MIN_ELEMS;

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
pub fn run<T: Scratch>(prog: &Program, shape: &[usize], inputs: &[Input<T>], mut outputs: Outputs<'_, T>) {
    let n: usize = shape.iter().product();
    assert!(outputs.iter().all(|o| o.len() == n), "fused: output length mismatch");
    assert_eq!(outputs.len(), prog.outputs.len(), "fused: output count mismatch");
    if n == 0 {
        return;
    }
    if tiny::fits(prog, n) {
        tiny::run(prog, shape, n, inputs, &mut outputs);
        return;
    }
    let readers = readers(shape, inputs);
    // Strided rows are not cut into tasks (the runtime gives them to small programs only).
    let rows = outputs.iter().any(|o| matches!(o, Output::Rows(_)));
    if n < PARALLEL_MIN || !crate::parallel::allowed() || rows {
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
            Output::Rows(_) => unreachable!("strided outputs run on one thread"),
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
    // Short runs copy out as before: finding the in-place writers costs more than the copy.
    let direct = if n >= DIRECT_MIN { direct_outputs(prog, &outputs, &[]) } else { Direct::default() };
    with_frame(prog, readers, n, |frame| {
        let mut done = 0;
        while done < n {
            let len = TILE.min(n - done);
            run_tile(prog, readers, frame, start + done, len, (&mut outputs, &direct, done));
            store(prog, frame, &mut outputs, &direct, done, len);
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

    /// [`operands`](Frame::operands), or the operands and `into` (an output's positions) as the
    /// destination.
    #[inline(always)]
    fn operands_into<'o>(
        &'o mut self,
        len: usize,
        dst: Reg,
        ops: [Reg; 3],
        into: Option<&'o mut [T]>,
    ) -> (&'o mut [T], [&'o [T]; 3]) {
        match into {
            Some(out) => (out, ops.map(|r| self.reg(r, len))),
            None => self.operands(len, dst, ops),
        }
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

/// Instructions that write a float output in place, as `(instruction, output)`: each output
/// register's last writer, when it computes (not a `Load`, which may be a view), the register
/// being no other output's and not summed. Later instructions that read the register read the
/// output's positions instead (a view, see `run_tile`). Computing into the register and copying
/// it out cost a pass over every tile (7.9% of CartPole's update, perf); the LSTM cell's
/// forward program stored 6 of its 7 outputs that way, each read again by a later instruction.
#[derive(Default)]
struct Direct {
    /// `(instruction, output)` pairs.
    pairs: SmallVec<[(usize, usize); 4]>,
    /// Per instruction, the output it writes in place, or [`Direct::NONE`] (empty when no
    /// instruction does): one lookup per instruction and tile instead of a search.
    by_instr: SmallVec<[u16; 48]>,
    /// Comparisons that run with the next instruction, their product, as one pass
    /// (`masks.rs`).
    masks: SmallVec<[usize; 2]>,
}

impl Direct {
    const NONE: u16 = u16::MAX;

    /// The output instruction `idx` writes in place, if any.
    #[inline(always)]
    fn output_of(&self, idx: usize) -> Option<usize> {
        self.by_instr.get(idx).filter(|&&k| k != Self::NONE).map(|&k| k as usize)
    }

    /// Whether output `k` is written in place (so not copied out).
    fn writes(&self, k: usize) -> bool {
        self.pairs.iter().any(|&(_, out)| out == k)
    }
}

fn direct_outputs<T>(prog: &Program, outputs: &Outputs<T>, summed: &[Reg]) -> Direct {
    let mut direct = Direct::default();
    for (k, (o, &r)) in outputs.iter().zip(&prog.outputs).enumerate() {
        let shared = prog.outputs.iter().filter(|&&q| q == r).count() > 1;
        if !matches!(o, Output::Float(_)) || shared || summed.contains(&r) {
            continue;
        }
        let Some(last) = prog.instrs.iter().rposition(|i| i.dst() == r) else { continue };
        if !matches!(prog.instrs[last], Instr::Load { .. }) {
            direct.pairs.push((last, k));
        }
    }
    if !direct.pairs.is_empty() {
        direct.by_instr = SmallVec::from_elem(Direct::NONE, prog.instrs.len());
        for &(i, k) in &direct.pairs {
            direct.by_instr[i] = u16::try_from(k).expect("fused: at most 65535 outputs");
        }
    }
    direct.masks = mask_products(prog, summed);
    direct
}

/// Copies a tile's output registers into positions `at..at + len` of the outputs (except those
/// the program wrote in place, see [`direct_outputs`]).
fn store<T: Float>(
    prog: &Program,
    frame: &Frame<'_, '_, T>,
    outputs: &mut Outputs<T>,
    direct: &Direct,
    at: usize,
    len: usize,
) {
    for (k, (o, &r)) in outputs.iter_mut().zip(&prog.outputs).enumerate() {
        if direct.writes(k) {
            continue;
        }
        let src = frame.reg(r, len);
        match o {
            Output::Float(s) => s[at..at + len].copy_from_slice(src),
            Output::Bool(s) => {
                s[at..at + len].iter_mut().zip(src).for_each(|(d, &v)| *d = v != T::ZERO);
            }
            Output::Int(s) => {
                s[at..at + len].iter_mut().zip(src).for_each(|(d, &v)| *d = v.to_f64() as i64);
            }
            Output::Rows(r) => r.write(at, src),
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
            Output::Rows(_) => panic!("fused: strided outputs are for runs without sums"),
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
    let summed: SmallVec<[Reg; 2]> = plans.iter().map(|p| p.0).collect();
    let direct =
        if part.len() >= DIRECT_MIN { direct_outputs(prog, &outs, &summed) } else { Direct::default() };
    with_frame(prog, readers, part.len(), |frame| {
        let mut done = part.start;
        while done < part.end {
            let len = TILE.min(part.end - done);
            run_tile(prog, readers, frame, done, len, (&mut outs, &direct, done - part.start));
            store(prog, frame, &mut outs, &direct, done - part.start, len);
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

/// Runs one tile's instructions: positions `start..start + len` of the inputs. Instructions in
/// `direct` write positions `at..at + len` of their output instead of a register. The whole
/// tile runs under one SIMD trampoline, not one per instruction: a pass over a tile is a few
/// dozen vector operations, and the per-instruction call and feature check were a fifth of
/// the LSTM backward cell's time (perf).
fn run_tile<'s, 'a: 's, T: Scratch>(
    prog: &Program,
    readers: &[Reader<'a, T>],
    frame: &mut Frame<'s, 'a, T>,
    start: usize,
    len: usize,
    (outputs, direct, at): (&mut Outputs<T>, &Direct, usize),
) {
    with_best_simd(
        #[inline(always)]
        || {
            let mut idx = 0;
            while idx < prog.instrs.len() {
                // A mask and its product as one pass, writing where the product writes.
                let pair = direct.masks.contains(&idx);
                let (writer, product) = if pair { (idx + 1, prog.instrs.get(idx + 1)) } else { (idx, None) };
                let into = direct.output_of(writer).map(|k| (&mut outputs[k], at));
                run_instr(&prog.instrs[idx], readers, frame, start, len, into, product);
                idx = writer + 1;
            }
        },
    )
}

/// One instruction over one tile; `into`: the output (and its first position) it writes in
/// place. With `product`, `ins` is a comparison that runs with it as one pass
/// ([`mask_products`]): `into` and the register written are then the product's.
#[inline(always)]
fn run_instr<'s, 'a: 's, T: Scratch>(
    ins: &Instr,
    readers: &[Reader<'a, T>],
    frame: &mut Frame<'s, 'a, T>,
    start: usize,
    len: usize,
    into: Option<(&mut Output<T>, usize)>,
    product: Option<&Instr>,
) {
    // The positions as a raw pointer first, and both the slice this instruction writes and the
    // view later ones read made from it: a pointer taken from a shared reborrow of the slice
    // lost its permission when the slice was written (Miri, tree borrows: `scripts/miri.sh`).
    let written = into.map(|(o, at)| match o {
        Output::Float(o) => (o[at..at + len].as_mut_ptr(), len),
        _ => unreachable!("only float outputs are written in place"),
    });
    // SAFETY: `ptr..ptr + n` are this tile's positions of an output borrowed mutably for the
    // whole run (the pointer comes from that borrow); nothing else reaches them while this
    // instruction writes them.
    let into = written.map(|(ptr, n)| unsafe { std::slice::from_raw_parts_mut(ptr, n) });
    if let (Instr::BinaryConst { f, a: x, c, const_left, dst: m }, Some(&Instr::Binary { dst, a, b, .. })) =
        (*ins, product)
    {
        let g = if a == m { b } else { a };
        let (out, [x, g, _]) = frame.operands_into(len, dst, [x, g, x], into);
        each_mask_product(f, out, x, g, T::from_f64(f64::from_bits(c)), const_left);
        if let Some((ptr, n)) = written {
            // SAFETY: as for one instruction's view below: this tile's positions of the
            // product's output, borrowed for the whole run and not borrowed mutably again
            // before the register's next write replaces this view.
            frame.views[dst as usize] = Some(unsafe { std::slice::from_raw_parts(ptr, n) });
        }
        return;
    }
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
            let (out, [x, _, _]) = frame.operands_into(len, dst, [a, a, a], into);
            each_unary(f, out, x);
        }
        Instr::Binary { dst, f, a, b } => {
            let (out, [x, y, _]) = frame.operands_into(len, dst, [a, b, a], into);
            each_binary(f, out, x, y);
        }
        Instr::BinaryConst { dst, f, a, c, const_left } => {
            let (out, [x, _, _]) = frame.operands_into(len, dst, [a, a, a], into);
            let c = T::from_f64(f64::from_bits(c));
            each_binary_const(f, out, x, c, const_left);
        }
        Instr::Select { dst, c, a, b } => {
            let (out, [k, x, y]) = frame.operands_into(len, dst, [c, a, b], into);
            // Zipped, not indexed: no bounds checks, so the loop vectorises into
            // compare-and-blend instead of a branch per element.
            for (((o, &k), &a), &b) in out.iter_mut().zip(k).zip(x).zip(y) {
                *o = if k != T::ZERO { a } else { b };
            }
        }
    }
    if let Some((ptr, n)) = written {
        // Later readers of the register read the positions just written to the output.
        // SAFETY: `ptr..ptr + n` are this tile's positions of output `k`, which outlives
        // the frame (the outputs are borrowed for the whole run); no `&mut` to them is
        // made again before the register's next write, which replaces this view (the next
        // tile's first write of the register, as every read follows a write in program
        // order): `store` skips direct outputs, and other outputs are disjoint slices.
        let view: &'s [T] = unsafe { std::slice::from_raw_parts(ptr, n) };
        frame.views[ins.dst() as usize] = Some(view);
    }
}

#[cfg(test)]
mod tests;
