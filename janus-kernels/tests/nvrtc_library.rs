//! Compiles the CUDA kernel library and sample generated kernels with NVRTC, then assembles the
//! PTX with `ptxas` for `sm_90`. Needs no GPU. Skips with a printed reason where NVRTC is not
//! installed, unless `JANUS_REQUIRE_NVRTC=1`.

use janus_kernels::DType;
use janus_kernels::cuda::codegen::{Access, Baked, EwSpec};
use janus_kernels::cuda::library::{Kernel, SOURCE};
use janus_kernels::cuda::{libs, nvrtc};
use janus_kernels::fused::{FBinary, FUnary, Instr, Program};
use janus_kernels::{BinaryOp, CmpOp, UnaryOp};

const ARCH: &str = "sm_90";

fn nvrtc_or_skip() -> bool {
    match nvrtc::available() {
        Ok(()) => true,
        Err(e) if std::env::var("JANUS_REQUIRE_NVRTC").is_ok_and(|v| v == "1") => {
            panic!("JANUS_REQUIRE_NVRTC=1 but {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// Assembles PTX with ptxas, when it is installed (always under JANUS_REQUIRE_NVRTC=1).
fn ptxas(ptx: &str, name: &str) {
    let Some(ptxas) = libs::find_ptxas() else {
        assert!(
            !std::env::var("JANUS_REQUIRE_NVRTC").is_ok_and(|v| v == "1"),
            "JANUS_REQUIRE_NVRTC=1 but ptxas was not found (pip install nvidia-cuda-nvcc==13.0.*)"
        );
        eprintln!("ptxas not found: PTX not assembled");
        return;
    };
    let dir = std::env::temp_dir().join(format!("janus-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(format!("{name}.ptx"));
    std::fs::write(&f, ptx).unwrap();
    let out = std::process::Command::new(&ptxas)
        .args(["-arch", ARCH, "-o"])
        .arg(dir.join(format!("{name}.cubin")))
        .arg(&f)
        .output()
        .expect("ptxas runs");
    assert!(out.status.success(), "ptxas failed on {name}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn nvrtc_compiles_every_library_kernel() {
    if !nvrtc_or_skip() {
        return;
    }
    let ptx = nvrtc::compile_uncached(SOURCE, ARCH, "janus_library").unwrap_or_else(|e| panic!("{e}"));
    for k in Kernel::all() {
        assert!(ptx.contains(&format!(".entry {}(", k.name())), "library lacks {}", k.name());
    }
    ptxas(&ptx, "janus_library");
}

#[test]
fn nvrtc_compiles_generated_elementwise_kernels() {
    if !nvrtc_or_skip() {
        return;
    }
    let prog = Program {
        instrs: vec![
            Instr::Load { dst: 0, input: 0 },
            Instr::Load { dst: 1, input: 1 },
            Instr::Load { dst: 2, input: 2 },
            Instr::Binary { dst: 3, f: FBinary::Op(BinaryOp::Mul), a: 0, b: 1 },
            Instr::Unary { dst: 4, f: FUnary::Op(UnaryOp::Sigmoid), a: 3 },
            Instr::BinaryConst {
                dst: 5,
                f: FBinary::Cmp(CmpOp::Gt),
                a: 4,
                c: 0.5f64.to_bits(),
                const_left: false,
            },
            Instr::Select { dst: 6, c: 5, a: 4, b: 2 },
            Instr::Unary { dst: 7, f: FUnary::Powf(2.5f64.to_bits()), a: 6 },
        ],
        num_regs: 8,
        outputs: vec![7, 5],
    };
    for reg in [DType::F32, DType::F64] {
        for (baked, rank) in [
            (None, 2),
            (Some(Baked { shape: vec![32, 512], strides: vec![vec![], vec![0, 1], vec![1, 32]] }), 2),
        ] {
            let spec = EwSpec {
                program: janus_kernels::cuda::codegen::canonical_program(&prog),
                reg,
                inputs: vec![
                    (reg, Access::Contiguous),
                    (reg, Access::Strided),
                    (DType::Bool, Access::Strided),
                ],
                outputs: vec![reg, DType::Bool],
                rank,
                wide: false,
                baked,
            };
            let ptx = nvrtc::compile_uncached(&spec.source(), ARCH, &spec.kernel_name())
                .unwrap_or_else(|e| panic!("{e}\n{}", spec.source()));
            ptxas(&ptx, &spec.kernel_name());
        }
    }
}

#[test]
fn nvrtc_compiles_every_float_function() {
    if !nvrtc_or_skip() {
        return;
    }
    #[rustfmt::skip]
    let fs = [
        FUnary::Op(UnaryOp::Neg), FUnary::Op(UnaryOp::Exp), FUnary::Op(UnaryOp::Log), FUnary::Op(UnaryOp::Sqrt), FUnary::Op(UnaryOp::Abs), FUnary::Op(UnaryOp::Tanh), FUnary::Op(UnaryOp::Sigmoid),
        FUnary::Op(UnaryOp::Relu), FUnary::Op(UnaryOp::Square), FUnary::Op(UnaryOp::Recip), FUnary::Op(UnaryOp::Sign), FUnary::Op(UnaryOp::Not), FUnary::Trunc,
        FUnary::NonZero, FUnary::Op(UnaryOp::Sin), FUnary::Op(UnaryOp::Cos), FUnary::Op(UnaryOp::Tan), FUnary::Op(UnaryOp::Exp2), FUnary::Op(UnaryOp::Log2),
        FUnary::Op(UnaryOp::Log1p), FUnary::Op(UnaryOp::Expm1), FUnary::Op(UnaryOp::Erf), FUnary::Op(UnaryOp::Gelu), FUnary::Op(UnaryOp::Silu), FUnary::Op(UnaryOp::Softplus),
        FUnary::Op(UnaryOp::Floor), FUnary::Op(UnaryOp::Ceil), FUnary::Op(UnaryOp::Round), FUnary::Op(UnaryOp::Rsqrt),
    ];
    // A chain through every function, then atan2 of the chain's end and the input.
    let mut instrs = vec![Instr::Load { dst: 0, input: 0 }];
    for (k, &f) in fs.iter().enumerate() {
        instrs.push(Instr::Unary { dst: k as u16 + 1, f, a: k as u16 });
    }
    let last = fs.len() as u16;
    instrs.push(Instr::Binary { dst: last + 1, f: FBinary::Op(BinaryOp::Atan2), a: last, b: 0 });
    let prog = Program { instrs, num_regs: last + 2, outputs: vec![last + 1] };
    for reg in [DType::F32, DType::F64] {
        let spec = EwSpec {
            program: prog.clone(),
            reg,
            inputs: vec![(reg, Access::Contiguous)],
            outputs: vec![reg],
            rank: 1,
            wide: false,
            baked: None,
        };
        let ptx = nvrtc::compile_uncached(&spec.source(), ARCH, &spec.kernel_name())
            .unwrap_or_else(|e| panic!("{e}\n{}", spec.source()));
        ptxas(&ptx, &spec.kernel_name());
    }
}
