//! `Tensor`: an immutable, cheaply clonable value handle (shape, dtype, device, storage, and the
//! autograd node that produced it). Mutation is rebinding; views share storage.

use crate::shape::Shape;
pub(crate) use crate::storage::{Data, Storage};
use crate::{DType, Device};
use janus_kernels::{CpuBuffer, Element};
use std::any::Any;
use std::borrow::Cow;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A tensor's place in the autograd graph.
#[derive(Clone, Default)]
pub(crate) enum GradMeta {
    /// Constant with respect to every parameter.
    #[default]
    None,
    /// A leaf whose gradient `backward()` reports.
    Leaf,
    /// Output `index` of an autograd node.
    Node(NodeRef, usize),
}

/// The autograd node that computed a tensor, opaque at this layer, as PyTorch's `AutogradMeta`
/// is to its `TensorImpl`: a tensor only holds it; `crate::autograd` defines the node
/// (`GradNode`, the one type stored) and reads it back through `Deref`. So the tensor layer
/// needs neither the ops nor autograd.
#[derive(Clone)]
pub(crate) struct NodeRef(pub(crate) Arc<dyn Any + Send + Sync + RefUnwindSafe + UnwindSafe>);

/// A multi-dimensional array of one dtype on one device.
///
/// `Clone` is cheap (a reference count). Every handle created by an op or constructor has a
/// fresh [`id`](Tensor::id); clones share it. Tensors are `Send + Sync`.
///
/// # Examples
///
/// Ops run at once (eagerly) and record what `backward()` needs, as in PyTorch:
///
/// ```
/// use janus_runtime::{DType, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]).requires_grad();
/// let y = (x.matmul(&x.t()) * 0.5).tanh().sum_all(); // torch: (x @ x.T * 0.5).tanh().sum()
/// let grads = y.backward(); // gradients come back, keyed by leaf: no `.grad`, no zero_grad()
/// assert_eq!(grads.get(&x).unwrap().dims(), [2, 2]);
/// assert_eq!(x.reshape([4]).narrow(0, 1, 2).to_vec::<f32>(), [2.0, 3.0]); // view, slicing
/// assert_eq!(Tensor::ones([3]).to_dtype(DType::I64).dtype(), DType::I64);
/// println!("{x}"); // tensor([[1.0000, 2.0000], [3.0000, 4.0000]], requires_grad=True)
/// ```
// A `triomphe::Arc`, which has no weak count: freeing a tensor takes one atomic operation, not
// std's two.
#[derive(Clone)]
pub struct Tensor(pub(crate) triomphe::Arc<TensorInner>);

pub(crate) struct TensorInner {
    pub(crate) id: u64,
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
    pub(crate) device: Device,
    /// `None` only for symbolic tensors built while deriving graphs (no values exist).
    pub(crate) data: Option<Data>,
    pub(crate) grad: GradMeta,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh, never reused tensor id.
#[inline]
pub(crate) fn fresh_id() -> u64 {
    // Each thread takes ids in blocks: one shared atomic per tensor cost about 5 ns of a
    // replay's output on the hit path. Ids stay unique, and increase in creation order within
    // a thread (gradients are summed in id order).
    const BLOCK: u64 = 1024;
    thread_local!(static IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) });
    IDS.with(|c| {
        let (mut next, mut end) = c.get();
        if next == end {
            next = NEXT_ID.fetch_add(BLOCK, Ordering::Relaxed);
            end = next + BLOCK;
        }
        c.set((next + 1, end));
        next
    })
}

impl Tensor {
    #[inline]
    pub(crate) fn from_parts(shape: Shape, dtype: DType, data: Option<Data>, grad: GradMeta) -> Tensor {
        let device = data.as_ref().map_or(Device::Cpu, |d| d.storage.device());
        // Written field by field into the allocation: `Arc::new` built the value on the stack
        // and copied it with a `memcpy` call, whose wide loads of the just-written narrow
        // stores stalled (4% of a dispatch-only replay, perf).
        let mut arc = triomphe::Arc::<std::mem::MaybeUninit<TensorInner>>::new_uninit();
        let p = arc.as_mut_ptr().cast::<TensorInner>();
        // SAFETY: `p` is the fresh, unshared allocation of `arc`; each field is written exactly
        // once (none is read or dropped before), so the value is initialised when
        // `assume_init` runs.
        unsafe {
            std::ptr::addr_of_mut!((*p).id).write(fresh_id());
            std::ptr::addr_of_mut!((*p).shape).write(shape);
            std::ptr::addr_of_mut!((*p).dtype).write(dtype);
            std::ptr::addr_of_mut!((*p).device).write(device);
            std::ptr::addr_of_mut!((*p).data).write(data);
            std::ptr::addr_of_mut!((*p).grad).write(grad);
            Tensor(arc.assume_init())
        }
    }

    /// A concrete tensor without autograd history over a fresh contiguous buffer.
    pub(crate) fn from_buffer(buf: CpuBuffer, shape: Shape) -> Tensor {
        debug_assert_eq!(buf.len(), shape.elems());
        let dtype = buf.dtype();
        let data = Data::contiguous(buf, &shape);
        Tensor::from_parts(shape, dtype, Some(data), GradMeta::None)
    }

    /// This handle's identity: unique among all tensors ever created in the process.
    #[inline]
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The dimensions, for the runtime's own use: not noted as a read by user code.
    #[inline]
    pub(crate) fn sizes(&self) -> &[usize] {
        &self.0.shape
    }

    /// The shape, for the runtime's own use.
    #[inline]
    pub(crate) fn shape_ref(&self) -> &Shape {
        &self.0.shape
    }

    /// Number of elements, for the runtime's own use.
    #[inline]
    pub(crate) fn elems(&self) -> usize {
        self.0.shape.numel()
    }

    /// Number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.0.shape.rank()
    }

    /// Element type.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Device holding the storage.
    #[inline]
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// Whether two handles are the same tensor (same id).
    #[inline]
    pub fn same(&self, other: &Tensor) -> bool {
        self.0.id == other.0.id
    }

    #[inline]
    pub(crate) fn data(&self) -> &Data {
        match &self.0.data {
            Some(d) => d,
            None => panic!("janus internal error: values of a symbolic tensor were requested"),
        }
    }

    /// Identity of the values this handle views: the storage allocation and the offset into it.
    /// Storage is never written after creation, so equal keys mean equal values (while a handle
    /// holding the storage keeps its address from being reused).
    #[inline]
    pub(crate) fn storage_key(&self) -> (usize, usize) {
        let d = self.data();
        let ptr = match &d.storage {
            Storage::Cpu(b) => crate::storage::SharedBuffer::as_ptr(b) as usize,
            Storage::Cuda(b) => Arc::as_ptr(b) as usize,
        };
        (ptr, d.offset)
    }

    /// Whether values exist (false only for symbolic tensors inside graph derivation).
    #[inline]
    pub(crate) fn is_concrete(&self) -> bool {
        self.0.data.is_some()
    }

    /// Strides of this view (elements).
    #[inline]
    pub(crate) fn strides(&self) -> &[usize] {
        &self.data().strides
    }

    /// Whether the view is row-major contiguous (offset may be non-zero).
    #[inline]
    pub(crate) fn is_contiguous(&self) -> bool {
        self.layout().is_dense()
    }

    /// This view's shape, strides and offset.
    #[inline]
    pub(crate) fn layout(&self) -> crate::layout::Layout<'_> {
        let d = self.data();
        crate::layout::Layout::new(self.sizes(), &d.strides, d.offset)
    }

    /// The elements in row-major order: borrowed when the view is contiguous, copied otherwise.
    pub(crate) fn contiguous_slice<T: Element>(&self) -> Cow<'_, [T]> {
        let d = self.data();
        let all = d.cpu().as_slice::<T>().expect("dtype of storage matches the tensor");
        if self.is_contiguous() {
            Cow::Borrowed(&all[d.offset..d.offset + self.elems()])
        } else {
            let mut out = vec![T::default(); self.elems()];
            let src = janus_kernels::strided::Src::new(all, &d.strides, d.offset);
            janus_kernels::strided::copy(self.sizes(), src, &mut out);
            Cow::Owned(out)
        }
    }

    /// The typed storage slice and this view's strides and offset into it.
    pub(crate) fn src<T: Element>(&self) -> janus_kernels::strided::Src<'_, T> {
        let d = self.data();
        let all = d.cpu().as_slice::<T>().expect("dtype of storage matches the tensor");
        janus_kernels::strided::Src::new(all, &d.strides, d.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `from_parts` writes each field into the allocation itself (no `Arc::new`): every field
    /// reads back, clones share it, and the last drop frees it (run under Miri too:
    /// `cargo +nightly miri test -p janus-runtime --lib tensor::tests`).
    #[test]
    fn tensors_written_in_place_read_back_and_drop_once() {
        let shape: Shape = vec![2, 3].into();
        let data = Data::contiguous(CpuBuffer::F32((0..6).map(|i| i as f32).collect()), &shape);
        let t = Tensor::from_parts(shape.clone(), DType::F32, Some(data), GradMeta::None);
        let u = t.clone();
        assert_eq!(t.sizes(), &[2, 3]);
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.device(), Device::Cpu);
        assert!(t.same(&u));
        drop(t);
        assert_eq!(u.to_vec::<f32>(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let v = Tensor::from_parts(shape, DType::F32, None, GradMeta::None);
        assert_ne!(v.id(), u.id());
    }
}
