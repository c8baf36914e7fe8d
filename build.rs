//! The macro fuzz's large setting: with `JANUS_MACRO_FUZZ_FUNCTIONS=N` set when the tests are
//! built, `tests/macro_fuzz` runs N generated functions (from `OUT_DIR`) instead of the 80
//! checked in under `tests/macro_fuzz/generated/`. Without it this does nothing.

#[path = "tests/macro_fuzz/generator.rs"]
#[allow(dead_code)]
mod generator;

fn main() {
    println!("cargo::rerun-if-env-changed=JANUS_MACRO_FUZZ_FUNCTIONS");
    println!("cargo::rerun-if-changed=tests/macro_fuzz/generator.rs");
    println!("cargo::rustc-check-cfg=cfg(janus_macro_fuzz_large)");
    let Some(count) = std::env::var("JANUS_MACRO_FUZZ_FUNCTIONS").ok().and_then(|n| n.parse().ok()) else {
        return;
    };
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("macro_fuzz_large.rs");
    std::fs::write(out, generator::generate_inline(1, count)).unwrap();
    println!("cargo::rustc-cfg=janus_macro_fuzz_large");
}
