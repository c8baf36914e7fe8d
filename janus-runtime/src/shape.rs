//! Shapes, dimension arguments and NumPy broadcasting.

use smallvec::SmallVec;
use std::fmt;

/// A tensor's dimensions, outermost first. Shapes are always concrete.
#[derive(PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Shape(pub(crate) SmallVec<[usize; 4]>);

impl Clone for Shape {
    /// A copy of the dimensions (see `copy_small`; the derived clone pushes them one by one
    /// through `SmallVec::extend`, about 60 instructions, on every replay's output).
    fn clone(&self) -> Self {
        Shape(copy_small(&self.0))
    }
}

/// A copy of a few dims or strides into an inline `SmallVec`, with fixed-size moves: both the
/// derived `clone` (element pushes) and `from_slice` (a `memcpy` call for a length the compiler
/// cannot see) cost more on the hit path, where every replay's outputs copy a shape and
/// strides.
#[inline]
pub(crate) fn copy_small<const N: usize>(s: &[usize]) -> SmallVec<[usize; N]> {
    if s.len() > N {
        return SmallVec::from_slice(s);
    }
    let mut a = [0usize; N];
    for (k, d) in a.iter_mut().enumerate() {
        *d = s.get(k).copied().unwrap_or(0);
    }
    SmallVec::from_buf_and_len(a, s.len())
}

impl Shape {
    /// The shape of a scalar (rank 0).
    pub fn scalar() -> Self {
        Shape(SmallVec::new())
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The dimensions (the same as [`dims`](Shape::dims); the name the runtime's code uses for
    /// tensors and shapes alike).
    pub(crate) fn sizes(&self) -> &[usize] {
        &self.0
    }

    /// Number of elements (the same as [`numel`](Shape::numel)).
    pub(crate) fn elems(&self) -> usize {
        self.0.iter().product()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Row-major strides of a contiguous tensor of this shape.
    pub fn contiguous_strides(&self) -> Strides {
        janus_kernels::strided::contiguous_strides(&self.0)
    }
}

/// Per-dimension strides, in elements.
pub type Strides = SmallVec<[usize; 6]>;

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::ops::Deref for Shape {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.0
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Self {
        Shape(SmallVec::from_slice(&d))
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Self {
        Shape(SmallVec::from_slice(d))
    }
}

impl<const N: usize> From<&[usize; N]> for Shape {
    fn from(d: &[usize; N]) -> Self {
        Shape(SmallVec::from_slice(d))
    }
}

impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Self {
        Shape(SmallVec::from_vec(d))
    }
}

impl From<&Vec<usize>> for Shape {
    fn from(d: &Vec<usize>) -> Self {
        Shape(SmallVec::from_slice(d))
    }
}

impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Self {
        s.clone()
    }
}

impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape::scalar()
    }
}

/// The NumPy broadcast of two shapes, or `None` if they are incompatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Shape> {
    let rank = a.len().max(b.len());
    let mut out = SmallVec::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    Some(Shape(out))
}

/// A dimension argument: a non-negative index, or a negative one counting from the end
/// (`-1` is the last dimension), as in PyTorch.
pub trait Dim: Copy {
    /// The signed value.
    fn to_isize(self) -> isize;
}

macro_rules! impl_dim {
    ($($t:ty),*) => {$(
        impl Dim for $t {
            fn to_isize(self) -> isize {
                self as isize
            }
        }
    )*};
}
impl_dim!(i32, i64, isize, usize, u32);

/// A reshape target: dimensions where at most one is `-1` (inferred from the element count).
pub trait ReshapeSpec {
    /// The requested dimensions, `-1` for the inferred one.
    fn to_spec(&self) -> SmallVec<[isize; 4]>;
}

macro_rules! impl_reshape_array {
    ($($t:ty),*) => {$(
        impl<const N: usize> ReshapeSpec for [$t; N] {
            fn to_spec(&self) -> SmallVec<[isize; 4]> {
                self.iter().map(|&d| d as isize).collect()
            }
        }
        impl ReshapeSpec for &[$t] {
            fn to_spec(&self) -> SmallVec<[isize; 4]> {
                self.iter().map(|&d| d as isize).collect()
            }
        }
        impl ReshapeSpec for Vec<$t> {
            fn to_spec(&self) -> SmallVec<[isize; 4]> {
                self.iter().map(|&d| d as isize).collect()
            }
        }
    )*};
}
impl_reshape_array!(i32, i64, isize, usize);

impl ReshapeSpec for Shape {
    fn to_spec(&self) -> SmallVec<[isize; 4]> {
        self.0.iter().map(|&d| d as isize).collect()
    }
}

impl ReshapeSpec for &Shape {
    fn to_spec(&self) -> SmallVec<[isize; 4]> {
        self.0.iter().map(|&d| d as isize).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap().sizes(), &[2, 4, 3]);
        assert_eq!(broadcast_shapes(&[], &[5]).unwrap().sizes(), &[5]);
        assert_eq!(broadcast_shapes(&[0, 3], &[1, 3]).unwrap().sizes(), &[0, 3]);
        assert!(broadcast_shapes(&[2, 3], &[3, 2]).is_none());
    }
}
