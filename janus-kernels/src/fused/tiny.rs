//! Programs over a few positions (the hit path's one-element blocks, a batch-1 policy's
//! scalars): registers on the stack, operands gathered by index, no tiles, readers or views.
//!
//! Why: the tiled machine's fixed cost (a reader per input, the thread's scratch, the
//! per-tile output plumbing) was about 1,500 instructions for `x * 2.0 + 1.0` on one element,
//! over a third of the block's whole replay (callgrind). Each instruction here is the same
//! per-function loop ([`each_unary`] and friends) over the same values, under the same
//! SIMD trampoline, so results are bit-identical to the tiled path's.

use super::elementwise::{bit, each_binary, each_binary_const, each_unary};
use super::{Input, Instr, Output, Program};
use crate::dtype::Float;
use crate::simd_math::with_best_simd;
use crate::strided::Src;

/// The most positions a program may cover to run here.
pub(super) const MAX_POSITIONS: usize = 8;

/// The most registers a program may use to run here (1 KiB of `f32` registers on the stack).
pub(super) const MAX_REGS: usize = 32;

/// Whether [`run`] takes a program over `n` positions.
#[inline]
pub(super) fn fits(prog: &Program, n: usize) -> bool {
    n <= MAX_POSITIONS && prog.num_regs as usize <= MAX_REGS
}

type Regs<T> = [[T; MAX_POSITIONS]; MAX_REGS];

/// Runs `prog` over `shape` (`n` positions, [`fits`]); `outputs[i]` receives register
/// `prog.outputs[i]`.
pub(super) fn run<T: Float>(
    prog: &Program,
    shape: &[usize],
    n: usize,
    inputs: &[Input<T>],
    outputs: &mut [Output<T>],
) {
    debug_assert!(fits(prog, n));
    let mut regs: Regs<T> = [[T::ZERO; MAX_POSITIONS]; MAX_REGS];
    for ins in &prog.instrs {
        match *ins {
            Instr::Load { dst, input } => {
                let out = &mut regs[dst as usize][..n];
                match &inputs[input as usize] {
                    Input::Float(s) => gather(shape, s, out, |x| x),
                    Input::Bool(s) => gather(shape, s, out, bit::<T>),
                }
            }
            // Operands are copied out (a few values): `dst` is never one of them.
            Instr::Unary { dst, f, a } => {
                let x = regs[a as usize];
                let out = &mut regs[dst as usize][..n];
                with_best_simd(
                    #[inline(always)]
                    || each_unary(f, out, &x[..n]),
                );
            }
            Instr::Binary { dst, f, a, b } => {
                let (x, y) = (regs[a as usize], regs[b as usize]);
                let out = &mut regs[dst as usize][..n];
                with_best_simd(
                    #[inline(always)]
                    || each_binary(f, out, &x[..n], &y[..n]),
                );
            }
            Instr::BinaryConst { dst, f, a, c, const_left } => {
                let x = regs[a as usize];
                let out = &mut regs[dst as usize][..n];
                let c = T::from_f64(f64::from_bits(c));
                with_best_simd(
                    #[inline(always)]
                    || each_binary_const(f, out, &x[..n], c, const_left),
                );
            }
            Instr::Select { dst, c, a, b } => {
                let (k, x, y) = (regs[c as usize], regs[a as usize], regs[b as usize]);
                for (i, o) in regs[dst as usize][..n].iter_mut().enumerate() {
                    *o = if k[i] != T::ZERO { x[i] } else { y[i] };
                }
            }
        }
    }
    for (o, &r) in outputs.iter_mut().zip(&prog.outputs) {
        let src = &regs[r as usize][..n];
        match o {
            Output::Float(s) => s.copy_from_slice(src),
            Output::Bool(s) => s.iter_mut().zip(src).for_each(|(d, &v)| *d = v != T::ZERO),
            Output::Int(s) => s.iter_mut().zip(src).for_each(|(d, &v)| *d = v.to_f64() as i64),
            Output::Rows(rows) => rows.write(0, src),
        }
    }
}

/// `out[k] = f(src at output position k)` for the first `out.len()` positions of `shape`.
#[inline]
fn gather<S: Copy, T>(shape: &[usize], src: &Src<S>, out: &mut [T], f: impl Fn(S) -> T) {
    debug_assert_eq!(shape.len(), src.strides.len(), "fused: one stride per dimension");
    for (k, o) in out.iter_mut().enumerate() {
        // Position `k`'s index, last dimension fastest, through the operand's strides.
        let (mut rest, mut at) = (k, src.offset);
        for (&d, &s) in shape.iter().zip(src.strides).rev() {
            if rest == 0 {
                break;
            }
            at += rest % d * s;
            rest /= d;
        }
        *o = f(src.data[at]);
    }
}
