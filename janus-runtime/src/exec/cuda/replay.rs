//! CUDA-graph capture and replay of a CUDA executor's steps (see the parent module): stable
//! buffers, the capture itself, and the `stage` copy tables updated before each replay.

use super::{Bases, CudaPlan};
use crate::backend::cuda::{runs_on_host, view};
use crate::exec::lower::{BufRef, Lowered, StepKind};
use crate::tensor::Tensor;
use crate::{DType, Device};
use janus_kernels::cuda::graph::{CapturedGraph, capture};
use janus_kernels::cuda::launch::{Args, stage_grid};
use janus_kernels::cuda::library::{Kernel, STAGE_INLINE_WORDS, STAGE_SIZES};
use janus_kernels::cuda::{CudaError, DeviceBuffer};
use std::sync::Arc;

/// A replayable graph with its stable buffers.
pub(super) struct Replay {
    graph: CapturedGraph,
    inputs: Vec<DeviceBuffer>,
    outs: Vec<DeviceBuffer>,
    _memos: Vec<DeviceBuffer>,
    _arena: Vec<DeviceBuffer>,
    stage_in: Option<(usize, usize)>,
    stage_out: Option<(usize, usize)>,
    /// Each input's device at capture: a call with another mix runs plainly.
    devices: Vec<Device>,
}

/// Bytes a replay may stage per launch it saves before a plain run is the better deal: a
/// replay copies every input in and every output out (device time, about two passes over the
/// bytes at ~2 TB/s, a conservative copy bandwidth), while it saves the host ~3 us per kernel
/// launch. 6 MB per launch is the break-even of those two estimates.
const STAGE_BYTES_PER_LAUNCH: usize = 6 << 20;

/// Whether capturing pays: the staging copies of `stage_bytes` cost less device time than the
/// `launches` a replay saves (a large elementwise graph is bandwidth bound, and copying its
/// operands would triple its traffic; an LSTM step's weights are small next to its hundreds
/// of kernels).
pub(super) fn worth_capturing(stage_bytes: usize, launches: usize) -> Result<(), String> {
    let limit = launches.saturating_mul(STAGE_BYTES_PER_LAUNCH);
    if stage_bytes > limit {
        return Err(format!(
            "staging {:.1} MB of inputs and outputs would cost more device time than {launches} \
             launches save (limit {:.1} MB)",
            stage_bytes as f64 / 1e6,
            limit as f64 / 1e6
        ));
    }
    Ok(())
}

fn table_size(n: usize) -> Option<usize> {
    STAGE_SIZES.iter().copied().find(|&s| s >= n)
}

/// The words of a stage table `{ n, inl[32], e[size] }` for these copies.
fn stage_words(size: usize, entries: &[(u64, u64, u64, u64)], inline: &[u64]) -> Vec<u64> {
    let mut w = vec![0u64; 1 + STAGE_INLINE_WORDS + 4 * size];
    w[0] = entries.len() as u64;
    w[1..1 + inline.len()].copy_from_slice(inline);
    for (i, e) in entries.iter().enumerate() {
        let at = 1 + STAGE_INLINE_WORDS + 4 * i;
        w[at..at + 4].copy_from_slice(&[e.0, e.1, e.2, e.3]);
    }
    w
}

impl CudaPlan {
    /// Captures the steps over fresh stable buffers.
    pub(super) fn capture(&self, l: &Lowered, inputs: &[Tensor]) -> Result<Replay, String> {
        if l.outputs.iter().any(|&o| matches!(l.vals[o].as_ref().map(|v| v.buf), Some(BufRef::Memo(_)))) {
            return Err("an output views a memoised copy".into());
        }
        // A host round trip (sorting, the sliding windows) cannot be captured in a CUDA graph.
        if let Some(op) = l.steps.iter().find_map(|s| match &s.kind {
            StepKind::Generic { op, .. } if runs_on_host(op) => Some(op),
            _ => None,
        }) {
            return Err(format!("{} runs on the host", op.name()));
        }
        let stage_bytes: usize = inputs.iter().map(|t| t.elems() * t.dtype().size_in_bytes()).sum::<usize>()
            + l.output_bufs.iter().map(|&(d, len)| len * d.size_in_bytes()).sum::<usize>();
        worth_capturing(stage_bytes, l.steps.len() + l.memos.len())?;
        let dev = &self.dev;
        let e = |e: CudaError| e.to_string();
        let mut host_words = 0;
        for t in inputs.iter().filter(|t| t.device() == Device::Cpu) {
            host_words += (t.elems() * t.dtype().size_in_bytes()).div_ceil(8);
        }
        if host_words > STAGE_INLINE_WORDS {
            return Err(format!("host inputs need {host_words} words (limit {STAGE_INLINE_WORDS})"));
        }
        let stage_in = table_size(inputs.len()).ok_or("too many inputs for a stage table")?;
        let stage_out = table_size(l.output_bufs.len()).ok_or("too many outputs for a stage table")?;
        let stable_in: Vec<DeviceBuffer> = inputs
            .iter()
            .map(|t| dev.alloc((t.elems() * t.dtype().size_in_bytes()).max(8)))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        let outs: Vec<DeviceBuffer> = l
            .output_bufs
            .iter()
            .map(|&(d, len)| dev.alloc((len * d.size_in_bytes()).max(1)))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        let memos: Vec<DeviceBuffer> = l
            .memos
            .iter()
            .map(|&(_, src)| {
                let v = l.vals[src].as_ref().expect("value");
                dev.alloc((v.shape.elems() * v.dtype.size_in_bytes()).max(1))
            })
            .collect::<Result<_, _>>()
            .map_err(e)?;
        let arena: Vec<DeviceBuffer> = l
            .plan
            .arena_len
            .iter()
            .zip([DType::F32, DType::F64, DType::I64, DType::Bool])
            .map(|(&len, d)| dev.alloc((len * d.size_in_bytes()).max(1)))
            .collect::<Result<_, _>>()
            .map_err(e)?;
        let bases = Bases {
            inputs: stable_in.iter().map(DeviceBuffer::ptr).collect(),
            consts: self.consts.iter().map(|t| view(t).start()).collect(),
            memos: memos.iter().map(DeviceBuffer::ptr).collect(),
            arena: [arena[0].ptr(), arena[1].ptr(), arena[2].ptr(), arena[3].ptr()],
            outs: outs.iter().map(DeviceBuffer::ptr).collect(),
        };
        let f_in = dev.library_function(Kernel::Stage(stage_in)).map_err(e)?;
        let f_out = dev.library_function(Kernel::StageOut(stage_out)).map_err(e)?;
        let has_in = !inputs.is_empty();
        let has_out = !l.output_bufs.is_empty();
        let ((), graph) = capture(dev, || {
            // SAFETY: empty tables (n = 0) copy nothing; the real tables are set per replay.
            unsafe {
                if has_in {
                    dev.launch(f_in, 1, Args::new().words(stage_words(stage_in, &[], &[])))?;
                }
                // A step that panics (an eager kernel asked for work a graph cannot hold, say)
                // ends the capture with an error: the plan then runs its steps one by one.
                let steps = crate::panics::catch_quietly(|| self.run_steps(l, &bases));
                steps.map_err(|p| {
                    CudaError::NotCapturable(format!(
                        "a step that panicked ({})",
                        crate::panics::message(&*p)
                    ))
                })??;
                if has_out {
                    dev.launch(f_out, 1, Args::new().words(stage_words(stage_out, &[], &[])))?;
                }
            }
            Ok(())
        })
        .map_err(e)?;
        let node = |f, want: bool, size: usize| -> Result<Option<(usize, usize)>, String> {
            if !want {
                return Ok(None);
            }
            match graph.kernel_nodes(f).map_err(e)?[..] {
                [n] => Ok(Some((n, size))),
                _ => Err("the stage node was not found once in the captured graph".into()),
            }
        };
        let stage_in_node = node(f_in, has_in, stage_in)?;
        let stage_out_node = node(f_out, has_out, stage_out)?;
        Ok(Replay {
            graph,
            inputs: stable_in,
            outs,
            _memos: memos,
            _arena: arena,
            stage_in: stage_in_node,
            stage_out: stage_out_node,
            devices: inputs.iter().map(Tensor::device).collect(),
        })
    }

    /// One replay: stage tables for this call's inputs and fresh outputs, then one launch.
    /// `None` when a driver call fails (the caller falls back to a plain run).
    pub(super) fn replay(&self, l: &Lowered, r: &Replay, inputs: &[Tensor]) -> Option<Vec<Tensor>> {
        let dev = &self.dev;
        // The stable buffers were sized, and the inline host data bounded, for the capture's
        // inputs: another mix of devices runs plainly.
        if inputs.len() != r.devices.len() || inputs.iter().zip(&r.devices).any(|(t, &d)| t.device() != d) {
            return None;
        }
        let mut entries = Vec::with_capacity(inputs.len());
        let mut inline: Vec<u64> = Vec::new();
        for (t, dst) in inputs.iter().zip(&r.inputs) {
            let bytes = (t.elems() * t.dtype().size_in_bytes()) as u64;
            if t.device() == Device::Cpu {
                let at = inline.len() as u64;
                inline.extend(host_words(t));
                entries.push((dst.ptr(), 0, bytes, at));
            } else {
                entries.push((dst.ptr(), view(t).start(), bytes, 0));
            }
        }
        if inline.len() > STAGE_INLINE_WORDS {
            return None;
        }
        let fresh: Vec<Arc<DeviceBuffer>> = l
            .output_bufs
            .iter()
            .map(|&(d, len)| dev.alloc((len * d.size_in_bytes()).max(1)).map(Arc::new))
            .collect::<Result<_, _>>()
            .ok()?;
        let out_entries: Vec<(u64, u64, u64, u64)> = fresh
            .iter()
            .zip(&r.outs)
            .zip(&l.output_bufs)
            .map(|((f, s), &(d, len))| (f.ptr(), s.ptr(), (len * d.size_in_bytes()) as u64, 0))
            .collect();
        let set = |node: Option<(usize, usize, bool)>,
                   entries: &[(u64, u64, u64, u64)],
                   inline: &[u64]|
         -> Result<(), CudaError> {
            if let Some((node, size, out)) = node {
                let f =
                    dev.library_function(if out { Kernel::StageOut(size) } else { Kernel::Stage(size) })?;
                let longest = entries.iter().map(|e| e.2 as usize).max().unwrap_or(0);
                // SAFETY: the table's addresses are live: the callers' inputs and the fresh
                // outputs (kept alive by the returned tensors), and the graph's stable buffers.
                unsafe {
                    r.graph.set_kernel_args(
                        node,
                        f,
                        stage_grid(entries.len(), longest, dev.sm_count),
                        Args::new().words(stage_words(size, entries, inline)),
                    )?
                };
            }
            Ok(())
        };
        let launched = set(r.stage_in.map(|(n, s)| (n, s, false)), &entries, &inline)
            .and_then(|_| set(r.stage_out.map(|(n, s)| (n, s, true)), &out_entries, &[]))
            .and_then(|_| r.graph.launch());
        if let Err(err) = launched {
            log::warn!(target: "janus", "cuda graph replay failed ({err}); running the steps instead");
            return None;
        }
        Some(self.outputs(l, inputs, &fresh, &[]))
    }
}

/// A host tensor's bytes as little-endian words (for a stage table's inline data).
fn host_words(t: &Tensor) -> Vec<u64> {
    let bytes: Vec<u8> = janus_kernels::with_any_type!(t.dtype(), T => {
        let v = t.contiguous_slice::<T>();
        // SAFETY: plain-old-data elements viewed as bytes, within the slice.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(&v[..])) }.to_vec()
    });
    bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::worth_capturing;

    #[test]
    fn large_operands_of_few_kernels_run_plainly() {
        // `relu(x * 2 + 1)` over 2^26 f32: 512 MiB staged for one launch saved.
        let err = worth_capturing(2 << 28, 1).unwrap_err();
        assert!(err.contains("staging 536.9 MB") && err.contains("1 launches"), "{err}");
        // An LSTM step: ~1 MB of weights and batches for a few hundred kernels.
        assert!(worth_capturing(1 << 20, 300).is_ok());
        // The 8-input fragment of [32, 128] f32: 147 KB for one kernel.
        assert!(worth_capturing(9 * 32 * 128 * 4, 1).is_ok());
        assert!(worth_capturing(usize::MAX, usize::MAX).is_ok());
    }
}
