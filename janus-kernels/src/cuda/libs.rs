//! Finding the CUDA libraries at run time.
//!
//! cudarc loads `libcuda`, `libnvrtc` and `libcublas` by name, through the dynamic loader's
//! search path. The driver is installed system-wide; NVRTC and cuBLAS often are not: Python's
//! `nvidia-*` wheels put them under `site-packages/nvidia/cu13/lib`, which the loader does not
//! search. Before the first use, this module looks for each library by name and, where that
//! fails, in a list of directories, and loads it by its full path. The dynamic loader then
//! matches cudarc's later load by name against the already loaded library's SONAME.
//!
//! Directories searched, in order: `JANUS_CUDA_LIB_DIR` (a `:`-separated list), `CUDA_HOME` and
//! `CUDA_PATH`, `/usr/local/cuda`, and the `nvidia/*/lib` folders of Python environments
//! (`VIRTUAL_ENV`, `CONDA_PREFIX`, `/opt/*/.venv`, `/usr/local`, `/usr`, `~/.local`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The libraries the backend needs beyond the driver, by the SONAME that cudarc (or NVRTC,
/// for its builtins) asks for.
pub const LIBRARIES: [&str; 4] =
    ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13", "libcublasLt.so.13", "libcublas.so.13"];

/// Where each library was found: `(soname, Some(path))` when loaded from a searched directory,
/// `(soname, None)` when the loader found it by name, absent when not found.
static FOUND: Mutex<Vec<(String, Option<PathBuf>)>> = Mutex::new(Vec::new());

fn push_python_roots(roots: &mut Vec<PathBuf>) {
    let env_dir = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    roots.extend(env_dir("VIRTUAL_ENV"));
    roots.extend(env_dir("CONDA_PREFIX"));
    if let Ok(rd) = std::fs::read_dir("/opt") {
        for e in rd.flatten() {
            roots.push(e.path().join(".venv"));
            roots.push(e.path().join("venv"));
            roots.push(e.path());
        }
    }
    roots.push("/usr/local".into());
    roots.push("/usr".into());
    if let Some(home) = env_dir("HOME") {
        roots.push(home.join(".local"));
    }
}

/// Every `ROOT/lib/python3*/{site,dist}-packages/nvidia/*/SUB` that exists.
fn nvidia_wheel_dirs(sub: &str) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    push_python_roots(&mut roots);
    let mut out = Vec::new();
    for root in roots {
        for lib in ["lib", "lib64"] {
            let Ok(rd) = std::fs::read_dir(root.join(lib)) else { continue };
            for py in rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("python3")) {
                for pkgs in ["site-packages", "dist-packages"] {
                    let nv = py.path().join(pkgs).join("nvidia");
                    let Ok(rd) = std::fs::read_dir(&nv) else { continue };
                    for pkg in rd.flatten() {
                        let d = pkg.path().join(sub);
                        if d.is_dir() {
                            out.push(d);
                        }
                    }
                }
            }
        }
    }
    out
}

/// The directories searched for the libraries, in order.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("JANUS_CUDA_LIB_DIR") {
        dirs.extend(std::env::split_paths(&v));
    }
    for k in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(k) {
            dirs.push(Path::new(&v).join("lib64"));
            dirs.push(Path::new(&v).join("lib"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.extend(nvidia_wheel_dirs("lib"));
    dirs.dedup();
    dirs
}

/// Finds `ptxas` (for tests that assemble generated PTX): `JANUS_PTXAS`, then `bin/ptxas` next
/// to the searched library folders, then the `PATH`.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("JANUS_PTXAS") {
        return Some(p.into());
    }
    let mut cands: Vec<PathBuf> =
        search_dirs().iter().filter_map(|d| d.parent().map(|p| p.join("bin"))).collect();
    cands.extend(nvidia_wheel_dirs("bin"));
    if let Some(path) = std::env::var_os("PATH") {
        cands.extend(std::env::split_paths(&path));
    }
    cands.into_iter().map(|d| d.join("ptxas")).find(|p| p.is_file())
}

/// Loads the libraries that the loader cannot find by name from the searched directories.
/// Runs once; never panics. Libraries that stay missing make the features that need them
/// report an error when used.
pub fn preload() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let dirs = search_dirs();
        let mut found = FOUND.lock().unwrap();
        for name in LIBRARIES {
            // SAFETY: loading a CUDA library runs its initialisers, which have no
            // preconditions; the handle is kept for the life of the process.
            if let Ok(lib) = unsafe { libloading::Library::new(name) } {
                std::mem::forget(lib);
                found.push((name.to_string(), None));
                continue;
            }
            for d in &dirs {
                let full = d.join(name);
                if !full.is_file() {
                    continue;
                }
                // SAFETY: as above, by full path.
                if let Ok(lib) = unsafe { libloading::Library::new(&full) } {
                    std::mem::forget(lib);
                    found.push((name.to_string(), Some(full)));
                    break;
                }
            }
        }
    });
}

/// Where each needed library was found, for error messages and `janus::cuda::info()`.
pub fn describe() -> String {
    preload();
    let found = FOUND.lock().unwrap();
    LIBRARIES
        .iter()
        .map(|name| match found.iter().find(|(n, _)| n == name) {
            Some((_, Some(p))) => format!("{name}: {}", p.display()),
            Some((_, None)) => format!("{name}: by name"),
            None => format!("{name}: not found"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether `soname` was found.
pub fn has(soname: &str) -> bool {
    preload();
    FOUND.lock().unwrap().iter().any(|(n, _)| n == soname)
}

/// How to install the libraries, for error messages.
pub const INSTALL_HINT: &str = "install the CUDA 13 wheels (`pip install nvidia-cuda-nvrtc==13.0.* \
     nvidia-cublas==13.0.*`) or a CUDA toolkit, or point JANUS_CUDA_LIB_DIR at the folder holding \
     libnvrtc.so.13 and libcublas.so.13";
