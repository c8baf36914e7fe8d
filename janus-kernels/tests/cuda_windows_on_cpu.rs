//! The CUDA sliding-window kernels (`unfold`, `fold`, `max_pool`, `max_pool_backward` in
//! `cuda::library::SOURCE`) compiled as C++ for the CPU and run as one thread (the grid-stride
//! loops then visit every element in order), against the CPU kernels of `janus_kernels::conv`:
//! bit for bit, on random geometries (stride, padding, dilation, empty images, the 2x2 halving)
//! with ties, NaN, -inf and -0 in the data. This checks their index arithmetic, tie rules and
//! summation orders on machines without a GPU. Needs a C++ compiler (`c++`, `g++` or
//! `clang++`); without one it prints why and passes.

use janus_kernels::conv::{self, Window};
use janus_kernels::cuda::library::SOURCE;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Shims that make the kernels' device code plain C++: one thread, `gtid() == 0`,
/// `gstride() == 1`.
const SHIM: &str = r#"
#include <cstdio>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cstring>
typedef long long i64; typedef unsigned long long u64;
#define __device__
static i64 gtid() { return 0; }
static i64 gstride() { return 1; }
using std::min;
template<typename T> T ninf() { return -INFINITY; }
"#;

/// Reads `op, bytes per element, Win` and the operands from stdin, writes the result to stdout.
const MAIN: &str = r#"
template<typename T> std::vector<T> rd(size_t n) { std::vector<T> v(n); if (fread(v.data(), sizeof(T), n, stdin) != n) exit(2); return v; }
template<typename T> void wr(const std::vector<T>& v) { fwrite(v.data(), sizeof(T), v.size(), stdout); }
template<typename T> void run(int op, Win g) {
  i64 img = g.n * g.c * g.h * g.w, col = g.c * g.kh * g.kw * g.n * g.oh * g.ow, pooled = g.n * g.c * g.oh * g.ow;
  if (op == 0) { auto x = rd<T>(img); T pad = rd<T>(1)[0]; std::vector<T> o(col); unfold<T>(g, x.data(), pad, o.data()); wr(o); }
  if (op == 1) { auto c = rd<T>(col); std::vector<T> o(img); fold<T>(g, c.data(), o.data()); wr(o); }
  if (op == 2) { auto x = rd<T>(img); std::vector<T> o(pooled); max_pool<T>(g, x.data(), o.data()); wr(o); }
  if (op == 3) { auto x = rd<T>(img); auto gy = rd<T>(pooled); std::vector<T> o(img); max_pool_backward<T>(g, x.data(), gy.data(), o.data()); wr(o); }
}
int main() {
  i64 hdr[16];
  if (fread(hdr, 8, 16, stdin) != 16) return 2;
  Win g; memcpy(&g, hdr + 2, sizeof(Win));
  if (hdr[1] == 4) run<float>((int)hdr[0], g); else run<double>((int)hdr[0], g);
}
"#;

/// The window section of the library source (its templates, without the `extern "C"` entry
/// points), compiled with the shims; `None` when no C++ compiler runs.
fn build(dir: &Path) -> Option<PathBuf> {
    let start = SOURCE.find("struct Win {").expect("the library defines struct Win");
    let end = SOURCE.find("extern \"C\" __global__ void unfold_f32").expect("the library has unfold_f32");
    let src = dir.join("windows.cpp");
    std::fs::write(&src, format!("{SHIM}{}{MAIN}", &SOURCE[start..end])).unwrap();
    let exe = dir.join("windows");
    for cxx in ["c++", "g++", "clang++"] {
        let out = Command::new(cxx).args(["-O1", "-std=c++17", "-o"]).arg(&exe).arg(&src).output();
        match out {
            Ok(o) if o.status.success() => return Some(exe),
            Ok(o) => panic!("{cxx} failed on the kernels' source:\n{}", String::from_utf8_lossy(&o.stderr)),
            Err(_) => continue,
        }
    }
    None
}

trait Elem: janus_kernels::dtype::Float + std::fmt::Debug {
    const BYTES: i64;
    fn of(v: f64) -> Self;
    fn bits(self) -> u64;
    fn to_bytes(v: &[Self]) -> Vec<u8>;
    fn from_bytes(b: &[u8]) -> Vec<Self>;
}

macro_rules! elem {
    ($t:ty, $n:expr) => {
        impl Elem for $t {
            const BYTES: i64 = $n;
            fn of(v: f64) -> Self {
                v as $t
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn to_bytes(v: &[Self]) -> Vec<u8> {
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
            fn from_bytes(b: &[u8]) -> Vec<Self> {
                b.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect()
            }
        }
    };
}
elem!(f32, 4);
elem!(f64, 8);

/// Runs kernel `op` of the compiled source on `g` with `operands`.
fn emulate<T: Elem>(exe: &Path, op: i64, g: &Window, operands: &[&[T]]) -> Vec<T> {
    let [oh, ow] = g.out_size().unwrap();
    let (k, s, p, d) = (g.kernel, g.stride, g.padding, g.dilation);
    let mut hdr = vec![op, T::BYTES];
    hdr.extend(
        [g.n, g.c, g.size[0], g.size[1], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], oh, ow]
            .map(|v| v as i64),
    );
    let mut bytes: Vec<u8> = hdr.iter().flat_map(|v| v.to_le_bytes()).collect();
    for o in operands {
        bytes.extend(T::to_bytes(o));
    }
    let mut child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the emulated kernel {op} failed on {g:?}");
    T::from_bytes(&out.stdout)
}

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }

    /// Small multiples of 0.5 (many ties), some off the grid, and NaN, -inf and -0.
    fn values<T: Elem>(&mut self, n: usize) -> Vec<T> {
        (0..n)
            .map(|_| match self.below(20) {
                0 => T::of(f64::NAN),
                1 => T::of(f64::NEG_INFINITY),
                2 => T::of(-0.0),
                3 => T::of(self.below(1000) as f64 * 1e-3 - 0.5),
                _ => T::of(self.below(7) as f64 * 0.5 - 1.5),
            })
            .collect()
    }
}

/// Equal bits, or both NaN.
fn same<T: Elem>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x.is_nan() && y.is_nan()) || x.bits() == y.bits())
}

fn check<T: Elem>(exe: &Path, r: &mut Lcg, g: &Window) -> Result<(), &'static str> {
    let img = g.n * g.c * g.size[0] * g.size[1];
    let [oh, ow] = g.out_size().unwrap();
    let x: Vec<T> = r.values(img);
    let pad = [T::of(if r.below(2) == 0 { 0.0 } else { f64::NEG_INFINITY })];
    let mut col = vec![T::of(0.0); g.col_len()];
    conv::unfold(g, &x, pad[0], &mut col);
    if !same(&col, &emulate(exe, 0, g, &[&x, &pad])) {
        return Err("unfold");
    }
    let c: Vec<T> = r.values(g.col_len());
    let mut image = vec![T::of(0.0); img];
    conv::fold(g, &c, &mut image);
    if !same(&image, &emulate(exe, 1, g, &[&c])) {
        return Err("fold");
    }
    let mut pooled = vec![T::of(0.0); g.n * g.c * oh * ow];
    conv::max_pool(g, &x, &mut pooled);
    if !same(&pooled, &emulate(exe, 2, g, &[&x])) {
        return Err("max_pool");
    }
    let gy: Vec<T> = r.values(pooled.len());
    let mut dx = vec![T::of(0.0); img];
    conv::max_pool_backward(g, &x, &gy, &mut dx);
    if !same(&dx, &emulate(exe, 3, g, &[&x, &gy])) {
        return Err("max_pool_backward");
    }
    Ok(())
}

#[test]
fn cuda_window_kernels_match_the_cpu_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("janus-windows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = build(&dir) else {
        eprintln!("skipped: no C++ compiler (c++, g++ or clang++) to build the kernels' source with");
        return;
    };
    let mut r = Lcg(7);
    let (mut ran, mut failures) = (0, Vec::new());
    for case in 0..600 {
        let one = |r: &mut Lcg, n| 1 + r.below(n);
        let mut g = Window {
            n: one(&mut r, 3),
            c: one(&mut r, 3),
            size: [r.below(9), r.below(9)],
            kernel: [one(&mut r, 4), one(&mut r, 4)],
            stride: [one(&mut r, 3), one(&mut r, 3)],
            padding: [r.below(3), r.below(3)],
            dilation: [one(&mut r, 2), one(&mut r, 2)],
        };
        if case % 5 == 0 {
            // The 2x2 halving, which the CPU kernels run by a path of their own.
            (g.kernel, g.stride, g.padding, g.dilation) = ([2, 2], [2, 2], [0, 0], [1, 1]);
            g.size = [2 + r.below(8), 2 + r.below(8)];
        }
        if g.out_size().is_none() {
            continue;
        }
        ran += 1;
        let res = if case % 2 == 0 { check::<f32>(&exe, &mut r, &g) } else { check::<f64>(&exe, &mut r, &g) };
        if let Err(what) = res {
            failures.push(format!("{what} on {g:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ran > 300, "only {ran} geometries fit");
    assert!(failures.is_empty(), "{} of {ran} geometries differ:\n{}", failures.len(), failures.join("\n"));
    eprintln!("{ran} geometries: the CUDA window kernels equal the CPU's bit for bit");
}
