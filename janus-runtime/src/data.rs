//! Mini-batches over tensors: [`Batches`], the counterpart of PyTorch's
//! `DataLoader(TensorDataset(x, y), batch_size, shuffle=True)` for data already in memory.

use crate::Device;
use crate::error::bail;
use crate::tensor::Tensor;

/// An iterator over mini-batches of the rows (dimension 0) of several tensors at once: each
/// item holds one slice of every tensor, taken at the same rows, so inputs and targets stay
/// aligned. Shuffled batches follow a fresh [`Tensor::randperm`] drawn when the iterator is
/// made, so each epoch (a new `Batches`) sees a new order, and the whole sequence repeats
/// after the same [`manual_seed`](crate::manual_seed). Sequential batches are views.
///
/// # Examples
/// ```
/// use janus_runtime::{Tensor, data::Batches};
/// let x = Tensor::from_vec((0..10).map(|i| i as f32).collect::<Vec<_>>(), [5, 2]);
/// let y = Tensor::from_vec(vec![0i64, 1, 2, 3, 4], [5]);
/// janus_runtime::manual_seed(0);
/// let mut seen = Vec::new();
/// for batch in Batches::shuffled(&[x, y], 2) {
///     let (xb, yb) = (&batch[0], &batch[1]);
///     assert_eq!(xb.dims()[0], yb.dims()[0]); // 2, 2, then the last 1
///     // Rows stay aligned: x's row i is [2i, 2i + 1].
///     let xs = xb.to_vec::<f32>();
///     for (k, label) in yb.to_vec::<i64>().into_iter().enumerate() {
///         assert_eq!(xs[2 * k], 2.0 * label as f32);
///         seen.push(label);
///     }
/// }
/// seen.sort();
/// assert_eq!(seen, vec![0, 1, 2, 3, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct Batches {
    tensors: Vec<Tensor>,
    batch_size: usize,
    /// The row order, `None` for `0..rows`.
    order: Option<Vec<i64>>,
    next: usize,
    rows: usize,
}

impl Batches {
    /// Batches of `batch_size` rows in order (`shuffle=False`); the last may be smaller.
    /// Panics, naming the shapes and the caller, when the tensors' first dimensions differ or
    /// `batch_size` is 0.
    #[track_caller]
    pub fn new(tensors: &[Tensor], batch_size: usize) -> Batches {
        let rows = check(tensors, batch_size);
        Batches { tensors: tensors.to_vec(), batch_size, order: None, next: 0, rows }
    }

    /// Batches of `batch_size` rows in a random order (`shuffle=True`), drawn from the thread's
    /// random stream.
    #[track_caller]
    pub fn shuffled(tensors: &[Tensor], batch_size: usize) -> Batches {
        let rows = check(tensors, batch_size);
        let order = Some(Tensor::randperm(rows).to_vec::<i64>());
        Batches { tensors: tensors.to_vec(), batch_size, order, next: 0, rows }
    }

    /// Leaves out a last batch smaller than `batch_size` (`drop_last=True`).
    pub fn drop_last(mut self) -> Batches {
        self.rows -= self.rows % self.batch_size;
        self
    }
}

/// The common number of rows; panics on unusable arguments.
#[track_caller]
fn check(tensors: &[Tensor], batch_size: usize) -> usize {
    let shapes: Vec<&[usize]> = tensors.iter().map(Tensor::dims).collect();
    if tensors.is_empty() || batch_size == 0 {
        bail!(
            "batches",
            "need at least one tensor and a batch size above 0, got {shapes:?} and batch size {batch_size}"
        );
    }
    if shapes.iter().any(|s| s.is_empty() || s[0] != shapes[0][0]) {
        bail!("batches", "every tensor needs the same first dimension (the rows), got shapes {shapes:?}");
    }
    shapes[0][0]
}

impl Iterator for Batches {
    type Item = Vec<Tensor>;

    fn next(&mut self) -> Option<Vec<Tensor>> {
        if self.next >= self.rows {
            return None;
        }
        let len = self.batch_size.min(self.rows - self.next);
        let start = self.next;
        self.next += len;
        Some(match &self.order {
            None => self.tensors.iter().map(|t| t.narrow(0, start, len)).collect(),
            Some(order) => {
                let idx = Tensor::from_vec(order[start..start + len].to_vec(), [len]);
                self.tensors
                    .iter()
                    .map(|t| {
                        let idx =
                            if t.device() == Device::Cpu { idx.clone() } else { idx.to_device(t.device()) };
                        t.index_select(0, &idx)
                    })
                    .collect()
            }
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.rows - self.next.min(self.rows)).div_ceil(self.batch_size);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Batches {}
