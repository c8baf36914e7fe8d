//! Generated elementwise CUDA kernels (`cuda::codegen`) compiled as C++ for the CPU and run as
//! one thread, against the CPU's own run of the same register program (`fused::run`): random
//! float programs over random shapes, with contiguous, broadcast, permuted and offset operands,
//! sizes baked into the source or passed at launch. The launch parameters go through
//! `EwSpec::params` into the kernel's `struct P` byte for byte, so this also checks that the two
//! agree on its layout. Math functions differ by a few ulps between the C library and janus's
//! SIMD code, so values agree within a tolerance; NaN and the infinities must match. Needs a
//! C++ compiler (`c++`, `g++` or `clang++`); without one it prints why and passes.

use janus_kernels::DType;
use janus_kernels::cuda::codegen::{EwSpec, const_words};
use janus_kernels::cuda::ops::elementwise_spec;
use janus_kernels::elementwise::{BinaryOp, CmpOp, UnaryOp};
use janus_kernels::fused::{self, FBinary, FUnary, Input, Instr, Output, Outputs, Program};
use janus_kernels::strided::Src;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const SHIM: &str = r#"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
typedef unsigned long long u64;
#define __global__
#define __launch_bounds__(x)
struct Dim3 { unsigned int x; };
static const Dim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
static float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
static double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
"#;

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// A random float program over `inputs` loads and `ops` more steps, each writing new registers
/// (a select step writes a comparison and the select); the last one or two registers are its
/// outputs.
fn program(r: &mut Lcg, inputs: usize, ops: usize) -> Program {
    use BinaryOp::*;
    use UnaryOp::*;
    let unary =
        [Neg, Exp, Log, Sqrt, Abs, Tanh, Sigmoid, Relu, Square, Recip, Sin, Erf, Gelu, Silu, Softplus, Floor];
    let binary = [Add, Sub, Mul, Div, Maximum, Minimum, Atan2];
    let cmp = [CmpOp::Gt, CmpOp::Ge, CmpOp::Lt, CmpOp::Le, CmpOp::Eq, CmpOp::Ne];
    let mut instrs: Vec<Instr> = (0..inputs as u16).map(|k| Instr::Load { dst: k, input: k }).collect();
    for _ in 0..ops {
        let next = instrs.len() as u16;
        let a = r.below(next as usize) as u16;
        let b = r.below(next as usize) as u16;
        match r.below(5) {
            0 | 1 => instrs.push(Instr::Unary { dst: next, f: FUnary::Op(unary[r.below(unary.len())]), a }),
            2 => {
                instrs.push(Instr::Binary { dst: next, f: FBinary::Op(binary[r.below(binary.len())]), a, b })
            }
            3 => {
                let c = (r.below(9) as f64 * 0.75 - 3.0).to_bits();
                let f = FBinary::Op(binary[r.below(4)]);
                instrs.push(Instr::BinaryConst { dst: next, f, a, c, const_left: r.below(2) == 0 })
            }
            _ => {
                // A comparison, then a select on it.
                instrs.push(Instr::Binary { dst: next, f: FBinary::Cmp(cmp[r.below(cmp.len())]), a, b });
                let (x, y) = (r.below(next as usize) as u16, r.below(next as usize) as u16);
                instrs.push(Instr::Select { dst: next + 1, c: next, a: x, b: y });
            }
        }
    }
    let n = instrs.len() as u16;
    let outputs = if n >= 2 && r.below(2) == 0 { vec![n - 2, n - 1] } else { vec![n - 1] };
    Program { instrs, num_regs: n, outputs }
}

/// One case: the spec, its launch words, the operands' bytes (from each view's first
/// element), and the CPU's outputs.
struct Case {
    spec: EwSpec,
    words: Vec<u64>,
    ins: Vec<Vec<u8>>,
    want: Vec<Vec<f64>>,
    reg: DType,
}

fn case<T: fused::Scratch + janus_kernels::dtype::Float>(
    r: &mut Lcg,
    reg: DType,
    bytes: fn(&[T]) -> Vec<u8>,
) -> Case {
    let rank = 1 + r.below(4);
    let shape: Vec<usize> = (0..rank).map(|_| 1 + r.below(5)).collect();
    let n: usize = shape.iter().product();
    let inputs = 1 + r.below(3);
    let ops = 2 + r.below(6);
    let prog = program(r, inputs, ops);
    // Each operand: a buffer, and strides (broadcast to `shape`) and an offset into it.
    let mut bufs: Vec<Vec<T>> = Vec::new();
    let mut views: Vec<(Vec<usize>, usize)> = Vec::new();
    for _ in 0..inputs {
        let mut dims = shape.clone();
        let kind = r.below(4);
        if kind == 1 {
            for d in dims.iter_mut() {
                if r.below(2) == 0 {
                    *d = 1; // broadcast along this dimension
                }
            }
        }
        // Row-major strides over `dims` (kind 2: over the reversed dims, a permuted view).
        let order: Vec<usize> = if kind == 2 { (0..rank).rev().collect() } else { (0..rank).collect() };
        let mut st = vec![0; rank];
        let mut acc = 1;
        for &d in order.iter().rev() {
            st[d] = acc;
            acc *= dims[d];
        }
        let strides: Vec<usize> = (0..rank).map(|d| if dims[d] == 1 { 0 } else { st[d] }).collect();
        let offset = if kind == 3 { 1 + r.below(3) } else { 0 };
        let len = offset + acc;
        let vals: Vec<T> = (0..len)
            .map(|_| match r.below(25) {
                0 => T::from_f64(f64::NAN),
                1 => T::from_f64(f64::INFINITY),
                2 => T::from_f64(-0.0),
                _ => T::from_f64(r.below(61) as f64 * 0.1 - 3.0),
            })
            .collect();
        bufs.push(vals);
        views.push((strides, offset));
    }
    let srcs: Vec<Input<T>> =
        bufs.iter().zip(&views).map(|(b, (st, off))| Input::Float(Src::new(b, st, *off))).collect();
    let mut outs: Vec<Vec<T>> = prog.outputs.iter().map(|_| vec![T::from_f64(0.0); n]).collect();
    let targets: Outputs<T> = outs.iter_mut().map(|o| Output::Float(&mut o[..])).collect();
    fused::run(&prog, &shape, &srcs, targets);
    let types: Vec<(DType, &[usize])> = views.iter().map(|(st, _)| (reg, &st[..])).collect();
    let out_types = vec![reg; prog.outputs.len()];
    let (spec, merged, per_input) = elementwise_spec(&prog, reg, &shape, &types, &out_types, r.below(2) == 0);
    // Addresses are patched in by the harness: placeholders here.
    let consts = const_words(&prog, reg);
    let words = spec.params(n, &merged, &per_input, &vec![0; inputs], &vec![0; out_types.len()], &consts);
    let ins = bufs.iter().zip(&views).map(|(b, (_, off))| bytes(&b[*off..])).collect();
    let want = outs.iter().map(|o| o.iter().map(|v| v.to_f64()).collect()).collect();
    Case { spec, words, ins, want, reg }
}

/// The harness around one kernel: `P` from the launch words (its size must match them), the
/// operands' and outputs' addresses patched in, one call.
fn harness(c: &Case) -> String {
    let (nin, nout) = (c.spec.inputs.len(), c.spec.outputs.len());
    let t = if c.reg == DType::F32 { "float" } else { "double" };
    let mut s = format!("{SHIM}{}\nint main() {{\n", c.spec.source());
    let _ = writeln!(s, "  size_t nw; if (fread(&nw, 8, 1, stdin) != 1) return 2; std::vector<u64> w(nw);");
    let _ = writeln!(s, "  if (fread(w.data(), 8, nw, stdin) != nw) return 2;");
    let _ = writeln!(
        s,
        "  if (sizeof(P) != nw * 8) {{ fprintf(stderr, \"P is %zu bytes\\n\", sizeof(P)); return 3; }}"
    );
    let _ = writeln!(s, "  P p; memcpy(&p, w.data(), sizeof(P)); size_t n = (size_t)p.n;");
    let _ = writeln!(s, "  std::vector<std::vector<char>> ins({nin});");
    let _ = writeln!(
        s,
        "  for (int k = 0; k < {nin}; ++k) {{ size_t b; if (fread(&b, 8, 1, stdin) != 1) return 2; ins[k].resize(b); if (fread(ins[k].data(), 1, b, stdin) != b) return 2; }}"
    );
    for k in 0..nin {
        let _ = writeln!(s, "  p.in[{k}] = ins[{k}].data();");
    }
    let _ = writeln!(s, "  std::vector<std::vector<{t}>> outs({nout}, std::vector<{t}>(n));");
    for k in 0..nout {
        let _ = writeln!(s, "  p.out[{k}] = outs[{k}].data();");
    }
    let _ = writeln!(s, "  {}(p);", c.spec.kernel_name());
    let _ = writeln!(s, "  for (auto& o : outs) fwrite(o.data(), sizeof({t}), n, stdout);\n  return 0;\n}}");
    s
}

fn run(dir: &Path, cxx: &str, k: usize, c: &Case) -> Result<Vec<f64>, String> {
    let (src, exe) = (dir.join(format!("k{k}.cpp")), dir.join(format!("k{k}")));
    std::fs::write(&src, harness(c)).unwrap();
    let out = Command::new(cxx).args(["-O1", "-std=c++17", "-o"]).arg(&exe).arg(&src).output().unwrap();
    if !out.status.success() {
        return Err(format!("does not compile:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut bytes: Vec<u8> = (c.words.len() as u64).to_le_bytes().to_vec();
    bytes.extend(c.words.iter().flat_map(|w| w.to_le_bytes()));
    for i in &c.ins {
        bytes.extend((i.len() as u64).to_le_bytes());
        bytes.extend(i);
    }
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(format!("exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(if c.reg == DType::F32 {
        out.stdout.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64).collect()
    } else {
        out.stdout.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
    })
}

/// A C++ compiler that runs, if any.
fn compiler() -> Option<&'static str> {
    ["c++", "g++", "clang++"].into_iter().find(|c| Command::new(c).arg("--version").output().is_ok())
}

#[test]
fn generated_kernels_compute_what_the_cpu_computes() {
    let Some(cxx) = compiler() else {
        eprintln!("skipped: no C++ compiler (c++, g++ or clang++) to build the generated kernels with");
        return;
    };
    let dir = std::env::temp_dir().join(format!("janus-codegen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut r = Lcg(11);
    let mut failures = Vec::new();
    let cases = 40;
    for k in 0..cases {
        let c = if k % 2 == 0 {
            case::<f32>(&mut r, DType::F32, |v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        } else {
            case::<f64>(&mut r, DType::F64, |v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        };
        let tol = if c.reg == DType::F32 { 1e-4 } else { 1e-10 };
        let want: Vec<f64> = c.want.concat();
        match run(&dir, cxx, k, &c) {
            Err(e) => failures.push(format!("case {k}: {e}")),
            Ok(got) if got.len() != want.len() => {
                failures.push(format!("case {k}: {} values, not {}", got.len(), want.len()))
            }
            Ok(got) => {
                let bad = got.iter().zip(&want).position(|(g, w)| {
                    !((g.is_nan() && w.is_nan())
                        || (w.is_infinite() && g == w)
                        || (w.is_finite() && g.is_finite() && (g - w).abs() <= tol * (1.0 + w.abs())))
                });
                if let Some(i) = bad {
                    failures.push(format!(
                        "case {k}: element {i}: {} vs {} (CPU)\n{:?}",
                        got[i], want[i], c.spec
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{} of {cases} kernels differ:\n{}", failures.len(), failures.join("\n\n"));
    eprintln!("{cases} generated kernels compute what the CPU computes");
}
