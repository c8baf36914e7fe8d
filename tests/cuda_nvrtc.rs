//! Every kernel the CUDA backend can generate, compiled with NVRTC and assembled with `ptxas`
//! for `sm_90`, on a machine without a GPU: each elementwise op × dtype × operand layout, and
//! the fused groups of the LSTM, MLP and CartPole graphs (forward and backward) plus a sample
//! of the graph fuzz's programs. (The kernel library is compiled by
//! `janus-kernels/tests/nvrtc_library.rs`.) `cargo test nvrtc` selects these tests.
//!
//! Where NVRTC is missing they print how to install it and pass, unless
//! `JANUS_REQUIRE_NVRTC=1` (which `.ci/run` sets after installing the wheels).

#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;
#[path = "fuzz/program.rs"]
#[allow(dead_code)]
mod program;

use janus::Traced;
use janus::prelude::*;
use janus_kernels::cuda::codegen::EwSpec;
use janus_kernels::cuda::{libs, nvrtc};
use std::collections::BTreeMap;

const ARCH: &str = "sm_90";

fn required() -> bool {
    std::env::var("JANUS_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

fn nvrtc_or_skip() -> bool {
    match nvrtc::available() {
        Ok(()) => true,
        Err(e) if required() => panic!("JANUS_REQUIRE_NVRTC=1 but {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// Compiles each distinct kernel with NVRTC and assembles it with ptxas (when found).
fn compile_all(what: &str, specs: Vec<EwSpec>) -> usize {
    let unique: BTreeMap<String, EwSpec> = specs.into_iter().map(|s| (s.kernel_name(), s)).collect();
    let ptxas = libs::find_ptxas();
    assert!(ptxas.is_some() || !required(), "ptxas not found (pip install nvidia-cuda-nvcc==13.0.*)");
    let dir = std::env::temp_dir().join(format!("janus-nvrtc-{}-{what}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, spec) in &unique {
        let src = spec.source();
        let ptx = nvrtc::compile_uncached(&src, ARCH, name).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(ptx.contains(&format!(".entry {name}(")), "{what}: {name} missing from its PTX");
        if let Some(ptxas) = &ptxas {
            let f = dir.join(format!("{name}.ptx"));
            std::fs::write(&f, &ptx).unwrap();
            let out = std::process::Command::new(ptxas)
                .args(["-arch", ARCH, "-o"])
                .arg(dir.join(format!("{name}.cubin")))
                .arg(&f)
                .output()
                .expect("ptxas runs");
            assert!(
                out.status.success(),
                "{what}: ptxas failed on {name}: {}\n{src}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "{what}: {} kernels compiled{}",
        unique.len(),
        if ptxas.is_some() { " and assembled" } else { "" }
    );
    unique.len()
}

#[test]
fn nvrtc_compiles_every_eager_elementwise_kernel() {
    if !nvrtc_or_skip() {
        return;
    }
    let n = compile_all("eager", janus::cuda::eager_kernels());
    assert!(n > 200, "only {n} eager kernels enumerated");
}

/// Runs `f` on `args` until its graph replays and a backward pass compiled, then returns the
/// kernels of every executor.
fn kernels_of(f: &Traced<impl Fn(&[Tensor]) -> Vec<Tensor>>, args: &[Tensor]) -> Vec<EwSpec> {
    for _ in 0..3 {
        let outs = f.run(args);
        if let Some(l) = outs.iter().find(|o| o.needs_grad() && o.numel() == 1) {
            l.backward();
        }
    }
    let c = f.compiled().unwrap_or_else(|| panic!("not compiled: {:?}", f.eager_reason(args)));
    c.cuda_kernels()
}

#[test]
fn nvrtc_compiles_the_fused_groups_of_the_models() {
    if !nvrtc_or_skip() {
        return;
    }
    janus::manual_seed(0);
    // The LSTM LM step (forward, backward and SGD update in one graph).
    let m = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let data = lstm_lm::Batches::synthetic(1);
    let (xs, ys) = data.batch(0);
    let lstm = trace(lstm_lm::flat_sgd_step);
    let mut specs = kernels_of(&lstm, &lstm_lm::flat_args(&m.params(), xs, ys));
    // The README's MLP, forward with autograd (backward compiled lazily).
    let w1 = Tensor::randn([4, 32]).requires_grad();
    let w2 = Tensor::randn([32, 2]).requires_grad();
    let x = Tensor::randn([64, 4]);
    let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64);
    let mlp = trace(|a: &[Tensor]| vec![a[0].matmul(&a[1]).relu().matmul(&a[2]).cross_entropy(&a[3])]);
    specs.extend(kernels_of(&mlp, &[x, w1, w2, y]));
    // The CartPole update's loss (policy logits, log-softmax, gather, weighted sum).
    let p = [
        Tensor::randn([4, 128]).requires_grad(),
        Tensor::zeros([128]).requires_grad(),
        Tensor::randn([128, 2]).requires_grad(),
        Tensor::zeros([2]).requires_grad(),
    ];
    let obs = Tensor::randn([64, 4]);
    let acts = Tensor::from_vec((0..64).map(|i| (i % 2) as i64).collect::<Vec<_>>(), [64, 1]);
    let ret = Tensor::randn([64]);
    let cart = trace(|a: &[Tensor]| {
        let logits = (a[0].matmul(&a[1]) + &a[2]).relu().matmul(&a[3]) + &a[4];
        let logp = logits.log_softmax(1).gather(1, &a[5]).squeeze(1);
        vec![-(logp * &a[6]).sum_all(), logits.softmax(1).multinomial()]
    });
    let mut args = vec![obs];
    args.extend(p);
    args.extend([acts, ret]);
    specs.extend(kernels_of(&cart, &args));
    let n = compile_all("models", specs);
    assert!(n >= 10, "only {n} fused groups");
}

#[test]
fn nvrtc_compiles_fused_groups_of_fuzz_programs() {
    if !nvrtc_or_skip() {
        return;
    }
    let count: u64 =
        std::env::var("JANUS_NVRTC_FUZZ_PROGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(150);
    let mut specs = Vec::new();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for seed in 0..count {
        let p = program::generate(seed);
        let ins = program::inputs(&p);
        let f = trace(|x: &[Tensor]| program::run(&p, x));
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for _ in 0..2 {
                janus::manual_seed(7);
                let outs = f.run(&ins);
                let loss = outs.iter().filter(|o| o.needs_grad() && o.dtype() == p.dtype).fold(
                    None::<Tensor>,
                    |acc, o| {
                        let t = o.sum_all();
                        Some(match acc {
                            Some(a) => a + t,
                            None => t,
                        })
                    },
                );
                if let Some(l) = loss {
                    l.backward();
                }
            }
            f.compiled().map(|c| c.cuda_kernels()).unwrap_or_default()
        }));
        specs.extend(got.unwrap_or_default());
    }
    std::panic::set_hook(hook);
    let n = compile_all("fuzz", specs);
    assert!(n >= 20, "only {n} fused groups from {count} programs");
}

/// A policy-gradient update like CartPole's, traced at two batch sizes: its fused groups
/// (forward and backward) are the same kernels, so a CUDA run at a new batch size compiles
/// none. Sizes the index arithmetic never divides by are not baked (the leading dimension), and
/// constants, such as the mean's `1/N`, are launch parameters. (Sizes and constants were once
/// in every kernel's source, and the CartPole example on an H200 spent most of its update time
/// in NVRTC, at one new batch size per round.) Needs no NVRTC.
#[test]
fn nvrtc_kernels_do_not_depend_on_the_batch_size() {
    janus::manual_seed(3);
    let p = [
        Tensor::randn([4, 32]).requires_grad(),
        Tensor::zeros([32]).requires_grad(),
        Tensor::randn([32, 2]).requires_grad(),
        Tensor::zeros([2]).requires_grad(),
    ];
    let names = |n: usize| {
        let f = trace(|a: &[Tensor]| {
            let logits = (a[0].matmul(&a[1]) + &a[2]).relu().matmul(&a[3]) + &a[4];
            let logp = logits.log_softmax(1).gather(1, &a[5]).squeeze(1);
            vec![-(logp * &a[6]).mean_all()]
        });
        let acts = Tensor::from_vec((0..n).map(|i| (i % 2) as i64).collect::<Vec<_>>(), [n, 1]);
        let mut args = vec![Tensor::randn([n, 4])];
        args.extend(p.iter().cloned());
        args.extend([acts, Tensor::randn([n])]);
        kernels_of(&f, &args).iter().map(EwSpec::kernel_name).collect::<std::collections::BTreeSet<_>>()
    };
    let (a, b) = (names(300), names(517));
    assert!(a.len() >= 3, "only {} fused groups", a.len());
    assert_eq!(a, b, "kernels that differ between batch sizes 300 and 517");
}
