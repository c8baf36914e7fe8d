//! Compiled execution: an optimised graph lowered to a flat list of steps over a memory plan
//! (`lower.rs`, `memory.rs`: device-independent), run by a backend: `cpu/` (host arenas, two
//! workers) or `cuda/` (device arenas, CUDA-graph replay). An [`Executor`] is immutable and
//! shared by every thread; each backend keeps its own per-run state.

mod cpu;
mod cuda;
pub(crate) mod faults;
pub(crate) mod free;
mod loops;
pub(crate) mod lower;
pub(crate) mod memory;

pub use cpu::arena_cache::{cached_bytes as cached_arena_bytes, release as release_cached_arenas};
pub(crate) use cpu::recycle_output_list;
#[cfg(feature = "fault-injection")]
pub use faults::{break_compiled_backward, break_fused_kernels};
pub use memory::MemoryPlan;

use crate::Device;
use crate::graph::Graph;
use crate::ops::Op;
use crate::tensor::Tensor;
use lower::Lowered;

/// A compiled graph, ready to run many times from many threads.
pub struct Executor {
    graph: Graph,
    lowered: Lowered,
    cpu: cpu::CpuPlan,
    /// The steps for CUDA runs: lowered again, without the CPU's fused sums (the code
    /// generator has no reductions), on the first CUDA run.
    cuda_lowered: std::sync::OnceLock<Lowered>,
    /// The CUDA side, made on the first run on a CUDA device.
    cuda: std::sync::OnceLock<cuda::CudaPlan>,
    /// The device of the graph's own creation ops, if any is not the CPU (found once, not on
    /// every run: a scan of a large graph's nodes cost more than a small graph's whole run).
    made_on: Option<Device>,
}

impl Executor {
    /// Lowers and plans an (already optimised) graph.
    pub fn compile(graph: Graph) -> Executor {
        let lowered = lower::lower(&graph);
        memory::validate(&lowered);
        if crate::passes::verifying() {
            assert_eq!(memory::check(&lowered), Ok(()), "executor: memory plan");
        }
        let cpu = cpu::CpuPlan::new(&lowered);
        let made_on = creation_device(&graph);
        Executor { graph, lowered, cpu, cuda_lowered: Default::default(), cuda: Default::default(), made_on }
    }

    /// The graph this executor runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The memory plan: planned arena bytes against one buffer per intermediate.
    pub fn memory_plan(&self) -> &MemoryPlan {
        &self.lowered.plan
    }

    /// The memory plan CPU runs use: the two-worker program's (planned again by pieces, see
    /// `cpu/split_memory.rs`) when the executor has one, else [`memory_plan`](Executor::memory_plan).
    pub fn run_memory_plan(&self) -> &MemoryPlan {
        self.cpu.run_memory_plan(&self.lowered)
    }

    /// Bytes of the packed right factors a CPU run holds besides its arena (see
    /// [`crate::ExecOptions::pack`]).
    pub fn packed_bytes(&self) -> usize {
        self.cpu.packed_bytes()
    }

    /// Whether CPU runs use two workers (see the schedule's tuner: after a plan's first replays,
    /// whichever of two workers and the calling thread measured faster).
    pub fn is_parallel(&self) -> bool {
        self.cpu.is_parallel()
    }

    /// Number of steps per run.
    pub fn num_steps(&self) -> usize {
        self.lowered.steps.len()
    }

    /// The device a run on `inputs` executes on: the first CUDA device among the inputs or
    /// the graph's source ops, else the CPU.
    fn device_for(&self, inputs: &[Tensor]) -> Device {
        match inputs.iter().find(|t| t.device() != Device::Cpu) {
            Some(t) => t.device(),
            None => self.made_on.unwrap_or(Device::Cpu),
        }
    }

    /// The steps a CUDA run executes.
    fn cuda_lowered(&self) -> &Lowered {
        self.cuda_lowered.get_or_init(|| {
            let l = lower::lower_for(&self.graph, false);
            memory::validate(&l);
            l
        })
    }

    /// The steps a CUDA run executes, counted by kind (`fused`, `matmul`, `reduce`, ..., and
    /// `generic OP` for ops that run their eager kernel), sorted by kind, and the memo copies
    /// before them. Needs no GPU: the CUDA lowering is device-independent.
    pub fn cuda_step_counts(&self) -> (Vec<(String, usize)>, usize) {
        let l = self.cuda_lowered();
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for s in &l.steps {
            *counts.entry(s.kind.kind_name()).or_default() += 1;
        }
        (counts.into_iter().collect(), l.memos.len())
    }

    /// The generated elementwise kernels (fused groups, shapes baked in) a CUDA run uses.
    pub fn cuda_kernels(&self) -> Vec<janus_kernels::cuda::codegen::EwSpec> {
        cuda::fused_specs(self.cuda_lowered())
    }

    /// CUDA runs of this executor: `(graph replays, plain runs)`.
    pub fn cuda_runs(&self) -> (u64, u64) {
        self.cuda.get().map_or((0, 0), |c| *c.counts.lock().unwrap())
    }

    /// Runs the graph on `inputs` (types as the graph's inputs) and returns its outputs, on
    /// the backend of the inputs' device.
    pub fn run(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        assert_eq!(inputs.len(), self.graph.inputs.len(), "executor: wrong number of inputs");
        match self.device_for(inputs) {
            Device::Cpu => self.cpu.run(&self.lowered, inputs),
            Device::Cuda(n) => {
                let l = self.cuda_lowered();
                self.cuda.get_or_init(|| cuda::CudaPlan::new(l, n)).run(l, inputs.to_vec())
            }
        }
    }
}

/// The first device other than the CPU that a creation op of `graph` names, if any.
fn creation_device(graph: &Graph) -> Option<Device> {
    graph.nodes.iter().find_map(|n| match n.op.as_op() {
        Some(Op::Full(p)) if p.device != Device::Cpu => Some(p.device),
        Some(Op::Constant(p)) if p.device != Device::Cpu => Some(p.device),
        Some(Op::Arange(p)) if p.device != Device::Cpu => Some(p.device),
        Some(Op::RandNormal(p) | Op::RandUniform(p)) if p.device != Device::Cpu => Some(p.device),
        Some(Op::ToDevice(p)) if p.device != Device::Cpu => Some(p.device),
        _ => None,
    })
}
