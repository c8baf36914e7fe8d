//! Right factors that several products of one program share, packed once per run
//! (`janus_kernels::matmul::packed`): an unrolled LSTM step multiplies by the same recurrent
//! weights at every time step, forward and (transposed) backward.
//!
//! Which factors: those that at least two of the whole program's `f32` products read (before
//! the split into halves, so the choice is the same whatever the worker count), identified by
//! the node for values the run computes, and by buffer and layout for inputs, constants and
//! memos (one weight read through 32 separate transpose nodes is one factor). A run packs each
//! on first use, under a per-factor lock, into buffers kept with the run's arenas.

use crate::DType;
use crate::exec::lower::{BufRef, Lowered, StepKind, ValRef};
use crate::shape::Strides;
use janus_kernels::matmul::packed;
use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

/// No slot: a node not read as a packed factor.
const NONE: u32 = u32::MAX;

/// What identifies a packed factor.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    /// A value the run computes (written once per run).
    Node(usize),
    /// A view of a buffer no step writes: input, constant or memo.
    Stored(BufRef, usize, Strides, [usize; 2]),
}

/// The program's packed factors.
#[derive(Default)]
pub(crate) struct PackPlan {
    /// Per node of the run program, the slot of its packed form when products read it as a
    /// packed right factor, else [`NONE`] (empty when nothing is packed): one index per
    /// product step, no hashing on the executor's path.
    slot_of: Vec<u32>,
    /// Elements of each slot's packed form.
    lens: Vec<usize>,
}

/// The packed length and the key of the right factor of a product the packed kernel may run.
fn eligible(l: &Lowered, kind: &StepKind) -> Option<(usize, Key)> {
    // The packed kernel has no relu epilogue.
    let StepKind::MatMul { a, b, out, relu: false, .. } = kind else { return None };
    let val = |i: usize| l.vals[i].as_ref();
    let (va, vb, vo) = (val(*a)?, val(*b)?, val(*out)?);
    let rank2 = |v: &ValRef| v.shape.rank() == 2;
    if vo.dtype != DType::F32 || !(rank2(va) && rank2(vb) && rank2(vo)) {
        return None;
    }
    let (k, n) = (vb.shape[0], vb.shape[1]);
    if !packed::packable(k, n) {
        return None;
    }
    let key = match vb.buf {
        BufRef::Input(_) | BufRef::Const(_) | BufRef::Memo(_) => {
            Key::Stored(vb.buf, vb.offset, vb.strides.clone(), [k, n])
        }
        BufRef::Arena(_) | BufRef::Output(_) => Key::Node(*b),
    };
    Some((packed::packed_len(k, n), key))
}

impl PackPlan {
    /// The factors of `whole` (the executor's program) read by two products or more, located
    /// in `run` (the program runs execute: `whole` or its split form). None when the CPU lacks
    /// the kernel.
    pub(crate) fn new(whole: &Lowered, run: &Lowered) -> PackPlan {
        if !packed::available() {
            return PackPlan::default();
        }
        let mut uses: HashMap<Key, usize> = HashMap::new();
        for s in &whole.steps {
            if let Some((_, key)) = eligible(whole, &s.kind) {
                *uses.entry(key).or_default() += 1;
            }
        }
        let mut plan = PackPlan::default();
        let mut slots: HashMap<Key, usize> = HashMap::new();
        for s in &run.steps {
            let (StepKind::MatMul { b, .. }, Some((len, key))) = (&s.kind, eligible(run, &s.kind)) else {
                continue;
            };
            if uses.get(&key).is_some_and(|&n| n >= 2) {
                let next = slots.len();
                let slot = *slots.entry(key).or_insert_with(|| {
                    plan.lens.push(len);
                    next
                });
                plan.slot_of.resize(run.vals.len(), NONE);
                plan.slot_of[*b] = slot as u32;
            }
        }
        plan
    }

    /// Whether no factor is packed.
    pub(crate) fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Bytes of the packed copies a run holds.
    pub(crate) fn bytes(&self) -> usize {
        self.lens.iter().sum::<usize>() * std::mem::size_of::<f32>()
    }

    /// The slot of right factor `b`, if packed.
    pub(crate) fn slot(&self, b: usize) -> Option<usize> {
        self.slot_of.get(b).filter(|&&s| s != NONE).map(|&s| s as usize)
    }
}

/// One run's packed factors: per slot, whether this run packed it yet, and the copy.
#[derive(Default)]
pub(crate) struct Packs(Vec<RwLock<(bool, Vec<f32>)>>);

impl Packs {
    /// No packed copies: what a run of a program that packs nothing reads.
    pub(crate) const EMPTY: Packs = Packs(Vec::new());

    /// Ready for a new run of a program with `plan`: every slot to be packed again.
    pub(crate) fn reset(&mut self, plan: &PackPlan) {
        self.0.resize_with(plan.lens.len(), Default::default);
        for slot in &mut self.0 {
            slot.get_mut().unwrap_or_else(PoisonError::into_inner).0 = false;
        }
    }

    /// Runs `f` on slot `slot`'s packed factor, packing it first with `fill` if this run has
    /// not yet. Both workers may read one slot at once; the first to find it empty packs it.
    pub(crate) fn with<R>(
        &self,
        slot: usize,
        fill: impl FnOnce(&mut Vec<f32>),
        f: impl FnOnce(&[f32]) -> R,
    ) -> R {
        let lock = &self.0[slot];
        {
            let ready = lock.read().unwrap_or_else(PoisonError::into_inner);
            if ready.0 {
                return f(&ready.1);
            }
        }
        {
            let mut w = lock.write().unwrap_or_else(PoisonError::into_inner);
            if !w.0 {
                fill(&mut w.1);
                w.0 = true;
            }
        }
        f(&lock.read().unwrap_or_else(PoisonError::into_inner).1)
    }
}

#[cfg(test)]
mod tests {
    use super::super::CpuPlan;
    use super::PackPlan;
    use crate::exec::lower::lower;
    use crate::passes::testing::trace;
    use crate::tensor::Tensor;

    fn bits(ts: &[Tensor]) -> Vec<Vec<u32>> {
        ts.iter().map(|t| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect()).collect()
    }

    /// An unrolled recurrence reads its weights at every step, forward and transposed, and a
    /// weight the program computes (`w * 0.5`): the plan packs them, runs give the same bits on
    /// one worker and two, and stay within rounding of gemm's products and of eager execution.
    #[test]
    fn an_unrolled_recurrence_packs_its_weights() {
        if !janus_kernels::matmul::packed::available() {
            eprintln!("skipped: the packed kernel needs AVX2 and FMA, which this CPU lacks");
            return;
        }
        crate::random::manual_seed(11);
        let inputs =
            [Tensor::randn([24, 20]), Tensor::randn([40, 40]), Tensor::randn([20, 40]), Tensor::randn([40])];
        let program = |x: &[Tensor]| {
            let half = &x[1] * 0.5;
            let mut h = Tensor::zeros([24, 40]);
            let mut back = Tensor::zeros([24, 40]);
            for t in 0..4 {
                let xt = (&x[0] * (t as f64 + 1.0)).tanh();
                h = (xt.matmul(&x[2]) + h.matmul(&x[1]) + &x[3]).tanh();
                back = back + h.matmul(&x[1].t()) + h.matmul(&half);
            }
            vec![h, back]
        };
        let eager = program(&inputs);
        let g = trace(&inputs, program);
        let (g, _) = crate::passes::optimize(g);
        let l = lower(&g);
        let mut plan = CpuPlan::with_options(&l, Some(0), true);
        assert!(plan.packs.lens.len() >= 4, "x[1], its transpose, x[2] and x[1] * 0.5 are packed");
        let one = plan.run_as(&l, &inputs, Some(false));
        for run in 0..3 {
            let two = plan.run_as(&l, &inputs, Some(true));
            assert_eq!(bits(&one), bits(&two), "parallel run {run}: the bits depend on the worker count");
        }
        plan.packs = PackPlan::default();
        let gemm = plan.run_as(&l, &inputs, Some(false));
        for (k, ((p, q), e)) in one.iter().zip(&gemm).zip(&eager).enumerate() {
            let (p, q, e) = (p.to_vec::<f32>(), q.to_vec::<f32>(), e.to_vec::<f32>());
            for i in 0..p.len() {
                let tol = 1e-4 * (1.0 + e[i].abs());
                assert!(
                    (p[i] - q[i]).abs() <= tol && (p[i] - e[i]).abs() <= tol,
                    "output {k}[{i}]: {} {} {}",
                    p[i],
                    q[i],
                    e[i]
                );
            }
        }
    }
}
