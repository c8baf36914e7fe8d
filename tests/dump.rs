//! `JANUS_DUMP=DIR` writes every compiled graph as text, DOT and JSON plus a summary. Its own
//! test binary: the configuration is read once per process.

use janus::prelude::*;

/// A speculated function with one assert (the `if` on a tensor value).
#[janus]
fn clipped(x: &Tensor) -> Tensor {
    let n = x.square().sum_all();
    let mut y = x * 2.0;
    if n.item() > 100.0 {
        y = &y * 0.5;
    }
    y
}

#[test]
fn dump_writes_text_dot_json_and_summary() {
    let dir = std::env::temp_dir().join(format!("janus-dump-{}", std::process::id()));
    // SAFETY: set before any thread of this test binary reads the environment through janus;
    // this binary has a single test.
    unsafe { std::env::set_var("JANUS_DUMP", &dir) };
    let f = trace(|x: &[Tensor]| vec![(x[0].exp() * 2.0).sum_all()]).named("dumped");
    let x = Tensor::ones([3]).requires_grad();
    let y = f.run(std::slice::from_ref(&x));
    let y = f.run(std::slice::from_ref(&x)).into_iter().chain(y).next().unwrap();
    y.backward(); // compiles the backward graph too
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for ext in ["txt", "dot", "json"] {
        assert!(names.iter().any(|n| n.contains("dumped-forward") && n.ends_with(ext)), "{names:?}");
        assert!(names.iter().any(|n| n.contains("dumped-backward") && n.ends_with(ext)), "{names:?}");
    }
    // A whole-function graph is dumped with a note on its asserts and path.
    janus::set_self_check(false);
    for _ in 0..4 {
        clipped(&Tensor::ones([4]));
    }
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.contains("dumped-forward") && summary.contains("dumped-backward"), "{summary}");
    let line = (include_str!("dump.rs").lines().position(|l| l.contains("if n.item() > 100.0")).unwrap()) + 1;
    assert!(
        summary.contains(&format!(
            "clipped#fn: whole-function graph; its last 1 output(s) are asserts that must be [false]; path: line {line} no"
        )),
        "{summary}"
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.contains("clipped_fn-forward")), "{names:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
