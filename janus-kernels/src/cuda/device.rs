//! One CUDA device: its context, its stream, the caching allocator, loaded kernels, the error
//! word that index kernels write, and the cuBLAS handle.
//!
//! Every device has one stream, shared by all threads; work from different threads is ordered
//! by when it was enqueued, which is what makes the allocator's immediate reuse safe. A thread
//! that captures a CUDA graph enqueues on a capture stream of its own instead (see `graph.rs`).
//! Nothing here panics: every driver call returns a [`CudaError`] that names the call.

use super::alloc::{Cache, MemoryStats, RawAlloc};
use super::codegen::EwSpec;
use super::launch::Args;
use super::library::{DeviceFault, Kernel};
use super::{CudaError, check, libs, nvrtc};
use cudarc::driver::sys;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

/// The driver side of the allocator.
pub(crate) struct Driver {
    ctx: usize,
}

impl RawAlloc for Driver {
    type Error = CudaError;
    fn raw_alloc(&mut self, bytes: usize) -> Result<u64, CudaError> {
        bind_ctx(self.ctx)?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: a valid out-pointer; the context is current on this thread.
        match unsafe { sys::cuMemAlloc_v2(&mut p, bytes) } {
            sys::CUresult::CUDA_SUCCESS => Ok(p),
            sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(CudaError::OutOfMemory { requested: bytes }),
            e => Err(CudaError::Driver { call: "cuMemAlloc", code: format!("{e:?}") }),
        }
    }
    fn raw_free(&mut self, ptr: u64) {
        if bind_ctx(self.ctx).is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc on this context and is freed once.
            unsafe {
                let _ = sys::cuMemFree_v2(ptr);
            }
        }
    }
}

/// A thread's graph capture: its stream, and the blocks freed while it captures.
pub(crate) type CaptureState = Option<(usize, Vec<(u64, usize)>)>;

type DeviceTable = Mutex<HashMap<usize, Result<Arc<CudaDevice>, CudaError>>>;

thread_local! {
    static CURRENT_CTX: Cell<usize> = const { Cell::new(0) };
    /// The stream of this thread's graph capture, and the blocks it freed meanwhile.
    pub(crate) static CAPTURE: RefCell<CaptureState> = const { RefCell::new(None) };
}

/// Makes `ctx` current on this thread (once per thread and context).
fn bind_ctx(ctx: usize) -> Result<(), CudaError> {
    if CURRENT_CTX.with(Cell::get) != ctx {
        // SAFETY: `ctx` is a retained primary context that is never released.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx as sys::CUcontext) })?;
        CURRENT_CTX.with(|c| c.set(ctx));
    }
    Ok(())
}

/// A CUDA device in use.
pub struct CudaDevice {
    /// The device's ordinal.
    pub ordinal: usize,
    /// The device's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    ctx: usize,
    stream: usize,
    cache: Mutex<Cache<Driver>>,
    kernels: Mutex<HashMap<String, usize>>,
    /// Generated elementwise kernels by their spec (a hash and a comparison per launch, not
    /// the source-shaped name `kernel_name` formats).
    ew_kernels: Mutex<HashMap<EwSpec, usize>>,
    library: Mutex<Option<usize>>,
    err_word: u64,
    pub(crate) blas: Mutex<Option<super::blas::Blas>>,
    pub(crate) capture_lock: Mutex<()>,
}

// SAFETY: the raw handles are plain addresses of driver objects, which the driver allows to be
// used from any thread once the context is current there (`bind` does that before each use).
unsafe impl Send for CudaDevice {}
// SAFETY: as above; mutable state is behind mutexes.
unsafe impl Sync for CudaDevice {}

/// Initialises the driver once; `Err` says why CUDA is unusable on this machine.
pub fn driver() -> Result<usize, CudaError> {
    static INIT: OnceLock<Result<usize, CudaError>> = OnceLock::new();
    INIT.get_or_init(|| {
        libs::preload();
        // SAFETY: only tries to load libcuda; no symbol is called.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDriver("libcuda.so.1 not found (no NVIDIA driver installed)".into()));
        }
        // SAFETY: cuInit has no preconditions.
        check("cuInit", unsafe { sys::cuInit(0) }).map_err(|e| CudaError::NoDriver(e.to_string()))?;
        let mut n = 0;
        // SAFETY: a valid out-pointer after cuInit.
        check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
        Ok(n as usize)
    })
    .clone()
}

/// Number of CUDA devices (0 when there is no driver). Never panics.
pub fn device_count() -> usize {
    driver().unwrap_or(0)
}

/// The device with this ordinal, initialised on first use.
pub fn device(ordinal: usize) -> Result<Arc<CudaDevice>, CudaError> {
    static DEVICES: OnceLock<DeviceTable> = OnceLock::new();
    let map = DEVICES.get_or_init(Default::default);
    let mut map = map.lock().unwrap();
    map.entry(ordinal).or_insert_with(|| CudaDevice::open(ordinal).map(Arc::new)).clone()
}

impl CudaDevice {
    fn open(ordinal: usize) -> Result<CudaDevice, CudaError> {
        let count = driver()?;
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let mut dev: sys::CUdevice = 0;
        // SAFETY: valid out-pointers; the ordinal is in range.
        unsafe {
            check("cuDeviceGet", sys::cuDeviceGet(&mut dev, ordinal as i32))?;
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            check("cuDevicePrimaryCtxRetain", sys::cuDevicePrimaryCtxRetain(&mut ctx, dev))?;
            bind_ctx(ctx as usize)?;
            let attr = |a: sys::CUdevice_attribute| -> Result<i32, CudaError> {
                let mut v = 0;
                check("cuDeviceGetAttribute", sys::cuDeviceGetAttribute(&mut v, a, dev))?;
                Ok(v)
            };
            use sys::CUdevice_attribute::*;
            let capability = (
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            );
            let sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
            let mut name = [0 as std::ffi::c_char; 256];
            check("cuDeviceGetName", sys::cuDeviceGetName(name.as_mut_ptr(), 256, dev))?;
            let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            let mut stream: sys::CUstream = std::ptr::null_mut();
            check(
                "cuStreamCreate",
                sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32),
            )?;
            let mut cache = Cache::new(Driver { ctx: ctx as usize });
            let (err_word, _) = cache.alloc(8)?;
            check("cuMemsetD32Async", sys::cuMemsetD32Async(err_word, 0, 2, stream))?;
            check("cuStreamSynchronize", sys::cuStreamSynchronize(stream))?;
            Ok(CudaDevice {
                ordinal,
                name,
                capability,
                sm_count,
                ctx: ctx as usize,
                stream: stream as usize,
                cache: Mutex::new(cache),
                kernels: Mutex::default(),
                ew_kernels: Mutex::default(),
                library: Mutex::default(),
                err_word,
                blas: Mutex::default(),
                capture_lock: Mutex::default(),
            })
        }
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self) -> Result<(), CudaError> {
        bind_ctx(self.ctx)
    }

    /// The NVRTC target, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.capability.0, self.capability.1)
    }

    /// The stream this thread enqueues on: its capture stream while capturing, else the
    /// device's stream.
    pub fn stream(&self) -> sys::CUstream {
        CAPTURE.with(|c| c.borrow().as_ref().map(|(s, _)| *s)).unwrap_or(self.stream) as sys::CUstream
    }

    /// Whether this thread is capturing a CUDA graph.
    pub fn capturing(&self) -> bool {
        CAPTURE.with(|c| c.borrow().is_some())
    }

    /// The device's own stream (where graphs are launched).
    pub fn main_stream(&self) -> sys::CUstream {
        self.stream as sys::CUstream
    }

    /// Address of the device's error word (`u32`), which index kernels set on a bad index.
    pub fn err_word(&self) -> u64 {
        self.err_word
    }

    /// A block of at least `bytes` from the caching allocator.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let (ptr, size) = self.cache.lock().unwrap().alloc(bytes)?;
        Ok(DeviceBuffer { ptr, size, bytes, dev: self.clone(), owned: true })
    }

    fn free(&self, ptr: u64, size: usize) {
        let held = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
            Some((_, held)) => {
                held.push((ptr, size));
                true
            }
            None => false,
        });
        if !held {
            self.cache.lock().unwrap().free(ptr, size);
        }
    }

    /// Returns blocks a graph held to the cache.
    pub(crate) fn release_held(&self, held: Vec<(u64, usize)>) {
        let mut c = self.cache.lock().unwrap();
        for (p, s) in held {
            c.free(p, s);
        }
    }

    /// Allocator statistics.
    pub fn memory_stats(&self) -> MemoryStats {
        self.cache.lock().unwrap().stats()
    }

    /// Returns the allocator's cached blocks to the driver.
    pub fn empty_cache(&self) {
        self.cache.lock().unwrap().release_cached();
    }

    /// Copies host bytes into a new device buffer (asynchronously on the stream).
    pub fn upload(self: &Arc<Self>, bytes: &[u8]) -> Result<DeviceBuffer, CudaError> {
        let buf = self.alloc(bytes.len())?;
        self.copy_htod(buf.ptr, bytes)?;
        Ok(buf)
    }

    /// Copies host bytes to device address `dst`.
    pub fn copy_htod(&self, dst: u64, bytes: &[u8]) -> Result<(), CudaError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.capturing() {
            // The driver would record the host address, and a replay read whatever is there.
            return Err(CudaError::NotCapturable("a copy from host memory".into()));
        }
        self.bind()?;
        // SAFETY: `dst` has room for `bytes` (the caller's allocation); pageable sources are
        // staged by the driver before the call returns.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, bytes.as_ptr() as *const _, bytes.len(), self.stream())
        })
    }

    /// Copies `bytes` bytes between device addresses.
    pub fn copy_dtod(&self, dst: u64, src: u64, bytes: usize) -> Result<(), CudaError> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both ranges lie in live allocations (the caller's).
        check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.stream()) })
    }

    /// Sets `bytes` bytes at `dst` to zero.
    pub fn zero(&self, dst: u64, bytes: usize) -> Result<(), CudaError> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the range lies in a live allocation (the caller's).
        check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(dst, 0, bytes, self.stream()) })
    }

    /// Copies device bytes to the host: waits for all work enqueued so far, then reports a fault
    /// that an index kernel flagged since the last synchronisation.
    pub fn download(&self, src: u64, out: &mut [u8]) -> Result<(), CudaError> {
        if self.capturing() {
            return Err(CudaError::NotCapturable("a read to the host".into()));
        }
        self.bind()?;
        let mut word = [0u8; 4];
        let stream = self.main_stream();
        // SAFETY: `out` and `word` are valid host buffers of the given sizes, `src` and the
        // error word live device ranges; the stream is synchronised before they are read.
        unsafe {
            if !out.is_empty() {
                check(
                    "cuMemcpyDtoHAsync",
                    sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr() as *mut _, src, out.len(), stream),
                )?;
            }
            check(
                "cuMemcpyDtoHAsync",
                sys::cuMemcpyDtoHAsync_v2(word.as_mut_ptr() as *mut _, self.err_word, 4, stream),
            )?;
            check("cuStreamSynchronize", sys::cuStreamSynchronize(stream))?;
        }
        let code = u32::from_le_bytes(word);
        if code != 0 {
            // SAFETY: the error word is a live 8-byte allocation; reset for the next fault, in
            // order with the device's stream.
            unsafe { check("cuMemsetD32Async", sys::cuMemsetD32Async(self.err_word, 0, 1, stream))? };
            let (op, what) =
                DeviceFault::from_code(code).map_or(("a kernel", "unknown fault"), DeviceFault::describe);
            return Err(CudaError::Fault { op, what });
        }
        Ok(())
    }

    /// Waits for all enqueued work and reports a flagged fault (see [`download`](Self::download)).
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.download(0, &mut [])
    }

    fn load(&self, ptx: &str, name: &str) -> Result<(usize, usize), CudaError> {
        self.bind()?;
        let image = CString::new(ptx).expect("PTX has no NUL byte");
        let cname = CString::new(name).expect("kernel names have no NUL byte");
        let mut module: sys::CUmodule = std::ptr::null_mut();
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: a NUL-terminated PTX image and valid out-pointers.
        unsafe {
            check("cuModuleLoadData", sys::cuModuleLoadData(&mut module, image.as_ptr() as *const _))?;
            check("cuModuleGetFunction", sys::cuModuleGetFunction(&mut f, module, cname.as_ptr()))?;
        }
        Ok((module as usize, f as usize))
    }

    /// The function of a generated elementwise kernel (compiled and loaded on first use).
    pub fn ew_function(&self, spec: &EwSpec) -> Result<sys::CUfunction, CudaError> {
        if let Some(&f) = self.ew_kernels.lock().unwrap().get(spec) {
            return Ok(f as sys::CUfunction);
        }
        let name = spec.kernel_name();
        let ptx = nvrtc::compile(&spec.source(), &self.arch(), &name)?;
        let (_, f) = self.load(&ptx, &name)?;
        self.ew_kernels.lock().unwrap().insert(spec.clone(), f);
        Ok(f as sys::CUfunction)
    }

    /// A library kernel (the library is compiled and loaded on first use).
    pub fn library_function(&self, k: Kernel) -> Result<sys::CUfunction, CudaError> {
        let name = k.name();
        if let Some(&f) = self.kernels.lock().unwrap().get(&name) {
            return Ok(f as sys::CUfunction);
        }
        let module = {
            let mut lib = self.library.lock().unwrap();
            match *lib {
                Some(m) => m,
                None => {
                    let ptx = nvrtc::compile(super::library::SOURCE, &self.arch(), "janus_library")?;
                    let (m, _) = self.load(&ptx, "rng_state")?;
                    *lib = Some(m);
                    m
                }
            }
        };
        let cname = CString::new(name.clone()).expect("kernel names have no NUL byte");
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: a loaded module and valid pointers.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, module as sys::CUmodule, cname.as_ptr())
        })?;
        self.kernels.lock().unwrap().insert(name, f as usize);
        Ok(f)
    }

    /// Enqueues `f` on this thread's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters, and every address among them must point to
    /// live device memory large enough for what the kernel touches.
    pub unsafe fn launch(&self, f: sys::CUfunction, grid: u32, mut args: Args) -> Result<(), CudaError> {
        self.bind()?;
        let mut ptrs = args.pointers();
        // SAFETY: the caller's contract; `ptrs` and `args` outlive the call, which copies them.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                f,
                grid,
                1,
                1,
                super::launch::BLOCK,
                1,
                1,
                0,
                self.stream(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}

/// An owned device allocation, returned to the caching allocator when dropped.
pub struct DeviceBuffer {
    ptr: u64,
    size: usize,
    bytes: usize,
    dev: Arc<CudaDevice>,
    owned: bool,
}

impl DeviceBuffer {
    /// A handle to memory owned elsewhere (a region of an executor's arena), never freed
    /// through this handle.
    ///
    /// # Safety
    /// The range must stay allocated while the handle and every use enqueued through it live.
    pub unsafe fn borrowed(dev: &Arc<CudaDevice>, ptr: u64, bytes: usize) -> DeviceBuffer {
        DeviceBuffer { ptr, size: 0, bytes, dev: dev.clone(), owned: false }
    }

    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The requested size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The device holding it.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.owned {
            self.dev.free(self.ptr, self.size);
        }
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer(cuda:{}, {} bytes at {:#x})", self.dev.ordinal, self.bytes, self.ptr)
    }
}
