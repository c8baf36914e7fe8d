//! Learning-rate schedules with PyTorch's names and formulas (`torch.optim.lr_scheduler`):
//! [`StepLr`], [`CosineAnnealingLr`], [`LinearLr`] (the usual linear warm-up) and
//! [`SequentialLr`] to chain them (warm-up, then cosine).
//!
//! As in PyTorch, creating a scheduler sets the optimiser's learning rate for epoch 0, and
//! [`step`](LrScheduler::step), called once per epoch (or per batch, for per-step schedules),
//! moves to the next epoch and sets its rate. Rates are computed in closed form from the base
//! rate (the optimiser's rate when the first scheduler was made), so they do not drift.
//!
//! Setting the rate costs nothing under `#[janus]`: it is an input of the compiled graphs, not
//! a constant, so a schedule never compiles a new variant.
//!
//! # Examples
//!
//! ```
//! use janus_runtime::optim::{Sgd, Optimizer, lr_scheduler::{LrScheduler, StepLr}};
//!
//! let mut opt = Sgd::new(0.1);
//! let mut sched = StepLr::new(&mut opt, 2, 0.5); // halve the rate every 2 epochs
//! let mut rates = vec![opt.lr()];
//! for _epoch in 0..5 {
//!     // ... train one epoch with `opt` ...
//!     sched.step(&mut opt);
//!     rates.push(opt.lr());
//! }
//! assert_eq!(rates, [0.1, 0.1, 0.05, 0.05, 0.025, 0.025]);
//! assert_eq!(sched.get_last_lr(), 0.025);
//! ```

use super::Optimizer;

/// What every schedule does. `lr_at` is the closed form; the rest follow from it.
pub trait LrScheduler {
    /// The learning rate at `epoch` (epoch 0 is the rate set when the scheduler was made).
    fn lr_at(&self, epoch: usize) -> f64;

    /// The rate the schedule starts from.
    fn base_lr(&self) -> f64;

    /// Changes the rate the schedule starts from ([`SequentialLr`] gives its schedules one).
    fn set_base_lr(&mut self, base_lr: f64);

    /// The epochs stepped so far.
    fn last_epoch(&self) -> usize;

    /// Sets the epoch, for resuming a run: the next [`step`](LrScheduler::step) goes to
    /// `epoch + 1`. Set the optimiser's rate too, or load it from a checkpoint.
    fn set_last_epoch(&mut self, epoch: usize);

    /// Moves to the next epoch and sets `opt`'s learning rate to its rate.
    fn step<O: Optimizer>(&mut self, opt: &mut O)
    where
        Self: Sized,
    {
        let epoch = self.last_epoch() + 1;
        self.set_last_epoch(epoch);
        opt.set_lr(self.lr_at(epoch));
    }

    /// The rate of the current epoch (PyTorch's `get_last_lr()`, for one parameter group).
    fn get_last_lr(&self) -> f64 {
        self.lr_at(self.last_epoch())
    }
}

/// Implements the bookkeeping of [`LrScheduler`] over `base_lr` and `last_epoch` fields.
macro_rules! bookkeeping {
    () => {
        fn base_lr(&self) -> f64 {
            self.base_lr
        }
        fn set_base_lr(&mut self, base_lr: f64) {
            self.base_lr = base_lr;
        }
        fn last_epoch(&self) -> usize {
            self.last_epoch
        }
        fn set_last_epoch(&mut self, epoch: usize) {
            self.last_epoch = epoch;
        }
    };
}

/// Sets `opt`'s rate for epoch 0 of a new schedule, as PyTorch's constructors do.
fn start<S: LrScheduler, O: Optimizer>(s: S, opt: &mut O) -> S {
    opt.set_lr(s.lr_at(0));
    s
}

#[track_caller]
fn check(what: &str, ok: bool, detail: std::fmt::Arguments<'_>) {
    if !ok {
        panic!("janus::{what}: {detail} (called at {})", std::panic::Location::caller());
    }
}

/// Multiplies the rate by `gamma` every `step_size` epochs (PyTorch's `StepLR`):
/// `lr = base_lr * gamma ^ floor(epoch / step_size)`.
#[derive(Clone, Debug)]
pub struct StepLr {
    base_lr: f64,
    last_epoch: usize,
    step_size: usize,
    gamma: f64,
}

impl StepLr {
    /// A step schedule starting from `opt`'s current rate. Panics if `step_size` is 0.
    #[track_caller]
    pub fn new<O: Optimizer>(opt: &mut O, step_size: usize, gamma: f64) -> Self {
        check("StepLr::new", step_size > 0, format_args!("step_size must be at least 1"));
        start(StepLr { base_lr: opt.lr(), last_epoch: 0, step_size, gamma }, opt)
    }
}

impl LrScheduler for StepLr {
    fn lr_at(&self, epoch: usize) -> f64 {
        self.base_lr * self.gamma.powi((epoch / self.step_size) as i32)
    }
    bookkeeping!();
}

/// Anneals the rate from the base rate to `eta_min` along half a cosine over `t_max` epochs
/// (PyTorch's `CosineAnnealingLR`, closed form):
/// `lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / t_max)) / 2`.
#[derive(Clone, Debug)]
pub struct CosineAnnealingLr {
    base_lr: f64,
    last_epoch: usize,
    t_max: usize,
    eta_min: f64,
}

impl CosineAnnealingLr {
    /// A cosine schedule over `t_max` epochs from `opt`'s current rate down to `eta_min`.
    /// Panics if `t_max` is 0.
    #[track_caller]
    pub fn new<O: Optimizer>(opt: &mut O, t_max: usize, eta_min: f64) -> Self {
        check("CosineAnnealingLr::new", t_max > 0, format_args!("t_max must be at least 1"));
        start(CosineAnnealingLr { base_lr: opt.lr(), last_epoch: 0, t_max, eta_min }, opt)
    }
}

impl LrScheduler for CosineAnnealingLr {
    fn lr_at(&self, epoch: usize) -> f64 {
        let phase = std::f64::consts::PI * epoch as f64 / self.t_max as f64;
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + phase.cos()) / 2.0
    }
    bookkeeping!();
}

/// Scales the rate linearly from `start_factor * base_lr` to `end_factor * base_lr` over
/// `total_iters` epochs, then holds it (PyTorch's `LinearLR`; with `end_factor` 1, the usual
/// linear warm-up): `lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters)`.
#[derive(Clone, Debug)]
pub struct LinearLr {
    base_lr: f64,
    last_epoch: usize,
    start_factor: f64,
    end_factor: f64,
    total_iters: usize,
}

impl LinearLr {
    /// A linear schedule from `opt`'s current rate. Panics if `start_factor` is not in (0, 1] or
    /// `end_factor` not in [0, 1], as PyTorch does.
    #[track_caller]
    pub fn new<O: Optimizer>(opt: &mut O, start_factor: f64, end_factor: f64, total_iters: usize) -> Self {
        check(
            "LinearLr::new",
            start_factor > 0.0 && start_factor <= 1.0 && (0.0..=1.0).contains(&end_factor),
            format_args!(
                "start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor} and {end_factor}"
            ),
        );
        start(LinearLr { base_lr: opt.lr(), last_epoch: 0, start_factor, end_factor, total_iters }, opt)
    }

    /// Linear warm-up from `start_factor * lr` to the full rate over `total_iters` epochs.
    #[track_caller]
    pub fn warmup<O: Optimizer>(opt: &mut O, start_factor: f64, total_iters: usize) -> Self {
        LinearLr::new(opt, start_factor, 1.0, total_iters)
    }
}

impl LrScheduler for LinearLr {
    fn lr_at(&self, epoch: usize) -> f64 {
        let done = if self.total_iters == 0 {
            1.0
        } else {
            epoch.min(self.total_iters) as f64 / self.total_iters as f64
        };
        self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)
    }
    bookkeeping!();
}

/// Runs schedules one after another (PyTorch's `SequentialLR`): schedule `i + 1` takes over at
/// epoch `milestones[i]` and counts its own epochs from there. Every schedule starts from the
/// first one's base rate, as PyTorch's `initial_lr` makes them do.
///
/// # Examples
///
/// ```
/// use janus_runtime::optim::{Adam, Optimizer};
/// use janus_runtime::optim::lr_scheduler::{CosineAnnealingLr, LinearLr, LrScheduler, SequentialLr};
///
/// let mut opt = Adam::new(1e-3);
/// let warmup = LinearLr::warmup(&mut opt, 0.1, 5); // 1e-4 .. 1e-3 over 5 epochs
/// let cosine = CosineAnnealingLr::new(&mut opt, 95, 0.0);
/// let sched = SequentialLr::new(&mut opt, vec![Box::new(warmup), Box::new(cosine)], &[5]);
/// assert!((opt.lr() - 1e-4).abs() < 1e-12);
/// assert!((sched.lr_at(5) - 1e-3).abs() < 1e-12); // the cosine's first epoch: the full rate
/// ```
pub struct SequentialLr {
    base_lr: f64,
    last_epoch: usize,
    schedules: Vec<Box<dyn LrScheduler>>,
    milestones: Vec<usize>,
}

impl SequentialLr {
    /// Chains `schedules`, switching at `milestones` (one fewer than the schedules, increasing).
    #[track_caller]
    pub fn new<O: Optimizer>(
        opt: &mut O,
        mut schedules: Vec<Box<dyn LrScheduler>>,
        milestones: &[usize],
    ) -> Self {
        check(
            "SequentialLr::new",
            !schedules.is_empty() && milestones.len() + 1 == schedules.len() && milestones.is_sorted(),
            format_args!(
                "expected increasing milestones, one fewer than the schedules: got {} schedule(s) and milestones {milestones:?}",
                schedules.len()
            ),
        );
        let base_lr = schedules[0].base_lr();
        for s in &mut schedules {
            s.set_base_lr(base_lr);
        }
        start(SequentialLr { base_lr, last_epoch: 0, schedules, milestones: milestones.to_vec() }, opt)
    }
}

impl LrScheduler for SequentialLr {
    fn lr_at(&self, epoch: usize) -> f64 {
        let i = self.milestones.iter().take_while(|&&m| m <= epoch).count();
        let since = if i == 0 { epoch } else { epoch - self.milestones[i - 1] };
        self.schedules[i].lr_at(since)
    }
    fn base_lr(&self) -> f64 {
        self.base_lr
    }
    fn set_base_lr(&mut self, base_lr: f64) {
        self.base_lr = base_lr;
        for s in &mut self.schedules {
            s.set_base_lr(base_lr);
        }
    }
    fn last_epoch(&self) -> usize {
        self.last_epoch
    }
    fn set_last_epoch(&mut self, epoch: usize) {
        self.last_epoch = epoch;
    }
}
