//! The compiled executor on a CUDA device: the same lowered steps and memory plan as the CPU
//! executor (`lower.rs`, `memory.rs`), run as kernels over one device arena per dtype.
//!
//! Fused groups become single generated kernels with their shapes compiled in; GEMMs go to
//! cuBLAS, accumulating into their addend where the plan says so; reductions, copies and
//! random fills use the kernel library; any other op runs its eager CUDA kernel and is copied
//! into place.
//!
//! **CUDA graphs.** After one plain run, an executor captures its steps once as a CUDA graph
//! over *stable* buffers (inputs, memos, arena, outputs), and later runs replay it: the first
//! node copies this call's inputs into the stable input buffers, the last copies the stable
//! outputs into fresh output buffers. Both are `stage` kernels whose copy tables are passed by
//! value and replaced before each launch (`cuGraphExecKernelNodeSetParams`), so a replay costs
//! three driver calls whatever the number of inputs and outputs. Nothing is allocated during
//! capture except through the caching allocator, whose blocks the graph then holds.

mod replay;

use crate::backend::cuda::{buffer, dense, ok, upload, view};
use crate::exec::lower::{BufRef, Lowered, ReduceKind, StepKind, ValRef};
use crate::exec::memory::dtype_slot;
use crate::ops::{Op, TensorType};
use crate::tensor::{Data, Storage, Tensor};
use crate::{DType, Device};
use janus_kernels::cuda::blas::{Operand, blas_layout, gemm};
use janus_kernels::cuda::library::ReduceOp;
use janus_kernels::cuda::ops::{self as ko, RngSource, View};
use janus_kernels::cuda::{CudaDevice, CudaError, DeviceBuffer};
use std::sync::{Arc, Mutex};

/// Plain runs before a capture is tried.
const WARMUP_RUNS: u32 = 1;

/// Base addresses of one run's buffers.
pub(super) struct Bases {
    pub(super) inputs: Vec<u64>,
    pub(super) consts: Vec<u64>,
    pub(super) memos: Vec<u64>,
    pub(super) arena: [u64; 4],
    pub(super) outs: Vec<u64>,
}

impl Bases {
    fn of(&self, v: &ValRef) -> u64 {
        match v.buf {
            BufRef::Input(k) => self.inputs[k],
            BufRef::Const(k) => self.consts[k],
            BufRef::Memo(k) => self.memos[k],
            BufRef::Arena(s) => self.arena[dtype_slot(v.dtype)] + (s * v.dtype.size_in_bytes()) as u64,
            BufRef::Output(k) => self.outs[k],
        }
    }

    fn view<'a>(&self, v: &'a ValRef) -> View<'a> {
        View { ptr: self.of(v), dtype: v.dtype, shape: &v.shape, strides: &v.strides, offset: v.offset }
    }

    /// `v`'s own (dense) region, for writing.
    fn dst(&self, v: &ValRef) -> u64 {
        self.of(v) + (v.offset * v.dtype.size_in_bytes()) as u64
    }
}

enum GraphState {
    Warmup(u32),
    Ready(Box<replay::Replay>),
    Off,
}

/// The CUDA side of an executor, made on its first CUDA run.
pub(crate) struct CudaPlan {
    pub(super) dev: Arc<CudaDevice>,
    pub(super) consts: Vec<Tensor>,
    graph: Mutex<GraphState>,
    /// Replays served from a captured graph, and plain runs.
    pub(crate) counts: Mutex<(u64, u64)>,
}

impl CudaPlan {
    pub(crate) fn new(l: &Lowered, ordinal: usize) -> CudaPlan {
        let dev = crate::backend::cuda::device("executor", ordinal);
        let consts = l
            .consts
            .iter()
            .map(|t| if t.device() == Device::Cpu { upload(t, ordinal) } else { t.clone() })
            .collect();
        CudaPlan { dev, consts, graph: Mutex::new(GraphState::Warmup(0)), counts: Mutex::new((0, 0)) }
    }

    /// Runs the lowered graph on `inputs` (any device; made dense on this one).
    pub(crate) fn run(&self, l: &Lowered, inputs: Vec<Tensor>) -> Vec<Tensor> {
        let n = self.dev.ordinal;
        let inputs: Vec<Tensor> =
            inputs.into_iter().map(|t| if t.device() == Device::Cuda(n) { dense(&t) } else { t }).collect();
        if let Ok(mut g) = self.graph.try_lock() {
            match &mut *g {
                GraphState::Ready(r) => {
                    if let Some(outs) = self.replay(l, r, &inputs) {
                        self.counts.lock().unwrap().0 += 1;
                        return outs;
                    }
                }
                GraphState::Warmup(k) if *k >= WARMUP_RUNS => {
                    *g = match self.capture(l, &inputs) {
                        Ok(r) => {
                            let outs = self.replay(l, &r, &inputs);
                            let state = GraphState::Ready(Box::new(r));
                            if let Some(outs) = outs {
                                *g = state;
                                self.counts.lock().unwrap().0 += 1;
                                return outs;
                            }
                            state
                        }
                        Err(why) => {
                            log::info!(target: "janus", "cuda executor: no CUDA graph ({why}); steps run one by one");
                            GraphState::Off
                        }
                    };
                }
                GraphState::Warmup(k) => *k += 1,
                GraphState::Off => {}
            }
        }
        self.counts.lock().unwrap().1 += 1;
        self.run_plain(l, &inputs)
    }

    /// Copies host inputs to the device (as they must be for kernels to read them).
    fn device_inputs(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        inputs
            .iter()
            .map(|t| if t.device() == Device::Cpu { upload(t, self.dev.ordinal) } else { t.clone() })
            .collect()
    }

    fn run_plain(&self, l: &Lowered, inputs: &[Tensor]) -> Vec<Tensor> {
        let n = self.dev.ordinal;
        let dev_inputs = self.device_inputs(inputs);
        let arena: Vec<DeviceBuffer> = l
            .plan
            .arena_len
            .iter()
            .zip([DType::F32, DType::F64, DType::I64, DType::Bool])
            .map(|(&len, d)| ok("executor", n, self.dev.alloc((len * d.size_in_bytes()).max(1))))
            .collect();
        let memos: Vec<DeviceBuffer> = l.memos.iter().map(|&(_, src)| self.alloc_val(l, src)).collect();
        let outs: Vec<Arc<DeviceBuffer>> = l
            .output_bufs
            .iter()
            .map(|&(d, len)| Arc::new(ok("executor", n, self.dev.alloc((len * d.size_in_bytes()).max(1)))))
            .collect();
        let bases = Bases {
            inputs: dev_inputs.iter().map(|t| view(t).start()).collect(),
            consts: self.consts.iter().map(|t| view(t).start()).collect(),
            memos: memos.iter().map(DeviceBuffer::ptr).collect(),
            arena: [arena[0].ptr(), arena[1].ptr(), arena[2].ptr(), arena[3].ptr()],
            outs: outs.iter().map(|b| b.ptr()).collect(),
        };
        ok("executor", n, self.run_steps(l, &bases));
        let memo_tensors: Vec<Tensor> = memos
            .into_iter()
            .zip(&l.memos)
            .map(|(b, &(_, src))| {
                let v = l.vals[src].as_ref().expect("memo sources have values");
                Tensor::from_parts(
                    v.shape.clone(),
                    v.dtype,
                    Some(dense_data(Arc::new(b), &v.shape)),
                    Default::default(),
                )
            })
            .collect();
        drop(arena); // stream order: later work reusing these blocks runs after the steps
        self.outputs(l, inputs, &outs, &memo_tensors)
    }

    fn alloc_val(&self, l: &Lowered, node: usize) -> DeviceBuffer {
        let v = l.vals[node].as_ref().expect("value");
        ok("executor", self.dev.ordinal, self.dev.alloc((v.shape.elems() * v.dtype.size_in_bytes()).max(1)))
    }

    /// The output tensors: views of output buffers, inputs, constants or memos.
    pub(super) fn outputs(
        &self,
        l: &Lowered,
        inputs: &[Tensor],
        outs: &[Arc<DeviceBuffer>],
        memos: &[Tensor],
    ) -> Vec<Tensor> {
        l.outputs
            .iter()
            .map(|&o| {
                let v = l.vals[o].as_ref().expect("outputs have values");
                let from = |t: &Tensor| {
                    let d = t.data();
                    d.view(v.strides.clone(), d.offset + v.offset)
                };
                let data = match v.buf {
                    BufRef::Output(k) => {
                        dense_data(outs[k].clone(), &v.shape).view(v.strides.clone(), v.offset)
                    }
                    BufRef::Input(k) => from(&inputs[k]),
                    BufRef::Const(k) => from(&self.consts[k]),
                    BufRef::Memo(k) => from(&memos[k]),
                    BufRef::Arena(_) => unreachable!("values reaching an output live in output buffers"),
                };
                Tensor::from_parts(v.shape.clone(), v.dtype, Some(data), Default::default())
            })
            .collect()
    }

    /// Enqueues every step (and the memo copies before them).
    // Long by design: one arm per step kind (the CPU's `run_step` has the same shape).
    pub(super) fn run_steps(&self, l: &Lowered, b: &Bases) -> Result<(), CudaError> {
        let dev = &self.dev;
        let val = |i: usize| l.vals[i].as_ref().expect("every node read by a step has a value");
        for (k, &(_, src)) in l.memos.iter().enumerate() {
            let v = val(src);
            let st = v.shape.contiguous_strides();
            let dst = View { ptr: b.memos[k], dtype: v.dtype, shape: &v.shape, strides: &st, offset: 0 };
            ko::copy(dev, b.view(v), dst)?;
        }
        for step in &l.steps {
            match &step.kind {
                StepKind::Fused { prog, inputs, outputs, reads, sums, .. } => {
                    debug_assert!(sums.is_empty(), "CUDA plans are lowered without fused sums");
                    let views: Vec<View> = inputs
                        .iter()
                        .zip(reads)
                        .map(|(&i, st)| View { strides: st, shape: &prog.shape, ..b.view(val(i)) })
                        .collect();
                    let outs: Vec<(u64, DType)> =
                        outputs.iter().map(|&o| (b.dst(val(o)), val(o).dtype)).collect();
                    ko::elementwise(dev, &prog.program, prog.dtype, &prog.shape, &views, &outs, true)?;
                }
                StepKind::MatMul { a, b: bb, c, out, relu } => {
                    // Only CPU lowering folds a relu into a product.
                    debug_assert!(!relu, "a CUDA plan's product has no relu epilogue");
                    self.matmul(b, val(*a), val(*bb), c.map(val), val(*out))?
                }
                StepKind::Reduce { kind, x, dims, out } => {
                    let vx = val(*x);
                    let shape = [dims.outer, dims.n, dims.inner];
                    let st = [dims.n * dims.inner, dims.inner, 1];
                    let xv = View {
                        ptr: b.of(vx),
                        dtype: vx.dtype,
                        shape: &shape,
                        strides: &st,
                        offset: vx.offset,
                    };
                    let o = b.dst(val(*out));
                    match kind {
                        ReduceKind::Softmax => ko::softmax(dev, false, xv, 1, o)?,
                        ReduceKind::LogSoftmax => ko::softmax(dev, true, xv, 1, o)?,
                        k => {
                            let op = match k {
                                ReduceKind::Sum => ReduceOp::Sum,
                                ReduceKind::Max => ReduceOp::Max,
                                ReduceKind::Min => ReduceOp::Min,
                                ReduceKind::ArgMax => ReduceOp::ArgMax,
                                ReduceKind::LogSumExp => ReduceOp::LogSumExp,
                                // Matched above; listed so that a new kind must choose.
                                ReduceKind::Softmax | ReduceKind::LogSoftmax => {
                                    unreachable!("softmaxes run above")
                                }
                            };
                            ko::reduce(dev, op, xv, &[1], o)?
                        }
                    }
                }
                StepKind::Cat { dim, parts, out } => {
                    let vo = val(*out);
                    let st = vo.shape.contiguous_strides();
                    let mut at = 0;
                    for &p in parts {
                        let vp = val(p);
                        let dst = View {
                            ptr: b.dst(vo),
                            dtype: vo.dtype,
                            shape: &vp.shape,
                            strides: &st,
                            offset: at * st[*dim],
                        };
                        ko::copy(dev, b.view(vp), dst)?;
                        at += vp.shape[*dim];
                    }
                }
                StepKind::Copy { x, out } => {
                    // A reshape of a strided value: `x` in row-major order into `out`'s dense
                    // region, viewed in `x`'s shape (the shapes differ; the counts agree).
                    let (vx, vo) = (val(*x), val(*out));
                    let st = vx.shape.contiguous_strides();
                    let dst =
                        View { ptr: b.dst(vo), dtype: vo.dtype, shape: &vx.shape, strides: &st, offset: 0 };
                    ko::copy(dev, b.view(vx), dst)?;
                }
                StepKind::RngState { rng, offset, out } => {
                    ko::rng_state(dev, b.dst(val(*rng)), *offset, b.dst(val(*out)))?
                }
                StepKind::Random { normal, state, out } => {
                    let vo = val(*out);
                    ko::random(
                        dev,
                        vo.dtype,
                        *normal,
                        vo.shape.elems(),
                        b.dst(vo),
                        RngSource::Device(b.dst(val(*state))),
                    )?
                }
                StepKind::Multinomial { probs, state, out } => {
                    let vp = val(*probs);
                    let cols = vp.shape.iter().last().copied().unwrap_or(1);
                    let rows = vp.shape.elems() / cols.max(1);
                    ko::multinomial(
                        dev,
                        vp.dtype,
                        rows,
                        cols,
                        b.dst(vp),
                        RngSource::Device(b.dst(val(*state))),
                        b.dst(val(*out)),
                    )?
                }
                StepKind::Generic { op, inputs, out } => {
                    self.generic(b, op, inputs.iter().map(|&i| val(i)).collect(), val(*out))?
                }
                StepKind::WindowPart { .. } => unreachable!("only the CPU backend splits steps"),
                StepKind::Loop { .. } => unreachable!("loop nodes are rolled from CPU recordings only"),
            }
        }
        Ok(())
    }

    fn matmul(
        &self,
        bases: &Bases,
        a: &ValRef,
        b: &ValRef,
        c: Option<&ValRef>,
        out: &ValRef,
    ) -> Result<(), CudaError> {
        let dev = &self.dev;
        let r = out.shape.rank();
        let (batch, m, n) = (if r == 3 { out.shape[0] } else { 1 }, out.shape[r - 2], out.shape[r - 1]);
        let k = a.shape[a.shape.rank() - 1];
        let dst = bases.dst(out);
        let in_place = c.is_some_and(|c| c.buf == out.buf);
        if let Some(c) = c.filter(|_| !in_place) {
            let st = crate::exec::cpu::steps::broadcast_strides(c, &out.shape);
            let dense_st = out.shape.contiguous_strides();
            let src = View { strides: &st, shape: &out.shape, ..bases.view(c) };
            ko::copy(
                dev,
                src,
                View { ptr: dst, dtype: out.dtype, shape: &out.shape, strides: &dense_st, offset: 0 },
            )?;
        }
        // Operands with no unit stride are copied to dense scratch (held by a graph in capture).
        let mut scratch: Vec<DeviceBuffer> = Vec::new();
        let mut operand = |v: &ValRef| -> Result<Operand, CudaError> {
            let rk = v.shape.rank();
            let size = v.dtype.size_in_bytes();
            let o = Operand::new(bases.of(v), size, v.layout().matrix());
            if blas_layout(v.shape[rk - 2], v.shape[rk - 1], &o).is_some() {
                return Ok(o);
            }
            let buf = dev.alloc(v.shape.elems() * size)?;
            let st = v.shape.contiguous_strides();
            ko::copy(
                dev,
                bases.view(v),
                View { ptr: buf.ptr(), dtype: v.dtype, shape: &v.shape, strides: &st, offset: 0 },
            )?;
            let o = Operand::new(buf.ptr(), size, crate::layout::Layout::new(&v.shape, &st, 0).matrix());
            scratch.push(buf);
            Ok(o)
        };
        let (oa, ob) = (operand(a)?, operand(b)?);
        gemm(dev, out.dtype, batch, (m, n, k), oa, ob, dst, c.is_some())
    }

    /// An op without a dedicated step: its eager CUDA kernel on views of the operands, then a
    /// copy into the step's region.
    fn generic(&self, b: &Bases, op: &Op, ins: Vec<&ValRef>, out: &ValRef) -> Result<(), CudaError> {
        let args: Vec<Tensor> = ins
            .iter()
            .map(|v| {
                let bytes = v.len * v.dtype.size_in_bytes();
                // SAFETY: the region belongs to this run's buffers, which outlive the step.
                let buf = unsafe { DeviceBuffer::borrowed(&self.dev, b.of(v), bytes) };
                let data = Data {
                    storage: Storage::Cuda(Arc::new(buf)),
                    strides: v.strides.clone(),
                    offset: v.offset,
                };
                Tensor::from_parts(v.shape.clone(), v.dtype, Some(data), Default::default())
            })
            .collect();
        let refs: Vec<&Tensor> = args.iter().collect();
        let ty = TensorType { shape: out.shape.clone(), dtype: out.dtype };
        let data = crate::backend::cuda::compute(op, &refs, &ty, self.dev.ordinal);
        let result = Tensor::from_parts(ty.shape.clone(), ty.dtype, Some(data), Default::default());
        let st = out.shape.contiguous_strides();
        ko::copy(
            &self.dev,
            view(&result),
            View { ptr: b.dst(out), dtype: out.dtype, shape: &out.shape, strides: &st, offset: 0 },
        )?;
        let _keep = buffer(&result); // freed after the copy is enqueued (stream order)
        Ok(())
    }
}

/// The kernels of the lowered plan's fused steps, as a CUDA run generates them.
pub(crate) fn fused_specs(l: &Lowered) -> Vec<janus_kernels::cuda::codegen::EwSpec> {
    let val = |i: usize| l.vals[i].as_ref().expect("every node read by a step has a value");
    l.steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Fused { prog, inputs, outputs, reads, .. } => {
                let types: Vec<(DType, &[usize])> =
                    inputs.iter().zip(reads).map(|(&i, st)| (val(i).dtype, &st[..])).collect();
                let outs: Vec<DType> = outputs.iter().map(|&o| val(o).dtype).collect();
                Some(ko::elementwise_spec(&prog.program, prog.dtype, &prog.shape, &types, &outs, true).0)
            }
            _ => None,
        })
        .collect()
}

fn dense_data(buf: Arc<DeviceBuffer>, shape: &crate::Shape) -> Data {
    Data { storage: Storage::Cuda(buf), strides: shape.contiguous_strides(), offset: 0 }
}
