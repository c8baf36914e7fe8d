//! The fixed CUDA kernels (everything that is not a generated elementwise program): strided
//! copies and fills, reductions and the softmax family, index kernels, the sliding windows
//! (`unfold`, `fold`, max pooling and its gradient), and the Philox stream.
//! One source, compiled once per device by NVRTC; [`Kernel`] names every entry point, so a test
//! can compile the source and check that each one exists.
//!
//! Reductions are deterministic: each output is reduced by one warp (or one thread) in a fixed
//! order. `index_add` and `scatter_add` accumulate with atomics, so the order in which
//! duplicate indices add up varies from run to run (as in PyTorch).
//!
//! Index kernels never read or write out of bounds: an index outside its range sets the
//! device's error word (read at the next synchronisation, see `device.rs`) and is skipped.

use crate::DType;

/// Error codes a kernel writes to the device's error word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum DeviceFault {
    /// `index_select` met an index outside `0..len`.
    IndexSelect = 1,
    /// `index_add` met an index outside `0..size`.
    IndexAdd = 2,
    /// `gather` met an index outside `0..len`.
    Gather = 3,
    /// `scatter_add` met an index outside `0..len`.
    ScatterAdd = 4,
    /// `one_hot` met a class outside `0..classes`.
    OneHot = 5,
    /// `multinomial` met a row of negative, non-finite or all-zero weights.
    Multinomial = 6,
}

impl DeviceFault {
    /// The fault with this code.
    pub fn from_code(c: u32) -> Option<Self> {
        Some(match c {
            1 => DeviceFault::IndexSelect,
            2 => DeviceFault::IndexAdd,
            3 => DeviceFault::Gather,
            4 => DeviceFault::ScatterAdd,
            5 => DeviceFault::OneHot,
            6 => DeviceFault::Multinomial,
            _ => return None,
        })
    }

    /// The op's name and what went wrong.
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            DeviceFault::IndexSelect => ("index_select", "an index is out of range"),
            DeviceFault::IndexAdd => ("index_add", "an index is out of range"),
            DeviceFault::Gather => ("gather", "an index is out of range"),
            DeviceFault::ScatterAdd => ("scatter_add", "an index is out of range"),
            DeviceFault::OneHot => ("one_hot", "a class index is out of range"),
            DeviceFault::Multinomial => ("multinomial", "a row has negative, non-finite or all-zero weights"),
        }
    }
}

/// Reductions with a library kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Maximum (NaN propagates).
    Max,
    /// Minimum (NaN propagates).
    Min,
    /// Index of the first maximum (NaN counts as the maximum).
    ArgMax,
    /// `log(sum(exp(x)))`, max-shifted.
    LogSumExp,
}

impl ReduceOp {
    fn code(self) -> u32 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Max => 1,
            ReduceOp::Min => 2,
            ReduceOp::ArgMax => 3,
            ReduceOp::LogSumExp => 4,
        }
    }
}

/// Every entry point of the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Strided copy of elements of this many bytes.
    CopyNd(usize),
    /// Fill with a bit pattern, elements of this many bytes.
    Fill(usize),
    /// `0..n` as i64.
    Arange,
    /// A reduction in a float type.
    Reduce(DType),
    /// Softmax or log-softmax in a float type.
    Softmax(DType),
    /// `index_select` of elements of this many bytes.
    IndexSelect(usize),
    /// `index_add` in a float type.
    IndexAdd(DType),
    /// `gather` of elements of this many bytes.
    Gather(usize),
    /// `scatter_add` in a float type.
    ScatterAdd(DType),
    /// `one_hot` producing this dtype.
    OneHot(DType),
    /// Uniform or normal fill in a float type.
    Random(DType),
    /// One category per row, weights in a float type.
    Multinomial(DType),
    /// `(key, counter + offset)` from a stream state.
    RngState,
    /// im2col over `[N, C, H, W]` images in a float type (`crate::conv::unfold`).
    Unfold(DType),
    /// col2im, `unfold`'s adjoint, in a float type (`crate::conv::fold`).
    Fold(DType),
    /// Max pooling in a float type (`crate::conv::max_pool`).
    MaxPool(DType),
    /// Max pooling's input gradient in a float type (`crate::conv::max_pool_backward`).
    MaxPoolBackward(DType),
    /// Copies listed in a table passed by value (grid y: the entry; grid x: blocks sharing its
    /// bytes); the table holds up to this many entries (graph replays update it in place of
    /// the copies' addresses).
    Stage(usize),
    /// The same copies, a second entry point, so a graph's input and output stages are told
    /// apart.
    StageOut(usize),
}

/// Entry counts of the `Stage` kernels' tables.
pub const STAGE_SIZES: [usize; 4] = [8, 32, 128, 512];

/// Words of inline data a stage table carries (values of small host inputs).
pub const STAGE_INLINE_WORDS: usize = 32;

fn t(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I64 => "i64",
        DType::Bool => "bool",
    }
}

impl Kernel {
    /// The entry point's name in the module.
    pub fn name(self) -> String {
        match self {
            Kernel::CopyNd(b) => format!("copy_nd_b{b}"),
            Kernel::Fill(b) => format!("fill_b{b}"),
            Kernel::Arange => "arange_i64".into(),
            Kernel::Reduce(d) => format!("reduce_{}", t(d)),
            Kernel::Softmax(d) => format!("softmax_{}", t(d)),
            Kernel::IndexSelect(b) => format!("index_select_b{b}"),
            Kernel::IndexAdd(d) => format!("index_add_{}", t(d)),
            Kernel::Gather(b) => format!("gather_b{b}"),
            Kernel::ScatterAdd(d) => format!("scatter_add_{}", t(d)),
            Kernel::OneHot(d) => format!("one_hot_{}", t(d)),
            Kernel::Random(d) => format!("rand_{}", t(d)),
            Kernel::Multinomial(d) => format!("multinomial_{}", t(d)),
            Kernel::RngState => "rng_state".into(),
            Kernel::Unfold(d) => format!("unfold_{}", t(d)),
            Kernel::Fold(d) => format!("fold_{}", t(d)),
            Kernel::MaxPool(d) => format!("max_pool_{}", t(d)),
            Kernel::MaxPoolBackward(d) => format!("max_pool_backward_{}", t(d)),
            Kernel::Stage(n) => format!("stage_{n}"),
            Kernel::StageOut(n) => format!("stageout_{n}"),
        }
    }

    /// Every entry point, for tests.
    pub fn all() -> Vec<Kernel> {
        let mut v = vec![Kernel::Arange, Kernel::RngState];
        v.extend(STAGE_SIZES.map(Kernel::Stage));
        v.extend(STAGE_SIZES.map(Kernel::StageOut));
        for b in [1, 4, 8] {
            v.extend([Kernel::CopyNd(b), Kernel::Fill(b), Kernel::IndexSelect(b), Kernel::Gather(b)]);
        }
        for d in [DType::F32, DType::F64] {
            v.extend([
                Kernel::Reduce(d),
                Kernel::Softmax(d),
                Kernel::IndexAdd(d),
                Kernel::ScatterAdd(d),
                Kernel::Random(d),
                Kernel::Multinomial(d),
                Kernel::Unfold(d),
                Kernel::Fold(d),
                Kernel::MaxPool(d),
                Kernel::MaxPoolBackward(d),
            ]);
        }
        for d in [DType::F32, DType::F64, DType::I64, DType::Bool] {
            v.push(Kernel::OneHot(d));
        }
        v
    }
}

/// The code a reduction kernel dispatches on.
pub fn reduce_code(op: ReduceOp) -> u32 {
    op.code()
}

/// Maximum rank of a strided operand of a library kernel.
pub const MAX_RANK: usize = 8;

/// The library's CUDA C source.
pub const SOURCE: &str = r#"
typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
#define MAXR 8
struct ND { i64 rank; i64 shape[MAXR]; i64 st[MAXR]; };

__device__ __forceinline__ i64 nd_off(const ND& d, i64 i) {
  if (d.rank == 1) return i * d.st[0]; // i < shape[0]: every caller's index is in range
  i64 off = 0;
  for (int k = (int)d.rank - 1; k >= 0; --k) { i64 len = d.shape[k]; i64 c = i % len; i /= len; off += c * d.st[k]; }
  return off;
}
__device__ __forceinline__ i64 gtid() { return (i64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ i64 gstride() { return (i64)gridDim.x * blockDim.x; }
__device__ __forceinline__ void fault(u32* err, u32 code) { atomicCAS(err, 0u, code); }

// ---- copies and fills --------------------------------------------------------------------
template<typename T> __device__ void copy_nd(i64 n, const T* src, T* dst, const ND& s, const ND& d) {
  for (i64 i = gtid(); i < n; i += gstride()) dst[nd_off(d, i)] = src[nd_off(s, i)];
}
template<typename T> __device__ void fill(i64 n, T* dst, T v) {
  for (i64 i = gtid(); i < n; i += gstride()) dst[i] = v;
}
extern "C" __global__ void copy_nd_b1(i64 n, const unsigned char* s, unsigned char* d, ND a, ND b) { copy_nd(n, s, d, a, b); }
extern "C" __global__ void copy_nd_b4(i64 n, const u32* s, u32* d, ND a, ND b) { copy_nd(n, s, d, a, b); }
extern "C" __global__ void copy_nd_b8(i64 n, const u64* s, u64* d, ND a, ND b) { copy_nd(n, s, d, a, b); }
extern "C" __global__ void fill_b1(i64 n, unsigned char* d, u64 v) { fill(n, d, (unsigned char)v); }
extern "C" __global__ void fill_b4(i64 n, u32* d, u64 v) { fill(n, d, (u32)v); }
extern "C" __global__ void fill_b8(i64 n, u64* d, u64 v) { fill(n, d, v); }
extern "C" __global__ void arange_i64(i64 n, i64* d) { for (i64 i = gtid(); i < n; i += gstride()) d[i] = i; }

// ---- reductions --------------------------------------------------------------------------
template<typename T> __device__ __forceinline__ T max_nan(T a, T b) { return (a != a || a > b) ? a : b; }
template<typename T> __device__ __forceinline__ T min_nan(T a, T b) { return (a != a || a < b) ? a : b; }
template<typename T> __device__ __forceinline__ T ninf();
template<> __device__ __forceinline__ float ninf<float>() { return __int_as_float(0xff800000u); }
template<> __device__ __forceinline__ double ninf<double>() { return __longlong_as_double((i64)0xfff0000000000000ull); }
template<typename T> __device__ __forceinline__ T shift_of(T m) { return (m == ninf<T>() || m == -ninf<T>()) ? (T)0 : m; }
__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float lg(float x) { return logf(x); }
__device__ __forceinline__ double lg(double x) { return log(x); }

// Argmax state: the first maximum, NaN counting as the maximum; at < 0 means empty.
template<typename T> __device__ __forceinline__ void am_take(T& best, i64& at, T x, i64 j) {
  bool take = at < 0 || (x != x && best == best) || (!(best != best) && x > best) || ((x == best || (x != x && best != best)) && j < at);
  if (take) { best = x; at = j; }
}

// One warp (per_thread = 0) or one thread (per_thread = 1) per unit. A unit reduces one chunk
// of `chunk` consecutive reduced elements of one output; with n_chunks > 1 (sums, max and min
// only) units write partials that a second launch reduces: at [c * n_out + o] for threads
// (neighbouring threads take neighbouring outputs) and [o * n_chunks + c] for warps. The split
// depends on the shape alone, so the result is the same bits on every run.
template<typename T> __device__ void reduce(u32 op, i64 n_out, i64 n_red, ND kept, ND red, const T* x, void* out, int per_thread, i64 n_chunks, i64 chunk) {
  const int lane = per_thread ? 0 : (threadIdx.x & 31);
  const int step = per_thread ? 1 : 32;
  const i64 first = per_thread ? gtid() : gtid() / 32;
  const i64 units = per_thread ? gstride() : gstride() / 32;
  for (i64 u = first; u < n_out * n_chunks; u += units) {
    const i64 o = per_thread ? u % n_out : u / n_chunks;
    const i64 c = per_thread ? u / n_out : u % n_chunks;
    const i64 lo = c * chunk, hi = min(n_red, lo + chunk);
    const T* base = x + nd_off(kept, o);
    T acc = (op == 2) ? -ninf<T>() : (op == 0 ? (T)0 : ninf<T>());
    i64 at = -1;
    for (i64 j = lo + lane; j < hi; j += step) {
      T v = base[nd_off(red, j)];
      if (op == 0) acc += v; else if (op == 1 || op == 4) acc = max_nan(acc, v); else if (op == 2) acc = min_nan(acc, v); else am_take(acc, at, v, j);
    }
    if (!per_thread) {
      for (int w = 16; w > 0; w >>= 1) {
        T other = __shfl_down_sync(0xffffffffu, acc, w);
        i64 oat = __shfl_down_sync(0xffffffffu, at, w);
        if (op == 0) acc += other; else if (op == 1 || op == 4) acc = max_nan(acc, other); else if (op == 2) acc = min_nan(acc, other);
        else if (oat >= 0) am_take(acc, at, other, oat);
      }
      acc = __shfl_sync(0xffffffffu, acc, 0);
      at = __shfl_sync(0xffffffffu, at, 0);
    }
    if (op == 4) {
      T sh = shift_of(acc), s = (T)0;
      for (i64 j = lane; j < n_red; j += step) s += ex(base[nd_off(red, j)] - sh);
      if (!per_thread) for (int w = 16; w > 0; w >>= 1) s += __shfl_down_sync(0xffffffffu, s, w);
      acc = sh + lg(s);
    }
    if (lane == 0) { if (op == 3) ((i64*)out)[u] = at < 0 ? 0 : at; else ((T*)out)[u] = acc; }
  }
}
extern "C" __global__ void reduce_f32(u32 op, i64 n_out, i64 n_red, ND kept, ND red, const float* x, void* out, int per_thread, i64 n_chunks, i64 chunk) { reduce<float>(op, n_out, n_red, kept, red, x, out, per_thread, n_chunks, chunk); }
extern "C" __global__ void reduce_f64(u32 op, i64 n_out, i64 n_red, ND kept, ND red, const double* x, void* out, int per_thread, i64 n_chunks, i64 chunk) { reduce<double>(op, n_out, n_red, kept, red, x, out, per_thread, n_chunks, chunk); }

// Softmax rows: `kin`/`kout` walk the rows in the input and output, `sin`/`sout` step along
// the axis of length n.
template<typename T> __device__ void softmax(int log_sm, i64 rows, i64 n, ND kin, ND kout, i64 sin, i64 sout, const T* x, T* y, int per_thread) {
  const int lane = per_thread ? 0 : (threadIdx.x & 31);
  const int step = per_thread ? 1 : 32;
  const i64 unit = per_thread ? gtid() : gtid() / 32;
  const i64 units = per_thread ? gstride() : gstride() / 32;
  for (i64 r = unit; r < rows; r += units) {
    const T* a = x + nd_off(kin, r);
    T* b = y + nd_off(kout, r);
    T m = ninf<T>();
    for (i64 j = lane; j < n; j += step) m = max_nan(m, a[j * sin]);
    if (!per_thread) { for (int w = 16; w > 0; w >>= 1) m = max_nan(m, __shfl_down_sync(0xffffffffu, m, w)); m = __shfl_sync(0xffffffffu, m, 0); }
    m = shift_of(m);
    T s = (T)0;
    for (i64 j = lane; j < n; j += step) s += ex(a[j * sin] - m);
    if (!per_thread) { for (int w = 16; w > 0; w >>= 1) s += __shfl_down_sync(0xffffffffu, s, w); s = __shfl_sync(0xffffffffu, s, 0); }
    if (log_sm) { T ls = lg(s); for (i64 j = lane; j < n; j += step) b[j * sout] = (a[j * sin] - m) - ls; }
    else { T inv = (T)1 / s; for (i64 j = lane; j < n; j += step) b[j * sout] = ex(a[j * sin] - m) * inv; }
  }
}
extern "C" __global__ void softmax_f32(int l, i64 rows, i64 n, ND kin, ND kout, i64 sin, i64 sout, const float* x, float* y, int pt) { softmax<float>(l, rows, n, kin, kout, sin, sout, x, y, pt); }
extern "C" __global__ void softmax_f64(int l, i64 rows, i64 n, ND kin, ND kout, i64 sin, i64 sout, const double* x, double* y, int pt) { softmax<double>(l, rows, n, kin, kout, sin, sout, x, y, pt); }

// ---- index kernels (dense operands) -------------------------------------------------------
template<typename T> __device__ void index_select(i64 outer, i64 len, i64 nidx, i64 inner, const T* x, const i64* idx, T* out, u32* err) {
  i64 total = outer * nidx * inner;
  for (i64 t = gtid(); t < total; t += gstride()) {
    i64 i = t % inner, j = (t / inner) % nidx, o = t / (inner * nidx);
    i64 id = idx[j];
    if (id < 0 || id >= len) { fault(err, 1); out[t] = (T)0; continue; }
    out[t] = x[(o * len + id) * inner + i];
  }
}
extern "C" __global__ void index_select_b1(i64 a, i64 b, i64 c, i64 d, const unsigned char* x, const i64* i, unsigned char* o, u32* e) { index_select(a, b, c, d, x, i, o, e); }
extern "C" __global__ void index_select_b4(i64 a, i64 b, i64 c, i64 d, const u32* x, const i64* i, u32* o, u32* e) { index_select(a, b, c, d, x, i, o, e); }
extern "C" __global__ void index_select_b8(i64 a, i64 b, i64 c, i64 d, const u64* x, const i64* i, u64* o, u32* e) { index_select(a, b, c, d, x, i, o, e); }

template<typename T> __device__ void index_add(i64 outer, i64 size, i64 nidx, i64 inner, const T* src, const i64* idx, T* out, u32* err) {
  i64 total = outer * nidx * inner;
  for (i64 t = gtid(); t < total; t += gstride()) {
    i64 i = t % inner, j = (t / inner) % nidx, o = t / (inner * nidx);
    i64 id = idx[j];
    if (id < 0 || id >= size) { fault(err, 2); continue; }
    atomicAdd(&out[(o * size + id) * inner + i], src[t]);
  }
}
extern "C" __global__ void index_add_f32(i64 a, i64 b, i64 c, i64 d, const float* s, const i64* i, float* o, u32* e) { index_add(a, b, c, d, s, i, o, e); }
extern "C" __global__ void index_add_f64(i64 a, i64 b, i64 c, i64 d, const double* s, const i64* i, double* o, u32* e) { index_add(a, b, c, d, s, i, o, e); }

// gather/scatter_add: `p` walks the index tensor's shape; `xs` holds the dense strides of the
// indexed tensor (with `len` along `dim`), `ps` the dense strides of the index tensor.
template<typename T> __device__ void gather(i64 n, int dim, i64 len, ND ps, ND xs, const T* x, const i64* idx, T* out, u32* err) {
  for (i64 t = gtid(); t < n; t += gstride()) {
    i64 rem = t, off = 0, id = idx[t];
    for (int k = (int)ps.rank - 1; k >= 0; --k) { i64 c = rem % ps.shape[k]; rem /= ps.shape[k]; off += (k == dim ? 0 : c) * xs.st[k]; }
    if (id < 0 || id >= len) { fault(err, 3); out[t] = (T)0; continue; }
    out[t] = x[off + id * xs.st[dim]];
  }
}
extern "C" __global__ void gather_b1(i64 n, int d, i64 l, ND p, ND s, const unsigned char* x, const i64* i, unsigned char* o, u32* e) { gather(n, d, l, p, s, x, i, o, e); }
extern "C" __global__ void gather_b4(i64 n, int d, i64 l, ND p, ND s, const u32* x, const i64* i, u32* o, u32* e) { gather(n, d, l, p, s, x, i, o, e); }
extern "C" __global__ void gather_b8(i64 n, int d, i64 l, ND p, ND s, const u64* x, const i64* i, u64* o, u32* e) { gather(n, d, l, p, s, x, i, o, e); }

template<typename T> __device__ void scatter_add(i64 n, int dim, i64 len, ND ps, ND xs, const T* src, const i64* idx, T* out, u32* err) {
  for (i64 t = gtid(); t < n; t += gstride()) {
    i64 rem = t, off = 0, id = idx[t];
    for (int k = (int)ps.rank - 1; k >= 0; --k) { i64 c = rem % ps.shape[k]; rem /= ps.shape[k]; off += (k == dim ? 0 : c) * xs.st[k]; }
    if (id < 0 || id >= len) { fault(err, 4); continue; }
    atomicAdd(&out[off + id * xs.st[dim]], src[t]);
  }
}
extern "C" __global__ void scatter_add_f32(i64 n, int d, i64 l, ND p, ND s, const float* x, const i64* i, float* o, u32* e) { scatter_add(n, d, l, p, s, x, i, o, e); }
extern "C" __global__ void scatter_add_f64(i64 n, int d, i64 l, ND p, ND s, const double* x, const i64* i, double* o, u32* e) { scatter_add(n, d, l, p, s, x, i, o, e); }

template<typename T> __device__ void one_hot(i64 n, i64 classes, const i64* idx, T* out, u32* err) {
  for (i64 t = gtid(); t < n * classes; t += gstride()) {
    i64 r = t / classes, c = t % classes, id = idx[r];
    if (c == 0 && (id < 0 || id >= classes)) fault(err, 5);
    out[t] = (T)(id == c ? 1 : 0);
  }
}
extern "C" __global__ void one_hot_f32(i64 n, i64 c, const i64* i, float* o, u32* e) { one_hot(n, c, i, o, e); }
extern "C" __global__ void one_hot_f64(i64 n, i64 c, const i64* i, double* o, u32* e) { one_hot(n, c, i, o, e); }
extern "C" __global__ void one_hot_i64(i64 n, i64 c, const i64* i, i64* o, u32* e) { one_hot(n, c, i, o, e); }
extern "C" __global__ void one_hot_bool(i64 n, i64 c, const i64* i, unsigned char* o, u32* e) { one_hot(n, c, i, o, e); }

// ---- Philox 4x32-10 (the CPU's janus_kernels::philox, word for word) ------------------------
__device__ __forceinline__ uint4 philox(u64 key, u64 ctr) {
  u32 c0 = (u32)ctr, c1 = (u32)(ctr >> 32), c2 = 0, c3 = 0, k0 = (u32)key, k1 = (u32)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  return make_uint4(c0, c1, c2, c3);
}
__device__ __forceinline__ double u53(u32 hi, u32 lo) { return (double)((((u64)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0); }
#define TWO_PI 6.283185307179586

__device__ __forceinline__ void rng_read(const i64* state, u64& key, u64& ctr) { if (state) { key = (u64)state[0]; ctr = (u64)state[1]; } }

extern "C" __global__ void rand_f32(i64 n, float* out, const i64* state, u64 key, u64 ctr, int normal) {
  rng_read(state, key, ctr);
  for (i64 b = gtid(); b * 4 < n; b += gstride()) {
    uint4 w = philox(key, ctr + (u64)b);
    u32 ws[4] = {w.x, w.y, w.z, w.w};
    float z[4];
    if (normal) {
      for (int p = 0; p < 2; ++p) {
        double u1 = (double)((ws[2 * p] >> 8) + 1) * (1.0 / 16777216.0);
        double u2 = (double)(ws[2 * p + 1] >> 8) * (1.0 / 16777216.0);
        double r = sqrt(-2.0 * log(u1));
        z[2 * p] = (float)(r * cos(TWO_PI * u2));
        z[2 * p + 1] = (float)(r * sin(TWO_PI * u2));
      }
    } else {
      for (int k = 0; k < 4; ++k) z[k] = (float)(ws[k] >> 8) * (1.0f / 16777216.0f);
    }
    for (int k = 0; k < 4 && b * 4 + k < n; ++k) out[b * 4 + k] = z[k];
  }
}
extern "C" __global__ void rand_f64(i64 n, double* out, const i64* state, u64 key, u64 ctr, int normal) {
  rng_read(state, key, ctr);
  for (i64 b = gtid(); b * 2 < n; b += gstride()) {
    uint4 w = philox(key, ctr + (u64)b);
    double z[2];
    if (normal) {
      double u1 = 1.0 - u53(w.x, w.y), u2 = u53(w.z, w.w);
      double r = sqrt(-2.0 * log(u1));
      z[0] = r * cos(TWO_PI * u2); z[1] = r * sin(TWO_PI * u2);
    } else {
      z[0] = u53(w.x, w.y); z[1] = u53(w.z, w.w);
    }
    for (int k = 0; k < 2 && b * 2 + k < n; ++k) out[b * 2 + k] = z[k];
  }
}

// One uniform per row (element r of a uniform fill), then the CPU's scan in f64.
template<typename T, int PER> __device__ void multinomial(i64 rows, i64 cols, const T* probs, const i64* state, u64 key, u64 ctr, i64* out, u32* err) {
  rng_read(state, key, ctr);
  for (i64 r = gtid(); r < rows; r += gstride()) {
    uint4 w = philox(key, ctr + (u64)(r / PER));
    double u;
    if (PER == 4) { u32 ws[4] = {w.x, w.y, w.z, w.w}; u = (double)((float)(ws[r % 4] >> 8) * (1.0f / 16777216.0f)); }
    else { u = (r % 2 == 0) ? u53(w.x, w.y) : u53(w.z, w.w); }
    const T* row = probs + r * cols;
    double total = 0.0; bool bad = false;
    for (i64 j = 0; j < cols; ++j) { double p = (double)row[j]; if (!(p >= 0.0 && p <= 1.7976931348623157e308)) bad = true; total += p; }
    if (bad || !(total > 0.0)) { fault(err, 6); out[r] = 0; continue; }
    double target = u * total, acc = 0.0; i64 pick = 0;
    for (i64 j = 0; j < cols; ++j) { double p = (double)row[j]; acc += p; if (p > 0.0) { pick = j; if (acc > target) break; } }
    out[r] = pick;
  }
}
extern "C" __global__ void multinomial_f32(i64 r, i64 c, const float* p, const i64* s, u64 k, u64 ct, i64* o, u32* e) { multinomial<float, 4>(r, c, p, s, k, ct, o, e); }
extern "C" __global__ void multinomial_f64(i64 r, i64 c, const double* p, const i64* s, u64 k, u64 ct, i64* o, u32* e) { multinomial<double, 2>(r, c, p, s, k, ct, o, e); }

// ---- staging copies for graph replays ---------------------------------------------------
// Entry: copy `bytes` from `src` to `dst`; `src == 0` copies from the table's inline words,
// starting at word `inl`. Grid: y picks the entry, the x blocks split its bytes (a grid-stride
// loop), in 16-byte moves where both ends and the length allow, else 4-byte or single bytes.
struct Entry { u64 dst; u64 src; u64 bytes; u64 inl; };
template<int N> struct Table { u64 n; u64 inl[32]; Entry e[N]; };
template<int N> __device__ void stage(const Table<N>& t) {
  if (blockIdx.y >= t.n) return;
  const Entry e = t.e[blockIdx.y];
  const unsigned char* s = e.src ? (const unsigned char*)e.src : (const unsigned char*)&t.inl[e.inl];
  unsigned char* d = (unsigned char*)e.dst;
  const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x, step = (u64)gridDim.x * blockDim.x;
  const u64 align = e.dst | (u64)s | e.bytes;
  if (e.src && (align & 15) == 0) {
    for (u64 i = first; i < e.bytes / 16; i += step) ((uint4*)d)[i] = ((const uint4*)s)[i];
  } else if ((align & 3) == 0) {
    for (u64 i = first; i < e.bytes / 4; i += step) ((u32*)d)[i] = ((const u32*)s)[i];
  } else {
    for (u64 i = first; i < e.bytes; i += step) d[i] = s[i];
  }
}
extern "C" __global__ void stage_8(const Table<8> t) { stage(t); }
extern "C" __global__ void stage_32(const Table<32> t) { stage(t); }
extern "C" __global__ void stage_128(const Table<128> t) { stage(t); }
extern "C" __global__ void stage_512(const Table<512> t) { stage(t); }
extern "C" __global__ void stageout_8(const Table<8> t) { stage(t); }
extern "C" __global__ void stageout_32(const Table<32> t) { stage(t); }
extern "C" __global__ void stageout_128(const Table<128> t) { stage(t); }
extern "C" __global__ void stageout_512(const Table<512> t) { stage(t); }

// ---- sliding windows over [N, C, H, W] images ----------------------------------------------
// The geometry, tie rules and summation orders of `crate::conv`, so results match the CPU bit
// for bit: `fold` sums each pixel's taps in (i, j) order from zero, and max pooling's gradient
// sums each pixel's windows in output order; both gather (one thread per result), so neither
// needs atomics and both are deterministic.
struct Win { i64 n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow; };
// col[c, i, j, b, oh, ow] = x[b, c, oh*sh + i*dh - ph, ow*sw + j*dw - pw], or pad outside.
template<typename T> __device__ void unfold(const Win g, const T* x, T pad, T* col) {
  const i64 total = g.c * g.kh * g.kw * g.n * g.oh * g.ow;
  for (i64 e = gtid(); e < total; e += gstride()) {
    i64 r = e;
    const i64 ow = r % g.ow; r /= g.ow;
    const i64 oh = r % g.oh; r /= g.oh;
    const i64 b = r % g.n; r /= g.n;
    const i64 j = r % g.kw; r /= g.kw;
    const i64 i = r % g.kh, c = r / g.kh;
    const i64 ih = oh * g.sh + i * g.dh - g.ph, iw = ow * g.sw + j * g.dw - g.pw;
    col[e] = (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) ? x[((b * g.c + c) * g.h + ih) * g.w + iw] : pad;
  }
}
template<typename T> __device__ void fold(const Win g, const T* col, T* x) {
  const i64 total = g.n * g.c * g.h * g.w;
  for (i64 e = gtid(); e < total; e += gstride()) {
    i64 r = e;
    const i64 z = r % g.w; r /= g.w;
    const i64 y = r % g.h; r /= g.h;
    const i64 c = r % g.c, b = r / g.c;
    T s = (T)0;
    for (i64 i = 0; i < g.kh; ++i) {
      const i64 py = y + g.ph - i * g.dh;
      if (py < 0 || py % g.sh != 0 || py / g.sh >= g.oh) continue;
      for (i64 j = 0; j < g.kw; ++j) {
        const i64 pz = z + g.pw - j * g.dw;
        if (pz < 0 || pz % g.sw != 0 || pz / g.sw >= g.ow) continue;
        s += col[((((c * g.kh + i) * g.kw + j) * g.n + b) * g.oh + py / g.sh) * g.ow + pz / g.sw];
      }
    }
    x[e] = s;
  }
}
// The window (oh, ow)'s first maximal tap in row-major tap order (a NaN beats any number;
// padding reads -inf): its index in the plane, or -1 when padding won; its value in `best`.
template<typename T> __device__ i64 pool_winner(const Win& g, const T* plane, i64 oh, i64 ow, T& best) {
  i64 at = -1;
  bool first = true;
  for (i64 i = 0; i < g.kh; ++i) {
    const i64 ih = oh * g.sh + i * g.dh - g.ph;
    for (i64 j = 0; j < g.kw; ++j) {
      const i64 iw = ow * g.sw + j * g.dw - g.pw;
      const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
      const T v = inside ? plane[ih * g.w + iw] : ninf<T>();
      if (first || v > best || (v != v && best == best)) { best = v; at = inside ? ih * g.w + iw : -1; first = false; }
    }
  }
  return at;
}
template<typename T> __device__ void max_pool(const Win g, const T* x, T* out) {
  const i64 total = g.n * g.c * g.oh * g.ow;
  for (i64 e = gtid(); e < total; e += gstride()) {
    const i64 ow = e % g.ow, oh = (e / g.ow) % g.oh, p = e / (g.ow * g.oh);
    T best = ninf<T>();
    pool_winner(g, x + p * g.h * g.w, oh, ow, best);
    out[e] = best;
  }
}
// dx[b, c, y, z]: the sum, in output order, of gy over the windows that (y, z) wins.
template<typename T> __device__ void max_pool_backward(const Win g, const T* x, const T* gy, T* dx) {
  const i64 total = g.n * g.c * g.h * g.w;
  for (i64 e = gtid(); e < total; e += gstride()) {
    const i64 z = e % g.w, y = (e / g.w) % g.h, p = e / (g.w * g.h);
    const T* plane = x + p * g.h * g.w;
    const i64 lo_y = y + g.ph - (g.kh - 1) * g.dh, lo_z = z + g.pw - (g.kw - 1) * g.dw;
    const i64 oh0 = lo_y <= 0 ? 0 : (lo_y + g.sh - 1) / g.sh, ow0 = lo_z <= 0 ? 0 : (lo_z + g.sw - 1) / g.sw;
    const i64 oh1 = min((y + g.ph) / g.sh, g.oh - 1), ow1 = min((z + g.pw) / g.sw, g.ow - 1);
    T s = (T)0;
    for (i64 oh = oh0; oh <= oh1; ++oh) {
      for (i64 ow = ow0; ow <= ow1; ++ow) {
        T best = ninf<T>();
        if (pool_winner(g, plane, oh, ow, best) == y * g.w + z) s += gy[(p * g.oh + oh) * g.ow + ow];
      }
    }
    dx[e] = s;
  }
}
extern "C" __global__ void unfold_f32(Win g, const float* x, float pad, float* col) { unfold(g, x, pad, col); }
extern "C" __global__ void unfold_f64(Win g, const double* x, double pad, double* col) { unfold(g, x, pad, col); }
extern "C" __global__ void fold_f32(Win g, const float* col, float* x) { fold(g, col, x); }
extern "C" __global__ void fold_f64(Win g, const double* col, double* x) { fold(g, col, x); }
extern "C" __global__ void max_pool_f32(Win g, const float* x, float* o) { max_pool(g, x, o); }
extern "C" __global__ void max_pool_f64(Win g, const double* x, double* o) { max_pool(g, x, o); }
extern "C" __global__ void max_pool_backward_f32(Win g, const float* x, const float* gy, float* dx) { max_pool_backward(g, x, gy, dx); }
extern "C" __global__ void max_pool_backward_f64(Win g, const double* x, const double* gy, double* dx) { max_pool_backward(g, x, gy, dx); }

extern "C" __global__ void rng_state(const i64* in, i64* out, u64 offset) {
  if (gtid() == 0) { out[0] = in[0]; out[1] = (i64)((u64)in[1] + offset); }
}
"#;
