//! The buffers of one executor run: inputs, constants, the arena and the output buffers, with
//! typed access to each value. All of the executor's `unsafe` lives here.
//!
//! Soundness rests on the memory plan (checked by `Executor::compile`, see `validate`): within a
//! step, no written region overlaps a region the step reads or another region it writes; two
//! steps that may run at the same time are ordered by the schedule whenever one writes a region
//! the other touches. Inputs and constants are never written.

use super::arena_buf::ArenaBuf;
use super::arena_cache::{self as shelf, Shelved};
use super::packed_factors::{PackPlan, Packs};
use crate::exec::lower::{BufRef, ValRef};
use crate::exec::memory::dtype_slot;
use crate::tensor::Tensor;
use janus_kernels::strided::Src;
use janus_kernels::{CpuBuffer, DType, Element};

/// Per-dtype arenas, reused across runs: small ones kept in the executor's pool with the rest
/// of the run state, large ones lent from the process-wide shelf for each run (`arena_cache.rs`).
pub(crate) struct Arenas {
    f32: ArenaBuf<f32>,
    f64: ArenaBuf<f64>,
    i64: ArenaBuf<i64>,
    bool: ArenaBuf<bool>,
}

impl Arenas {
    /// No arena at all: a run state not yet [`fill`](Arenas::fill)ed.
    pub(crate) const fn empty() -> Self {
        Arenas {
            f32: ArenaBuf::empty(),
            f64: ArenaBuf::empty(),
            i64: ArenaBuf::empty(),
            bool: ArenaBuf::empty(),
        }
    }

    /// Gives each dtype whose arena holds fewer than `len` elements one that holds them: from
    /// the shelf when that large, else a fresh zeroed one.
    pub(crate) fn fill(&mut self, len: [usize; 4]) {
        fn one<T: Shelved>(a: &mut ArenaBuf<T>, len: usize) {
            if a.len() < len {
                *a = if shelf::lends::<T>(len) { shelf::take(len) } else { ArenaBuf::new(len) };
            }
        }
        one(&mut self.f32, len[0]);
        one(&mut self.f64, len[1]);
        one(&mut self.i64, len[2]);
        one(&mut self.bool, len[3]);
    }

    /// Returns the large arenas to the shelf, for whichever run needs one next.
    pub(crate) fn shelve(&mut self) {
        fn one<T: Shelved>(a: &mut ArenaBuf<T>) {
            if shelf::lends::<T>(a.len()) {
                shelf::put(std::mem::replace(a, ArenaBuf::empty()));
            }
        }
        one(&mut self.f32);
        one(&mut self.f64);
        one(&mut self.i64);
        one(&mut self.bool);
    }
}

/// Base pointers of one run's buffers.
pub(crate) struct Frame<'a> {
    inputs: &'a [Tensor],
    consts: &'a [Tensor],
    memos: &'a [Tensor],
    arena: [*mut u8; 4],
    outs: smallvec::SmallVec<[*mut u8; 4]>,
    /// The program's packed right factors and this run's copies of them.
    packs: (&'a PackPlan, &'a Packs),
}

// SAFETY: the pointers refer to buffers owned by the run that created the frame, which outlive
// it; concurrent access from the executor's workers follows the plan's ordering (module docs).
unsafe impl Send for Frame<'_> {}
// SAFETY: as above.
unsafe impl Sync for Frame<'_> {}

fn base_ptr(b: &mut CpuBuffer) -> *mut u8 {
    match b {
        CpuBuffer::F32(v) => v.as_mut_ptr().cast(),
        CpuBuffer::F64(v) => v.as_mut_ptr().cast(),
        CpuBuffer::I64(v) => v.as_mut_ptr().cast(),
        CpuBuffer::Bool(v) => v.as_mut_ptr().cast(),
    }
}

impl<'a> Frame<'a> {
    /// `inputs` must be contiguous tensors; `outs` are this run's output buffers, not yet
    /// shared; `arenas` is `None` for a program without intermediates (no arena is built on
    /// that hit path).
    pub(crate) fn new(
        inputs: &'a [Tensor],
        consts: &'a [Tensor],
        memos: &'a [Tensor],
        arenas: Option<&'a mut Arenas>,
        outs: &'a mut [crate::storage::SharedBuffer],
        packs: (&'a PackPlan, &'a Packs),
    ) -> Self {
        let mut out_ptrs = smallvec::SmallVec::new();
        for b in outs.iter_mut() {
            out_ptrs.push(base_ptr(
                crate::storage::SharedBuffer::get_mut(b).expect("a run's output buffers are its own"),
            ));
        }
        Frame {
            inputs,
            consts,
            memos,
            // Without arenas, a dangling base aligned for every dtype (as an empty `Vec`'s):
            // zero-length values may still make slices of it, which null would not allow.
            arena: arenas.map_or([std::ptr::NonNull::<u64>::dangling().as_ptr().cast(); 4], |a| {
                [
                    a.f32.as_mut_ptr().cast(),
                    a.f64.as_mut_ptr().cast(),
                    a.i64.as_mut_ptr().cast(),
                    a.bool.as_mut_ptr().cast(),
                ]
            }),
            outs: out_ptrs,
            packs,
        }
    }

    /// This run's packed copies and the slot of right factor `b`, when the program packs it.
    pub(crate) fn packed(&self, b: usize) -> Option<(&'a Packs, usize)> {
        self.packs.0.slot(b).map(|s| (self.packs.1, s))
    }

    fn tensor_region<T: Element>(t: &Tensor) -> *const T {
        let d = t.data();
        let all = d.cpu().as_slice::<T>().expect("value dtype matches its tensor");
        all[d.offset..].as_ptr()
    }

    /// Start of `v`'s region.
    fn region<T: Element>(&self, v: &ValRef) -> *mut T {
        debug_assert_eq!(T::DTYPE, v.dtype);
        match v.buf {
            BufRef::Input(k) => Self::tensor_region::<T>(&self.inputs[k]).cast_mut(),
            BufRef::Const(k) => Self::tensor_region::<T>(&self.consts[k]).cast_mut(),
            BufRef::Memo(k) => Self::tensor_region::<T>(&self.memos[k]).cast_mut(),
            // SAFETY: the plan keeps `start + len` within the arena of this dtype.
            BufRef::Arena(start) => unsafe { self.arena[dtype_slot(T::DTYPE)].cast::<T>().add(start) },
            BufRef::Output(k) => self.outs[k].cast(),
        }
    }

    /// `v` for reading: its region and layout.
    ///
    /// The slice covers only the elements `v`'s layout can reach (its offset is 0): a step may
    /// read one block of a buffer while it writes another (the parts of a stack written in
    /// place, `lower::alias_cats`), and the shared slice must not overlap the written one.
    pub(crate) fn src<T: Element>(&self, v: &'a ValRef) -> Src<'a, T> {
        let n = v.layout().span();
        if n == 0 {
            return Src::new(&[], &v.strides, 0); // its offset may lie past an empty region
        }
        assert!(v.offset + n <= v.len, "a read value lies inside its region");
        // SAFETY: these `n` elements lie inside the region of `v.len` initialised elements of a
        // live buffer (checked above); no step writes them while this step runs (module docs).
        let data = unsafe { std::slice::from_raw_parts(self.region::<T>(v).add(v.offset), n) };
        Src::new(data, &v.strides, 0)
    }

    /// `v`'s region as a dense slice for reading (the layout must be dense).
    pub(crate) fn dense<T: Element>(&self, v: &'a ValRef) -> &'a [T] {
        &self.src::<T>(v).data[..v.shape.elems()]
    }

    /// `v`'s elements for writing (arena or output values only, always dense: a whole value,
    /// or a block of its leading rows when a step is split, see `split.rs`).
    ///
    /// # Safety
    /// No other reference to these elements may be alive while the result is: the caller is a
    /// step of a validated plan writing one of its own results.
    pub(crate) unsafe fn dst<T: Element>(&self, v: &ValRef) -> &'a mut [T] {
        assert_written(v);
        let n = v.shape.elems();
        assert!(v.offset + n <= v.len, "a written value lies inside its region");
        assert!(v.layout().is_dense(), "a value written as a slice is dense (else `dst_rows`)");
        // SAFETY: the caller guarantees exclusive access; the elements lie inside the region of
        // `v.len` elements (checked above).
        unsafe { std::slice::from_raw_parts_mut(self.region::<T>(v).add(v.offset), n) }
    }

    /// `v`'s elements for writing as strided rows, when its layout is not dense (a part of a
    /// concatenation written in place, `lower::alias_cats`; arena or output values only).
    ///
    /// # Safety
    /// As for [`dst`](Frame::dst): no other reference may reach `v`'s elements while the result
    /// lives (other values' elements may lie between its rows).
    pub(crate) unsafe fn dst_rows<T: Element>(&self, v: &ValRef) -> janus_kernels::fused::Rows<'a, T> {
        assert_written(v);
        let (rows, row, stride) = v.layout().rows().expect("a written view is a run of rows");
        if rows * row == 0 {
            // SAFETY: no elements.
            return unsafe {
                janus_kernels::fused::Rows::new(std::ptr::NonNull::dangling().as_ptr(), 0, 0, 0)
            };
        }
        assert!(v.offset + v.layout().span() <= v.len, "a written value lies inside its region");
        // SAFETY: the rows lie inside the region (checked above); the caller guarantees that
        // nothing else reaches them.
        unsafe { janus_kernels::fused::Rows::new(self.region::<T>(v).add(v.offset), rows, row, stride) }
    }

    /// A tensor holding `v`'s value (a view of an input or constant, a copy otherwise), for
    /// steps that run an eager kernel.
    pub(crate) fn tensor(&self, v: &'a ValRef) -> Tensor {
        let base = match v.buf {
            BufRef::Input(k) => Some(&self.inputs[k]),
            BufRef::Const(k) => Some(&self.consts[k]),
            BufRef::Memo(k) => Some(&self.memos[k]),
            _ => None,
        };
        match base {
            Some(t) => {
                let d = t.data();
                let data = d.view(v.strides.clone(), d.offset + v.offset);
                Tensor::from_parts(v.shape.clone(), v.dtype, Some(data), Default::default())
            }
            None => janus_kernels::with_any_type!(v.dtype, T => {
                let mut out = vec![T::default(); v.shape.elems()];
                janus_kernels::strided::copy(&v.shape, self.src::<T>(v), &mut out);
                Tensor::from_buffer(janus_kernels::buffer::Stored::wrap(out), v.shape.clone())
            }),
        }
    }
}

/// Steps write only arena and output values (never inputs, constants or memos).
fn assert_written(v: &ValRef) {
    assert!(
        matches!(v.buf, BufRef::Arena(_) | BufRef::Output(_)),
        "only arena and output values are written"
    );
}

/// A fresh zeroed buffer for an output.
pub(crate) fn output_buffer(dtype: DType, len: usize) -> CpuBuffer {
    CpuBuffer::zeroed(dtype, len)
}
