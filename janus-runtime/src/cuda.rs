//! CUDA utilities for programs: memory statistics, synchronisation, and where the libraries
//! were found. Tensors move with [`crate::Tensor::to_device`]; [`crate::Device::best`] picks
//! CUDA when it is usable.
//!
//! The backend loads the driver, NVRTC and cuBLAS at run time. NVRTC and cuBLAS are found by
//! name, or in `JANUS_CUDA_LIB_DIR`, `CUDA_HOME`, `/usr/local/cuda`, or the `nvidia/*/lib`
//! folders of Python environments (the `nvidia-cuda-nvrtc` and `nvidia-cublas` wheels).

pub use janus_kernels::cuda::MemoryStats;

fn dev(ordinal: usize) -> Result<std::sync::Arc<janus_kernels::cuda::CudaDevice>, crate::DeviceError> {
    janus_kernels::cuda::device(ordinal).map_err(|e| crate::DeviceError::Unavailable {
        device: crate::Device::Cuda(ordinal),
        reason: e.to_string(),
    })
}

/// Allocated, reserved and peak bytes of the caching allocator on `cuda:0` (zeros when CUDA
/// is unavailable).
pub fn memory_stats() -> MemoryStats {
    memory_stats_of(0)
}

/// [`memory_stats`] of one device.
pub fn memory_stats_of(ordinal: usize) -> MemoryStats {
    dev(ordinal).map(|d| d.memory_stats()).unwrap_or_default()
}

/// Waits for all work enqueued on `cuda:ordinal`; reports a bad index that a kernel found.
pub fn synchronize(ordinal: usize) -> Result<(), crate::DeviceError> {
    dev(ordinal)?.synchronize().map_err(|e| crate::DeviceError::Unavailable {
        device: crate::Device::Cuda(ordinal),
        reason: e.to_string(),
    })
}

/// Returns the allocator's cached blocks on `cuda:ordinal` to the driver.
pub fn empty_cache(ordinal: usize) {
    if let Ok(d) = dev(ordinal) {
        d.empty_cache();
    }
}

/// A one-paragraph description: devices, their names and architectures, and where each
/// library was found (or why CUDA is unavailable).
pub fn info() -> String {
    let libs = janus_kernels::cuda::libs::describe();
    match janus_kernels::cuda::device::driver() {
        Err(e) => format!("CUDA unavailable: {e}; {libs}"),
        Ok(n) => {
            let devs: Vec<String> = (0..n)
                .map(|i| match janus_kernels::cuda::device(i) {
                    Ok(d) => format!(
                        "cuda:{i} {} (sm_{}{}, {} SMs)",
                        d.name, d.capability.0, d.capability.1, d.sm_count
                    ),
                    Err(e) => format!("cuda:{i} unusable: {e}"),
                })
                .collect();
            format!("{n} CUDA device(s): {}; {libs}", devs.join(", "))
        }
    }
}

/// The device address of a CUDA tensor's first element (PyTorch's `data_ptr()`), for passing
/// it to other CUDA code; `None` for a CPU tensor. The address is valid while the tensor lives.
pub fn device_ptr(t: &crate::Tensor) -> Option<u64> {
    (t.device() != crate::Device::Cpu).then(|| crate::backend::cuda::view(t).start())
}

/// Whether `unfold`, `fold` and max pooling (so convolutions and pooling) on CUDA tensors run
/// as device kernels (`true`) or through the host: download, compute on the CPU, upload
/// (`false`). The host path is the default, and plans that contain it are not captured as
/// CUDA graphs; the device kernels become the default once a GPU run has checked them against
/// it (`tests/cuda`). `JANUS_CUDA_WINDOWS=device` sets the same at start-up.
pub fn set_windows_on_device(on: bool) {
    crate::backend::cuda::set_windows_on_device(on);
}

/// Where the sliding windows run on CUDA tensors now (see [`set_windows_on_device`]).
pub fn windows_on_device() -> bool {
    crate::backend::cuda::windows_on_device()
}

/// NVRTC compilations in this process: `(compiled, read from the disk cache, ms compiling)`.
pub fn compile_stats() -> (u64, u64, u64) {
    let s = janus_kernels::cuda::nvrtc::stats();
    (s.compiled, s.from_disk, s.compile_ms)
}

/// Every elementwise kernel the eager CUDA path generates: each elementwise op on each dtype it
/// accepts, with contiguous, strided and broadcast-scalar operands. With [`crate::Compiled::cuda_kernels`]
/// this lets a test compile every generated kernel with NVRTC on a machine without a GPU.
pub fn eager_kernels() -> Vec<janus_kernels::cuda::codegen::EwSpec> {
    use crate::DType;
    use crate::DType::{Bool, F32, F64, I64};
    use crate::ops::{BinaryOp, Cast, Clamp, CmpOp, F64Bits, Op, Powf, UnaryOp};
    let mut cases: Vec<(Op, Vec<DType>)> = Vec::new();
    let floats = [F32, F64];
    #[rustfmt::skip]
    let float_unary = [
        UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Recip,
        UnaryOp::Sin, UnaryOp::Cos, UnaryOp::Tan, UnaryOp::Exp2, UnaryOp::Log2, UnaryOp::Log1p,
        UnaryOp::Expm1, UnaryOp::Erf, UnaryOp::Gelu, UnaryOp::Silu, UnaryOp::Softplus, UnaryOp::Floor,
        UnaryOp::Ceil, UnaryOp::Round, UnaryOp::Rsqrt,
    ];
    for u in float_unary {
        cases.extend(floats.map(|d| (Op::Unary(u), vec![d])));
    }
    for u in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Square, UnaryOp::Sign, UnaryOp::Relu] {
        cases.extend([F32, F64, I64].map(|d| (Op::Unary(u), vec![d])));
    }
    cases.push((Op::Unary(UnaryOp::Not), vec![Bool]));
    let p = Powf { exponent: F64Bits::new(2.5) };
    cases.extend(floats.map(|d| (Op::Powf(p.clone()), vec![d])));
    let c = Clamp { min: F64Bits::new(-1.0), max: F64Bits::new(2.0) };
    cases.extend([F32, F64, I64].map(|d| (Op::Clamp(c.clone()), vec![d])));
    for s in [F32, F64, I64, Bool] {
        for d in [F32, F64, I64, Bool] {
            cases.push((Op::Cast(Cast { dtype: d }), vec![s]));
        }
    }
    for b in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Maximum, BinaryOp::Minimum] {
        cases.extend([F32, F64, I64].map(|d| (Op::Binary(b), vec![d, d])));
    }
    for b in [BinaryOp::Div, BinaryOp::Atan2] {
        cases.extend(floats.map(|d| (Op::Binary(b), vec![d, d])));
    }
    cases.extend([BinaryOp::And, BinaryOp::Or].map(|b| (Op::Binary(b), vec![Bool, Bool])));
    for cmp in [CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le, CmpOp::Eq, CmpOp::Ne] {
        cases.extend([F32, F64, I64].map(|d| (Op::Compare(cmp), vec![d, d])));
    }
    cases.extend([CmpOp::Eq, CmpOp::Ne].map(|cmp| (Op::Compare(cmp), vec![Bool, Bool])));
    cases.extend([F32, F64, I64, Bool].map(|d| (Op::Where, vec![Bool, d, d])));
    let mut specs = Vec::new();
    // Operands over a [4, 6] result: dense, transposed (strided), broadcast scalar.
    let (dense, strided, scalar): (&[usize], &[usize], &[usize]) = (&[6, 1], &[1, 4], &[0, 0]);
    for (op, dtypes) in cases {
        let (prog, reg) = crate::backend::cuda::ew_program(&op, &dtypes).expect("elementwise");
        let out = match &op {
            Op::Compare(_) => DType::Bool,
            Op::Cast(c) => c.dtype,
            Op::Where => dtypes[1],
            _ => dtypes[0],
        };
        for pattern in [[dense, dense, dense], [strided, dense, scalar], [scalar, strided, dense]] {
            let ins: Vec<(DType, &[usize])> = dtypes.iter().zip(pattern).map(|(&d, s)| (d, s)).collect();
            specs
                .push(janus_kernels::cuda::ops::elementwise_spec(&prog, reg, &[4, 6], &ins, &[out], false).0);
        }
    }
    specs.sort_by_key(|s| s.kernel_name());
    specs.dedup_by_key(|s| s.kernel_name());
    specs
}
