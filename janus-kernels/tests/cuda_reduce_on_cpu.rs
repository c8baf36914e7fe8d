//! The CUDA reduction kernel (`reduce` in `cuda::library::SOURCE`) compiled as C++ for the CPU
//! and run as one emulated warp: 32 threads, with `__shfl_down_sync` and `__shfl_sync` as
//! barrier-separated exchanges. Each case runs the launches `cuda::ops::reduce_passes` plans
//! (one pass, or the split's partials and their second pass) and compares them with a
//! reference: sums in f64 within rounding, max, min and argmax exactly (NaN counting as the
//! maximum, as the CPU kernels do). This checks the kernel's unit mapping, chunk bounds and
//! partial layouts on machines without a GPU. Needs a C++20 compiler; without one it prints why
//! and passes.

use janus_kernels::cuda::codegen::plan_access;
use janus_kernels::cuda::library::{MAX_RANK, ReduceOp, SOURCE, reduce_code};
use janus_kernels::cuda::ops::{ReducePass, reduce_passes};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One warp of threads on the CPU: lane `lane_id`, one block of 32, and shuffles through a
/// shared slot array between barriers.
const SHIM: &str = r#"
#include <cstdio>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <thread>
#include <barrier>
#include <vector>
#include <algorithm>
typedef long long i64; typedef unsigned long long u64; typedef unsigned int u32;
#define MAXR 8
#define __device__
#define __forceinline__ inline
static thread_local int lane_id;
struct Idx { long long x; };
#define threadIdx (Idx{lane_id})
#define blockIdx (Idx{0})
#define blockDim (Idx{32})
#define gridDim (Idx{1})
static std::barrier<>* bar;
static u64 slots[32];
template<typename T> T xchg(T v, int src) {
  u64 b = 0; memcpy(&b, &v, sizeof(T));
  bar->arrive_and_wait(); slots[lane_id] = b; bar->arrive_and_wait();
  u64 r = (src >= 0 && src < 32) ? slots[src] : b;
  T o; memcpy(&o, &r, sizeof(T)); return o;
}
template<typename T> T __shfl_down_sync(unsigned, T v, int w) { return xchg(v, lane_id + w); }
template<typename T> T __shfl_sync(unsigned, T v, int src) { return xchg(v, src); }
static float __int_as_float(unsigned v) { float f; memcpy(&f, &v, 4); return f; }
static double __longlong_as_double(i64 v) { double d; memcpy(&d, &v, 8); return d; }
static u32 atomicCAS(u32* p, u32 c, u32 v) { u32 o = *p; if (o == c) *p = v; return o; }
using std::min;
"#;

/// Reads a header, two NDs and the input from stdin; runs one launch; writes the results.
const MAIN: &str = r#"
template<typename T> void run(const i64* h, const ND& kept, const ND& red) {
  std::vector<T> x(h[7]);
  if (fread(x.data(), sizeof(T), x.size(), stdin) != x.size()) exit(2);
  size_t n = (size_t)(h[3] * h[5]), width = h[0] == 3 ? 8 : sizeof(T);
  std::vector<unsigned char> out(n * width);
  std::barrier<> b(32); bar = &b;
  std::vector<std::thread> lanes;
  for (int l = 0; l < 32; ++l) lanes.emplace_back([&, l] {
    lane_id = l;
    reduce<T>((u32)h[0], h[3], h[4], kept, red, x.data(), out.data(), (int)h[2], h[5], h[6]);
  });
  for (auto& t : lanes) t.join();
  fwrite(out.data(), 1, out.size(), stdout);
}
int main() {
  i64 h[8]; ND kept, red;
  if (fread(h, 8, 8, stdin) != 8 || fread(&kept, sizeof(ND), 1, stdin) != 1 || fread(&red, sizeof(ND), 1, stdin) != 1) return 2;
  if (h[1] == 4) run<float>(h, kept, red); else run<double>(h, kept, red);
}
"#;

fn build(dir: &Path) -> Option<PathBuf> {
    let nd = SOURCE.find("struct ND {").expect("the library defines struct ND");
    let copies = SOURCE.find("// ---- copies and fills").expect("the library has copies");
    let start = SOURCE.find("// ---- reductions").expect("the library has reductions");
    let end = SOURCE.find("extern \"C\" __global__ void reduce_f32").expect("the library has reduce_f32");
    let src = dir.join("reduce.cpp");
    std::fs::write(&src, format!("{SHIM}{}{}{MAIN}", &SOURCE[nd..copies], &SOURCE[start..end])).unwrap();
    let exe = dir.join("reduce");
    for cxx in ["c++", "g++", "clang++"] {
        let out =
            Command::new(cxx).args(["-O1", "-std=c++20", "-pthread", "-o"]).arg(&exe).arg(&src).output();
        match out {
            Ok(o) if o.status.success() => return Some(exe),
            Ok(o) => {
                let err = String::from_utf8_lossy(&o.stderr);
                if err.contains("barrier") && err.contains("No such file") {
                    return None; // a compiler without C++20's <barrier>
                }
                panic!("{cxx} failed on the kernel's source:\n{err}")
            }
            Err(_) => continue,
        }
    }
    None
}

fn nd(shape: &[usize], strides: &[usize]) -> Vec<i64> {
    let mut w = vec![0i64; 1 + 2 * MAX_RANK];
    w[0] = shape.len() as i64;
    for (i, (&s, &st)) in shape.iter().zip(strides).enumerate() {
        w[1 + i] = s as i64;
        w[1 + MAX_RANK + i] = st as i64;
    }
    w
}

/// One launch of `pass` on `x` (f64 data, sent as f32 when `f32`); results as f64 (argmax:
/// the index).
fn launch(exe: &Path, op: ReduceOp, f32: bool, pass: &ReducePass, x: &[f64]) -> Vec<f64> {
    let bytes = if f32 { 4 } else { 8 };
    let h = [
        reduce_code(op) as i64,
        bytes,
        pass.per_thread as i64,
        pass.n_out as i64,
        pass.n_red as i64,
        pass.chunks as i64,
        pass.chunk as i64,
        x.len() as i64,
    ];
    let mut input: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
    for w in [nd(&pass.kept.0, &pass.kept.1), nd(&pass.red.0, &pass.red.1)] {
        input.extend(w.iter().flat_map(|v| v.to_le_bytes()));
    }
    for &v in x {
        if f32 {
            input.extend((v as f32).to_le_bytes());
        } else {
            input.extend(v.to_le_bytes());
        }
    }
    let mut child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the emulated reduce failed on {pass:?}");
    if op == ReduceOp::ArgMax {
        return out
            .stdout
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect();
    }
    match f32 {
        true => {
            out.stdout.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect()
        }
        false => out.stdout.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
    }
}

/// The planned passes, run in order (the second reads the first's partials).
fn emulate(exe: &Path, op: ReduceOp, f32: bool, passes: &[ReducePass], x: &[f64]) -> Vec<f64> {
    let mut partials = Vec::new();
    let mut out = Vec::new();
    for p in passes {
        let r = launch(exe, op, f32, p, if p.from_partials { &partials } else { x });
        if p.to_partials { partials = r } else { out = r }
    }
    out
}

/// What each output should be: its reduced elements by `op` (NaN the maximum for max, min and
/// argmax, whose first maximum wins).
fn reference(op: ReduceOp, vals: &[f64]) -> f64 {
    let nan = vals.iter().position(|v| v.is_nan());
    match op {
        ReduceOp::Sum => vals.iter().sum(),
        ReduceOp::Max => {
            nan.map_or_else(|| vals.iter().copied().fold(f64::NEG_INFINITY, f64::max), |_| f64::NAN)
        }
        ReduceOp::Min => nan.map_or_else(|| vals.iter().copied().fold(f64::INFINITY, f64::min), |_| f64::NAN),
        ReduceOp::ArgMax => nan.unwrap_or_else(|| {
            let m = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            vals.iter().position(|&v| v == m).unwrap_or(0)
        }) as f64,
        ReduceOp::LogSumExp => unreachable!("not split; not checked here"),
    }
}

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn cuda_reduce_passes_match_a_reference_on_an_emulated_warp() {
    let dir = std::env::temp_dir().join(format!("janus-reduce-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = build(&dir) else {
        eprintln!("skipped: no C++20 compiler (c++, g++ or clang++) to build the kernel's source with");
        return;
    };
    let mut r = Lcg(11);
    let (mut split, mut failures) = ([0, 0], Vec::new());
    for case in 0..160 {
        // A dense [a, b, c] tensor reduced over a random non-empty set of its dims; long dims
        // often, so that the split (which a 1-multiprocessor device makes likely) happens.
        let len = |r: &mut Lcg| if r.below(3) == 0 { 1 + r.below(4) } else { 1 + r.below(3000) };
        let shape = loop {
            // Every fifth case: few long contiguous rows, which warps reduce in chunks.
            let s = match case % 5 {
                0 => [1 + r.below(8), 16_384 + r.below(40_000), 1],
                _ => [len(&mut r), len(&mut r), 1 + r.below(5)],
            };
            if s.iter().product::<usize>() <= 400_000 {
                break s;
            }
        };
        let dims: Vec<usize> = loop {
            if case % 5 == 0 {
                break vec![1, 2];
            }
            let d: Vec<usize> = (0..3).filter(|_| r.below(2) == 0).collect();
            if !d.is_empty() {
                break d;
            }
        };
        let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax][case % 4];
        let f32 = case % 8 >= 4;
        let n: usize = shape.iter().product();
        let x: Vec<f64> = (0..n)
            .map(|_| match r.below(4000) {
                0 if op != ReduceOp::Sum => f64::NAN,
                1 if op != ReduceOp::Sum => f64::NEG_INFINITY,
                _ => r.below(1 << 20) as f64 / (1 << 19) as f64 - 1.0,
            })
            .map(|v| if f32 { v as f32 as f64 } else { v })
            .collect();
        let strides = [shape[1] * shape[2], shape[2], 1];
        let pick = |inside: bool| -> (Vec<usize>, Vec<usize>) {
            (0..3).filter(|d| dims.contains(d) == inside).map(|d| (shape[d], strides[d])).unzip()
        };
        let ((ks, kst), (rs, rst)) = (pick(false), pick(true));
        let (kept, kst, _) = plan_access(&ks, &[&kst]);
        let (red, rst, _) = plan_access(&rs, &[&rst]);
        let sm = if r.below(3) == 0 { 132 } else { 1 };
        let passes = reduce_passes(op, (&kept, &kst[0]), (&red, &rst[0]), sm);
        if passes.len() == 2 {
            split[passes[0].per_thread as usize] += 1;
        }
        let got = emulate(&exe, op, f32, &passes, &x);
        // The reference: walk each output's elements in index order.
        let n_out: usize = kept.iter().product();
        let offsets = |shape: &[usize], st: &[usize], i: usize| {
            let (mut rem, mut off) = (i, 0);
            for (&l, &s) in shape.iter().zip(st).rev() {
                off += (rem % l) * s;
                rem /= l;
            }
            off
        };
        assert_eq!(got.len(), n_out, "case {case}: results");
        for (o, &g) in got.iter().enumerate() {
            let base = offsets(&kept, &kst[0], o);
            let vals: Vec<f64> =
                (0..red.iter().product::<usize>()).map(|j| x[base + offsets(&red, &rst[0], j)]).collect();
            let want = reference(op, &vals);
            let scale: f64 = vals.iter().map(|v| v.abs()).sum::<f64>().max(1.0);
            let ok = match op {
                ReduceOp::Sum => (g - want).abs() <= scale * if f32 { 1e-5 } else { 1e-13 },
                _ => (g.is_nan() && want.is_nan()) || g == want,
            };
            if !ok && failures.len() < 6 {
                failures.push(format!(
                    "case {case}: {op:?} of {shape:?} over {dims:?} ({}, sm {sm}, passes {passes:?}): output {o} is {} not {want}",
                    if f32 { "f32" } else { "f64" },
                    g
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Both unit kinds reach the two-pass path: [warps, threads].
    assert!(
        split.iter().all(|&n| n >= 8),
        "split cases by unit kind {split:?}: too few to test the two passes"
    );
}
