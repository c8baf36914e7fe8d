//! The CartPole workload of `shared/refbench` (REINFORCE, MLP 4-128-2, Adam 1e-2, gamma 0.99),
//! shared by the `cartpole` example and the bench entry.
#![allow(dead_code)]

use janus::prelude::*;

/// Observation size.
pub const OBS: usize = 4;
/// Hidden units.
pub const HID: usize = 128;
/// Actions (push left, push right).
pub const ACT: usize = 2;
/// Episodes are truncated after this many steps.
pub const MAX_STEPS: usize = 500;
/// Discount factor.
pub const GAMMA: f64 = 0.99;

/// CartPole-v1 with gym's constants and Euler integration.
pub struct CartPole {
    state: [f64; 4],
    steps: usize,
    rng: SplitMix,
    /// Termination thresholds; `f64::INFINITY` disables termination (fixed-length episodes).
    pub x_threshold: f64,
    /// Pole angle threshold in radians (12 degrees).
    pub theta_threshold: f64,
}

impl CartPole {
    /// A new environment whose resets draw from `seed`.
    pub fn new(seed: u64) -> CartPole {
        CartPole {
            state: [0.0; 4],
            steps: 0,
            rng: SplitMix(seed),
            x_threshold: 2.4,
            theta_threshold: 12.0 * 2.0 * std::f64::consts::PI / 360.0,
        }
    }

    /// Starts an episode at a state drawn from `U(-0.05, 0.05)^4`.
    pub fn reset(&mut self) -> [f32; 4] {
        for s in &mut self.state {
            *s = self.rng.uniform() * 0.1 - 0.05;
        }
        self.steps = 0;
        self.obs()
    }

    fn obs(&self) -> [f32; 4] {
        self.state.map(|v| v as f32)
    }

    /// Applies `action` (1 pushes right); returns the observation and whether the episode ended.
    /// Every step earns a reward of 1.
    pub fn step(&mut self, action: usize) -> ([f32; 4], bool) {
        const GRAVITY: f64 = 9.8;
        const MASSPOLE: f64 = 0.1;
        const TOTAL_MASS: f64 = 1.1;
        const LENGTH: f64 = 0.5;
        const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
        const TAU: f64 = 0.02;
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if action == 1 { 10.0 } else { -10.0 };
        let (sin, cos) = theta.sin_cos();
        let temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS;
        let theta_acc =
            (GRAVITY * sin - cos * temp) / (LENGTH * (4.0 / 3.0 - MASSPOLE * cos * cos / TOTAL_MASS));
        let x_acc = temp - POLEMASS_LENGTH * theta_acc * cos / TOTAL_MASS;
        self.state =
            [x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc];
        self.steps += 1;
        let [x, _, theta, _] = self.state;
        let fell = x.abs() > self.x_threshold || theta.abs() > self.theta_threshold;
        (self.obs(), fell || self.steps >= MAX_STEPS)
    }
}

/// A small deterministic generator (SplitMix64) for environment resets.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The policy: `softmax(relu(o W1 + b1) W2 + b2)`.
#[derive(Module, Clone)]
pub struct Policy {
    /// `[4, 128]`.
    pub w1: Tensor,
    /// `[128]`.
    pub b1: Tensor,
    /// `[128, 2]`.
    pub w2: Tensor,
    /// `[2]`.
    pub b2: Tensor,
}

impl Policy {
    /// Weights `N(0, 0.1^2)` from the thread's seeded stream, biases zero (as the refbench).
    pub fn new() -> Policy {
        let w = |r: usize, c: usize| no_grad(|| (Tensor::randn([r, c]) * 0.1f32).requires_grad());
        let (w1, w2) = (w(OBS, HID), w(HID, ACT));
        Policy { w1, b1: Tensor::zeros([HID]).requires_grad(), w2, b2: Tensor::zeros([ACT]).requires_grad() }
    }

    /// Action logits `[N, 2]` for observations `[N, 4]`.
    pub fn logits(&self, obs: &Tensor) -> Tensor {
        (obs.matmul(&self.w1) + &self.b1).relu().matmul(&self.w2) + &self.b2
    }
}

impl Policy {
    /// The same weights on `device` (still gradient leaves).
    pub fn to_device(&self, d: Device) -> Policy {
        let mv = |t: &Tensor| no_grad(|| t.to_device(d)).requires_grad();
        Policy { w1: mv(&self.w1), b1: mv(&self.b1), w2: mv(&self.w2), b2: mv(&self.b2) }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::new()
    }
}

/// Batch-1 inference and sampling on every environment step: the action drawn from the
/// policy's distribution (with the thread's Philox stream, inside the graph).
#[janus]
pub fn act(p: &Policy, obs: &Tensor) -> usize {
    let action = p.logits(obs).softmax(1).multinomial();
    action.to_vec::<i64>()[0] as usize
}

/// Batched inference and sampling for `N` environments stepped in lockstep: one action per row
/// of `obs` (`[N, 4]`).
#[janus]
pub fn act_batch(p: &Policy, obs: &Tensor) -> Vec<usize> {
    let actions = p.logits(obs).softmax(1).multinomial();
    actions.to_vec::<i64>().into_iter().map(|a| a as usize).collect()
}

/// One REINFORCE step on an episode of any length: `loss = -sum_t log pi(a_t|s_t) G_t`, then
/// one optimiser step. Returns the loss. Episode lengths vary, so after two lengths compile
/// the rest are instances of one shape-polymorphic graph (no padding, no recompiles).
#[janus]
pub fn update<O: Optimizer>(
    p: &mut Policy,
    opt: &mut O,
    obs: &Tensor,
    actions: &Tensor,
    returns: &Tensor,
) -> f32 {
    let logp = p.logits(obs).log_softmax(1).gather(1, actions).squeeze(1);
    let loss = -(logp * returns).sum_all();
    let grads = loss.backward();
    opt.step(p, &grads);
    loss.item()
}

/// Discounted returns `G_t = sum_k gamma^k r_{t+k}` of an all-ones reward sequence of `len`
/// steps, normalised to zero mean and unit (population) standard deviation.
pub fn normalised_returns(len: usize) -> Vec<f32> {
    let mut g = vec![0.0f64; len];
    let mut run = 0.0;
    for t in (0..len).rev() {
        run = 1.0 + GAMMA * run;
        g[t] = run;
    }
    let mean = g.iter().sum::<f64>() / len as f64;
    let std = (g.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / len as f64).sqrt();
    g.iter().map(|v| ((v - mean) / (std + 1e-8)) as f32).collect()
}

/// An episode's observations, actions and returns as tensors of one row per step.
pub fn episode_tensors(obs: &[[f32; 4]], actions: &[usize]) -> (Tensor, Tensor, Tensor) {
    let len = obs.len();
    let o: Vec<f32> = obs.iter().flatten().copied().collect();
    let a: Vec<i64> = actions.iter().map(|&a| a as i64).collect();
    let g = normalised_returns(len);
    (Tensor::from_vec(o, [len, OBS]), Tensor::from_vec(a, [len, 1]), Tensor::from_vec(g, [len]))
}

/// Timings of one episode.
pub struct Episode {
    /// Steps taken (the return, since every step earns 1).
    pub len: usize,
    /// Seconds spent in `act` plus the environment.
    pub rollout_s: f64,
    /// Seconds spent preparing the batch and in `update`.
    pub update_s: f64,
    /// The loss of the update.
    pub loss: f32,
}

/// Runs one episode with batch-1 inference, then one update.
pub fn run_episode<O: Optimizer>(p: &mut Policy, opt: &mut O, env: &mut CartPole) -> Episode {
    let t0 = std::time::Instant::now();
    let (mut obs_log, mut actions) = (Vec::with_capacity(MAX_STEPS), Vec::with_capacity(MAX_STEPS));
    let mut obs = env.reset();
    loop {
        let a = no_grad(|| act(p, &Tensor::from_vec(obs.to_vec(), [1, OBS])));
        obs_log.push(obs);
        actions.push(a);
        let (next, done) = env.step(a);
        obs = next;
        if done {
            break;
        }
    }
    let t1 = std::time::Instant::now();
    let (o, a, g) = episode_tensors(&obs_log, &actions);
    let loss = update(p, opt, &o, &a, &g);
    Episode {
        len: actions.len(),
        rollout_s: (t1 - t0).as_secs_f64(),
        update_s: t1.elapsed().as_secs_f64(),
        loss,
    }
}

/// One round of `envs.len()` episodes run in lockstep with batched inference on the CPU copy
/// `acting` of the policy, then one update of `p` (on its own device) over all of them, each
/// stacked; `acting` then takes `p`'s new weights.
/// Returns the episodes' lengths, the rollout seconds and the update seconds.
pub fn run_round<O: Optimizer>(
    p: &mut Policy,
    acting: &mut Policy,
    opt: &mut O,
    envs: &mut [CartPole],
) -> (Vec<usize>, f64, f64, f32) {
    let t0 = std::time::Instant::now();
    let n = envs.len();
    let mut obs: Vec<[f32; 4]> = envs.iter_mut().map(CartPole::reset).collect();
    let (mut logs, mut acts): (Vec<Vec<[f32; 4]>>, Vec<Vec<usize>>) =
        (vec![Vec::new(); n], vec![Vec::new(); n]);
    let mut live: Vec<usize> = (0..n).collect();
    while !live.is_empty() {
        // Every environment's row, finished ones included (their actions are ignored), so the
        // batch keeps one shape and `act_batch` one compiled variant.
        let batch: Vec<f32> = obs.iter().flatten().copied().collect();
        let a = no_grad(|| act_batch(acting, &Tensor::from_vec(batch, [n, OBS])));
        let mut still = Vec::with_capacity(live.len());
        for &e in &live {
            logs[e].push(obs[e]);
            acts[e].push(a[e]);
            let (next, done) = envs[e].step(a[e]);
            obs[e] = next;
            if !done {
                still.push(e);
            }
        }
        live = still;
    }
    let t1 = std::time::Instant::now();
    let device = p.w1.device();
    let parts: Vec<(Tensor, Tensor, Tensor)> = (0..n).map(|e| episode_tensors(&logs[e], &acts[e])).collect();
    let cat = |f: &dyn Fn(&(Tensor, Tensor, Tensor)) -> &Tensor| {
        let v: Vec<&Tensor> = parts.iter().map(f).collect();
        Tensor::cat(&v, 0).to_device(device)
    };
    let (o, a, g) = (cat(&|t| &t.0), cat(&|t| &t.1), cat(&|t| &t.2));
    let loss = update(p, opt, &o, &a, &g);
    *acting = p.to_device(Device::Cpu);
    (acts.iter().map(Vec::len).collect(), (t1 - t0).as_secs_f64(), t1.elapsed().as_secs_f64(), loss)
}
