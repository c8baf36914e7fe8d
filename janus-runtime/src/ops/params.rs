//! The parameters of the primitive ops: named-field `Hash + Eq` structs, so a graph of ops
//! doubles as its own cache key.

use crate::shape::Shape;
use crate::{DType, Device};
use smallvec::SmallVec;

/// An `f64` stored by its bits, so op parameters can be hashed and compared exactly.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct F64Bits(u64);

impl F64Bits {
    /// Wraps a value.
    pub fn new(v: f64) -> Self {
        F64Bits(v.to_bits())
    }
    /// The value.
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl std::fmt::Debug for F64Bits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// Dimension lists in op parameters.
pub type DimList = SmallVec<[usize; 4]>;

/// A constant fill: `zeros`, `ones`, `full`, `scalar`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Full {
    /// Result shape.
    pub shape: Shape,
    /// Result dtype.
    pub dtype: DType,
    /// The value every element takes.
    pub value: F64Bits,
    /// Where the result is created.
    pub device: Device,
}

/// `0..n` as `i64`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arange {
    /// Number of elements.
    pub n: usize,
    /// Where the result is created.
    pub device: Device,
}

/// Literal data baked into a graph (from `Tensor::from_vec` inside a trace).
#[derive(Clone, Debug)]
pub struct Constant {
    /// The values, shared.
    pub data: crate::storage::SharedBuffer,
    /// Result shape.
    pub shape: Shape,
    /// Where the result is created.
    pub device: Device,
}

impl PartialEq for Constant {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape
            && self.device == other.device
            && self.data.dtype() == other.data.dtype()
            && bits_of(&self.data) == bits_of(&other.data)
    }
}
impl Eq for Constant {}
impl std::hash::Hash for Constant {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.shape.hash(state);
        self.device.hash(state);
        self.data.dtype().hash(state);
        bits_of(&self.data).hash(state);
    }
}

/// Each element's exact bits (`i64` natively: not every one survives a trip through `f64`).
fn bits_of(b: &janus_kernels::CpuBuffer) -> Vec<u64> {
    match b.as_slice::<i64>() {
        Some(v) => v.iter().map(|&x| x as u64).collect(),
        None => (0..b.len()).map(|i| b.get_f64(i).to_bits()).collect(),
    }
}

/// Random fills; their single input is the stream state `i64[2] = (key, counter)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RandFill {
    /// Result shape.
    pub shape: Shape,
    /// Result dtype (a float).
    pub dtype: DType,
    /// Where the result is created.
    pub device: Device,
}

/// A copy to another device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToDevice {
    /// The target device.
    pub device: Device,
}

/// `x^p` for a constant exponent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Powf {
    /// The exponent.
    pub exponent: F64Bits,
}

/// `min(max(x, lo), hi)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Clamp {
    /// Lower bound.
    pub min: F64Bits,
    /// Upper bound.
    pub max: F64Bits,
}

/// Conversion to another dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cast {
    /// Target dtype.
    pub dtype: DType,
}

/// Sum over a set of dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sum {
    /// Reduced dimensions, sorted and unique.
    pub dims: DimList,
    /// Keep reduced dimensions as size 1.
    pub keepdim: bool,
}

/// A reduction along one dimension.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReduceDim {
    /// The dimension.
    pub dim: usize,
    /// Keep it as size 1.
    pub keepdim: bool,
}

/// An op along one dimension that keeps the shape (softmax) or concatenates (cat).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Axis {
    /// The dimension.
    pub dim: usize,
}

/// Reinterpret with another shape of the same element count.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reshape {
    /// Result shape.
    pub shape: Shape,
}

/// Reorder dimensions: result dim `i` is input dim `perm[i]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Permute {
    /// The permutation.
    pub perm: DimList,
}

/// The slice `start..start + len` of one dimension.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Narrow {
    /// The dimension.
    pub dim: usize,
    /// First index kept.
    pub start: usize,
    /// Number of indices kept.
    pub len: usize,
}

/// Zero padding along one dimension (the adjoint of [`Narrow`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pad {
    /// The dimension.
    pub dim: usize,
    /// Zeros before.
    pub before: usize,
    /// Zeros after.
    pub after: usize,
}

/// NumPy broadcast to a larger shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BroadcastTo {
    /// Result shape.
    pub shape: Shape,
}

/// `out[.., idx[j], ..] += src[.., j, ..]` into zeros of length `size` along `dim`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexAdd {
    /// The dimension.
    pub dim: usize,
    /// Its length in the result.
    pub size: usize,
}

/// `out[p with dim = idx[p]] += src[p]` into zeros of `shape`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScatterAdd {
    /// The dimension.
    pub dim: usize,
    /// Result shape.
    pub shape: Shape,
}

/// One-hot encoding of `i64` class indices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OneHot {
    /// Number of classes (the new last dimension).
    pub classes: usize,
    /// Result dtype.
    pub dtype: DType,
}
