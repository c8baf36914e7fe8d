//! Compiling generated CUDA C to PTX with NVRTC, cached in memory and on disk.
//!
//! The cache key is a hash of the source, the target architecture and NVRTC's version, so a
//! changed kernel, GPU or compiler never reuses a stale PTX. The disk cache lives in
//! `JANUS_CACHE_DIR`, else `$XDG_CACHE_HOME/janus/ptx`, else `~/.cache/janus/ptx`; writes go
//! through a temporary file and a rename, so concurrent processes never read half a file.
//! NVRTC needs no GPU, so all of this runs (and is tested) on machines without one.

use super::CudaError;
use cudarc::nvrtc::{result, sys};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// FNV-1a over bytes, 64 bits: a hash that is stable across builds and platforms.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Whether NVRTC can be loaded; the error says how to install it.
pub fn available() -> Result<(), CudaError> {
    static OK: OnceLock<Result<(), CudaError>> = OnceLock::new();
    OK.get_or_init(|| {
        super::libs::preload();
        // SAFETY: only tries to load the library; no symbol is called.
        if unsafe { sys::is_culib_present() } {
            Ok(())
        } else {
            Err(CudaError::Nvrtc(format!("libnvrtc.so.13 not found: {}", super::libs::INSTALL_HINT)))
        }
    })
    .clone()
}

/// NVRTC's version as `(major, minor)`.
pub fn version() -> Result<(i32, i32), CudaError> {
    available()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| CudaError::Nvrtc(format!("nvrtcVersion: {e:?}")))?;
    Ok((major, minor))
}

fn disk_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = env("JANUS_CACHE_DIR") {
        return Some(d.join("ptx"));
    }
    env("XDG_CACHE_HOME")
        .map(|d| d.join("janus"))
        .or_else(|| env("HOME").map(|h| h.join(".cache").join("janus")))
        .map(|d| d.join("ptx"))
}

type MemCache = Mutex<HashMap<u64, Arc<str>>>;

fn mem_cache() -> &'static MemCache {
    static CACHE: OnceLock<MemCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Counters of the compile cache (for tests and `explain`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Sources compiled by NVRTC in this process.
    pub compiled: u64,
    /// Sources read from the disk cache.
    pub from_disk: u64,
    /// Milliseconds spent in NVRTC.
    pub compile_ms: u64,
}

static STATS: Mutex<CompileStats> = Mutex::new(CompileStats { compiled: 0, from_disk: 0, compile_ms: 0 });

/// Compile-cache counters so far.
pub fn stats() -> CompileStats {
    *STATS.lock().unwrap()
}

/// PTX for `src` on `arch` (e.g. `sm_90`), from the memory cache, the disk cache or NVRTC.
/// `name` labels errors.
pub fn compile(src: &str, arch: &str, name: &str) -> Result<Arc<str>, CudaError> {
    let (major, minor) = version()?;
    let key = fnv1a(&[src.as_bytes(), arch.as_bytes(), &major.to_le_bytes(), &minor.to_le_bytes()]);
    if let Some(p) = mem_cache().lock().unwrap().get(&key) {
        return Ok(p.clone());
    }
    let file = disk_dir().map(|d| d.join(format!("{key:016x}-{arch}.ptx")));
    if let Some(f) = &file
        && let Ok(ptx) = std::fs::read_to_string(f)
        && ptx.contains(".entry")
    {
        STATS.lock().unwrap().from_disk += 1;
        let ptx: Arc<str> = ptx.into();
        mem_cache().lock().unwrap().insert(key, ptx.clone());
        return Ok(ptx);
    }
    let t = std::time::Instant::now();
    let ptx: Arc<str> = compile_uncached(src, arch, name)?.into();
    {
        let mut s = STATS.lock().unwrap();
        s.compiled += 1;
        s.compile_ms += t.elapsed().as_millis() as u64;
    }
    if let Some(f) = &file {
        // Best effort: a read-only home only costs a recompile next time.
        let tmp = f.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::create_dir_all(f.parent().unwrap()).is_ok()
            && std::fs::write(&tmp, ptx.as_bytes()).is_ok()
        {
            let _ = std::fs::rename(&tmp, f);
        }
    }
    mem_cache().lock().unwrap().insert(key, ptx.clone());
    Ok(ptx)
}

/// Runs NVRTC; the error carries the compiler's log and the source's first lines.
pub fn compile_uncached(src: &str, arch: &str, name: &str) -> Result<String, CudaError> {
    available()?;
    let csrc = CString::new(src).expect("generated CUDA source has no NUL byte");
    let cname = CString::new(format!("{name}.cu")).expect("kernel names have no NUL byte");
    let err = |what: &str, e: result::NvrtcError| CudaError::Nvrtc(format!("{what} ({name}): {e:?}"));
    let prog = result::create_program(&csrc, Some(&cname)).map_err(|e| err("nvrtcCreateProgram", e))?;
    let opts =
        [format!("--gpu-architecture={arch}"), "--std=c++17".to_string(), "-default-device".to_string()];
    // SAFETY: `prog` is a live program created above and destroyed once, below.
    unsafe {
        let compiled = result::compile_program(prog, &opts);
        let res = match compiled {
            Ok(()) => result::get_ptx(prog)
                .map_err(|e| err("nvrtcGetPTX", e))
                .map(|raw| CStr::from_ptr(raw.as_ptr()).to_string_lossy().into_owned()),
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| CStr::from_ptr(l.as_ptr()).to_string_lossy().into_owned())
                    .unwrap_or_default();
                let head: String = src.lines().take(60).collect::<Vec<_>>().join("\n");
                Err(CudaError::Compile {
                    kernel: name.to_string(),
                    log: format!("{e:?}\n{log}\n--- source ---\n{head}"),
                })
            }
        };
        let _ = result::destroy_program(prog);
        res
    }
}
