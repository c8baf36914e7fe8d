//! REINFORCE on CartPole: a port of pytorch/examples `reinforcement_learning/reinforce.py`
//! (https://github.com/pytorch/examples/blob/main/reinforcement_learning/reinforce.py).
//! A 4-128-2 policy with dropout 0.6 (left in train mode, as in the original), a `#[janus]`
//! `select_action` doing batch-1 inference and sampling (`multinomial`, in place of
//! `Categorical`) on every environment step and keeping the log-probability's autograd history,
//! variable-length episodes (up to 500 steps) of CartPole-v1 dynamics written below, discounted
//! and normalised returns, and a `#[janus]` `finish_episode` that sums `-log_prob * R` over the
//! saved log-probabilities, backpropagates through every step's graph and takes an Adam step
//! (lr 1e-2). Also tracks the running reward as the original does.
use janus::prelude::*;

const GAMMA: f64 = 0.99;
const LOG_INTERVAL: usize = 10;

// ---------------------------------------------------------------------------------------------
// CartPole-v1 (gym's classic-control equations, Euler integration).

struct SplitMix64(u64);

impl SplitMix64 {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct CartPole {
    state: [f64; 4],
    elapsed_steps: usize,
    np_random: SplitMix64,
}

impl CartPole {
    const GRAVITY: f64 = 9.8;
    const MASS_CART: f64 = 1.0;
    const MASS_POLE: f64 = 0.1;
    const LENGTH: f64 = 0.5;
    const FORCE_MAG: f64 = 10.0;
    const TAU: f64 = 0.02;
    const X_THRESHOLD: f64 = 2.4;
    const THETA_THRESHOLD_RADIANS: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
    const MAX_EPISODE_STEPS: usize = 500;

    fn new(seed: u64) -> Self {
        CartPole { state: [0.0; 4], elapsed_steps: 0, np_random: SplitMix64(seed) }
    }

    fn reset(&mut self) -> [f32; 4] {
        self.state = std::array::from_fn(|_| self.np_random.uniform() * 0.1 - 0.05);
        self.elapsed_steps = 0;
        self.state.map(|v| v as f32)
    }

    /// Returns (state, reward, terminated, truncated).
    fn step(&mut self, action: usize) -> ([f32; 4], f64, bool, bool) {
        let [mut x, mut x_dot, mut theta, mut theta_dot] = self.state;
        let force = if action == 1 { Self::FORCE_MAG } else { -Self::FORCE_MAG };
        let costheta = theta.cos();
        let sintheta = theta.sin();
        let total_mass = Self::MASS_POLE + Self::MASS_CART;
        let polemass_length = Self::MASS_POLE * Self::LENGTH;
        let temp = (force + polemass_length * theta_dot.powi(2) * sintheta) / total_mass;
        let thetaacc = (Self::GRAVITY * sintheta - costheta * temp)
            / (Self::LENGTH * (4.0 / 3.0 - Self::MASS_POLE * costheta.powi(2) / total_mass));
        let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
        x += Self::TAU * x_dot;
        x_dot += Self::TAU * xacc;
        theta += Self::TAU * theta_dot;
        theta_dot += Self::TAU * thetaacc;
        self.state = [x, x_dot, theta, theta_dot];
        self.elapsed_steps += 1;
        let terminated = !(-Self::X_THRESHOLD..=Self::X_THRESHOLD).contains(&x)
            || !(-Self::THETA_THRESHOLD_RADIANS..=Self::THETA_THRESHOLD_RADIANS).contains(&theta);
        let truncated = self.elapsed_steps >= Self::MAX_EPISODE_STEPS;
        (self.state.map(|v| v as f32), 1.0, terminated, truncated)
    }
}

// ---------------------------------------------------------------------------------------------
// The policy.

#[derive(Module)]
struct Policy {
    affine1: nn::Linear,
    dropout: nn::Dropout,
    affine2: nn::Linear,
}

impl Policy {
    fn new() -> Self {
        Policy {
            affine1: nn::Linear::new(4, 128),
            dropout: nn::Dropout::new(0.6),
            affine2: nn::Linear::new(128, 2),
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.affine1.forward(x);
        let x = self.dropout.forward(&x);
        let x = x.relu();
        let action_scores = self.affine2.forward(&x);
        action_scores.softmax(1)
    }
}

/// Samples an action from the policy for one state; returns the action and its log-probability
/// (`[1]`, with autograd history back to the policy's weights).
#[janus]
fn select_action(policy: &Policy, state: &Tensor) -> (usize, Tensor) {
    let probs = policy.forward(state);
    // m = Categorical(probs); action = m.sample(); m.log_prob(action)
    let action = probs.multinomial();
    let log_prob = probs.log().gather(1, &action.unsqueeze(1)).squeeze(1);
    (action.item() as usize, log_prob)
}

/// The policy-gradient update at the end of an episode; returns the loss.
#[janus]
fn finish_episode(
    policy: &mut Policy,
    optimizer: &mut optim::Adam,
    saved_log_probs: &[Tensor],
    rewards: &[f64],
) -> f32 {
    let eps = f32::EPSILON as f64;
    let mut r = 0.0;
    let mut returns = std::collections::VecDeque::new();
    for &reward in rewards.iter().rev() {
        r = reward + GAMMA * r;
        returns.push_front(r as f32);
    }
    let n = returns.len();
    let returns = Tensor::from_vec(Vec::from(returns), [n]);
    // returns.std() is the unbiased standard deviation; janus has no std(), so by hand.
    let mean = returns.mean_all();
    let std = ((&returns - &mean).square().sum_all() / (n as f64 - 1.0)).sqrt();
    let returns = (&returns - &mean) / (std + eps);
    let policy_loss: Vec<Tensor> =
        saved_log_probs.iter().zip(0..n).map(|(log_prob, i)| -log_prob * returns.narrow(0, i, 1)).collect();
    let policy_loss = Tensor::cat(&policy_loss.iter().collect::<Vec<_>>(), 0).sum_all();
    let grads = policy_loss.backward();
    optimizer.step(policy, &grads);
    policy_loss.item()
}

/// Trains for `episodes` episodes (each up to 500 environment steps, one update per episode) from
/// `seed` in the current janus mode (the caller picks eager/janus/check with
/// `janus::with_mode`) and returns the policy loss of every episode.
pub fn train(episodes: usize, seed: u64) -> Vec<f64> {
    janus::manual_seed(seed);
    let mut env = CartPole::new(seed);
    let mut policy = Policy::new();
    let mut optimizer = optim::Adam::new(1e-2);

    let mut losses = Vec::with_capacity(episodes);
    let mut running_reward = 10.0;
    for i_episode in 1..=episodes {
        let mut state = env.reset();
        let mut ep_reward = 0.0;
        let mut saved_log_probs = Vec::new();
        let mut rewards = Vec::new();
        for _t in 1..10_000 {
            let (action, log_prob) = select_action(&policy, &Tensor::from_vec(state.to_vec(), [1, 4]));
            saved_log_probs.push(log_prob);
            let (next_state, reward, terminated, truncated) = env.step(action);
            state = next_state;
            rewards.push(reward);
            ep_reward += reward;
            if terminated || truncated {
                break;
            }
        }
        running_reward = 0.05 * ep_reward + (1.0 - 0.05) * running_reward;
        let loss = finish_episode(&mut policy, &mut optimizer, &saved_log_probs, &rewards);
        losses.push(loss as f64);
        if i_episode % LOG_INTERVAL == 0 {
            log::info!(target: "corpus", "Episode {i_episode}\tLast reward: {ep_reward:.2}\tAverage reward: {running_reward:.2}");
        }
        // The original stops once solved (`running_reward > env.spec.reward_threshold`); here
        // the caller asked for `episodes` episodes, so training goes on.
    }
    losses
}
