//! CUDA graphs: a run of kernel launches captured once and replayed with one launch.
//!
//! Capture happens on a stream of its own, so other threads keep enqueueing on the device's
//! stream meanwhile, and one thread captures at a time. Blocks freed during capture are held
//! by the graph (its kernels keep their addresses) and return to the allocator when the graph
//! is dropped. A graph is launched on the device's stream, after everything enqueued before.

use super::device::{CAPTURE, CudaDevice};
use super::{CudaError, check};
use cudarc::driver::sys;
use std::sync::Arc;

/// An instantiated graph.
pub struct CapturedGraph {
    graph: usize,
    exec: usize,
    held: Vec<(u64, usize)>,
    dev: Arc<CudaDevice>,
}

// SAFETY: the handles are driver objects; launches are serialised by the owner's mutex.
unsafe impl Send for CapturedGraph {}
// SAFETY: as above.
unsafe impl Sync for CapturedGraph {}

/// Captures the launches `f` makes on this thread into a graph. `f` must not synchronise or
/// copy from pageable host memory (capture would fail, and the error says so).
pub fn capture<R>(
    dev: &Arc<CudaDevice>,
    f: impl FnOnce() -> Result<R, CudaError>,
) -> Result<(R, CapturedGraph), CudaError> {
    // A capture that panicked elsewhere left nothing half-done (see `Capturing`), so a
    // poisoned lock carries no broken state.
    let _one_at_a_time = dev.capture_lock.lock().unwrap_or_else(|p| p.into_inner());
    dev.bind()?;
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
    })?;
    let mut cap = Capturing { dev, stream, graph: std::ptr::null_mut(), ended: false };
    CAPTURE.with(|c| *c.borrow_mut() = Some((stream as usize, Vec::new())));
    // SAFETY: a fresh stream with nothing enqueued.
    let began = check("cuStreamBeginCapture", unsafe {
        sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
    });
    let value = began.and_then(|_| f())?; // an error or a panic: `cap`'s drop cleans up
    let graph = cap.end()?;
    let held = CAPTURE.with(|c| c.borrow_mut().take()).map(|(_, h)| h).unwrap_or_default();
    let mut exec: sys::CUgraphExec = std::ptr::null_mut();
    // SAFETY: a complete captured graph and a valid out-pointer.
    if let Err(e) =
        check("cuGraphInstantiate", unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) })
    {
        // SAFETY: the graph was created by the capture and is owned by nobody else.
        unsafe {
            let _ = sys::cuGraphDestroy(graph);
        }
        dev.release_held(held);
        return Err(e);
    }
    Ok((value, CapturedGraph { graph: graph as usize, exec: exec as usize, held, dev: dev.clone() }))
}

/// An open capture on this thread: ending it (normally, on an error, or while a panic unwinds)
/// stops the capture, restores the thread's stream and frees what a failed capture held.
struct Capturing<'a> {
    dev: &'a Arc<CudaDevice>,
    stream: sys::CUstream,
    graph: sys::CUgraph,
    ended: bool,
}

impl Capturing<'_> {
    /// Ends the capture and returns its graph.
    fn end(&mut self) -> Result<sys::CUgraph, CudaError> {
        self.ended = true;
        // SAFETY: ends the capture begun on this stream.
        check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(self.stream, &mut self.graph) })?;
        Ok(std::mem::replace(&mut self.graph, std::ptr::null_mut()))
    }
}

impl Drop for Capturing<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.end();
        }
        // SAFETY: the capture has ended; a graph left here belongs to a failed capture.
        unsafe {
            if !self.graph.is_null() {
                let _ = sys::cuGraphDestroy(self.graph);
            }
            let _ = sys::cuStreamDestroy_v2(self.stream);
        }
        // A later stream may get this one's handle: cuBLAS must be told again.
        super::blas::forget_stream(self.dev);
        if let Some((_, held)) = CAPTURE.with(|c| c.borrow_mut().take()) {
            self.dev.release_held(held);
        }
    }
}

impl CapturedGraph {
    /// The kernel nodes that launch `f`, in the graph's node order.
    pub fn kernel_nodes(&self, f: sys::CUfunction) -> Result<Vec<usize>, CudaError> {
        let mut n = 0usize;
        // SAFETY: a live graph; the first call reads the count, the second fills `nodes`.
        unsafe {
            check(
                "cuGraphGetNodes",
                sys::cuGraphGetNodes(self.graph as sys::CUgraph, std::ptr::null_mut(), &mut n),
            )?;
            let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); n];
            check(
                "cuGraphGetNodes",
                sys::cuGraphGetNodes(self.graph as sys::CUgraph, nodes.as_mut_ptr(), &mut n),
            )?;
            let mut out = Vec::new();
            for node in nodes {
                let mut ty = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
                check("cuGraphNodeGetType", sys::cuGraphNodeGetType(node, &mut ty))?;
                if ty != sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
                    continue;
                }
                let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
                check("cuGraphKernelNodeGetParams", sys::cuGraphKernelNodeGetParams_v2(node, &mut p))?;
                if p.func == f {
                    out.push(node as usize);
                }
            }
            Ok(out)
        }
    }

    /// Replaces the arguments of kernel node `node` (launching `f` over a `grid` of `(x, y)`
    /// blocks) for the next launches; launches already enqueued keep the old ones.
    ///
    /// # Safety
    /// As for [`CudaDevice::launch`]: the arguments must match `f`'s parameters and address
    /// live memory for as long as launches may use them.
    pub unsafe fn set_kernel_args(
        &self,
        node: usize,
        f: sys::CUfunction,
        grid: (u32, u32),
        mut args: super::launch::Args,
    ) -> Result<(), CudaError> {
        self.dev.bind()?;
        let mut ptrs = args.pointers();
        // SAFETY: the caller's contract; the driver copies the arguments during the call.
        unsafe {
            // Start from the captured launch (function, context), then swap in the arguments.
            let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
            check(
                "cuGraphKernelNodeGetParams",
                sys::cuGraphKernelNodeGetParams_v2(node as sys::CUgraphNode, &mut p),
            )?;
            debug_assert!(p.func == f, "set_kernel_args: the node launches another function");
            p.extra = std::ptr::null_mut();
            p.gridDimX = grid.0;
            p.gridDimY = grid.1;
            p.gridDimZ = 1;
            p.blockDimX = super::launch::BLOCK;
            p.blockDimY = 1;
            p.blockDimZ = 1;
            p.kernelParams = ptrs.as_mut_ptr();
            check(
                "cuGraphExecKernelNodeSetParams",
                sys::cuGraphExecKernelNodeSetParams_v2(
                    self.exec as sys::CUgraphExec,
                    node as sys::CUgraphNode,
                    &p,
                ),
            )
        }
    }

    /// Enqueues one replay on the device's stream.
    pub fn launch(&self) -> Result<(), CudaError> {
        self.dev.bind()?;
        // SAFETY: a live instantiated graph; every address it uses is held by the graph or by
        // its owner (stable buffers).
        check("cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(self.exec as sys::CUgraphExec, self.dev.main_stream())
        })
    }
}

impl Drop for CapturedGraph {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            // SAFETY: owned handles, destroyed once; launches already enqueued keep running
            // (the driver defers destruction), and held blocks are only reused by later work.
            unsafe {
                let _ = sys::cuGraphExecDestroy(self.exec as sys::CUgraphExec);
                let _ = sys::cuGraphDestroy(self.graph as sys::CUgraph);
            }
        }
        self.dev.release_held(std::mem::take(&mut self.held));
    }
}
