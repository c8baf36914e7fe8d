//! `JANUS_DUMP=DIR` writes every compiled graph as text, DOT and JSON plus a summary. Its own
//! test binary: the configuration is read once per process.

use janus::prelude::*;

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
    let summary = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(summary.contains("dumped-forward") && summary.contains("dumped-backward"), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}
