//! What reaches the host from a tensor: its values (`item`, `to_bool`, `to_vec`, formatting),
//! which a recording must see as host reads, and its sizes as user code reads them (`dims`,
//! `shape`, `numel`), which keep a block's graphs specialised to the sizes they saw. Above the
//! tensor layer because each tells the active recording (`crate::recorder`), and a CUDA tensor's
//! values come through its backend.

use crate::Device;
use crate::error::bail;
use crate::shape::Shape;
use crate::tensor::{Storage, Tensor};
use janus_kernels::Element;
use std::fmt;
use std::panic::Location;

impl Tensor {
    /// The dimensions. Shapes are always concrete, so this is not a host read; but inside a
    /// `#[janus]` block it keeps the block's graphs specialised to the sizes they saw (see
    /// docs/guide/dynamic-shapes-and-loops.md).
    #[doc(alias = "size", alias = "shape")]
    #[track_caller]
    #[inline]
    pub fn dims(&self) -> &[usize] {
        note_shape_read(Location::caller());
        &self.0.shape
    }

    /// The shape (see [`dims`](Tensor::dims) on reading it inside a `#[janus]` block).
    #[track_caller]
    #[inline]
    pub fn shape(&self) -> &Shape {
        note_shape_read(Location::caller());
        &self.0.shape
    }

    /// Number of elements (see [`dims`](Tensor::dims) on reading it inside a `#[janus]` block).
    #[track_caller]
    #[inline]
    pub fn numel(&self) -> usize {
        note_shape_read(Location::caller());
        self.0.shape.elems()
    }

    /// The single element as `f32` (any dtype). Panics unless `numel() == 1`. A host read.
    #[track_caller]
    #[doc(alias = "tolist")]
    pub fn item(&self) -> f32 {
        self.item_f64() as f32
    }

    /// The single element as `f64` (any dtype). Panics unless `numel() == 1`. A host read.
    #[track_caller]
    pub fn item_f64(&self) -> f64 {
        if self.elems() != 1 {
            bail!("item", "expected a tensor with one element, got shape {:?}", self.shape_ref());
        }
        crate::recorder::host_read("item");
        let host = self.on_host();
        let d = host.data();
        d.cpu().get_f64(d.offset)
    }

    /// The single element as a bool (non-zero is true). Panics unless `numel() == 1`.
    /// A host read.
    #[track_caller]
    pub fn to_bool(&self) -> bool {
        if self.elems() != 1 {
            bail!("to_bool", "expected a tensor with one element, got shape {:?}", self.shape_ref());
        }
        let host = self.on_host();
        let d = host.data();
        let value = d.cpu().get_f64(d.offset) != 0.0;
        // In a whole-function recording the decision becomes an assert on this predicate.
        if !crate::recorder::assertion(self, value) {
            crate::recorder::host_read("to_bool");
        }
        value
    }

    /// All elements in row-major order, converted to `T` when the dtype differs. A host read.
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        crate::recorder::host_read("to_vec");
        self.host_values()
    }

    /// The elements as [`to_vec`](Tensor::to_vec) returns them, without counting as a host read
    /// (for the runtime's own use: constant folding, checkpoints).
    pub(crate) fn host_values<T: Element>(&self) -> Vec<T> {
        let host = self.on_host();
        if host.dtype() == T::DTYPE {
            return host.contiguous_slice::<T>().into_owned();
        }
        janus_kernels::with_any_type!(host.dtype(), S => {
            host.contiguous_slice::<S>().iter().map(|&v| T::from_f64(v.to_f64())).collect()
        })
    }

    /// This tensor with its values in host memory: itself on the CPU, a copy otherwise (which
    /// waits for the device). Not recorded, no autograd.
    #[track_caller]
    pub(crate) fn on_host(&self) -> Tensor {
        match self.data().storage {
            Storage::Cpu(_) => self.clone(),
            Storage::Cuda(_) => crate::backend::cuda::download(self),
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(id={}, {:?}, {}", self.id(), self.shape_ref(), self.dtype())?;
        if self.device() != Device::Cpu {
            write!(f, ", {}", self.device())?;
        }
        if self.needs_grad() {
            f.write_str(", grad")?;
        }
        if !self.is_concrete() {
            return f.write_str(", symbolic)");
        }
        if self.elems() <= 16 {
            crate::recorder::host_read("format"); // values reach the host, like `to_vec`
            let host = self.on_host();
            let d = host.data();
            let vals: Vec<String> = (0..self.elems())
                .map(|i| {
                    let mut rest = i;
                    let mut off = d.offset;
                    for (&len, &st) in self.sizes().iter().zip(&d.strides).rev() {
                        off += (rest % len) * st;
                        rest /= len;
                    }
                    format!("{}", d.cpu().get_f64(off))
                })
                .collect();
            write!(f, ", [{}]", vals.join(", "))?;
        }
        f.write_str(")")
    }
}

/// Prints as PyTorch does: nested rows, 4 decimals (`{:.2}` for 2), long tensors summarised
/// with `...`, and the dtype, device and `requires_grad` where they differ from the defaults.
/// A host read. `{:?}` shows the handle's id and flat values instead.
///
/// # Examples
/// ```
/// use janus_runtime::Tensor;
/// let t = Tensor::from_vec(vec![1.0f32, -0.5, 2.25, 3.0], [2, 2]);
/// assert_eq!(t.to_string(), "tensor([[ 1.0000, -0.5000],\n        [ 2.2500,  3.0000]])");
/// assert_eq!(format!("{:.1}", t), "tensor([[ 1.0, -0.5],\n        [ 2.2,  3.0]])");
/// ```
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::print::display(self, f)
    }
}

/// Tells an active recording that code outside the runtime read a tensor's size: its graphs
/// must not generalise over sizes (the runtime's own reads turn into graph sizes it tracks).
#[inline]
fn note_shape_read(at: &'static Location<'static>) {
    crate::recorder::shape_read_from(at, is_runtime_source);
}

/// Whether `file` is a source file of this crate (its reads of sizes are the runtime's own).
fn is_runtime_source(file: &str) -> bool {
    const OWN: &str = file!(); // ".../janus-runtime/src/api/host.rs"
    let root = &OWN[..OWN.len() - "api/host.rs".len()];
    file.starts_with(root)
}
