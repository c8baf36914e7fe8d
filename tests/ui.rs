//! trybuild cases for the macros: every macro error pinned with its `.stderr`, and compile-pass
//! cases for methods, generics, patterns, control flow, closures, shadowing and items.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui-tests/fail/*.rs");
    t.pass("ui-tests/pass/*.rs");
}
