//! A fused program's output written as rows of a larger buffer: one part of a concatenation
//! along a later dimension, which the program writes in place instead of a copy assembling
//! the parts afterwards (the LSTM backward's four gate gradients, `[B, H]` each, in the
//! `[B, 4H]` gradient of the gate pre-activations).

use std::marker::PhantomData;

/// `rows` runs of `row` consecutive elements, `stride` apart, starting at `ptr`. Several such
/// outputs may interleave in one buffer (the parts of one concatenation), so this holds a raw
/// pointer: a `&mut` slice over its span would alias the others'.
pub struct Rows<'a, T> {
    ptr: *mut T,
    rows: usize,
    row: usize,
    stride: usize,
    _buf: PhantomData<&'a mut T>,
}

// SAFETY: a `Rows` is a unique borrow of its elements (see `new`), like a `&mut [T]`.
unsafe impl<T: Send> Send for Rows<'_, T> {}

impl<'a, T: Copy> Rows<'a, T> {
    /// The elements `ptr + i * stride + j` for `i < rows`, `j < row`.
    ///
    /// # Safety
    /// Those elements must be valid for writes for `'a`, and no other reference may reach them
    /// during `'a` (other outputs may reach elements between them).
    pub unsafe fn new(ptr: *mut T, rows: usize, row: usize, stride: usize) -> Self {
        assert!(row <= stride || rows <= 1, "fused: rows of {row} elements overlap at stride {stride}");
        Rows { ptr, rows, row, stride, _buf: PhantomData }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.rows * self.row
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `src` to positions `at..at + src.len()` (row-major over the rows).
    pub fn write(&mut self, at: usize, src: &[T]) {
        assert!(at + src.len() <= self.len(), "fused: write past a strided output");
        let mut done = 0;
        while done < src.len() {
            let pos = at + done;
            let (r, c) = (pos / self.row, pos % self.row);
            let n = (self.row - c).min(src.len() - done);
            // SAFETY: row `r < rows`, columns `c..c + n <= row`: elements of this output, which
            // `new`'s caller lent it alone.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r * self.stride + c), n) };
            dst.copy_from_slice(&src[done..done + n]);
            done += n;
        }
    }
}
