//! Random well-typed tensor programs for the differential fuzz test: a generator, an
//! interpreter, and a shrinker.

#[path = "nn.rs"]
mod nn;

use janus::prelude::*;
use std::cell::Cell;
use std::fmt;

thread_local! {
    static DEVICE: Cell<Device> = const { Cell::new(Device::Cpu) };
}

/// Where this thread's programs create their inputs and constants.
#[allow(dead_code)]
pub fn set_device(d: Device) {
    DEVICE.with(|c| c.set(d));
}

fn device() -> Device {
    DEVICE.with(Cell::get)
}

fn from_vec<T: janus::Element>(v: Vec<T>, shape: impl Into<Shape>) -> Tensor {
    Tensor::from_vec_on(v, shape, device())
}

/// A small deterministic RNG (xorshift64*), independent of janus's own.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn float(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// One instruction; each produces one new value. Operands index earlier values.
#[derive(Clone, Debug)]
pub enum Instr {
    Unary(&'static str, usize),
    Scalar(&'static str, usize, f64),
    Binary(&'static str, usize, usize),
    Where(usize, usize, usize),
    Compare(usize, usize),
    Reduce(&'static str, usize, isize),
    MatMul(usize, usize),
    Reshape(usize, Vec<usize>),
    Transpose(usize, usize, usize),
    Narrow(usize, usize, usize, usize),
    Broadcast(usize, Vec<usize>),
    Unsqueeze(usize, usize),
    Squeeze(usize, usize),
    /// `cat([a, b], d)`; with `fresh`, of two new elementwise results (`a * 0.5`, `b + 1`),
    /// which the compiled program writes in place into the result when `d > 0`.
    Cat(usize, usize, usize, bool),
    Stack(usize, usize, usize),
    Chunk(usize, usize, usize),
    Pad(usize, usize, usize, usize),
    IndexSelect(usize, usize, Vec<i64>),
    Gather(usize, usize, Vec<i64>, Vec<usize>),
    CastOther(usize),
    BoolToFloat(usize),
    CrossEntropy(usize, Vec<i64>),
    Mse(usize, usize),
    Randn(Vec<usize>),
    Const(Vec<usize>, u64),
    /// An issue-15 op (`nn.rs`) over operand values.
    Nn(nn::NnOp, Vec<usize>),
}

/// A program: inputs (shape, requires grad), instructions, outputs.
#[derive(Clone)]
pub struct Program {
    pub dtype: DType,
    /// Whether inputs and constants include special values (signed zeros, infinities, NaN).
    pub special: bool,
    pub inputs: Vec<(Vec<usize>, bool)>,
    pub instrs: Vec<Instr>,
    pub outputs: Vec<usize>,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "program ({}{}):", self.dtype, if self.special { ", special values" } else { "" })?;
        for (i, (s, g)) in self.inputs.iter().enumerate() {
            writeln!(f, "  v{i} = input {s:?}{}", if *g { " requires_grad" } else { "" })?;
        }
        for (k, ins) in self.instrs.iter().enumerate() {
            writeln!(f, "  v{} = {ins:?}", self.inputs.len() + k)?;
        }
        write!(f, "  outputs {:?}", self.outputs)
    }
}

/// Values compiled graphs must reproduce exactly, sign of zero included.
const SPECIAL: [f64; 5] = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];

pub fn values(shape: &[usize], seed: u64, dtype: DType, special: bool) -> Tensor {
    let mut r = Rng::new(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| if special && r.chance(0.2) { r.pick(&SPECIAL) } else { r.float(-1.0, 1.0) })
        .collect();
    from_vec(v, shape).to_dtype(dtype)
}

/// The program's input tensors (deterministic), with grad flags applied.
pub fn inputs(p: &Program) -> Vec<Tensor> {
    p.inputs
        .iter()
        .enumerate()
        .map(|(i, (s, g))| {
            let t = values(s, 1000 + i as u64, p.dtype, p.special);
            if *g { t.requires_grad() } else { t }
        })
        .collect()
}

/// Runs the program on `inputs`; returns its outputs.
pub fn run(p: &Program, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut v: Vec<Tensor> = inputs.to_vec();
    for ins in &p.instrs {
        let out = apply(p.dtype, p.special, ins, &v);
        v.push(out);
    }
    p.outputs.iter().map(|&o| v[o].clone()).collect()
}

fn apply(dtype: DType, special: bool, ins: &Instr, v: &[Tensor]) -> Tensor {
    match ins {
        Instr::Unary(op, a) => {
            let x = &v[*a];
            match *op {
                "neg" => x.neg(),
                "exp" => x.clamp(-5.0, 5.0).exp(),
                "log" => (x.abs() + 0.5).log(),
                "sqrt" => (x.abs() + 0.1).sqrt(),
                "abs" => x.abs(),
                "tanh" => x.tanh(),
                "sigmoid" => x.sigmoid(),
                "relu" => x.relu(),
                "square" => x.square(),
                "recip" => (x.abs() + 0.5).recip(),
                "powf" => (x.abs() + 0.1).powf(1.7),
                "clamp" => x.clamp(-0.4, 0.6),
                "softplus" => (x.exp() + 1.0).log(),
                "sin" => x.sin(),
                "cos" => x.cos(),
                "tan" => x.clamp(-1.2, 1.2).tan(),
                "exp2" => x.clamp(-5.0, 5.0).exp2(),
                "log2" => (x.abs() + 0.5).log2(),
                "log1p" => x.abs().log1p(),
                "expm1" => x.clamp(-5.0, 5.0).expm1(),
                "erf" => x.erf(),
                "gelu" => x.gelu(),
                "silu" => x.silu(),
                "softplus_op" => x.softplus(),
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                "round" => x.round(),
                "rsqrt" => (x.abs() + 0.1).rsqrt(),
                _ => unreachable!(),
            }
        }
        Instr::Scalar(op, a, c) => {
            let x = &v[*a];
            match *op {
                "add" => x + *c,
                "sub" => x - *c,
                "rsub" => *c - x,
                "mul" => x * *c,
                "div" => x / (c.abs() + 0.5),
                _ => unreachable!(),
            }
        }
        Instr::Binary(op, a, b) => {
            let (x, y) = (&v[*a], &v[*b]);
            match *op {
                "add" => x + y,
                "sub" => x - y,
                "mul" => x * y,
                "div" => x / (y.abs() + 0.5),
                "maximum" => x.maximum(y),
                "minimum" => x.minimum(y),
                "atan2" => x.atan2(y),
                _ => unreachable!(),
            }
        }
        Instr::Where(c, a, b) => v[*c].where_cond(&v[*a], &v[*b]),
        Instr::Compare(a, b) => v[*a].gt(&v[*b]),
        Instr::Reduce(op, a, d) => {
            let x = &v[*a];
            match *op {
                "sum" => x.sum(*d),
                "sum_keepdim" => x.sum_keepdim(*d),
                "mean" => x.mean(*d),
                "max" => x.max(*d),
                "min" => x.min_keepdim(*d),
                "logsumexp" => x.logsumexp(*d),
                "softmax" => x.softmax(*d),
                "log_softmax" => x.log_softmax(*d),
                "argmax_onehot" => {
                    let n = x.dims()[*d as usize];
                    x.argmax(*d).one_hot_dtype(n, dtype)
                }
                "sum_all" => x.sum_all(),
                "mean_all" => x.mean_all(),
                _ => unreachable!(),
            }
        }
        Instr::MatMul(a, b) => v[*a].matmul(&v[*b]),
        Instr::Reshape(a, s) => v[*a].reshape(s.clone()),
        Instr::Transpose(a, d0, d1) => v[*a].transpose(*d0, *d1),
        Instr::Narrow(a, d, s, l) => v[*a].narrow(*d, *s, *l),
        Instr::Broadcast(a, s) => v[*a].broadcast_to(s.clone()),
        Instr::Unsqueeze(a, d) => v[*a].unsqueeze(*d),
        Instr::Squeeze(a, d) => v[*a].squeeze(*d),
        Instr::Cat(a, b, d, false) => Tensor::cat(&[&v[*a], &v[*b]], *d),
        Instr::Cat(a, b, d, true) => Tensor::cat(&[&(&v[*a] * 0.5), &(&v[*b] + 1.0)], *d),
        Instr::Stack(a, b, d) => Tensor::stack(&[&v[*a], &v[*b]], *d),
        Instr::Chunk(a, d, pick) => {
            let [x, y] = v[*a].chunk::<2>(*d);
            if *pick == 0 { x } else { y }
        }
        Instr::Pad(a, d, b, e) => v[*a].pad(*d, *b, *e),
        Instr::IndexSelect(a, d, idx) => v[*a].index_select(*d, &from_vec(idx.clone(), [idx.len()])),
        Instr::Gather(a, d, idx, shape) => v[*a].gather(*d, &from_vec(idx.clone(), shape.clone())),
        Instr::CastOther(a) => {
            let other = if dtype == DType::F32 { DType::F64 } else { DType::F32 };
            v[*a].to_dtype(other).to_dtype(dtype)
        }
        Instr::BoolToFloat(a) => v[*a].to_dtype(dtype),
        Instr::CrossEntropy(a, t) => v[*a].cross_entropy(&from_vec(t.clone(), [t.len()])),
        Instr::Mse(a, b) => v[*a].mse(&v[*b]),
        Instr::Randn(s) => Tensor::randn_on(s.clone(), dtype, device()),
        Instr::Const(s, seed) => values(s, *seed, dtype, special),
        Instr::Nn(op, args) => {
            nn::apply(dtype, special, op, &args.iter().map(|&k| &v[k]).collect::<Vec<_>>())
        }
    }
}

const DIMS: [usize; 7] = [0, 1, 1, 2, 3, 4, 5];

fn random_shape(r: &mut Rng) -> Vec<usize> {
    let rank = r.below(4);
    (0..rank).map(|_| if r.chance(0.08) { 0 } else { r.pick(&DIMS[1..]) }).collect()
}

/// A shape broadcastable with `s`: some dims set to 1, maybe fewer leading dims.
fn broadcast_partner(r: &mut Rng, s: &[usize]) -> Vec<usize> {
    let drop = r.below(s.len() + 1);
    s[drop..].iter().map(|&d| if r.chance(0.3) { 1 } else { d }).collect()
}

/// Generates a program from `seed`.
pub fn generate(seed: u64) -> Program {
    let mut r = Rng::new(seed);
    let dtype = if r.chance(0.3) { DType::F64 } else { DType::F32 };
    let special = r.chance(0.4);
    let mut p = Program { dtype, special, inputs: Vec::new(), instrs: Vec::new(), outputs: Vec::new() };
    let n_in = 1 + r.below(3);
    for _ in 0..n_in {
        let s = random_shape(&mut r);
        p.inputs.push((s, r.chance(0.7)));
    }
    let mut vals: Vec<Tensor> = inputs(&p);
    let steps = 3 + if r.chance(0.2) { r.below(40) } else { r.below(12) };
    let mut attempts = 0;
    while p.instrs.len() < steps && attempts < 200 {
        attempts += 1;
        let Some(ins) = propose(&mut r, &vals, dtype) else { continue };
        // Generation runs the instruction to learn its type (and to reject invalid ones).
        let out =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(dtype, special, &ins, &vals)));
        if let Ok(out) = out {
            vals.push(out);
            p.instrs.push(ins);
        }
    }
    let total = vals.len();
    let mut outs: Vec<usize> = (n_in..total).filter(|_| r.chance(0.35)).collect();
    if outs.is_empty() {
        outs.push(total - 1);
    }
    p.outputs = outs;
    p
}

fn propose(r: &mut Rng, v: &[Tensor], dtype: DType) -> Option<Instr> {
    let floats: Vec<usize> = (0..v.len()).filter(|&i| v[i].dtype() == dtype).collect();
    let bools: Vec<usize> = (0..v.len()).filter(|&i| v[i].dtype() == DType::Bool).collect();
    let a = *floats.get(r.below(floats.len()))?;
    let x = &v[a];
    let s = x.dims().to_vec();
    let rank = s.len();
    let dim = if rank > 0 { Some(r.below(rank)) } else { None };
    Some(match r.below(27) {
        24..=26 => return nn::propose(r, v, dtype, a),
        0..=3 => Instr::Unary(
            r.pick(&[
                "neg",
                "exp",
                "log",
                "sqrt",
                "abs",
                "tanh",
                "sigmoid",
                "relu",
                "square",
                "recip",
                "powf",
                "clamp",
                "softplus",
                "sin",
                "cos",
                "tan",
                "exp2",
                "log2",
                "log1p",
                "expm1",
                "erf",
                "gelu",
                "silu",
                "softplus_op",
                "floor",
                "ceil",
                "round",
                "rsqrt",
            ]),
            a,
        ),
        4 => {
            // Signed zeros among the constants (`x + 0.0` is not `x` when `x` is `-0.0`).
            let c =
                if r.chance(0.2) { r.pick(&[0.0, -0.0]) } else { (r.float(-2.0, 2.0) * 4.0).round() / 4.0 };
            Instr::Scalar(r.pick(&["add", "sub", "rsub", "mul", "div"]), a, c)
        }
        5..=7 => {
            // Another value of a broadcast-compatible shape, or a fresh constant.
            let partner = floats
                .iter()
                .copied()
                .filter(|&b| janus::broadcast_shapes(&s, v[b].dims()).is_some())
                .collect::<Vec<_>>();
            let b = if !partner.is_empty() && r.chance(0.6) {
                r.pick(&partner)
            } else {
                return Some(Instr::Const(broadcast_partner(r, &s), r.next()));
            };
            Instr::Binary(r.pick(&["add", "sub", "mul", "div", "maximum", "minimum", "atan2"]), a, b)
        }
        8 => {
            let c = *bools.get(r.below(bools.len()))?;
            let b = floats.iter().copied().find(|&b| v[b].dims() == v[c].dims() && b != a).unwrap_or(a);
            Instr::Where(c, a, b)
        }
        9 => {
            Instr::Compare(a, *floats.iter().find(|&&b| janus::broadcast_shapes(&s, v[b].dims()).is_some())?)
        }
        10..=11 => {
            let d = dim?;
            let mut ops = vec![
                "sum",
                "sum_keepdim",
                "mean",
                "logsumexp",
                "softmax",
                "log_softmax",
                "sum_all",
                "mean_all",
            ];
            if s[d] > 0 {
                ops.extend(["max", "min", "argmax_onehot"]);
            }
            let op = r.pick(&ops);
            Instr::Reduce(op, a, if r.chance(0.5) { d as isize } else { d as isize - rank as isize })
        }
        12..=13 => {
            if rank == 2 || rank == 3 {
                let k = s[rank - 1];
                let n = r.pick(&[1, 2, 3, 5]);
                let other = floats.iter().copied().find(|&b| v[b].rank() == 2 && v[b].dims()[0] == k);
                match other {
                    Some(b) if r.chance(0.5) => Instr::MatMul(a, b),
                    _ => return Some(Instr::Const(vec![k, n], r.next())),
                }
            } else {
                return None;
            }
        }
        14 => {
            let n: usize = s.iter().product();
            let shape = if n == 0 {
                vec![0]
            } else if n.is_multiple_of(2) && r.chance(0.5) {
                vec![2, n / 2]
            } else {
                vec![n]
            };
            Instr::Reshape(a, shape)
        }
        15 => {
            if rank < 2 {
                return None;
            }
            Instr::Transpose(a, r.below(rank), r.below(rank))
        }
        16 => {
            let d = dim?;
            let len = r.below(s[d] + 1);
            Instr::Narrow(a, d, r.below(s[d] - len + 1), len)
        }
        17 => {
            let mut t = vec![r.pick(&[1, 2, 3])];
            t.extend(s.iter().map(|&d| if d == 1 && r.chance(0.5) { 3 } else { d }));
            Instr::Broadcast(a, t)
        }
        18 => {
            if let Some(d) = (0..rank).find(|&d| s[d] == 1)
                && r.chance(0.5)
            {
                Instr::Squeeze(a, d)
            } else {
                Instr::Unsqueeze(a, r.below(rank + 1))
            }
        }
        19 => {
            let d = dim?;
            match r.below(4) {
                0 => Instr::Cat(
                    a,
                    *floats.iter().find(|&&b| {
                        let t = v[b].dims();
                        t.len() == rank && (0..rank).all(|i| i == d || t[i] == s[i])
                    })?,
                    d,
                    r.chance(0.5),
                ),
                1 => Instr::Stack(
                    a,
                    *floats.iter().find(|&&b| v[b].dims() == s.as_slice())?,
                    r.below(rank + 1),
                ),
                2 if s[d].is_multiple_of(2) => Instr::Chunk(a, d, r.below(2)),
                _ => Instr::Pad(a, d, r.below(3), r.below(3)),
            }
        }
        20 => {
            let d = dim?;
            if s[d] == 0 {
                return None;
            }
            if r.chance(0.5) {
                let idx = (0..r.below(5)).map(|_| r.below(s[d]) as i64).collect();
                Instr::IndexSelect(a, d, idx)
            } else {
                let mut shape = s.clone();
                for (i, x) in shape.iter_mut().enumerate() {
                    if i != d {
                        *x = r.below(*x + 1);
                    } else {
                        *x = r.below(4);
                    }
                }
                let n: usize = shape.iter().product();
                Instr::Gather(a, d, (0..n).map(|_| r.below(s[d]) as i64).collect(), shape)
            }
        }
        21 => match (r.below(3), bools.first()) {
            (0, Some(&b)) => Instr::BoolToFloat(b),
            (1, _) => Instr::CastOther(a),
            _ => Instr::Randn(random_shape(r)),
        },
        _ => {
            if rank == 2 && s[0] > 0 && s[1] > 0 {
                Instr::CrossEntropy(a, (0..s[0]).map(|_| r.below(s[1]) as i64).collect())
            } else {
                Instr::Mse(a, *floats.iter().find(|&&b| v[b].dims() == s.as_slice())?)
            }
        }
    })
}

/// Operand value indices of an instruction.
fn operands(ins: &Instr) -> Vec<usize> {
    match ins {
        Instr::Unary(_, a) | Instr::Scalar(_, a, _) | Instr::Reduce(_, a, _) | Instr::Reshape(a, _) => {
            vec![*a]
        }
        Instr::Transpose(a, ..) | Instr::Narrow(a, ..) | Instr::Broadcast(a, _) | Instr::Unsqueeze(a, _) => {
            vec![*a]
        }
        Instr::Squeeze(a, _) | Instr::Chunk(a, ..) | Instr::Pad(a, ..) | Instr::IndexSelect(a, ..) => {
            vec![*a]
        }
        Instr::Gather(a, ..) | Instr::CastOther(a) | Instr::BoolToFloat(a) | Instr::CrossEntropy(a, _) => {
            vec![*a]
        }
        Instr::Binary(_, a, b) | Instr::Compare(a, b) | Instr::MatMul(a, b) | Instr::Mse(a, b) => {
            vec![*a, *b]
        }
        Instr::Cat(a, b, _, _) | Instr::Stack(a, b, _) => vec![*a, *b],
        Instr::Where(c, a, b) => vec![*c, *a, *b],
        Instr::Nn(_, args) => args.clone(),
        Instr::Randn(_) | Instr::Const(..) => vec![],
    }
}

fn renumber(ins: &mut Instr, f: &dyn Fn(usize) -> usize) {
    match ins {
        Instr::Unary(_, a) | Instr::Scalar(_, a, _) | Instr::Reduce(_, a, _) | Instr::Reshape(a, _) => {
            *a = f(*a)
        }
        Instr::Transpose(a, ..) | Instr::Narrow(a, ..) | Instr::Broadcast(a, _) | Instr::Unsqueeze(a, _) => {
            *a = f(*a)
        }
        Instr::Squeeze(a, _) | Instr::Chunk(a, ..) | Instr::Pad(a, ..) | Instr::IndexSelect(a, ..) => {
            *a = f(*a)
        }
        Instr::Gather(a, ..) | Instr::CastOther(a) | Instr::BoolToFloat(a) | Instr::CrossEntropy(a, _) => {
            *a = f(*a)
        }
        Instr::Binary(_, a, b) | Instr::Compare(a, b) | Instr::MatMul(a, b) | Instr::Mse(a, b) => {
            *a = f(*a);
            *b = f(*b);
        }
        Instr::Cat(a, b, _, _) | Instr::Stack(a, b, _) => {
            *a = f(*a);
            *b = f(*b);
        }
        Instr::Where(c, a, b) => {
            *c = f(*c);
            *a = f(*a);
            *b = f(*b);
        }
        Instr::Nn(_, args) => args.iter_mut().for_each(|a| *a = f(*a)),
        Instr::Randn(_) | Instr::Const(..) => {}
    }
}

/// `p` without instruction `k` and everything depending on it; `None` if nothing would remain
/// to output.
pub fn without(p: &Program, k: usize) -> Option<Program> {
    let n_in = p.inputs.len();
    let mut dead = vec![false; n_in + p.instrs.len()];
    dead[n_in + k] = true;
    for (j, ins) in p.instrs.iter().enumerate() {
        if operands(ins).iter().any(|&o| dead[o]) {
            dead[n_in + j] = true;
        }
    }
    let mut new_index = vec![usize::MAX; dead.len()];
    let mut next = 0;
    for (i, d) in dead.iter().enumerate() {
        if !d {
            new_index[i] = next;
            next += 1;
        }
    }
    let instrs: Vec<Instr> = p
        .instrs
        .iter()
        .enumerate()
        .filter(|(j, _)| !dead[n_in + j])
        .map(|(_, ins)| {
            let mut ins = ins.clone();
            renumber(&mut ins, &|o| new_index[o]);
            ins
        })
        .collect();
    let outputs: Vec<usize> = p.outputs.iter().filter(|&&o| !dead[o]).map(|&o| new_index[o]).collect();
    (!outputs.is_empty()).then(|| Program {
        dtype: p.dtype,
        special: p.special,
        inputs: p.inputs.clone(),
        instrs,
        outputs,
    })
}
