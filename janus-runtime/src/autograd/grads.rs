//! [`Grads`], what `backward()` returns: each leaf's gradient, with the arithmetic training loops
//! use on them (accumulation, scaling, the global norm and clipping by it).

use crate::tensor::Tensor;
use std::collections::HashMap;

/// Gradients from [`Tensor::backward`], keyed by the identity of each leaf.
#[derive(Clone, Default)]
pub struct Grads {
    pub(crate) leaves: HashMap<u64, Tensor>,
}

impl Grads {
    /// The gradient of `leaf`, if the loss depends on it.
    #[doc(alias = "grad")]
    pub fn get(&self, leaf: &Tensor) -> Option<&Tensor> {
        self.leaves.get(&leaf.id())
    }

    /// Number of leaves with a gradient.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// Whether no leaf received a gradient.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// `(leaf id, gradient)` pairs by leaf id ([`Tensor::id`]): the order the leaves were
    /// created in, for leaves created on one thread (each thread takes ids in blocks, so leaves
    /// from several threads come by thread, in the order the threads first made a tensor). The
    /// same order on every call, so code that runs ops over them records the same graph each
    /// time.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let (a, b) = (Tensor::ones([2]).requires_grad(), Tensor::ones([3]).requires_grad());
    /// let grads = (a.sum_all() + b.sum_all() * 2.0).backward();
    /// let ids: Vec<u64> = grads.iter().map(|(id, _)| id).collect();
    /// assert_eq!(ids, vec![a.id(), b.id()]);
    /// assert_eq!(grads.iter().map(|(_, g)| g.numel()).sum::<usize>(), 5);
    /// ```
    pub fn iter(&self) -> std::vec::IntoIter<(u64, &Tensor)> {
        let mut v: Vec<(u64, &Tensor)> = self.leaves.iter().map(|(&id, g)| (id, g)).collect();
        v.sort_unstable_by_key(|(id, _)| *id);
        v.into_iter()
    }

    /// Every gradient multiplied by `factor`.
    #[track_caller]
    pub fn scale(&self, factor: f64) -> Grads {
        self.map(|g| g * factor)
    }

    /// The 2-norm of all gradients together, as if concatenated into one vector (the value
    /// `torch.nn.utils.clip_grad_norm_` returns), as a rank-0 tensor of the first gradient's
    /// dtype (`f32` when there are none). Not a host read: it stays in compiled graphs.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let (a, b) = (Tensor::ones([2]).requires_grad(), Tensor::ones([1]).requires_grad());
    /// let grads = (a.sum_all() * 3.0 + b.sum_all() * 4.0).backward(); // [3, 3] and [4]
    /// assert!((grads.total_norm().item() - 34f32.sqrt()).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn total_norm(&self) -> Tensor {
        let mut squares = self.iter().map(|(_, g)| g.square().sum_all());
        let Some(first) = squares.next() else { return Tensor::scalar(0.0) };
        let dtype = first.dtype();
        squares.fold(first, |acc, s| acc + s.to_dtype(dtype)).sqrt()
    }

    /// Every gradient multiplied by a rank-0 tensor `factor` (a norm-dependent factor stays in
    /// the graph, with no host read).
    #[track_caller]
    pub fn scale_by(&self, factor: &Tensor) -> Grads {
        self.map(|g| g * &factor.to_dtype(g.dtype()))
    }

    /// Gradients rescaled so that their [`total_norm`](Grads::total_norm) is at most
    /// `max_norm`, as `torch.nn.utils.clip_grad_norm_`: each is multiplied by
    /// `min(max_norm / (total_norm + 1e-6), 1)`; also returns the norm before clipping (what
    /// `clip_grad_norm_` returns). Branch-free tensor ops, so no host read: it stays in
    /// compiled and speculated graphs.
    ///
    /// # Examples
    /// ```
    /// use janus_runtime::Tensor;
    /// let w = Tensor::ones([2]).requires_grad();
    /// let grads = (w.sum_all() * 30.0).backward(); // [30, 30], norm 42.4
    /// let (clipped, norm) = grads.clip_norm(1.0);
    /// assert!((clipped.total_norm().item() - 1.0).abs() < 1e-5);
    /// assert!((norm.item() - 1800f32.sqrt()).abs() < 1e-4);
    /// let (small, _) = grads.clip_norm(100.0); // already within the bound: unchanged
    /// assert_eq!(small.get(&w).unwrap().to_vec::<f32>(), vec![30.0, 30.0]);
    /// ```
    #[track_caller]
    #[doc(alias = "clip_grad_norm_", alias = "clip_grad_norm")]
    pub fn clip_norm(&self, max_norm: f64) -> (Grads, Tensor) {
        if max_norm.is_nan() || max_norm < 0.0 {
            crate::error::bail!("clip_norm", "max_norm must be a non-negative number, got {max_norm}");
        }
        let total = self.total_norm();
        if self.is_empty() {
            return (self.clone(), total);
        }
        let coef = (max_norm / (&total + 1e-6)).clamp(f64::NEG_INFINITY, 1.0);
        (self.scale_by(&coef), total)
    }

    /// Applies `f` to each gradient, in leaf order.
    #[track_caller]
    fn map(&self, f: impl Fn(&Tensor) -> Tensor) -> Grads {
        Grads { leaves: self.iter().map(|(id, g)| (id, f(g))).collect() }
    }
}

/// Accumulation: the gradient of each leaf in either, summed where both have one (PyTorch's
/// `.grad` accumulating over several `backward()` calls).
///
/// # Examples
/// ```
/// use janus_runtime::Tensor;
/// let w = Tensor::ones([2]).requires_grad();
/// let total = (w.sum_all() * 2.0).backward() + &(w.sum_all() * 3.0).backward();
/// assert_eq!(total.get(&w).unwrap().to_vec::<f32>(), vec![5.0, 5.0]);
/// ```
impl std::ops::Add<&Grads> for Grads {
    type Output = Grads;
    #[track_caller]
    fn add(mut self, other: &Grads) -> Grads {
        self += other;
        self
    }
}

impl std::ops::Add<&Grads> for &Grads {
    type Output = Grads;
    #[track_caller]
    fn add(self, other: &Grads) -> Grads {
        self.clone() + other
    }
}

impl std::ops::AddAssign<&Grads> for Grads {
    #[track_caller]
    fn add_assign(&mut self, other: &Grads) {
        for (id, g) in other.iter() {
            let sum = match self.leaves.get(&id) {
                Some(mine) => mine + g,
                None => g.clone(),
            };
            self.leaves.insert(id, sum);
        }
    }
}

impl<'a> IntoIterator for &'a Grads {
    type Item = (u64, &'a Tensor);
    type IntoIter = std::vec::IntoIter<(u64, &'a Tensor)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::fmt::Debug for Grads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<_> = self.leaves.keys().collect();
        ids.sort();
        f.debug_struct("Grads").field("leaf_ids", &ids).finish()
    }
}
