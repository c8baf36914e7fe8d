//! DQN on CartPole: a port of the PyTorch "Reinforcement Learning (DQN) Tutorial"
//! (https://pytorch.org/tutorials/intermediate/reinforcement_q_learning.html).
//! CartPole-v1 dynamics written below in Rust, a 4-128-128-2 MLP Q-network, a ring-buffer replay
//! memory of 10k transitions sampled on the host, epsilon-greedy exploration with exponentially
//! decaying epsilon, batch 128, smooth-L1 (Huber) loss written by hand, Adam, gradient clipping,
//! a target network made with `clone()` and refreshed every 250 steps, and a checkpoint of the
//! network and optimiser saved and reloaded halfway. `#[janus]` is on the optimisation step and
//! on the greedy action.
use janus::prelude::*;

const BATCH_SIZE: usize = 128;
const GAMMA: f64 = 0.99;
const EPS_START: f64 = 0.9;
const EPS_END: f64 = 0.05;
const EPS_DECAY: f64 = 1000.0;
const LR: f64 = 3e-4;
const MEMORY_CAPACITY: usize = 10_000;
const TARGET_UPDATE: usize = 250;

// ---------------------------------------------------------------------------------------------
// Host RNG (Python's `random` in the tutorial).

struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn random(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in [0, n).
    fn below(&mut self, n: usize) -> usize {
        (self.random() * n as f64) as usize
    }
}

// ---------------------------------------------------------------------------------------------
// CartPole-v1 (gym's classic-control equations, Euler integration).

struct CartPole {
    state: [f64; 4],
    steps: usize,
    rng: SplitMix64,
}

impl CartPole {
    const GRAVITY: f64 = 9.8;
    const MASS_CART: f64 = 1.0;
    const MASS_POLE: f64 = 0.1;
    const LENGTH: f64 = 0.5; // half the pole's length
    const FORCE_MAG: f64 = 10.0;
    const TAU: f64 = 0.02;
    const X_THRESHOLD: f64 = 2.4;
    const THETA_THRESHOLD: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
    const MAX_EPISODE_STEPS: usize = 500;

    fn new(seed: u64) -> Self {
        CartPole { state: [0.0; 4], steps: 0, rng: SplitMix64(seed) }
    }

    fn reset(&mut self) -> [f32; 4] {
        for s in self.state.iter_mut() {
            *s = self.rng.random() * 0.1 - 0.05;
        }
        self.steps = 0;
        self.observation()
    }

    fn observation(&self) -> [f32; 4] {
        self.state.map(|v| v as f32)
    }

    /// Returns (observation, reward, terminated, truncated).
    fn step(&mut self, action: usize) -> ([f32; 4], f32, bool, bool) {
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if action == 1 { Self::FORCE_MAG } else { -Self::FORCE_MAG };
        let total_mass = Self::MASS_CART + Self::MASS_POLE;
        let polemass_length = Self::MASS_POLE * Self::LENGTH;
        let (sin, cos) = theta.sin_cos();
        let temp = (force + polemass_length * theta_dot * theta_dot * sin) / total_mass;
        let theta_acc = (Self::GRAVITY * sin - cos * temp)
            / (Self::LENGTH * (4.0 / 3.0 - Self::MASS_POLE * cos * cos / total_mass));
        let x_acc = temp - polemass_length * theta_acc * cos / total_mass;
        self.state = [
            x + Self::TAU * x_dot,
            x_dot + Self::TAU * x_acc,
            theta + Self::TAU * theta_dot,
            theta_dot + Self::TAU * theta_acc,
        ];
        self.steps += 1;
        let terminated =
            self.state[0].abs() > Self::X_THRESHOLD || self.state[2].abs() > Self::THETA_THRESHOLD;
        let truncated = self.steps >= Self::MAX_EPISODE_STEPS;
        (self.observation(), 1.0, terminated, truncated)
    }
}

// ---------------------------------------------------------------------------------------------
// Replay memory.

#[derive(Clone, Copy)]
struct Transition {
    state: [f32; 4],
    action: usize,
    /// `None` when the episode terminated (the tutorial's `next_state = None`).
    next_state: Option<[f32; 4]>,
    reward: f32,
}

struct ReplayMemory {
    memory: Vec<Transition>,
    capacity: usize,
    position: usize,
}

impl ReplayMemory {
    fn new(capacity: usize) -> Self {
        ReplayMemory { memory: Vec::with_capacity(capacity), capacity, position: 0 }
    }

    fn push(&mut self, t: Transition) {
        if self.memory.len() < self.capacity {
            self.memory.push(t);
        } else {
            self.memory[self.position] = t;
        }
        self.position = (self.position + 1) % self.capacity;
    }

    /// `random.sample(memory, batch_size)`: without replacement (partial Fisher-Yates).
    fn sample(&self, batch_size: usize, rng: &mut SplitMix64) -> Vec<Transition> {
        let mut idx: Vec<usize> = (0..self.memory.len()).collect();
        for i in 0..batch_size {
            let j = i + rng.below(idx.len() - i);
            idx.swap(i, j);
        }
        idx[..batch_size].iter().map(|&i| self.memory[i]).collect()
    }

    fn len(&self) -> usize {
        self.memory.len()
    }
}

// ---------------------------------------------------------------------------------------------
// The Q-network.

#[derive(Module, Clone)]
struct Dqn {
    layer1: nn::Linear,
    layer2: nn::Linear,
    layer3: nn::Linear,
}

impl Dqn {
    fn new(n_observations: usize, n_actions: usize) -> Self {
        Dqn {
            layer1: nn::Linear::new(n_observations, 128),
            layer2: nn::Linear::new(128, 128),
            layer3: nn::Linear::new(128, n_actions),
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.layer1.forward(x).relu();
        let x = self.layer2.forward(&x).relu();
        self.layer3.forward(&x)
    }
}

/// `nn.SmoothL1Loss()` (beta = 1, mean reduction), which janus does not have.
fn smooth_l1_loss(input: &Tensor, target: &Tensor) -> Tensor {
    let diff = (input - target).abs();
    let quadratic = diff.square() * 0.5;
    let linear = &diff - 0.5;
    diff.lt_scalar(1.0).where_cond(&quadratic, &linear).mean_all()
}

/// `policy_net(state).max(1).indices` for a batch of one state.
#[janus]
fn greedy_action(policy_net: &Dqn, state: &Tensor) -> usize {
    let q = policy_net.forward(state);
    q.argmax(1).item() as usize
}

/// The tutorial's `optimize_model()` on an already sampled batch. Terminal transitions have a
/// zero next state and a 0 in `non_final_mask`.
#[janus]
#[allow(clippy::too_many_arguments)]
fn optimize_model(
    policy_net: &mut Dqn,
    target_net: &Dqn,
    optimizer: &mut optim::Adam,
    state_batch: &Tensor,
    action_batch: &Tensor,
    reward_batch: &Tensor,
    next_states: &Tensor,
    non_final_mask: &Tensor,
) -> f32 {
    // Q(s_t, a): the value of the action that was taken.
    let state_action_values = policy_net.forward(state_batch).gather(1, action_batch);
    // V(s_{t+1}) = max_a Q_target(s_{t+1}, a), 0 for final states.
    let next_state_values = no_grad(|| target_net.forward(next_states).max(1) * non_final_mask);
    let expected_state_action_values = next_state_values * GAMMA + reward_batch;
    let loss = smooth_l1_loss(&state_action_values, &expected_state_action_values.unsqueeze(1));
    let grads = loss.backward();
    // The tutorial clips by value (`clip_grad_value_(..., 100)`); janus only clips by norm.
    let (grads, _norm) = grads.clip_norm(100.0);
    optimizer.step(policy_net, &grads);
    loss.item()
}

fn select_action(policy_net: &Dqn, state: &[f32; 4], steps_done: &mut usize, rng: &mut SplitMix64) -> usize {
    let sample = rng.random();
    let eps_threshold = EPS_END + (EPS_START - EPS_END) * (-(*steps_done as f64) / EPS_DECAY).exp();
    *steps_done += 1;
    if sample > eps_threshold {
        no_grad(|| greedy_action(policy_net, &Tensor::from_vec(state.to_vec(), [1, 4])))
    } else {
        rng.below(2)
    }
}

fn checkpoint_path(what: &str, seed: u64) -> std::path::PathBuf {
    let thread =
        format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
    std::env::temp_dir()
        .join(format!("janus_corpus_dqn_{what}_{}_{thread}_{seed}.safetensors", std::process::id()))
}

/// Trains for `steps` optimisation steps (each after one environment step, once the replay
/// memory holds a batch) from `seed` in the current janus mode (the caller picks
/// eager/janus/check with `janus::with_mode`) and returns the Huber loss of every step.
pub fn train(steps: usize, seed: u64) -> Vec<f64> {
    janus::manual_seed(seed);
    let mut rng = SplitMix64(seed ^ 0x5DEE_CE66_D1CE_5EED);
    let mut env = CartPole::new(seed);
    let (n_observations, n_actions) = (4, 2);

    let mut policy_net = Dqn::new(n_observations, n_actions);
    let mut target_net = policy_net.clone();
    let mut optimizer = optim::Adam::new(LR);
    let mut memory = ReplayMemory::new(MEMORY_CAPACITY);

    let mut steps_done = 0usize;
    let mut losses = Vec::with_capacity(steps);
    let mut episode_durations: Vec<usize> = Vec::new();
    let mut state = env.reset();
    let mut t = 0usize;

    while losses.len() < steps {
        let action = select_action(&policy_net, &state, &mut steps_done, &mut rng);
        let (observation, reward, terminated, truncated) = env.step(action);
        let next_state = if terminated { None } else { Some(observation) };
        memory.push(Transition { state, action, next_state, reward });
        state = observation;
        t += 1;

        if memory.len() >= BATCH_SIZE {
            let transitions = memory.sample(BATCH_SIZE, &mut rng);
            let mut states = Vec::with_capacity(BATCH_SIZE * 4);
            let mut actions = Vec::with_capacity(BATCH_SIZE);
            let mut rewards = Vec::with_capacity(BATCH_SIZE);
            let mut next_states = Vec::with_capacity(BATCH_SIZE * 4);
            let mut non_final = Vec::with_capacity(BATCH_SIZE);
            for tr in &transitions {
                states.extend_from_slice(&tr.state);
                actions.push(tr.action as i64);
                rewards.push(tr.reward);
                next_states.extend_from_slice(&tr.next_state.unwrap_or([0.0; 4]));
                non_final.push(if tr.next_state.is_some() { 1.0f32 } else { 0.0 });
            }
            let loss = optimize_model(
                &mut policy_net,
                &target_net,
                &mut optimizer,
                &Tensor::from_vec(states, [BATCH_SIZE, 4]),
                &Tensor::from_vec(actions, [BATCH_SIZE, 1]),
                &Tensor::from_vec(rewards, [BATCH_SIZE]),
                &Tensor::from_vec(next_states, [BATCH_SIZE, 4]),
                &Tensor::from_vec(non_final, [BATCH_SIZE]),
            );
            losses.push(loss as f64);

            if losses.len() % TARGET_UPDATE == 0 {
                target_net = policy_net.clone();
            }

            // Save a checkpoint halfway and resume from it, as after a restart.
            if losses.len() == steps / 2 {
                let (model_path, opt_path) = (checkpoint_path("model", seed), checkpoint_path("opt", seed));
                janus::save(&model_path, &policy_net).expect("saving the model");
                janus::save(&opt_path, &optimizer).expect("saving the optimiser");
                policy_net = Dqn::new(n_observations, n_actions);
                optimizer = optim::Adam::new(LR);
                janus::load(&model_path, &mut policy_net).expect("loading the model");
                janus::load(&opt_path, &mut optimizer).expect("loading the optimiser");
                let _ = std::fs::remove_file(model_path);
                let _ = std::fs::remove_file(opt_path);
            }
        }

        if terminated || truncated {
            episode_durations.push(t);
            t = 0;
            state = env.reset();
        }
    }
    log::info!(target: "corpus", "dqn: {} episodes, last durations {:?}", episode_durations.len(), &episode_durations[episode_durations.len().saturating_sub(10)..]);
    losses
}
