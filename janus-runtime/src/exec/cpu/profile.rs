//! Labels of executor steps for `JANUS_PROFILE=1` (`crate::profile`), and the two-worker
//! timeline of `JANUS_TIMELINE=FILE`.

use crate::exec::lower::{Lowered, Step, StepKind};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What a step computes, as a table label.
pub(crate) fn label(l: &Lowered, step: &Step) -> String {
    let shape = |i: usize| l.vals[i].as_ref().map_or_else(String::new, |v| format!("{:?}", v.shape.sizes()));
    match &step.kind {
        StepKind::Fused { prog, sums, .. } => {
            let summed = if sums.is_empty() { String::new() } else { format!(" +{} sum(s)", sums.len()) };
            format!("fused {} instrs{summed} -> {:?}", prog.program.instrs.len(), prog.shape.sizes())
        }
        StepKind::MatMul { a, b, c, out, relu } => {
            let acc = if c.is_some() { " +c" } else { "" };
            let act = if *relu { " relu" } else { "" };
            format!("matmul {} x {}{acc}{act} -> {}", shape(*a), shape(*b), shape(*out))
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
        StepKind::Loop { run, .. } => format!("loop {}", crate::graph::loops::describe(&run.spec)),
        StepKind::Generic { op, inputs, out } => {
            let ins: Vec<String> = inputs.iter().map(|&i| shape(i)).collect();
            format!("{} {} -> {}", op.name(), ins.join(" "), shape(*out))
        }
    }
}

/// One two-worker run in this many is written to the timeline file.
const TIMELINE_EVERY: u64 = 500;

/// The steps of one sampled two-worker run: which worker ran each, from when to when. It shows
/// what `JANUS_PROFILE=1` cannot (profiled runs are serial): the critical path, and where a
/// worker idles.
pub(crate) struct Timeline {
    t0: Instant,
    /// (step, worker: 1 the caller, 2 the helper, start ns, end ns).
    events: Mutex<Vec<(u32, u8, u64, u64)>>,
}

impl Timeline {
    /// A timeline for this run, if `JANUS_TIMELINE` is set and the run is sampled.
    pub(crate) fn sample() -> Option<Timeline> {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        crate::config::config().timeline.as_ref()?;
        let k = RUNS.fetch_add(1, Ordering::Relaxed);
        (k % TIMELINE_EVERY == TIMELINE_EVERY - 1)
            .then(|| Timeline { t0: Instant::now(), events: Mutex::new(Vec::new()) })
    }

    /// Runs step `s`, timed.
    pub(crate) fn time(&self, s: usize, run: impl FnOnce()) {
        let start = self.t0.elapsed().as_nanos() as u64;
        run();
        let end = self.t0.elapsed().as_nanos() as u64;
        let w = if std::thread::current().name() == Some("janus-worker") { 2 } else { 1 };
        self.events.lock().unwrap().push((s as u32, w, start, end));
    }

    /// Appends the run to the timeline file: a summary line, then one line per step by start:
    /// the worker that ran it, start and end (µs), what it did, `#` its index, `w` the worker
    /// it was meant for.
    pub(crate) fn write(self, l: &Lowered) {
        let wall = self.t0.elapsed().as_secs_f64() * 1e6;
        let mut ev = self.events.into_inner().unwrap();
        ev.sort_by_key(|e| e.2);
        let busy = |w: u8| ev.iter().filter(|e| e.1 == w).map(|e| (e.3 - e.2) as f64 / 1e3).sum::<f64>();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {} steps, wall {wall:.1} us, busy: caller {:.1} us, helper {:.1} us",
            ev.len(),
            busy(1),
            busy(2)
        );
        for (s, w, a, b) in ev {
            let (a, b) = (a as f64 / 1e3, b as f64 / 1e3);
            let step = &l.steps[s as usize];
            // The step's index and the worker it is meant for (0: either), to follow it into
            // `JANUS_SCHED_DEBUG=2`'s list of predecessors.
            let _ =
                writeln!(out, "{w} {a:9.1} {b:9.1} {:8.1}  {} #{s} w{}", b - a, label(l, step), step.worker);
        }
        let path = crate::config::config().timeline.as_ref().expect("sampled only when set");
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Err(e) = file.and_then(|mut f| f.write_all(out.as_bytes())) {
            eprintln!("janus: cannot write JANUS_TIMELINE `{}`: {e}", path.display());
        }
    }
}
