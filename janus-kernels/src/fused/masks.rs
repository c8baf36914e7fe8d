//! A comparison with a constant whose 0/1 result is a factor of one product, `(x > 0) as f32 *
//! g` (a relu's gradient), as one pass over each tile instead of two: the mask is never
//! written to a register and read back. [`Program::adjoin_masks`] moves such a comparison next
//! to its product when the fuse pass emitted loads between them, and [`mask_products`] finds
//! the adjacent pairs a run executes together (`run_tile`).

use super::{FBinary, Instr, Program, Reg};
use crate::elementwise::BinaryOp;
use smallvec::SmallVec;

impl Instr {
    /// Reads of register `from` read `to` instead.
    fn rename_reads(&mut self, from: Reg, to: Reg) {
        let swap = |r: &mut Reg| {
            if *r == from {
                *r = to;
            }
        };
        match self {
            Instr::Load { .. } => {}
            Instr::Unary { a, .. } | Instr::BinaryConst { a, .. } => swap(a),
            Instr::Binary { a, b, .. } => {
                swap(a);
                swap(b);
            }
            Instr::Select { c, a, b, .. } => {
                swap(c);
                swap(a);
                swap(b);
            }
        }
    }
}

/// `Some((x, m))` when `ins` compares register `x` with a constant into `m`.
fn comparison(ins: &Instr) -> Option<(Reg, Reg)> {
    match *ins {
        Instr::BinaryConst { dst, f: FBinary::Cmp(_), a, .. } => Some((a, dst)),
        _ => None,
    }
}

/// Whether `ins` multiplies `m` by another register, reading `m` once.
fn multiplies(ins: &Instr, m: Reg) -> bool {
    matches!(*ins, Instr::Binary { f: FBinary::Op(BinaryOp::Mul), a, b, .. } if (a == m) != (b == m))
}

impl Program {
    /// Moves each comparison with a constant whose result only a later product reads, with
    /// only loads between them, to just before that product. The fuse pass loads an operand
    /// where it is first read, often into the register the comparison's operand just freed
    /// (`Load x; x > 0; Load g; mask * g`): such a load gets a fresh register, and the
    /// instructions after it read that one. The same values in the same order of operations.
    pub fn adjoin_masks(&mut self) {
        let mut i = 0;
        while i < self.instrs.len() {
            let Some((x, m)) = comparison(&self.instrs[i]) else {
                i += 1;
                continue;
            };
            let loads = self.instrs[i + 1..].iter().take_while(|s| matches!(s, Instr::Load { .. })).count();
            let j = i + 1 + loads;
            let movable = loads > 0
                && self.instrs.get(j).is_some_and(|s| multiplies(s, m))
                && !self.instrs[i + 1..j].iter().any(|s| s.dst() == m)
                && self.instrs[i + 1..j].iter().filter(|s| s.dst() == x).count() <= 1
                && !self.outputs.contains(&m)
                && !self.instrs[j + 1..].iter().any(|s| s.reads(m));
            if !movable {
                i += 1;
                continue;
            }
            // A load that overwrites the comparison's operand writes a fresh register instead,
            // read by everything after it up to the operand register's next write.
            if let Some(k) = (i + 1..j).find(|&k| self.instrs[k].dst() == x) {
                let fresh = self.num_regs;
                self.num_regs += 1;
                if let Instr::Load { dst, .. } = &mut self.instrs[k] {
                    *dst = fresh;
                }
                let mut rewritten = false;
                for s in &mut self.instrs[k + 1..] {
                    s.rename_reads(x, fresh);
                    if s.dst() == x {
                        rewritten = true;
                        break;
                    }
                }
                if !rewritten {
                    self.outputs.iter_mut().filter(|o| **o == x).for_each(|o| *o = fresh);
                }
            }
            let cmp = self.instrs.remove(i);
            self.instrs.insert(j - 1, cmp);
            i = j;
        }
    }
}

/// The comparisons that run with the next instruction as one pass: those with a constant whose
/// 0/1 result only the next instruction reads, as one factor of a product, and is no output and
/// no sum; the product must not write the comparison's operand.
pub(super) fn mask_products(prog: &Program, summed: &[Reg]) -> SmallVec<[usize; 2]> {
    let ins = &prog.instrs;
    let mut found = SmallVec::new();
    for i in 0..ins.len().saturating_sub(1) {
        let Some((x, m)) = comparison(&ins[i]) else { continue };
        let dead =
            !prog.outputs.contains(&m) && !summed.contains(&m) && !ins[i + 2..].iter().any(|s| s.reads(m));
        if multiplies(&ins[i + 1], m) && dead && ins[i + 1].dst() != x {
            found.push(i);
        }
    }
    found
}
