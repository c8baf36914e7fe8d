//! [`Layout`]: where a strided view's elements are (shape, strides and offset, in elements).
//! The one definition of broadcasting strides, density and GEMM operand layouts, shared by the
//! eager kernels (CPU and CUDA), the executor's lowering and both executor backends.

use crate::shape::Strides;
use janus_kernels::matmul::MatLayout;

/// A strided view: element `[i0, .., ik]` is at `offset + Σ i_d * strides[d]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout<'a> {
    /// Dimensions.
    pub shape: &'a [usize],
    /// Elements between neighbours along each dimension.
    pub strides: &'a [usize],
    /// Position of element 0.
    pub offset: usize,
}

impl<'a> Layout<'a> {
    /// A view of `shape` with these strides and offset.
    pub fn new(shape: &'a [usize], strides: &'a [usize], offset: usize) -> Self {
        Layout { shape, strides, offset }
    }

    /// Strides that read this view at every index of the (larger or equal) broadcast shape
    /// `out` (NumPy rules: missing leading and size-1 dimensions get stride 0).
    pub fn broadcast_to(&self, out: &[usize]) -> Strides {
        let lead = out.len() - self.shape.len();
        let mut s: Strides = smallvec::smallvec![0; out.len()];
        for (i, (&len, &st)) in self.shape.iter().zip(self.strides).enumerate() {
            s[lead + i] = if len == 1 { 0 } else { st };
        }
        s
    }

    /// Whether the view is row-major contiguous (size-1 dimensions may have any stride; the
    /// offset may be non-zero).
    pub fn is_dense(&self) -> bool {
        let mut expect = 1;
        for (&len, &st) in self.shape.iter().zip(self.strides).rev() {
            if len != 1 && st != expect {
                return false;
            }
            expect *= len;
        }
        true
    }

    /// How many elements from the offset on the view can touch: one past its largest index
    /// (0 for an empty view).
    pub fn span(&self) -> usize {
        if self.shape.contains(&0) {
            return 0;
        }
        1 + self.shape.iter().zip(self.strides).map(|(&d, &s)| (d - 1) * s).sum::<usize>()
    }

    /// The view as `(rows, row, stride)`: `rows` runs of `row` consecutive elements, `stride`
    /// apart (a dense view is one row), or `None` when it is not such a run of rows. A part of a
    /// concatenation along a later dimension is one (`exec::lower::alias_cats`).
    pub fn rows(&self) -> Option<(usize, usize, usize)> {
        // The longest contiguous suffix of dimensions is the row.
        let mut row = 1;
        let mut k = self.shape.len();
        while k > 0 && (self.shape[k - 1] == 1 || self.strides[k - 1] == row) {
            row *= self.shape[k - 1];
            k -= 1;
        }
        if k == 0 {
            return Some((1, row, row));
        }
        // The rest steps over rows at one stride.
        let stride = self.strides[k - 1];
        let (mut rows, mut next) = (1, stride);
        for d in (0..k).rev() {
            if self.shape[d] == 1 {
                continue;
            }
            if self.strides[d] != next {
                return None;
            }
            rows *= self.shape[d];
            next *= self.shape[d];
        }
        Some((rows, row, stride))
    }

    /// The GEMM layout of a 2-D or 3-D operand (a size-1 or missing batch broadcasts).
    pub fn matrix(&self) -> MatLayout {
        let r = self.shape.len();
        MatLayout {
            offset: self.offset,
            batch_stride: if r == 3 && self.shape[0] > 1 { self.strides[0] } else { 0 },
            row_stride: self.strides[r - 2],
            col_stride: self.strides[r - 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_density_and_matrices() {
        let l = Layout::new(&[3, 1], &[1, 7], 2);
        assert_eq!(l.broadcast_to(&[4, 3, 5]).as_slice(), &[0, 1, 0]);
        assert!(l.is_dense(), "a size-1 dimension may have any stride");
        assert!(!Layout::new(&[3, 2], &[1, 3], 0).is_dense());
        assert!(Layout::new(&[2, 1, 3], &[3, 99, 1], 0).is_dense());
        let t = Layout::new(&[5, 4], &[1, 5], 0); // a transposed [4, 5]
        let m = t.matrix();
        assert_eq!((m.row_stride, m.col_stride, m.batch_stride), (1, 5, 0));
        let b = Layout::new(&[1, 4, 5], &[20, 5, 1], 3).matrix();
        assert_eq!((b.batch_stride, b.offset), (0, 3));
        // Rows: dense views are one row; a part of a cat along dim 1 or 2 is rows of it.
        assert_eq!(Layout::new(&[2, 3], &[3, 1], 0).rows(), Some((1, 6, 6)));
        assert_eq!(Layout::new(&[16, 128], &[512, 1], 128).rows(), Some((16, 128, 512)));
        assert_eq!(Layout::new(&[2, 3, 4], &[24, 8, 1], 0).rows(), Some((6, 4, 8)));
        assert_eq!(Layout::new(&[2, 2, 4], &[16, 4, 1], 0).rows(), Some((2, 8, 16)));
        assert_eq!(Layout::new(&[2, 3, 4], &[40, 8, 1], 0).rows(), None, "two row strides");
        assert_eq!(Layout::new(&[5, 4], &[1, 5], 0).rows(), None, "a transpose");
    }
}
