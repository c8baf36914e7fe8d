//! Eager ops on CUDA tensors: each op of the table mapped onto `janus_kernels::cuda`.
//! Elementwise ops run as one-instruction register programs, through the same code generator
//! as fused groups; views (`permute`, `narrow`, `broadcast_to`, `reshape` of contiguous data)
//! share storage exactly as on the CPU.
//!
//! Kernels are enqueued asynchronously; host reads wait. A driver failure panics with the op,
//! the device and the CUDA error (out-of-memory named as such); a bad index found by a kernel
//! is reported at the next host read.

use crate::error::bail;
use crate::ops::conv::window;
use crate::ops::elementwise::broadcast_strides;
use crate::ops::{Op, TensorType};
use crate::shape::{Shape, Strides};
use crate::tensor::{Data, Storage, Tensor};
use crate::{DType, Device};
use janus_kernels::cuda::blas::{Operand, blas_layout, gemm};
use janus_kernels::cuda::library::ReduceOp;
use janus_kernels::cuda::ops::{self as ko, RngSource, View};
use janus_kernels::cuda::{CudaDevice, CudaError, DeviceBuffer};
use janus_kernels::fused::{FBinary, FUnary, Instr, Program};
use janus_kernels::{CpuBuffer, with_any_type};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// The device with this ordinal; panics naming the op when CUDA is unusable.
#[track_caller]
pub(crate) fn device(op: &str, ordinal: usize) -> Arc<CudaDevice> {
    match janus_kernels::cuda::device(ordinal) {
        Ok(d) => d,
        Err(e) => bail!(op, "cuda:{ordinal} is not available: {e}"),
    }
}

/// Unwraps a CUDA result, or panics with the op, the device and the error.
#[track_caller]
pub(crate) fn ok<T>(op: &str, ordinal: usize, r: Result<T, CudaError>) -> T {
    match r {
        Ok(v) => v,
        Err(e @ CudaError::OutOfMemory { .. }) => {
            let s = janus_kernels::cuda::device(ordinal).map(|d| d.memory_stats()).unwrap_or_default();
            bail!(
                op,
                "CUDA out of memory on cuda:{ordinal}: {e} ({} bytes allocated, {} reserved by janus)",
                s.allocated,
                s.reserved
            )
        }
        Err(e) => bail!(op, "CUDA error on cuda:{ordinal}: {e}"),
    }
}

/// The device buffer behind a CUDA tensor.
pub(crate) fn buffer(t: &Tensor) -> &Arc<DeviceBuffer> {
    match &t.data().storage {
        Storage::Cuda(b) => b,
        Storage::Cpu(_) => panic!("janus internal error: a CUDA kernel was given a CPU tensor"),
    }
}

/// The strided device view of a CUDA tensor.
pub(crate) fn view(t: &Tensor) -> View<'_> {
    let d = t.data();
    View { ptr: buffer(t).ptr(), dtype: t.dtype(), shape: t.sizes(), strides: &d.strides, offset: d.offset }
}

/// A fresh buffer for `numel` elements of `dtype`.
#[track_caller]
fn alloc(op: &str, dev: &Arc<CudaDevice>, dtype: DType, numel: usize) -> Arc<DeviceBuffer> {
    Arc::new(ok(op, dev.ordinal, dev.alloc((numel * dtype.size_in_bytes()).max(1))))
}

fn dense_data(buf: Arc<DeviceBuffer>, shape: &Shape) -> Data {
    Data { storage: Storage::Cuda(buf), strides: shape.contiguous_strides(), offset: 0 }
}

fn tensor(data: Data, shape: &Shape, dtype: DType) -> Tensor {
    Tensor::from_parts(shape.clone(), dtype, Some(data), Default::default())
}

/// A copy of a CPU tensor on `cuda:ordinal` (no autograd, not recorded).
#[track_caller]
pub(crate) fn upload(t: &Tensor, ordinal: usize) -> Tensor {
    let dev = device("to_device", ordinal);
    let bytes: Vec<u8> = with_any_type!(t.dtype(), T => {
        let v = t.contiguous_slice::<T>();
        // SAFETY: plain-old-data elements viewed as bytes, within the slice.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(&v[..])) }.to_vec()
    });
    let buf = Arc::new(ok("to_device", ordinal, dev.upload(&bytes)));
    tensor(dense_data(buf, t.shape_ref()), t.shape_ref(), t.dtype())
}

/// A contiguous CPU copy of a CUDA tensor; waits for the device.
#[track_caller]
pub(crate) fn download(t: &Tensor) -> Tensor {
    let Device::Cuda(n) = t.device() else { return t.clone() };
    let d = dense(t);
    let dev = buffer(&d).device().clone();
    let numel = t.elems();
    let host: CpuBuffer = with_any_type!(t.dtype(), T => {
        let mut v = vec![T::default(); numel];
        // SAFETY: the vector's bytes are plain-old-data elements, written whole by the copy.
        let bytes = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, numel * std::mem::size_of::<T>()) };
        ok("host read", n, dev.download(view(&d).start(), bytes));
        janus_kernels::buffer::Stored::wrap(v)
    });
    Tensor::from_buffer(host, t.shape_ref().clone())
}

/// `t` itself when dense, else a dense copy on its device.
#[track_caller]
pub(crate) fn dense(t: &Tensor) -> Tensor {
    if t.is_contiguous() {
        return t.clone();
    }
    let Device::Cuda(n) = t.device() else { unreachable!("dense() of a CUDA tensor") };
    let dev = buffer(t).device().clone();
    let out = alloc("contiguous", &dev, t.dtype(), t.elems());
    let st = t.shape_ref().contiguous_strides();
    let dst = View { ptr: out.ptr(), dtype: t.dtype(), shape: t.sizes(), strides: &st, offset: 0 };
    ok("contiguous", n, ko::copy(&dev, view(t), dst));
    tensor(dense_data(out, t.shape_ref()), t.shape_ref(), t.dtype())
}

/// The register type a program over `dtype` values computes in.
fn reg_for(d: DType) -> DType {
    match d {
        DType::F32 | DType::F64 => d,
        _ => DType::I64,
    }
}

fn program(instrs: Vec<Instr>, out: u16) -> Program {
    let num_regs = instrs.len() as u16;
    Program { instrs, num_regs, outputs: vec![out] }
}

/// Runs a program over `ty.shape` with `x` broadcast to it.
#[track_caller]
fn run_program(
    op: &Op,
    dev: &Arc<CudaDevice>,
    prog: &Program,
    reg: DType,
    x: &[&Tensor],
    ty: &TensorType,
) -> Data {
    let strides: Vec<Strides> = x.iter().map(|t| broadcast_strides(t, &ty.shape)).collect();
    let views: Vec<View> =
        x.iter().zip(&strides).map(|(t, st)| View { strides: st, shape: &ty.shape, ..view(t) }).collect();
    let out = alloc(op.name(), dev, ty.dtype, ty.shape.elems());
    ok(
        op.name(),
        dev.ordinal,
        ko::elementwise(dev, prog, reg, &ty.shape, &views, &[(out.ptr(), ty.dtype)], false),
    );
    dense_data(out, &ty.shape)
}

fn unary_program(f: FUnary) -> Program {
    program(vec![Instr::Load { dst: 0, input: 0 }, Instr::Unary { dst: 1, f, a: 0 }], 1)
}

/// The one-instruction register program (and its register type) that computes an elementwise
/// op on operands of these dtypes; `None` for ops that are not elementwise.
pub(crate) fn ew_program(op: &Op, dtypes: &[DType]) -> Option<(Program, DType)> {
    let load = |k: u16| Instr::Load { dst: k, input: k };
    Some(match op {
        Op::Unary(u) => (unary_program(FUnary::Op(*u)), reg_for(dtypes[0])),
        Op::Powf(p) => (unary_program(FUnary::Powf(p.exponent.get().to_bits())), reg_for(dtypes[0])),
        Op::Clamp(p) => {
            (unary_program(FUnary::Clamp(p.min.get().to_bits(), p.max.get().to_bits())), reg_for(dtypes[0]))
        }
        Op::Cast(c) => {
            let (s, d) = (dtypes[0], c.dtype);
            let reg = if s == DType::F64 || d == DType::F64 {
                DType::F64
            } else if s == DType::F32 || d == DType::F32 {
                DType::F32
            } else {
                DType::I64
            };
            (program(vec![load(0)], 0), reg)
        }
        Op::Binary(b) => (Program::binary(FBinary::Op(*b)), reg_for(dtypes[0])),
        Op::Compare(c) => (Program::binary(FBinary::Cmp(*c)), reg_for(dtypes[0])),
        Op::Where => (
            program(vec![load(0), load(1), load(2), Instr::Select { dst: 3, c: 0, a: 1, b: 2 }], 3),
            reg_for(dtypes[1]),
        ),
        _ => return None,
    })
}

/// Computes `op` on `cuda:ordinal`. Rank-0 CPU operands are copied to the device first.
#[track_caller]
// Long by design: one arm per op of the table, as in `Op::compute_cpu`.
pub(crate) fn compute(op: &Op, x: &[&Tensor], ty: &TensorType, ordinal: usize) -> Data {
    let dev = device(op.name(), ordinal);
    let moved: Vec<Tensor> = x
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let state = matches!((op, k), (Op::RandUniform(_) | Op::RandNormal(_), 0) | (Op::Multinomial, 1));
            if t.device() == Device::Cpu && !state && !matches!(op, Op::ToDevice(_)) {
                upload(t, ordinal)
            } else {
                (*t).clone()
            }
        })
        .collect();
    let x: Vec<&Tensor> = moved.iter().collect();
    let name = op.name();
    let out = |dtype: DType, numel: usize| alloc(name, &dev, dtype, numel);
    let done = |r: Result<(), CudaError>| ok(name, ordinal, r);
    match op {
        Op::Full(p) => {
            let b = out(p.dtype, p.shape.elems());
            done(ko::fill(&dev, b.ptr(), p.shape.elems(), p.dtype, p.value.get()));
            dense_data(b, &p.shape)
        }
        Op::Arange(p) => {
            let b = out(DType::I64, p.n);
            done(ko::arange(&dev, b.ptr(), p.n));
            dense_data(b, &ty.shape)
        }
        Op::Constant(c) => {
            upload(&Tensor::from_buffer((*c.data).clone(), c.shape.clone()), ordinal).data().clone()
        }
        Op::RandUniform(p) | Op::RandNormal(p) => {
            let src = rng_source(x[0]);
            let b = out(p.dtype, p.shape.elems());
            let normal = matches!(op, Op::RandNormal(_));
            done(ko::random(&dev, p.dtype, normal, p.shape.elems(), b.ptr(), src));
            dense_data(b, &p.shape)
        }
        Op::Multinomial => {
            let src = rng_source(x[1]);
            let probs = dense(x[0]);
            let cols = probs.sizes()[probs.rank() - 1];
            let rows = probs.elems() / cols;
            let b = out(DType::I64, rows);
            done(ko::multinomial(&dev, probs.dtype(), rows, cols, view(&probs).start(), src, b.ptr()));
            dense_data(b, &ty.shape)
        }
        Op::Unary(_)
        | Op::Powf(_)
        | Op::Clamp(_)
        | Op::Cast(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Where => {
            let dtypes: Vec<DType> = x.iter().map(|t| t.dtype()).collect();
            let (prog, reg) = ew_program(op, &dtypes).expect("an elementwise op");
            run_program(op, &dev, &prog, reg, &x, ty)
        }
        Op::Sum(p) => reduce(&dev, ReduceOp::Sum, x[0], &p.dims, ty),
        Op::Max(p) => reduce(&dev, ReduceOp::Max, x[0], &[p.dim], ty),
        Op::Min(p) => reduce(&dev, ReduceOp::Min, x[0], &[p.dim], ty),
        Op::ArgMax(p) => reduce(&dev, ReduceOp::ArgMax, x[0], &[p.dim], ty),
        Op::LogSumExp(p) => reduce(&dev, ReduceOp::LogSumExp, x[0], &[p.dim], ty),
        Op::Softmax(p) | Op::LogSoftmax(p) => {
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::softmax(&dev, matches!(op, Op::LogSoftmax(_)), view(x[0]), p.dim, b.ptr()));
            dense_data(b, &ty.shape)
        }
        Op::MatMul => matmul(&dev, x[0], x[1], None, ty),
        Op::Reshape(p) => {
            let d = dense(x[0]);
            let data = d.data();
            data.view(p.shape.contiguous_strides(), data.offset)
        }
        Op::Permute(_) | Op::Narrow(_) | Op::BroadcastTo(_) => op.compute_cpu(&x, ty),
        Op::Pad(p) => {
            let b = out(ty.dtype, ty.shape.elems());
            done(dev.zero(b.ptr(), ty.shape.elems() * ty.dtype.size_in_bytes()));
            place(&dev, &b, ty, p.dim, &[(x[0], p.before)]);
            dense_data(b, &ty.shape)
        }
        Op::Cat(p) => {
            let b = out(ty.dtype, ty.shape.elems());
            let mut at = 0;
            let parts: Vec<(&Tensor, usize)> = x
                .iter()
                .map(|t| {
                    at += t.sizes()[p.dim];
                    (*t, at - t.sizes()[p.dim])
                })
                .collect();
            place(&dev, &b, ty, p.dim, &parts);
            dense_data(b, &ty.shape)
        }
        Op::IndexSelect(p) => {
            let (src, idx) = (dense(x[0]), dense(x[1]));
            let d = janus_kernels::reduce::ReduceDims::new(src.sizes(), p.dim);
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::index_select(
                &dev,
                ty.dtype,
                (d.outer, d.n, d.inner),
                view(&src).start(),
                view(&idx).start(),
                idx.elems(),
                b.ptr(),
            ));
            dense_data(b, &ty.shape)
        }
        Op::IndexAdd(p) => {
            let (src, idx) = (dense(x[0]), dense(x[1]));
            let d = janus_kernels::reduce::ReduceDims::new(&ty.shape, p.dim);
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::index_add(
                &dev,
                ty.dtype,
                (d.outer, p.size, d.inner),
                view(&src).start(),
                view(&idx).start(),
                idx.elems(),
                b.ptr(),
            ));
            dense_data(b, &ty.shape)
        }
        Op::Gather(p) => {
            let (src, idx) = (dense(x[0]), dense(x[1]));
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::gather_scatter(
                &dev,
                false,
                ty.dtype,
                p.dim,
                src.sizes(),
                idx.sizes(),
                view(&src).start(),
                view(&idx).start(),
                b.ptr(),
            ));
            dense_data(b, &ty.shape)
        }
        Op::ScatterAdd(p) => {
            let (src, idx) = (dense(x[0]), dense(x[1]));
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::gather_scatter(
                &dev,
                true,
                ty.dtype,
                p.dim,
                &p.shape,
                idx.sizes(),
                view(&src).start(),
                view(&idx).start(),
                b.ptr(),
            ));
            dense_data(b, &ty.shape)
        }
        Op::OneHot(p) => {
            let idx = dense(x[0]);
            let b = out(p.dtype, ty.shape.elems());
            done(ko::one_hot(&dev, p.dtype, idx.elems(), p.classes, view(&idx).start(), b.ptr()));
            dense_data(b, &ty.shape)
        }
        Op::ToDevice(_) => unreachable!("transfers run in backend::compute"),
        Op::Detach | Op::FreshLeaf => x[0].data().clone(),
        // Sorting runs on the host (a device sort is future work): download, sort, upload.
        Op::ArgSort(p) => {
            let idx = crate::ops::sort::argsort(p, &download(x[0]));
            let host = Tensor::from_parts(ty.shape.clone(), ty.dtype, Some(idx), Default::default());
            upload(&host, ordinal).data().clone()
        }
        Op::Unfold(p) if windows_on_device() => {
            let xd = dense(x[0]);
            let d = xd.sizes();
            let g = window(&p.window, d[0], d[1], [d[2], d[3]]);
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::unfold(&dev, ty.dtype, &g, view(&xd).start(), p.pad_value.get(), b.ptr()));
            dense_data(b, &ty.shape)
        }
        Op::Fold(p) if windows_on_device() => {
            let cd = dense(x[0]);
            let d = cd.sizes();
            let g = window(&p.window, d[3], d[0], p.size);
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::fold(&dev, ty.dtype, &g, view(&cd).start(), b.ptr()));
            dense_data(b, &ty.shape)
        }
        Op::MaxPool2d(w) if windows_on_device() => {
            let xd = dense(x[0]);
            let d = xd.sizes();
            let g = window(w, d[0], d[1], [d[2], d[3]]);
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::max_pool(&dev, ty.dtype, &g, view(&xd).start(), b.ptr()));
            dense_data(b, &ty.shape)
        }
        Op::MaxPool2dBackward(w) if windows_on_device() => {
            let (xd, gy) = (dense(x[0]), dense(x[1]));
            let d = xd.sizes();
            let g = window(w, d[0], d[1], [d[2], d[3]]);
            let b = out(ty.dtype, ty.shape.elems());
            done(ko::max_pool_backward(&dev, ty.dtype, &g, view(&xd).start(), view(&gy).start(), b.ptr()));
            dense_data(b, &ty.shape)
        }
        // The sliding windows' host path (the default until a GPU run has checked the device
        // kernels above against it): download, compute on the CPU, upload, like sorting.
        Op::Unfold(_) | Op::Fold(_) | Op::MaxPool2d(_) | Op::MaxPool2dBackward(_) => {
            debug_assert!(runs_on_host(op));
            let host: Vec<Tensor> = x.iter().map(|t| download(t)).collect();
            let refs: Vec<&Tensor> = host.iter().collect();
            let data = op.compute_cpu(&refs, ty);
            let out = Tensor::from_parts(ty.shape.clone(), ty.dtype, Some(data), Default::default());
            upload(&out, ordinal).data().clone()
        }
    }
}

/// Whether `op`'s CUDA kernel is a round trip through the host (download, compute on the CPU,
/// upload): such a step cannot be captured in a CUDA graph, which would replay the upload from
/// a host buffer that no longer exists.
pub(crate) fn runs_on_host(op: &Op) -> bool {
    match op {
        Op::ArgSort(_) => true,
        Op::Unfold(_) | Op::Fold(_) | Op::MaxPool2d(_) | Op::MaxPool2dBackward(_) => !windows_on_device(),
        _ => false,
    }
}

/// 0: as `JANUS_CUDA_WINDOWS` says; 1: through the host; 2: device kernels.
static WINDOWS: AtomicU8 = AtomicU8::new(0);

/// Whether `unfold`, `fold` and max pooling run as device kernels on CUDA tensors
/// (`JANUS_CUDA_WINDOWS=device`, or [`set_windows_on_device`]) rather than through the host.
pub(crate) fn windows_on_device() -> bool {
    match WINDOWS.load(Ordering::Relaxed) {
        0 => crate::config::config().cuda_windows,
        v => v == 2,
    }
}

/// Sets where the sliding windows run (see [`windows_on_device`]).
pub(crate) fn set_windows_on_device(on: bool) {
    WINDOWS.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// Where a random op reads its stream position: the host state of eager code, or the device
/// state a compiled graph computed.
fn rng_source(state: &Tensor) -> RngSource {
    match state.device() {
        Device::Cpu => {
            let (key, counter) = crate::ops::source::stream_state(state);
            RngSource::Host { key, counter }
        }
        Device::Cuda(_) => RngSource::Device(view(&dense(state)).start()),
    }
}

/// Writes each `(part, start)` into `b` (dense, type `ty`) at `start` along `dim`.
#[track_caller]
fn place(dev: &Arc<CudaDevice>, b: &DeviceBuffer, ty: &TensorType, dim: usize, parts: &[(&Tensor, usize)]) {
    let st = ty.shape.contiguous_strides();
    for (t, start) in parts {
        let dst =
            View { ptr: b.ptr(), dtype: ty.dtype, shape: t.sizes(), strides: &st, offset: start * st[dim] };
        ok("cat", dev.ordinal, ko::copy(dev, view(t), dst));
    }
}

#[track_caller]
fn reduce(dev: &Arc<CudaDevice>, op: ReduceOp, x: &Tensor, dims: &[usize], ty: &TensorType) -> Data {
    let b = alloc("reduce", dev, ty.dtype, ty.shape.elems());
    ok("reduce", dev.ordinal, ko::reduce(dev, op, view(x), dims, b.ptr()));
    dense_data(b, &ty.shape)
}

/// The cuBLAS operand of a 2-D or 3-D tensor (a size-1 or missing batch broadcasts), or a dense
/// copy's when neither matrix stride is unit.
fn operand(t: &Tensor) -> (Operand, Option<Tensor>) {
    let make = |t: &Tensor| Operand::new(buffer(t).ptr(), t.dtype().size_in_bytes(), t.layout().matrix());
    let o = make(t);
    let r = t.rank();
    if blas_layout(t.sizes()[r - 2], t.sizes()[r - 1], &o).is_some() {
        return (o, None);
    }
    let d = dense(t);
    (make(&d), Some(d))
}

/// `a @ b` (plus `c` accumulated, when given: a dense tensor of the result's type).
#[track_caller]
pub(crate) fn matmul(
    dev: &Arc<CudaDevice>,
    a: &Tensor,
    b: &Tensor,
    c: Option<&Tensor>,
    ty: &TensorType,
) -> Data {
    let r = ty.shape.rank();
    let (batch, m, n) = (if r == 3 { ty.shape[0] } else { 1 }, ty.shape[r - 2], ty.shape[r - 1]);
    let k = a.sizes()[a.rank() - 1];
    let ((oa, _ka), (ob, _kb)) = (operand(a), operand(b));
    let out = alloc("matmul", dev, ty.dtype, ty.shape.elems());
    if let Some(c) = c {
        ok(
            "matmul",
            dev.ordinal,
            dev.copy_dtod(out.ptr(), view(c).start(), ty.shape.elems() * ty.dtype.size_in_bytes()),
        );
    }
    ok("matmul", dev.ordinal, gemm(dev, ty.dtype, batch, (m, n, k), oa, ob, out.ptr(), c.is_some()));
    dense_data(out, &ty.shape)
}
