//! `JANUS_PROFILE=1`: the time of every executor step, summed by what it computes (step kind
//! and shapes), so "where does a replay's time go" has an answer without a sampling profiler.
//! Profiled runs are serial. Eager ops' kernels are timed too, labelled `eager`. [`report`] formats the table, heaviest first.

use crate::exec::lower::{Lowered, Step, StepKind};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use crate::ops::{Op, TensorType};
use crate::tensor::Tensor;

static TOTALS: Mutex<Option<HashMap<String, (u64, Duration)>>> = Mutex::new(None);

/// What a step computes, as a table label.
fn label(l: &Lowered, step: &Step) -> String {
    let shape = |i: usize| l.vals[i].as_ref().map_or_else(String::new, |v| format!("{:?}", v.shape.dims()));
    match &step.kind {
        StepKind::Fused { prog, outputs, .. } => {
            format!("fused {} instrs -> {}", prog.program.instrs.len(), shape(outputs[0]))
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
        StepKind::Generic { op, inputs, out } => {
            let ins: Vec<String> = inputs.iter().map(|&i| shape(i)).collect();
            format!("{} {} -> {}", op.name(), ins.join(" "), shape(*out))
        }
    }
}

thread_local! {
    static IN_STEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs one executor step, timed.
pub(crate) fn step(l: &Lowered, step: &Step, run: impl FnOnce()) {
    let t0 = Instant::now();
    IN_STEP.set(true);
    run();
    IN_STEP.set(false);
    add(label(l, step), t0.elapsed());
}

/// Runs one eager op's kernel, timed (unless an executor step runs it: that step is timed).
pub(crate) fn eager<R>(op: &Op, x: &[&Tensor], ty: &TensorType, run: impl FnOnce() -> R) -> R {
    if IN_STEP.get() {
        return run();
    }
    let t0 = Instant::now();
    let r = run();
    let ins: Vec<String> = x.iter().map(|t| format!("{:?}", t.shape().dims())).collect();
    add(format!("eager {} {} -> {:?}", op.name(), ins.join(" "), ty.shape.dims()), t0.elapsed());
    r
}

fn add(key: String, took: Duration) {
    let mut t = TOTALS.lock().unwrap();
    let e = t.get_or_insert_with(HashMap::new).entry(key).or_default();
    e.0 += 1;
    e.1 += took;
}

/// The profile so far, heaviest first (empty unless `JANUS_PROFILE=1`).
pub fn report() -> String {
    let t = TOTALS.lock().unwrap();
    let Some(t) = t.as_ref() else { return String::new() };
    let mut rows: Vec<_> = t.iter().collect();
    rows.sort_by(|a, b| b.1.1.cmp(&a.1.1));
    let total: Duration = rows.iter().map(|r| r.1.1).sum();
    let mut out = String::new();
    let _ = writeln!(out, "{:>10} {:>6} {:>9} {:>10}  step", "total ms", "share", "runs", "mean µs");
    for (k, (n, d)) in rows {
        let _ = writeln!(
            out,
            "{:>10.2} {:>5.1}% {:>9} {:>10.1}  {k}",
            d.as_secs_f64() * 1e3,
            100.0 * d.as_secs_f64() / total.as_secs_f64().max(1e-12),
            n,
            d.as_secs_f64() * 1e6 / *n as f64
        );
    }
    out
}
