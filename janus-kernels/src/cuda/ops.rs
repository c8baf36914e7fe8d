//! Launching kernels on device views: the CUDA counterpart of the CPU kernel modules. Each
//! function takes strided views and destination addresses and enqueues work. Only a split
//! reduction allocates (its partials, from the caching allocator, whose blocks a CUDA graph
//! capture holds), so they all run unchanged inside a capture.

use super::CudaError;
use super::codegen::{Access, Baked, EwSpec, canonical_program, const_words, plan_access};
use super::device::CudaDevice;
use super::launch::{Args, grid_for, grid_for_warps, nd_words};
use super::library::{Kernel, ReduceOp, reduce_code};
use crate::DType;
use crate::conv::Window;
use crate::fused::Program;
use std::sync::Arc;

/// A strided view of device memory, in elements of `dtype`.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The allocation's address.
    pub ptr: u64,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
    /// Strides (elements).
    pub strides: &'a [usize],
    /// Offset of element 0 (elements).
    pub offset: usize,
}

impl View<'_> {
    /// Address of element 0.
    pub fn start(&self) -> u64 {
        self.ptr + (self.offset * self.dtype.size_in_bytes()) as u64
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the view is dense row-major.
    pub fn is_dense(&self) -> bool {
        let mut expect = 1;
        for (&len, &st) in self.shape.iter().zip(self.strides).rev() {
            if len != 1 && st != expect {
                return false;
            }
            expect *= len;
        }
        true
    }
}

/// The kernel that runs `program` over `shape` for inputs of these dtypes and strides (already
/// broadcast to `shape`), with the merged shape and per-input strides its launch takes.
pub fn elementwise_spec(
    program: &Program,
    reg: DType,
    shape: &[usize],
    inputs: &[(DType, &[usize])],
    outputs: &[DType],
    bake: bool,
) -> (EwSpec, Vec<usize>, Vec<Vec<usize>>) {
    let n: usize = shape.iter().product();
    let strides: Vec<&[usize]> = inputs.iter().map(|v| v.1).collect();
    let (merged, per_input, access) = plan_access(shape, &strides);
    let max_off = per_input
        .iter()
        .map(|st| st.iter().zip(&merged).map(|(&s, &l)| s * (l.max(1) - 1)).sum::<usize>())
        .max()
        .unwrap_or(0);
    let spec = EwSpec {
        program: canonical_program(program),
        reg,
        inputs: inputs.iter().zip(&access).map(|(v, &a)| (v.0, a)).collect(),
        outputs: outputs.to_vec(),
        rank: if access.contains(&Access::Strided) { merged.len() } else { 0 },
        wide: n >= (1 << 31) || max_off >= (1 << 31),
        baked: (bake && access.contains(&Access::Strided))
            .then(|| Baked::canonical(&merged, &per_input, &access)),
    };
    (spec, merged, per_input)
}

/// Runs `program` over `shape`: `inputs` broadcast to it (strides already broadcast), outputs
/// dense. With `bake`, shapes and strides are compiled into the kernel.
pub fn elementwise(
    dev: &Arc<CudaDevice>,
    program: &Program,
    reg: DType,
    shape: &[usize],
    inputs: &[View],
    outputs: &[(u64, DType)],
    bake: bool,
) -> Result<(), CudaError> {
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let types: Vec<(DType, &[usize])> = inputs.iter().map(|v| (v.dtype, v.strides)).collect();
    let out_types: Vec<DType> = outputs.iter().map(|o| o.1).collect();
    let (spec, merged, per_input) = elementwise_spec(program, reg, shape, &types, &out_types, bake);
    let f = dev.ew_function(&spec)?;
    let ins: Vec<u64> = inputs.iter().map(View::start).collect();
    let outs: Vec<u64> = outputs.iter().map(|o| o.0).collect();
    let words = spec.params(n, &merged, &per_input, &ins, &outs, &const_words(program, reg));
    // SAFETY: the parameter words follow the generated `struct P`; the views and outputs
    // cover `n` elements (the caller's contract).
    unsafe { dev.launch(f, grid_for(n, dev.sm_count), Args::new().words(words)) }
}

fn elem_bytes(d: DType) -> usize {
    d.size_in_bytes()
}

/// Copies a view into another of the same shape (`dst` strided too).
pub fn copy(dev: &Arc<CudaDevice>, src: View, dst: View) -> Result<(), CudaError> {
    let n = src.numel();
    if n == 0 {
        return Ok(());
    }
    if src.is_dense() && dst.is_dense() {
        return dev.copy_dtod(dst.start(), src.start(), n * elem_bytes(src.dtype));
    }
    let (merged, st, _) = plan_access(src.shape, &[src.strides, dst.strides]);
    let f = dev.library_function(Kernel::CopyNd(elem_bytes(src.dtype)))?;
    let args =
        Args::new().i64(n as i64).ptr(src.start()).ptr(dst.start()).nd(&merged, &st[0]).nd(&merged, &st[1]);
    // SAFETY: both views lie in live allocations of their dtype.
    unsafe { dev.launch(f, grid_for(n, dev.sm_count), args) }
}

/// Fills `n` elements at `dst` with `value` converted to `dtype` as the CPU converts it.
pub fn fill(dev: &Arc<CudaDevice>, dst: u64, n: usize, dtype: DType, value: f64) -> Result<(), CudaError> {
    if n == 0 {
        return Ok(());
    }
    let bits = match dtype {
        DType::F32 => (value as f32).to_bits() as u64,
        DType::F64 => value.to_bits(),
        DType::I64 => value as i64 as u64,
        DType::Bool => (value != 0.0) as u64,
    };
    if bits == 0 {
        return dev.zero(dst, n * elem_bytes(dtype));
    }
    let f = dev.library_function(Kernel::Fill(elem_bytes(dtype)))?;
    // SAFETY: `dst` holds `n` elements.
    unsafe { dev.launch(f, grid_for(n, dev.sm_count), Args::new().i64(n as i64).ptr(dst).u64(bits)) }
}

/// `0..n` as i64 at `dst`.
pub fn arange(dev: &Arc<CudaDevice>, dst: u64, n: usize) -> Result<(), CudaError> {
    if n == 0 {
        return Ok(());
    }
    let f = dev.library_function(Kernel::Arange)?;
    // SAFETY: `dst` holds `n` i64.
    unsafe { dev.launch(f, grid_for(n, dev.sm_count), Args::new().i64(n as i64).ptr(dst)) }
}

/// Reduces `x` over the sorted dimensions `dims` into dense `out` (i64 for `ArgMax`).
pub fn reduce(
    dev: &Arc<CudaDevice>,
    op: ReduceOp,
    x: View,
    dims: &[usize],
    out: u64,
) -> Result<(), CudaError> {
    let (mut ks, mut kst, mut rs, mut rst) = (vec![], vec![], vec![], vec![]);
    for (d, (&len, &st)) in x.shape.iter().zip(x.strides).enumerate() {
        if dims.contains(&d) {
            rs.push(len);
            rst.push(st);
        } else {
            ks.push(len);
            kst.push(st);
        }
    }
    let (kept, kst, _) = plan_access(&ks, &[&kst]);
    let (red, rst, _) = plan_access(&rs, &[&rst]);
    if kept.iter().product::<usize>() == 0 {
        return Ok(());
    }
    let f = dev.library_function(Kernel::Reduce(x.dtype))?;
    let passes = reduce_passes(op, (&kept, &kst[0]), (&red, &rst[0]), dev.sm_count);
    let partials = match passes.len() {
        1 => None,
        _ => Some(dev.alloc(passes[0].results() * x.dtype.size_in_bytes())?),
    };
    for pass in &passes {
        let at = |partial: bool, or: u64| {
            if partial { partials.as_ref().map_or(or, super::DeviceBuffer::ptr) } else { or }
        };
        let args = pass.args(op, at(pass.from_partials, x.start()), at(pass.to_partials, out));
        let units = pass.results();
        let grid =
            if pass.per_thread { grid_for(units, dev.sm_count) } else { grid_for_warps(units, dev.sm_count) };
        // SAFETY: `x` is a live view of the described layout; `out` holds `n_out` results and
        // `partials` the first pass's.
        unsafe { dev.launch(f, grid, args)? };
    }
    // `partials` returns to the stream-ordered cache here: later work reusing it runs after.
    Ok(())
}

/// One launch of the library's `reduce` kernel (see its comment in `library::SOURCE`).
#[derive(Clone, Debug, PartialEq)]
pub struct ReducePass {
    /// Outputs.
    pub n_out: usize,
    /// Reduced elements per output.
    pub n_red: usize,
    /// The kept index space: shape and element strides.
    pub kept: (Vec<usize>, Vec<usize>),
    /// The reduced index space: shape and element strides.
    pub red: (Vec<usize>, Vec<usize>),
    /// One thread per unit (else one warp).
    pub per_thread: bool,
    /// Chunks per output.
    pub chunks: usize,
    /// Reduced elements per chunk.
    pub chunk: usize,
    /// Whether the pass reads the partials (else the input).
    pub from_partials: bool,
    /// Whether the pass writes the partials (else the output).
    pub to_partials: bool,
}

impl ReducePass {
    /// Results it writes: one per (output, chunk).
    pub fn results(&self) -> usize {
        self.n_out * self.chunks
    }

    /// The kernel's arguments, reading `src` and writing `dst`.
    pub fn args(&self, op: ReduceOp, src: u64, dst: u64) -> Args {
        Args::new()
            .u32(reduce_code(op))
            .i64(self.n_out as i64)
            .i64(self.n_red as i64)
            .nd(&self.kept.0, &self.kept.1)
            .nd(&self.red.0, &self.red.1)
            .ptr(src)
            .ptr(dst)
            .u32(self.per_thread as u32)
            .i64(self.chunks as i64)
            .i64(self.chunk as i64)
    }
}

/// The launches that reduce `kept` outputs over `red` (merged shapes and strides): one pass,
/// or for a long sum, max or min into few outputs, partials per (output, chunk) and then each
/// output's partials in chunk order. Depends on the shape alone, so it is deterministic.
pub fn reduce_passes(
    op: ReduceOp,
    kept: (&[usize], &[usize]),
    red: (&[usize], &[usize]),
    sm_count: u32,
) -> Vec<ReducePass> {
    let n_out: usize = kept.0.iter().product();
    let n_red: usize = red.0.iter().product();
    // A warp per unit when the reduced elements are adjacent in memory, a thread per unit
    // otherwise (neighbouring threads then read neighbouring elements).
    let per_thread = n_red < 32 || red.1.last().is_some_and(|&s| s != 1);
    let chunks = if matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) {
        reduce_chunks(n_out, n_red, per_thread, sm_count)
    } else {
        1
    };
    // As many chunks as the rounded-up chunk length needs (none left empty).
    let chunk = n_red.div_ceil(chunks).max(1);
    let chunks = n_red.div_ceil(chunk).max(1);
    let first = ReducePass {
        n_out,
        n_red,
        kept: (kept.0.to_vec(), kept.1.to_vec()),
        red: (red.0.to_vec(), red.1.to_vec()),
        per_thread,
        chunks,
        chunk,
        from_partials: false,
        to_partials: chunks > 1,
    };
    if chunks == 1 {
        return vec![first];
    }
    // Partials lie at [c * n_out + o] after threads and [o * chunks + c] after warps.
    let (kept_st, red_st) = if per_thread { (1, n_out) } else { (chunks, 1) };
    let second = ReducePass {
        n_out,
        n_red: chunks,
        kept: (vec![n_out], vec![kept_st]),
        red: (vec![chunks], vec![red_st]),
        per_thread: chunks < 32 || red_st != 1,
        chunks: 1,
        chunk: chunks,
        from_partials: true,
        to_partials: false,
    };
    vec![first, second]
}

/// How many chunks each output's `n_red` reduced elements split into: 1 when the outputs
/// alone fill the device; else enough (output, chunk) units to fill it, each chunk at least
/// 256 elements per lane (a thread, or each of a warp's 32 lanes), so that the partials' second
/// pass is short. A function of the shape alone: the same input reduces in the same order.
pub fn reduce_chunks(n_out: usize, n_red: usize, per_thread: bool, sm_count: u32) -> usize {
    let lanes = if per_thread { 1 } else { 32 };
    // Resident threads: 2048 per multiprocessor.
    let want_units = sm_count as usize * 2048 / lanes;
    if n_out >= want_units / 4 {
        return 1;
    }
    let most = n_red / (256 * lanes).min(n_red.max(1));
    want_units.div_ceil(n_out).min(most).max(1)
}

/// Softmax (or log-softmax) of `x` along `axis` into dense `out` of the same shape.
pub fn softmax(dev: &Arc<CudaDevice>, log: bool, x: View, axis: usize, out: u64) -> Result<(), CudaError> {
    let dense = crate::strided::contiguous_strides(x.shape);
    let (mut ks, mut kin, mut kout) = (vec![], vec![], vec![]);
    for d in 0..x.shape.len() {
        if d != axis {
            ks.push(x.shape[d]);
            kin.push(x.strides[d]);
            kout.push(dense[d]);
        }
    }
    let (kept, st, _) = plan_access(&ks, &[&kin, &kout]);
    let rows: usize = kept.iter().product();
    let n = x.shape[axis];
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let per_thread = n < 32 || x.strides[axis] != 1;
    let f = dev.library_function(Kernel::Softmax(x.dtype))?;
    let grid = if per_thread { grid_for(rows, dev.sm_count) } else { grid_for_warps(rows, dev.sm_count) };
    let args = Args::new()
        .u32(log as u32)
        .i64(rows as i64)
        .i64(n as i64)
        .nd(&kept, &st[0])
        .nd(&kept, &st[1])
        .i64(x.strides[axis] as i64)
        .i64(dense[axis] as i64)
        .ptr(x.start())
        .ptr(out)
        .u32(per_thread as u32);
    // SAFETY: `x` is a live view; `out` is dense with x's shape.
    unsafe { dev.launch(f, grid, args) }
}

/// `out[o, j, i] = x[o, idx[j], i]`: `x` dense `[outer, len, inner]`, `idx` dense i64.
#[allow(clippy::too_many_arguments)]
pub fn index_select(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    (outer, len, inner): (usize, usize, usize),
    x: u64,
    idx: u64,
    nidx: usize,
    out: u64,
) -> Result<(), CudaError> {
    let total = outer * nidx * inner;
    if total == 0 {
        return Ok(());
    }
    let f = dev.library_function(Kernel::IndexSelect(elem_bytes(dtype)))?;
    let args = Args::new().i64(outer as i64).i64(len as i64).i64(nidx as i64).i64(inner as i64);
    let args = args.ptr(x).ptr(idx).ptr(out).ptr(dev.err_word());
    // SAFETY: dense operands of the stated sizes; bad indices are flagged, never followed.
    unsafe { dev.launch(f, grid_for(total, dev.sm_count), args) }
}

/// `out[o, idx[j], i] += src[o, j, i]` into zeroed dense `out` `[outer, size, inner]`.
#[allow(clippy::too_many_arguments)]
pub fn index_add(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    (outer, size, inner): (usize, usize, usize),
    src: u64,
    idx: u64,
    nidx: usize,
    out: u64,
) -> Result<(), CudaError> {
    dev.zero(out, outer * size * inner * elem_bytes(dtype))?;
    let total = outer * nidx * inner;
    if total == 0 {
        return Ok(());
    }
    let f = dev.library_function(Kernel::IndexAdd(dtype))?;
    let args = Args::new().i64(outer as i64).i64(size as i64).i64(nidx as i64).i64(inner as i64);
    let args = args.ptr(src).ptr(idx).ptr(out).ptr(dev.err_word());
    // SAFETY: as for `index_select`.
    unsafe { dev.launch(f, grid_for(total, dev.sm_count), args) }
}

/// `gather` (`scatter = false`: `out[p] = x[p with dim = idx[p]]`) or `scatter_add`
/// (`out[p with dim = idx[p]] += x[p]` into zeroed `out`). `x_shape` is the indexed tensor's
/// (dense) shape, `idx_shape` the index tensor's; both dense.
#[allow(clippy::too_many_arguments)]
pub fn gather_scatter(
    dev: &Arc<CudaDevice>,
    scatter: bool,
    dtype: DType,
    dim: usize,
    big_shape: &[usize],
    idx_shape: &[usize],
    src: u64,
    idx: u64,
    out: u64,
) -> Result<(), CudaError> {
    let big_strides = crate::strided::contiguous_strides(big_shape);
    if scatter {
        dev.zero(out, big_shape.iter().product::<usize>() * elem_bytes(dtype))?;
    }
    let n: usize = idx_shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let k = if scatter { Kernel::ScatterAdd(dtype) } else { Kernel::Gather(elem_bytes(dtype)) };
    let f = dev.library_function(k)?;
    let args = Args::new()
        .i64(n as i64)
        .u32(dim as u32)
        .i64(big_shape[dim] as i64)
        .words(nd_words(idx_shape, &crate::strided::contiguous_strides(idx_shape)))
        .words(nd_words(big_shape, &big_strides))
        .ptr(src)
        .ptr(idx)
        .ptr(out)
        .ptr(dev.err_word());
    // SAFETY: dense operands of the stated shapes; bad indices are flagged, never followed.
    unsafe { dev.launch(f, grid_for(n, dev.sm_count), args) }
}

/// One-hot rows of `classes` values of `dtype` for `n` dense i64 indices.
pub fn one_hot(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    n: usize,
    classes: usize,
    idx: u64,
    out: u64,
) -> Result<(), CudaError> {
    if n * classes == 0 {
        return Ok(());
    }
    let f = dev.library_function(Kernel::OneHot(dtype))?;
    let args = Args::new().i64(n as i64).i64(classes as i64).ptr(idx).ptr(out).ptr(dev.err_word());
    // SAFETY: dense operands of the stated sizes.
    unsafe { dev.launch(f, grid_for(n * classes, dev.sm_count), args) }
}

/// Where a random kernel reads its stream position.
#[derive(Clone, Copy, Debug)]
pub enum RngSource {
    /// Known on the host.
    Host {
        /// Philox key.
        key: u64,
        /// First counter value.
        counter: u64,
    },
    /// An `i64[2] = (key, counter)` in device memory (inside compiled graphs).
    Device(u64),
}

fn rng_args(args: Args, src: RngSource) -> Args {
    match src {
        RngSource::Host { key, counter } => args.ptr(0).u64(key).u64(counter),
        RngSource::Device(p) => args.ptr(p).u64(0).u64(0),
    }
}

/// Uniform `[0, 1)` or standard normal values: the CPU's Philox stream, value for value.
pub fn random(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    normal: bool,
    n: usize,
    out: u64,
    src: RngSource,
) -> Result<(), CudaError> {
    if n == 0 {
        return Ok(());
    }
    let per_block = if dtype == DType::F32 { 4 } else { 2 };
    let f = dev.library_function(Kernel::Random(dtype))?;
    let args = rng_args(Args::new().i64(n as i64).ptr(out), src).u32(normal as u32);
    // SAFETY: `out` holds `n` values; a device stream state is a live i64[2].
    unsafe { dev.launch(f, grid_for(n.div_ceil(per_block), dev.sm_count), args) }
}

/// One category per row of dense `rows x cols` weights.
#[allow(clippy::too_many_arguments)]
pub fn multinomial(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    rows: usize,
    cols: usize,
    probs: u64,
    src: RngSource,
    out: u64,
) -> Result<(), CudaError> {
    if rows == 0 {
        return Ok(());
    }
    let f = dev.library_function(Kernel::Multinomial(dtype))?;
    let args = rng_args(Args::new().i64(rows as i64).i64(cols as i64).ptr(probs), src);
    let args = args.ptr(out).ptr(dev.err_word());
    // SAFETY: dense operands of the stated sizes.
    unsafe { dev.launch(f, grid_for(rows, dev.sm_count), args) }
}

/// `out = (state[0], state[1] + offset)` on the device.
pub fn rng_state(dev: &Arc<CudaDevice>, state: u64, offset: u64, out: u64) -> Result<(), CudaError> {
    let f = dev.library_function(Kernel::RngState)?;
    // SAFETY: both are live i64[2].
    unsafe { dev.launch(f, 1, Args::new().ptr(state).ptr(out).u64(offset)) }
}

/// The kernels' `struct Win` for window `g` (which must fit its image).
fn win_words(g: &Window) -> Vec<u64> {
    let [oh, ow] = g.out_size().expect("cuda windows: the window fits the image (the shape rule checks)");
    let (k, s, p, d) = (g.kernel, g.stride, g.padding, g.dilation);
    [g.n, g.c, g.size[0], g.size[1], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], oh, ow]
        .map(|v| v as u64)
        .to_vec()
}

/// The sliding-window kernels: `f` over `n` results (one thread each) with the window's words,
/// then `rest`.
fn window_launch(
    dev: &Arc<CudaDevice>,
    k: Kernel,
    g: &Window,
    n: usize,
    rest: Args,
) -> Result<(), CudaError> {
    if n == 0 {
        return Ok(());
    }
    let f = dev.library_function(k)?;
    let mut args = Args::new().words(win_words(g));
    args.append(rest);
    // SAFETY: the callers' buffers are dense and sized for the window's geometry.
    unsafe { dev.launch(f, grid_for(n, dev.sm_count), args) }
}

/// im2col of dense `x` (`[N, C, H, W]`) into dense `col` (`[C, kh, kw, N, OH, OW]`), padding
/// reading as `pad`: `crate::conv::unfold` on the device.
pub fn unfold(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    g: &Window,
    x: u64,
    pad: f64,
    col: u64,
) -> Result<(), CudaError> {
    let pad = if dtype == DType::F32 { (pad as f32).to_bits() as u64 } else { pad.to_bits() };
    window_launch(dev, Kernel::Unfold(dtype), g, g.col_len(), Args::new().ptr(x).u64(pad).ptr(col))
}

/// col2im, `unfold`'s adjoint: dense `col` summed into dense `x`, which is overwritten.
pub fn fold(dev: &Arc<CudaDevice>, dtype: DType, g: &Window, col: u64, x: u64) -> Result<(), CudaError> {
    let n = g.n * g.c * g.size[0] * g.size[1];
    window_launch(dev, Kernel::Fold(dtype), g, n, Args::new().ptr(col).ptr(x))
}

/// Max pooling of dense `x` into dense `out` (`[N, C, OH, OW]`).
pub fn max_pool(dev: &Arc<CudaDevice>, dtype: DType, g: &Window, x: u64, out: u64) -> Result<(), CudaError> {
    let [oh, ow] = g.out_size().unwrap_or([0, 0]);
    window_launch(dev, Kernel::MaxPool(dtype), g, g.n * g.c * oh * ow, Args::new().ptr(x).ptr(out))
}

/// Max pooling's input gradient: each window's cotangent (dense `gy`) routed to its winner in
/// dense `x`; dense `dx` is overwritten.
pub fn max_pool_backward(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    g: &Window,
    x: u64,
    gy: u64,
    dx: u64,
) -> Result<(), CudaError> {
    let n = g.n * g.c * g.size[0] * g.size[1];
    window_launch(dev, Kernel::MaxPoolBackward(dtype), g, n, Args::new().ptr(x).ptr(gy).ptr(dx))
}

#[cfg(test)]
mod tests {
    use super::reduce_chunks;

    #[test]
    fn long_reductions_into_few_outputs_split_into_chunks() {
        // H200: 132 multiprocessors.
        // A full sum of 128k elements: one warp-unit would walk 4000 elements a lane.
        assert_eq!(reduce_chunks(1, 128 << 10, false, 132), 16);
        // A bias gradient, [128k, 128] over rows (one thread per output): 512 chunks of 256.
        assert_eq!(reduce_chunks(128, 128 << 10, true, 132), 512);
        // Enough outputs to fill the device, or too little to split: one pass.
        assert_eq!(reduce_chunks(1 << 20, 1 << 10, true, 132), 1);
        assert_eq!(reduce_chunks(4, 200, true, 132), 1);
        assert_eq!(reduce_chunks(4, 0, false, 132), 1);
        // Never more chunks than the device has room for.
        assert_eq!(reduce_chunks(1, 1 << 30, false, 132), 132 * 64);
    }
}
