//! The compiled CPU executor: an optimised graph lowered to a flat list of steps over planned
//! buffers (see [`plan`]). An executor is immutable and shared; each run takes an arena from a
//! pool (one per concurrent caller), so threads share compiled code but never buffers, and
//! after the first run no intermediate buffer is allocated.

mod frame;
mod plan;
mod schedule;
mod steps;

pub use plan::MemoryPlan;

use crate::graph::Graph;
use crate::tensor::{Data, Tensor};
use frame::{Arenas, Frame, output_buffer};
use plan::{BufRef, Lowered, StepKind};
use std::sync::{Arc, Mutex};

/// Test-only fault: fused kernels corrupt their first output element (see `rt::testing`).
pub(crate) static BREAK_FUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A compiled graph, ready to run many times from many threads.
pub struct Executor {
    graph: Graph,
    lowered: Lowered,
    schedule: schedule::Schedule,
    pool: Mutex<Vec<(Arenas, schedule::Scratch)>>,
    /// Per memo: the storage of the input it was made from (held, so its address stays
    /// unique), and the copy.
    memo_cache: Vec<Mutex<Option<(Tensor, Tensor)>>>,
}

impl Executor {
    /// Lowers and plans an (already optimised) graph.
    pub fn compile(graph: Graph) -> Executor {
        let lowered = plan::lower(&graph);
        validate(&lowered);
        let schedule = schedule::build(&lowered);
        let memo_cache = lowered.memos.iter().map(|_| Mutex::new(None)).collect();
        Executor { graph, lowered, schedule, pool: Mutex::new(Vec::new()), memo_cache }
    }

    /// The graph this executor runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The memory plan: planned arena bytes against one buffer per intermediate.
    pub fn memory_plan(&self) -> &MemoryPlan {
        &self.lowered.plan
    }

    /// The memoised dense copies of input views for this run: reused while the same values come
    /// back (the same storage, whatever the handle), made afresh otherwise.
    fn memos(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        self.lowered
            .memos
            .iter()
            .zip(&self.memo_cache)
            .map(|(&(k, src), cache)| {
                let key = inputs[k].storage_key();
                let mut slot = cache.lock().unwrap();
                if let Some((source, t)) = &*slot
                    && source.storage_key() == key
                {
                    return t.clone();
                }
                let v = self.lowered.vals[src].as_ref().expect("memo sources have values");
                let d = inputs[k].data();
                let view = Tensor::from_parts(
                    v.shape.clone(),
                    v.dtype,
                    Some(d.view(v.strides.clone(), d.offset + v.offset)),
                    Default::default(),
                );
                let t = dense_input(&view);
                *slot = Some((inputs[k].clone(), t.clone()));
                t
            })
            .collect()
    }

    /// Whether this run may use the two-worker schedule: not from inside a rayon task, where
    /// both workers would compete with the caller's own parallel work.
    fn parallel_allowed(&self) -> bool {
        rayon::current_thread_index().is_none() && !crate::config::config().serial
    }

    /// Whether runs use two workers.
    pub fn is_parallel(&self) -> bool {
        self.schedule.parallel
    }

    /// Number of steps per run.
    pub fn num_steps(&self) -> usize {
        self.lowered.steps.len()
    }

    /// Runs the graph on `inputs` (types as the graph's inputs) and returns its outputs.
    pub fn run(&self, mut inputs: Vec<Tensor>) -> Vec<Tensor> {
        assert_eq!(inputs.len(), self.graph.inputs.len(), "executor: wrong number of inputs");
        for t in &mut inputs {
            if !t.is_contiguous() {
                *t = dense_input(t);
            }
        }
        let dense = inputs;
        let pooled = self.pool.lock().unwrap().pop();
        let (mut arenas, mut scratch) =
            pooled.unwrap_or_else(|| (Arenas::new(self.lowered.plan.arena_len), Default::default()));
        let mut outs: Vec<_> = self.lowered.output_bufs.iter().map(|&(d, n)| output_buffer(d, n)).collect();
        let memos = self.memos(&dense);
        {
            let frame = Frame::new(&dense, &self.lowered.consts, &memos, &mut arenas, &mut outs);
            let (steps, vals) = (&self.lowered.steps, &self.lowered.vals);
            if self.schedule.parallel && self.parallel_allowed() {
                schedule::run_parallel(&self.schedule, &mut scratch, &|s| {
                    steps::run_step(&steps[s], vals, &frame)
                });
            } else {
                for step in steps {
                    steps::run_step(step, vals, &frame);
                }
            }
        }
        self.pool.lock().unwrap().push((arenas, scratch));
        let outs: Vec<Arc<janus_kernels::CpuBuffer>> = outs.into_iter().map(Arc::new).collect();
        self.lowered
            .outputs
            .iter()
            .map(|&o| {
                let v = self.lowered.vals[o].as_ref().expect("outputs have values");
                let data = match v.buf {
                    BufRef::Output(k) => {
                        Data::shared(outs[k].clone(), &v.shape).view(v.strides.clone(), v.offset)
                    }
                    BufRef::Input(k) => {
                        let d = dense[k].data();
                        d.view(v.strides.clone(), d.offset + v.offset)
                    }
                    BufRef::Const(k) => {
                        let d = self.lowered.consts[k].data();
                        d.view(v.strides.clone(), d.offset + v.offset)
                    }
                    BufRef::Memo(k) => {
                        let d = memos[k].data();
                        d.view(v.strides.clone(), d.offset + v.offset)
                    }
                    BufRef::Arena(_) => unreachable!("values reaching an output live in output buffers"),
                };
                Tensor::from_parts(v.shape.clone(), v.dtype, Some(data), Default::default())
            })
            .collect()
    }
}

/// A contiguous copy of `t`.
fn dense_input(t: &Tensor) -> Tensor {
    let buf = janus_kernels::with_any_type!(t.dtype(), T => {
        janus_kernels::buffer::Stored::wrap(t.contiguous_slice::<T>().into_owned())
    });
    Tensor::from_buffer(buf, t.shape().clone())
}

/// Checks the plan's safety invariant: no step writes a region it also reads or writes twice,
/// unless it is an in-place GEMM accumulation into its own addend.
fn validate(l: &Lowered) {
    let region = |i: usize| {
        let v = l.vals[i].as_ref().expect("value");
        if v.len == 0 {
            return None; // an empty region touches no memory
        }
        match v.buf {
            BufRef::Arena(s) => Some((crate::exec::plan::dtype_slot(v.dtype), s, s + v.len, true)),
            BufRef::Output(k) => Some((usize::MAX - k, 0, v.len, false)),
            _ => None,
        }
    };
    let overlap =
        |a: (usize, usize, usize, bool), b: (usize, usize, usize, bool)| a.0 == b.0 && a.1 < b.2 && b.1 < a.2;
    for st in &l.steps {
        let writes: Vec<_> = st.kind.writes().iter().filter_map(|&w| region(w)).collect();
        for (i, w) in writes.iter().enumerate() {
            for w2 in &writes[i + 1..] {
                assert!(!overlap(*w, *w2), "executor plan: a step writes overlapping regions");
            }
        }
        let in_place = match st.kind {
            StepKind::MatMul { c: Some(c), out, .. } => {
                region(c).zip(region(out)).filter(|(a, b)| a == b).map(|_| c)
            }
            _ => None,
        };
        for r in st.kind.reads() {
            if Some(r) == in_place {
                continue;
            }
            if let Some(rr) = region(r) {
                assert!(
                    !writes.iter().any(|w| overlap(*w, rr)),
                    "executor plan: a step reads a region it writes"
                );
            }
        }
    }
}
