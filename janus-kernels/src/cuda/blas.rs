//! Matrix products through cuBLAS (strided batched GEMM), with row-major operands mapped onto
//! column-major calls and transposes folded into the operation flags.
//!
//! TF32 stays off unless `JANUS_CUDA_TF32=1`, so `f32` products are full `f32` and agree with
//! the CPU within the usual summation-order rounding.

use super::device::{CudaDevice, DeviceBuffer};
use super::{CudaError, libs};
use crate::DType;
use cudarc::cublas::sys;
use std::sync::Arc;

/// A cuBLAS handle with its workspace (fixed, so graph capture never allocates).
pub(crate) struct Blas {
    handle: usize,
    workspace: DeviceBuffer,
    /// The stream the handle was last set to (0: none yet): set again only when it changes (a
    /// capture's stream), since `cublasSetStream` also drops the workspace.
    stream: usize,
}

// SAFETY: the handle is only used under the device's `blas` mutex.
unsafe impl Send for Blas {}

const WORKSPACE: usize = 32 << 20;

fn check(call: &'static str, s: sys::cublasStatus_t) -> Result<(), CudaError> {
    match s {
        sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(()),
        e => Err(CudaError::Blas(format!("{call}: {e:?}"))),
    }
}

/// Makes the next product set cuBLAS's stream and workspace again (called when a capture's
/// stream is destroyed: a stream created later may reuse its handle value).
pub(crate) fn forget_stream(dev: &CudaDevice) {
    if let Some(b) = dev.blas.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        b.stream = 0;
    }
}

impl Blas {
    fn new(dev: &Arc<CudaDevice>) -> Result<Blas, CudaError> {
        libs::preload();
        // SAFETY: only tries to load the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::Blas(format!("libcublas.so.13 not found: {}", libs::INSTALL_HINT)));
        }
        dev.bind()?;
        let workspace = dev.alloc(WORKSPACE)?;
        let mut h: sys::cublasHandle_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the workspace outlives the handle (both in `Blas`).
        unsafe {
            check("cublasCreate", sys::cublasCreate_v2(&mut h))?;
            check("cublasSetWorkspace", sys::cublasSetWorkspace_v2(h, workspace.ptr() as *mut _, WORKSPACE))?;
            let tf32 = std::env::var("JANUS_CUDA_TF32").is_ok_and(|v| v == "1");
            let mode = if tf32 {
                sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
            } else {
                sys::cublasMath_t::CUBLAS_DEFAULT_MATH
            };
            check("cublasSetMathMode", sys::cublasSetMathMode(h, mode))?;
        }
        Ok(Blas { handle: h as usize, workspace, stream: 0 })
    }
}

/// One operand: its device address (at the matrix start), row and column strides, and the
/// stride between batch entries (0 broadcasts), all in elements.
#[derive(Clone, Copy, Debug)]
pub struct Operand {
    /// Address of element (0, 0) of batch entry 0.
    pub ptr: u64,
    /// Elements between rows.
    pub row_stride: usize,
    /// Elements between columns.
    pub col_stride: usize,
    /// Elements between batch entries.
    pub batch_stride: usize,
}

impl Operand {
    /// The operand at `base` (the buffer's address) with layout `m`, elements of `elem` bytes.
    pub fn new(base: u64, elem: usize, m: crate::matmul::MatLayout) -> Operand {
        Operand {
            ptr: base + (m.offset * elem) as u64,
            row_stride: m.row_stride,
            col_stride: m.col_stride,
            batch_stride: m.batch_stride,
        }
    }
}

/// How cuBLAS reads a `rows x cols` row-major operand as the transpose it needs: `(op, ld)`,
/// or `None` when neither stride is unit (the caller copies it to a dense buffer first).
pub fn blas_layout(rows: usize, cols: usize, o: &Operand) -> Option<(bool, usize)> {
    if rows == 0 || cols == 0 {
        // An empty operand is never read (the product is empty, or zeros when `k == 0`), and
        // its strides may be anything, so no copy is needed either.
        return Some((false, cols.max(1)));
    }
    // The leading dimension must be a real stride: a broadcast (stride-0) row or column has
    // none, and goes through a dense copy instead.
    if (o.col_stride == 1 || cols == 1) && (rows == 1 || o.row_stride >= cols.max(1)) {
        Some((false, if rows == 1 { cols.max(1) } else { o.row_stride }))
    } else if (o.row_stride == 1 || rows == 1) && (cols == 1 || o.col_stride >= rows.max(1)) {
        Some((true, if cols == 1 { rows.max(1) } else { o.col_stride }))
    } else {
        None
    }
}

/// `out[b] = a[b] @ b[b] (+ out[b] when accumulate)` for `batch` products of `m x k` by
/// `k x n`; `out` is dense row-major. Operands must satisfy [`blas_layout`].
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    batch: usize,
    (m, n, k): (usize, usize, usize),
    a: Operand,
    b: Operand,
    out: u64,
    accumulate: bool,
) -> Result<(), CudaError> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // An empty sum: zeros, unless accumulating into existing values.
        return if accumulate { Ok(()) } else { dev.zero(out, batch * m * n * dtype.size_in_bytes()) };
    }
    let (ta, lda) = blas_layout(m, k, &a).expect("gemm: operand a needs a unit stride");
    let (tb, ldb) = blas_layout(k, n, &b).expect("gemm: operand b needs a unit stride");
    let mut guard = dev.blas.lock().unwrap();
    if guard.is_none() {
        *guard = Some(Blas::new(dev)?);
    }
    let h = guard.as_ref().unwrap().handle as sys::cublasHandle_t;
    dev.bind()?;
    let op =
        |t: bool| if t { sys::cublasOperation_t::CUBLAS_OP_T } else { sys::cublasOperation_t::CUBLAS_OP_N };
    let int =
        |v: usize| i32::try_from(v).map_err(|_| CudaError::Blas(format!("gemm dimension {v} exceeds i32")));
    let (mi, ni, ki) = (int(m)?, int(n)?, int(k)?);
    // Column-major: out^T (n x m) = b^T (n x k) @ a^T (k x m).
    let blas = guard.as_mut().unwrap();
    let stream = dev.stream() as usize;
    // SAFETY: the handle is used under its mutex, with its own workspace and the device's (or
    // the capture's) stream; the addresses and strides describe live device ranges (the
    // caller's contract), and alpha/beta are host scalars read at the call.
    unsafe {
        if blas.stream != stream {
            check("cublasSetStream", sys::cublasSetStream_v2(h, stream as sys::cudaStream_t))?;
            let ws = blas.workspace.ptr() as *mut _;
            check("cublasSetWorkspace", sys::cublasSetWorkspace_v2(h, ws, WORKSPACE))?;
            blas.stream = stream;
        }
        let beta_one = accumulate;
        match dtype {
            DType::F32 => {
                let (alpha, beta) = (1.0f32, if beta_one { 1.0f32 } else { 0.0 });
                check(
                    "cublasSgemmStridedBatched",
                    sys::cublasSgemmStridedBatched(
                        h,
                        op(tb),
                        op(ta),
                        ni,
                        mi,
                        ki,
                        &alpha,
                        b.ptr as *const f32,
                        int(ldb)?,
                        b.batch_stride as i64,
                        a.ptr as *const f32,
                        int(lda)?,
                        a.batch_stride as i64,
                        &beta,
                        out as *mut f32,
                        ni,
                        (m * n) as i64,
                        int(batch)?,
                    ),
                )
            }
            DType::F64 => {
                let (alpha, beta) = (1.0f64, if beta_one { 1.0f64 } else { 0.0 });
                check(
                    "cublasDgemmStridedBatched",
                    sys::cublasDgemmStridedBatched(
                        h,
                        op(tb),
                        op(ta),
                        ni,
                        mi,
                        ki,
                        &alpha,
                        b.ptr as *const f64,
                        int(ldb)?,
                        b.batch_stride as i64,
                        a.ptr as *const f64,
                        int(lda)?,
                        a.batch_stride as i64,
                        &beta,
                        out as *mut f64,
                        ni,
                        (m * n) as i64,
                        int(batch)?,
                    ),
                )
            }
            d => Err(CudaError::Blas(format!("gemm on {d} is not supported"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(row_stride: usize, col_stride: usize) -> Operand {
        Operand { ptr: 0, row_stride, col_stride, batch_stride: 0 }
    }

    #[test]
    fn layouts_need_a_real_leading_dimension() {
        assert_eq!(blas_layout(4, 8, &op(8, 1)), Some((false, 8)));
        assert_eq!(blas_layout(4, 8, &op(1, 4)), Some((true, 4)));
        assert_eq!(blas_layout(4, 8, &op(16, 1)), Some((false, 16))); // a narrowed view
        assert_eq!(blas_layout(1, 8, &op(0, 1)), Some((false, 8))); // one row: any row stride
        assert_eq!(blas_layout(4, 1, &op(1, 0)), Some((false, 1))); // one column
        // Broadcasts have no leading dimension: copy first.
        assert_eq!(blas_layout(1, 8, &op(0, 0)), None);
        assert_eq!(blas_layout(4, 8, &op(1, 0)), None);
        assert_eq!(blas_layout(4, 8, &op(0, 1)), None);
        assert_eq!(blas_layout(4, 1, &op(0, 0)), None);
        // Empty operands are never read: any strides will do (a dense [5, 0] has row stride 0).
        assert_eq!(blas_layout(5, 0, &op(0, 1)), Some((false, 1)));
        assert_eq!(blas_layout(0, 0, &op(0, 1)), Some((false, 1)));
        assert_eq!(blas_layout(0, 4, &op(0, 0)), Some((false, 4)));
    }
}
