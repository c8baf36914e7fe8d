//! CUDA C for elementwise kernels, generated from the same register [`Program`]s that the CPU
//! runs tile by tile (`crate::fused`). One generated kernel runs a whole program per element,
//! so a fused group reads its inputs and writes its outputs once.
//!
//! A kernel is described by an [`EwSpec`]: the program, the register type, each input's dtype
//! and access pattern, each output's dtype, and either the shape and strides *baked* into the
//! source (compiled graphs: shapes are fixed per variant, and constant divisors are cheap) or
//! passed at launch (eager ops: one kernel serves every shape of a given rank). Dimensions that
//! every operand walks contiguously are merged first ([`plan_access`]), so most kernels need no
//! index arithmetic at all. Only what the source uses is baked ([`Baked::canonical`]): a kernel
//! with no strided input bakes nothing, and the leading dimension is never baked, so a batch
//! size that changes does not mean new kernels to compile.

use super::nvrtc::fnv1a;
use crate::DType;
use crate::elementwise::{BinaryOp, CmpOp, UnaryOp};
use crate::fused::{FBinary, FUnary, Instr, Program};
use std::fmt::Write;

/// How a kernel reads one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Element `i` of the output reads element `i`.
    Contiguous,
    /// Every element reads element 0 (a broadcast scalar).
    Scalar,
    /// Element `i` reads at the offset its coordinates and strides give.
    Strided,
}

/// Shape and strides fixed at code generation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Baked {
    /// The (merged) output shape.
    pub shape: Vec<usize>,
    /// Per input, its strides over `shape` (used for `Strided` inputs only).
    pub strides: Vec<Vec<usize>>,
}

impl Baked {
    /// What a kernel's source depends on, and nothing more: the shape with its first dimension
    /// zeroed (the index arithmetic never divides by it; the element count comes at launch)
    /// and the strides of `Strided` inputs only. So variants whose sizes differ only in the
    /// leading (batch) dimension share one compiled kernel, as long as no strided input's
    /// strides follow that size.
    pub fn canonical(shape: &[usize], strides: &[Vec<usize>], access: &[Access]) -> Baked {
        let mut shape = shape.to_vec();
        if let Some(first) = shape.first_mut() {
            *first = 0;
        }
        let strides = strides
            .iter()
            .zip(access)
            .map(|(st, &a)| if a == Access::Strided { st.clone() } else { Vec::new() })
            .collect();
        Baked { shape, strides }
    }
}

/// One elementwise kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EwSpec {
    /// The register program, each `BinaryConst`'s constant replaced by its index in the launch
    /// constants ([`canonical_program`]).
    pub program: Program,
    /// Register type: `F32`, `F64` or `I64` (bools are 0/1 in registers).
    pub reg: DType,
    /// Per input: the element type in memory and how it is read.
    pub inputs: Vec<(DType, Access)>,
    /// Per output: the element type in memory (contiguous over the output shape).
    pub outputs: Vec<DType>,
    /// Rank of the index space (the merged shape's rank).
    pub rank: usize,
    /// Whether indices need 64 bits.
    pub wide: bool,
    /// Shape and strides in the source, or `None` to pass them at launch.
    pub baked: Option<Baked>,
}

/// The C type of an element.
pub fn c_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I64 => "long long",
        DType::Bool => "unsigned char",
    }
}

/// A literal of register type `reg` with the value `f64::from_bits(bits)`, exactly as the CPU
/// converts it (`as f32`, `as i64`).
pub fn literal(reg: DType, bits: u64) -> String {
    let v = f64::from_bits(bits);
    match reg {
        DType::F32 => format!("__int_as_float((int)0x{:08x}u)", (v as f32).to_bits()),
        DType::F64 => format!("__longlong_as_double((long long)0x{bits:016x}ull)"),
        DType::I64 | DType::Bool => format!("((long long)0x{:016x}ull)", v as i64 as u64),
    }
}

/// Constant `k` of `P::k` as a value of register type `reg` (the word holds what
/// [`const_words`] put there).
fn const_param(reg: DType, k: u64) -> String {
    match reg {
        DType::F32 => format!("__int_as_float((int)p.k[{k}])"),
        DType::F64 => format!("__longlong_as_double((long long)p.k[{k}])"),
        DType::I64 | DType::Bool => format!("((long long)p.k[{k}])"),
    }
}

/// `p` with each `BinaryConst`'s constant replaced by its index among them. Kernels take the
/// constants at launch ([`EwSpec::params`]), so programs that differ only in them (a mean's
/// `1/N` at another batch size, another learning rate) share one compiled kernel.
pub fn canonical_program(p: &Program) -> Program {
    let mut k = 0;
    let mut out = p.clone();
    for i in &mut out.instrs {
        if let Instr::BinaryConst { c, .. } = i {
            *c = k;
            k += 1;
        }
    }
    out
}

/// The constants of `p`'s `BinaryConst`s in order, as the launch words of register type `reg`
/// hold them: converted exactly as the CPU converts them (`as f32`, `as i64`), as [`literal`]
/// writes them.
pub fn const_words(p: &Program, reg: DType) -> Vec<u64> {
    p.instrs
        .iter()
        .filter_map(|i| match *i {
            Instr::BinaryConst { c, .. } => {
                let v = f64::from_bits(c);
                Some(match reg {
                    DType::F32 => (v as f32).to_bits() as u64,
                    DType::F64 => c,
                    DType::I64 | DType::Bool => v as i64 as u64,
                })
            }
            _ => None,
        })
        .collect()
}

fn zero_one(reg: DType) -> (&'static str, &'static str) {
    match reg {
        DType::F32 => ("0.0f", "1.0f"),
        DType::F64 => ("0.0", "1.0"),
        _ => ("0ll", "1ll"),
    }
}

/// `f(a)` in C for register type `reg`.
fn unary(f: FUnary, a: &str, reg: DType) -> String {
    let (z, o) = zero_one(reg);
    let fl = if reg == DType::F32 { "f" } else { "" };
    if reg == DType::I64 || reg == DType::Bool {
        let neg = format!("(long long)(0ull - (unsigned long long){a})");
        return match f {
            FUnary::Op(UnaryOp::Neg) => neg,
            FUnary::Op(UnaryOp::Abs) => format!("({a} < 0 ? {neg} : {a})"),
            FUnary::Op(UnaryOp::Square) => {
                format!("(long long)((unsigned long long){a} * (unsigned long long){a})")
            }
            FUnary::Op(UnaryOp::Sign) => format!("({a} > 0 ? 1ll : ({a} < 0 ? -1ll : 0ll))"),
            FUnary::Op(UnaryOp::Relu) => format!("({a} < 0 ? 0ll : {a})"),
            FUnary::Op(UnaryOp::Not) => format!("({a} == 0 ? 1ll : 0ll)"),
            FUnary::NonZero => format!("({a} != 0 ? 1ll : 0ll)"),
            FUnary::Trunc => a.to_string(),
            FUnary::Clamp(lo, hi) => {
                let (lo, hi) = (literal(reg, lo), literal(reg, hi));
                format!("({a} < {lo} ? {lo} : ({a} > {hi} ? {hi} : {a}))")
            }
            f => unreachable!("cuda codegen: {f:?} is not defined on integer registers"),
        };
    }
    match f {
        FUnary::Op(UnaryOp::Neg) => format!("(-{a})"),
        FUnary::Op(UnaryOp::Exp) => format!("exp{fl}({a})"),
        FUnary::Op(UnaryOp::Log) => format!("log{fl}({a})"),
        FUnary::Op(UnaryOp::Sqrt) => format!("sqrt{fl}({a})"),
        FUnary::Op(UnaryOp::Abs) => format!("fabs{fl}({a})"),
        FUnary::Op(UnaryOp::Tanh) => format!("tanh{fl}({a})"),
        FUnary::Op(UnaryOp::Sigmoid) => format!("({o} / ({o} + exp{fl}(-{a})))"),
        FUnary::Op(UnaryOp::Relu) => format!("({a} < {z} ? {z} : {a})"),
        FUnary::Op(UnaryOp::Square) => format!("({a} * {a})"),
        FUnary::Op(UnaryOp::Recip) => format!("({o} / {a})"),
        FUnary::Op(UnaryOp::Sign) => format!("({a} > {z} ? {o} : ({a} < {z} ? -{o} : {a}))"),
        FUnary::Op(UnaryOp::Not) => format!("({a} == {z} ? {o} : {z})"),
        FUnary::NonZero => format!("({a} != {z} ? {o} : {z})"),
        FUnary::Trunc => format!("trunc{fl}({a})"),
        FUnary::Powf(p) => format!("pow{fl}({a}, {})", literal(reg, p)),
        FUnary::Clamp(lo, hi) => {
            let (lo, hi) = (literal(reg, lo), literal(reg, hi));
            format!("({a} < {lo} ? {lo} : ({a} > {hi} ? {hi} : {a}))")
        }
        FUnary::Op(UnaryOp::Sin) => format!("sin{fl}({a})"),
        FUnary::Op(UnaryOp::Cos) => format!("cos{fl}({a})"),
        FUnary::Op(UnaryOp::Tan) => format!("tan{fl}({a})"),
        FUnary::Op(UnaryOp::Exp2) => format!("exp2{fl}({a})"),
        FUnary::Op(UnaryOp::Log2) => format!("log2{fl}({a})"),
        FUnary::Op(UnaryOp::Log1p) => format!("log1p{fl}({a})"),
        FUnary::Op(UnaryOp::Expm1) => format!("expm1{fl}({a})"),
        FUnary::Op(UnaryOp::Erf) => format!("erf{fl}({a})"),
        // The same operations, in the same order, as `fused::unary`.
        FUnary::Op(UnaryOp::Gelu) => {
            let (half, k) =
                (literal(reg, 0.5f64.to_bits()), literal(reg, std::f64::consts::FRAC_1_SQRT_2.to_bits()));
            let (ninf, nzero) =
                (literal(reg, f64::NEG_INFINITY.to_bits()), literal(reg, (-0.0f64).to_bits()));
            format!("({a} == {ninf} ? {nzero} : ({a} * {half} * ({o} + erf{fl}({a} * {k}))))")
        }
        FUnary::Op(UnaryOp::Silu) => format!("({a} * ({o} / ({o} + exp{fl}(-{a}))))"),
        FUnary::Op(UnaryOp::Softplus) => {
            let t = literal(reg, crate::fused::SOFTPLUS_THRESHOLD.to_bits());
            format!("({a} > {t} ? {a} : log1p{fl}(exp{fl}({a})))")
        }
        FUnary::Op(UnaryOp::Floor) => format!("floor{fl}({a})"),
        FUnary::Op(UnaryOp::Ceil) => format!("ceil{fl}({a})"),
        // `rint` rounds ties to even in the default rounding mode, as `round_ties_even`.
        FUnary::Op(UnaryOp::Round) => format!("rint{fl}({a})"),
        // Not `rsqrt`, which is approximate: this is what the CPU computes.
        FUnary::Op(UnaryOp::Rsqrt) => format!("({o} / sqrt{fl}({a}))"),
    }
}

/// `f(a, b)` in C for register type `reg`.
fn binary(f: FBinary, a: &str, b: &str, reg: DType) -> String {
    let (z, o) = zero_one(reg);
    let int = reg == DType::I64 || reg == DType::Bool;
    let wrap = |op: &str| format!("(long long)((unsigned long long){a} {op} (unsigned long long){b})");
    let pred = |c: String| format!("({c} ? {o} : {z})");
    match f {
        FBinary::Op(BinaryOp::Add) if int => wrap("+"),
        FBinary::Op(BinaryOp::Sub) if int => wrap("-"),
        FBinary::Op(BinaryOp::Mul) if int => wrap("*"),
        FBinary::Op(BinaryOp::Add) => format!("({a} + {b})"),
        FBinary::Op(BinaryOp::Sub) => format!("({a} - {b})"),
        FBinary::Op(BinaryOp::Mul) => format!("({a} * {b})"),
        FBinary::Op(BinaryOp::Div) => format!("({a} / {b})"),
        FBinary::Op(BinaryOp::Maximum) => format!("(({a} != {a} || {a} > {b}) ? {a} : {b})"),
        FBinary::Op(BinaryOp::Minimum) => format!("(({a} != {a} || {a} < {b}) ? {a} : {b})"),
        FBinary::Op(BinaryOp::And) => pred(format!("({a} != {z} && {b} != {z})")),
        FBinary::Op(BinaryOp::Or) => pred(format!("({a} != {z} || {b} != {z})")),
        FBinary::Cmp(CmpOp::Gt) => pred(format!("{a} > {b}")),
        FBinary::Cmp(CmpOp::Ge) => pred(format!("{a} >= {b}")),
        FBinary::Cmp(CmpOp::Lt) => pred(format!("{a} < {b}")),
        FBinary::Cmp(CmpOp::Le) => pred(format!("{a} <= {b}")),
        FBinary::Cmp(CmpOp::Eq) => pred(format!("{a} == {b}")),
        FBinary::Cmp(CmpOp::Ne) => pred(format!("{a} != {b}")),
        FBinary::Op(BinaryOp::Atan2) => {
            let fl = if reg == DType::F32 { "f" } else { "" };
            format!("atan2{fl}({a}, {b})")
        }
    }
}

/// Converts register `r` (type `reg`) to an element of type `d`, as the CPU stores it.
fn store(r: &str, reg: DType, d: DType) -> String {
    let reg_int = reg == DType::I64 || reg == DType::Bool;
    match d {
        DType::Bool => format!("(unsigned char)({r} != 0)"),
        _ if d == reg => r.to_string(),
        // The CPU converts an integer to a float through f64.
        DType::F32 | DType::F64 if reg_int => format!("({})(double){r}", c_type(d)),
        // Float to integer conversion saturates and maps NaN to 0, as Rust's `as` does.
        _ => format!("({}){r}", c_type(d)),
    }
}

/// Merges dimensions that every operand walks the same way and drops size-1 dimensions;
/// returns the merged shape, each input's strides over it, and each input's access pattern.
pub fn plan_access(shape: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>, Vec<Access>) {
    let mut dims: Vec<(usize, Vec<usize>)> = Vec::new();
    for (d, &len) in shape.iter().enumerate() {
        if len == 1 {
            continue;
        }
        let st: Vec<usize> = strides.iter().map(|s| s[d]).collect();
        if let Some((plen, pst)) = dims.last_mut()
            && pst.iter().zip(&st).all(|(&p, &s)| p == s * len)
        {
            *plen *= len;
            *pst = st;
            continue;
        }
        dims.push((len, st));
    }
    let merged: Vec<usize> = dims.iter().map(|d| d.0).collect();
    let per_input: Vec<Vec<usize>> =
        (0..strides.len()).map(|k| dims.iter().map(|d| d.1[k]).collect()).collect();
    let contiguous = crate::strided::contiguous_strides(&merged);
    let access = per_input
        .iter()
        .map(|st| {
            if st.iter().all(|&s| s == 0) {
                Access::Scalar
            } else if st.iter().zip(&merged).zip(contiguous.iter()).all(|((&s, &len), &c)| len == 1 || s == c)
            {
                Access::Contiguous
            } else {
                Access::Strided
            }
        })
        .collect();
    (merged, per_input, access)
}

impl EwSpec {
    fn strided(&self) -> Vec<usize> {
        self.inputs.iter().enumerate().filter(|(_, (_, a))| *a == Access::Strided).map(|(k, _)| k).collect()
    }

    /// The kernel's name: a hash of everything that shapes its source.
    pub fn kernel_name(&self) -> String {
        format!("janus_ew_{:016x}", fnv1a(&[format!("{self:?}").as_bytes()]))
    }

    /// Parameter words for a launch, laid out as the generated `struct P`: `n`, then (when not
    /// baked and some input is strided) the shape and each strided input's strides, then the
    /// input and output addresses, then the program's constants ([`const_words`] of the
    /// program the spec was made from).
    pub fn params(
        &self,
        n: usize,
        shape: &[usize],
        strides: &[Vec<usize>],
        ins: &[u64],
        outs: &[u64],
        consts: &[u64],
    ) -> Vec<u64> {
        let mut p = vec![n as u64];
        let strided = self.strided();
        if self.baked.is_none() && !strided.is_empty() {
            p.extend(shape.iter().map(|&s| s as u64));
            for &k in &strided {
                p.extend(strided_of(&strides[k], self.rank).iter().map(|&s| s as u64));
            }
        }
        p.extend_from_slice(ins);
        p.extend_from_slice(outs);
        debug_assert_eq!(consts.len(), self.const_count(), "params: the program's constants");
        p.extend_from_slice(consts);
        p
    }

    /// How many constants the kernel takes at launch (`P::k`).
    fn const_count(&self) -> usize {
        self.program.instrs.iter().filter(|i| matches!(i, Instr::BinaryConst { .. })).count()
    }

    /// The inputs the program loads, each once, in order.
    fn loaded_inputs(&self) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        for ins in &self.program.instrs {
            if let Instr::Load { input, .. } = *ins
                && !v.contains(&(input as usize))
            {
                v.push(input as usize);
            }
        }
        v
    }

    /// One element's registers, arithmetic and stores: `load(k)` is the expression that reads
    /// input `k`, `at` the element's index in the outputs.
    fn body(&self, s: &mut String, load: &dyn Fn(usize) -> String, at: &str) {
        let regs = self.program.num_regs.max(1);
        let _ = writeln!(s, "    R {};", (0..regs).map(|r| format!("r{r}")).collect::<Vec<_>>().join(", "));
        for ins in &self.program.instrs {
            let line = match *ins {
                Instr::Load { dst, input } => {
                    let dt = self.inputs[input as usize].0;
                    let v = load(input as usize);
                    if dt == DType::Bool {
                        format!("r{dst} = (R)({v} != 0);")
                    } else if dt == DType::I64 && self.reg == DType::F32 {
                        // As the CPU converts: through f64 (one rounding more).
                        format!("r{dst} = (R)(double){v};")
                    } else {
                        format!("r{dst} = (R){v};")
                    }
                }
                Instr::Unary { dst, f, a } => format!("r{dst} = {};", unary(f, &format!("r{a}"), self.reg)),
                Instr::Binary { dst, f, a, b } => {
                    format!("r{dst} = {};", binary(f, &format!("r{a}"), &format!("r{b}"), self.reg))
                }
                Instr::BinaryConst { dst, f, a, c, const_left } => {
                    // `c` is the constant's index in `P::k` (see `canonical_program`).
                    let (ra, lc) = (format!("r{a}"), const_param(self.reg, c));
                    let e = if const_left {
                        binary(f, &lc, &ra, self.reg)
                    } else {
                        binary(f, &ra, &lc, self.reg)
                    };
                    format!("r{dst} = {e};")
                }
                Instr::Select { dst, c, a, b } => {
                    format!("r{dst} = (r{c} != (R)0) ? r{a} : r{b};")
                }
            };
            let _ = writeln!(s, "    {line}");
        }
        for (k, (&r, &d)) in self.program.outputs.iter().zip(&self.outputs).enumerate() {
            let _ = writeln!(
                s,
                "    (({}*)p.out[{k}])[{at}] = {};",
                c_type(d),
                store(&format!("r{r}"), self.reg, d)
            );
        }
    }

    /// The CUDA C source of the kernel.
    // Long by design: the kernel's source, emitted in order, section by section.
    pub fn source(&self) -> String {
        let name = self.kernel_name();
        let strided = self.strided();
        let (nin, nout, rank) = (self.inputs.len(), self.outputs.len(), self.rank);
        let idx = if self.wide { "unsigned long long" } else { "unsigned int" };
        let mut s = String::new();
        let _ = writeln!(s, "// generated by janus from {} instructions", self.program.instrs.len());
        let _ = writeln!(
            s,
            "typedef {} R;\ntypedef {idx} IDX;\nstruct P {{\n  unsigned long long n;",
            c_type(self.reg)
        );
        if self.baked.is_none() && !strided.is_empty() {
            let _ = writeln!(
                s,
                "  unsigned long long shape[{rank}];\n  unsigned long long st[{}][{rank}];",
                strided.len()
            );
        }
        if nin > 0 {
            let _ = writeln!(s, "  const void* in[{nin}];");
        }
        if nout > 0 {
            let _ = writeln!(s, "  void* out[{nout}];");
        }
        let nk = self.const_count();
        if nk > 0 {
            let _ = writeln!(s, "  unsigned long long k[{nk}];");
        }
        let _ = writeln!(s, "}};");
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void __launch_bounds__(256) {name}(const P p) {{\n  const IDX n = (IDX)p.n;\n  \
             const IDX S = (IDX)gridDim.x * blockDim.x;\n  IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x;"
        );
        if strided.is_empty() {
            // Dense and scalar operands: four elements per thread and pass, S apart (each warp's
            // accesses stay coalesced), every load issued before any arithmetic, so each thread
            // has four loads per input in flight. The tail runs the plain loop below.
            let _ = writeln!(s, "  for (; i + {} * S < n; i += {UNROLL} * S) {{", UNROLL - 1);
            let loaded = self.loaded_inputs();
            for u in 0..UNROLL {
                for &input in &loaded {
                    let (dt, acc) = self.inputs[input];
                    let at = if acc == Access::Scalar { "0".to_string() } else { format!("i + {u} * S") };
                    let _ = writeln!(
                        s,
                        "    const {0} l{input}_{u} = ((const {0}*)p.in[{input}])[{at}];",
                        c_type(dt)
                    );
                }
            }
            for u in 0..UNROLL {
                let _ = writeln!(s, "    {{\n    const IDX e = i + {u} * S;");
                self.body(&mut s, &|input| format!("l{input}_{u}"), "e");
                let _ = writeln!(s, "    }}");
            }
            let _ = writeln!(s, "  }}");
        }
        let _ = writeln!(s, "  for (; i < n; i += S) {{");
        if !strided.is_empty() {
            let dim = |d: usize| match &self.baked {
                Some(b) => format!("(IDX){}u", b.shape[d]),
                None => format!("(IDX)p.shape[{d}]"),
            };
            let _ = writeln!(s, "    IDX rem = i;");
            for d in (1..rank).rev() {
                let _ = writeln!(s, "    const IDX c{d} = rem % {0}; rem /= {0};", dim(d));
            }
            let _ = writeln!(s, "    const IDX c0 = rem;");
            for (j, &k) in strided.iter().enumerate() {
                let terms: Vec<String> = (0..rank)
                    .filter_map(|d| match &self.baked {
                        Some(b) => {
                            let st = strided_of(&b.strides[k], rank)[d];
                            (st != 0).then(|| format!("c{d} * (IDX){st}u"))
                        }
                        None => Some(format!("c{d} * (IDX)p.st[{j}][{d}]")),
                    })
                    .collect();
                let sum = if terms.is_empty() { "0".to_string() } else { terms.join(" + ") };
                let _ = writeln!(s, "    const IDX o{k} = {sum};");
            }
        }
        let load = |input: usize| {
            let (dt, acc) = self.inputs[input];
            let at = match acc {
                Access::Contiguous => "i".to_string(),
                Access::Scalar => "0".to_string(),
                Access::Strided => format!("o{input}"),
            };
            format!("((const {}*)p.in[{input}])[{at}]", c_type(dt))
        };
        self.body(&mut s, &load, "i");
        let _ = writeln!(s, "  }}\n}}");
        s
    }
}

/// Elements per thread and pass of a kernel whose operands are all dense or scalar.
const UNROLL: usize = 4;

/// `strides` padded or cut to `rank` entries (inputs that are not strided pass an empty list).
fn strided_of(strides: &[usize], rank: usize) -> Vec<usize> {
    let mut v = strides.to_vec();
    v.resize(rank, 0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_contiguous_dims_and_classifies_inputs() {
        // [4, 3, 5] output; a dense, b a row broadcast over the leading dims.
        let (shape, st, acc) = plan_access(&[4, 3, 5], &[&[15, 5, 1], &[0, 0, 1]]);
        assert_eq!(shape, vec![12, 5]);
        assert_eq!(st, vec![vec![5, 1], vec![0, 1]]);
        assert_eq!(acc, vec![Access::Contiguous, Access::Strided]);
        // A transposed operand keeps every dimension.
        let (shape, _, acc) = plan_access(&[4, 3, 5], &[&[15, 5, 1], &[1, 4, 12]]);
        assert_eq!(shape, vec![4, 3, 5]);
        assert_eq!(acc, vec![Access::Contiguous, Access::Strided]);
        let (shape, _, acc) = plan_access(&[2, 1, 3], &[&[3, 3, 1], &[0, 0, 0]]);
        assert_eq!(shape, vec![6]);
        assert_eq!(acc, vec![Access::Contiguous, Access::Scalar]);
    }

    #[test]
    fn batch_sizes_share_baked_kernels() {
        use crate::cuda::ops::elementwise_spec;
        let prog = Program::binary(FBinary::Op(BinaryOp::Add));
        let spec = |shape: &[usize], strides: [&[usize]; 2]| {
            let ins = [(DType::F32, strides[0]), (DType::F32, strides[1])];
            elementwise_spec(&prog, DType::F32, shape, &ins, &[DType::F32], true).0
        };
        // `x + bias` over [N, 32]: the bias row is strided (stride 0 over N); N is not baked.
        let (a, b) = (spec(&[8, 32], [&[32, 1], &[0, 1]]), spec(&[500, 32], [&[32, 1], &[0, 1]]));
        assert!(a.baked.is_some());
        assert_eq!(a.kernel_name(), b.kernel_name());
        assert_eq!(a.source(), b.source().replace(&b.kernel_name(), &a.kernel_name()));
        // Dense operands bake nothing at all.
        let (c, d) = (spec(&[8, 32], [&[32, 1], &[32, 1]]), spec(&[9, 7], [&[7, 1], &[7, 1]]));
        assert_eq!((c.baked.clone(), c.kernel_name()), (None, d.kernel_name()));
        // A transposed operand's strides follow N: its kernels differ.
        let (e, f) = (spec(&[8, 32], [&[32, 1], &[1, 8]]), spec(&[9, 32], [&[32, 1], &[1, 9]]));
        assert_ne!(e.kernel_name(), f.kernel_name());
        // Inner sizes are baked.
        assert_ne!(a.kernel_name(), spec(&[8, 16], [&[16, 1], &[0, 1]]).kernel_name());
    }

    #[test]
    fn constants_are_launch_parameters() {
        use crate::cuda::ops::elementwise_spec;
        let scaled = |c: f64| Program {
            instrs: vec![
                Instr::Load { dst: 0, input: 0 },
                Instr::BinaryConst {
                    dst: 1,
                    f: FBinary::Op(BinaryOp::Mul),
                    a: 0,
                    c: c.to_bits(),
                    const_left: false,
                },
            ],
            num_regs: 2,
            outputs: vec![1],
        };
        let spec = |c: f64| {
            elementwise_spec(&scaled(c), DType::F32, &[7], &[(DType::F32, &[1])], &[DType::F32], true).0
        };
        assert_eq!(spec(1.0 / 300.0).kernel_name(), spec(1.0 / 517.0).kernel_name());
        assert!(spec(0.5).source().contains("p.k[0]"));
        assert_eq!(const_words(&scaled(0.1), DType::F32), [0.1f32.to_bits() as u64]);
        assert_eq!(const_words(&scaled(0.1), DType::F64), [0.1f64.to_bits()]);
        assert_eq!(const_words(&scaled(-2.7), DType::I64), [-2i64 as u64]);
    }

    #[test]
    fn literals_round_like_the_cpu() {
        assert_eq!(
            literal(DType::F32, 0.1f64.to_bits()),
            format!("__int_as_float((int)0x{:08x}u)", 0.1f32.to_bits())
        );
        assert_eq!(literal(DType::I64, (-2.7f64).to_bits()), "((long long)0xfffffffffffffffeull)");
        assert!(literal(DType::F64, f64::NAN.to_bits()).contains("7ff8"));
    }
}
