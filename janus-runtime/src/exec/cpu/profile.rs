//! Labels of executor steps for `JANUS_PROFILE=1` (`crate::profile`).

use crate::exec::lower::{Lowered, Step, StepKind};

/// What a step computes, as a table label.
pub(crate) fn label(l: &Lowered, step: &Step) -> String {
    let shape = |i: usize| l.vals[i].as_ref().map_or_else(String::new, |v| format!("{:?}", v.shape.sizes()));
    match &step.kind {
        StepKind::Fused { prog, sums, .. } => {
            let summed = if sums.is_empty() { String::new() } else { format!(" +{} sum(s)", sums.len()) };
            format!("fused {} instrs{summed} -> {:?}", prog.program.instrs.len(), prog.shape.sizes())
        }
        StepKind::MatMul { a, b, c, out } => {
            let acc = if c.is_some() { " +c" } else { "" };
            format!("matmul {} x {}{acc} -> {}", shape(*a), shape(*b), shape(*out))
        }
        StepKind::Reduce { kind, x, out, .. } => format!("{kind:?} {} -> {}", shape(*x), shape(*out)),
        StepKind::Cat { out, .. } => format!("cat -> {}", shape(*out)),
        StepKind::Copy { x, out } => format!("copy {} -> {}", shape(*x), shape(*out)),
        StepKind::RngState { .. } => "rng state".into(),
        StepKind::Random { out, .. } => format!("random -> {}", shape(*out)),
        StepKind::Multinomial { out, .. } => format!("multinomial -> {}", shape(*out)),
        StepKind::WindowPart { op, x, out, first } => {
            format!("{} part from {first}: {} -> {}", op.name(), shape(*x), shape(*out))
        }
        StepKind::Generic { op, inputs, out } => {
            let ins: Vec<String> = inputs.iter().map(|&i| shape(i)).collect();
            format!("{} {} -> {}", op.name(), ins.join(" "), shape(*out))
        }
    }
}
