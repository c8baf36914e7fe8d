//! `explain()` at a glance: rows by function, the whole function first and then its blocks in
//! source order, each with its line range and the ops one replay runs; runs recorded into the
//! function graph are not listed as eager runs. Its own binary, so no other test's fragments
//! show up.

use janus::prelude::*;

#[janus]
fn two_blocks(x: &Tensor, n: usize) -> Tensor {
    let a = (x * 2.0).tanh() + 1.0;
    let b = a.exp() * 0.5;
    let mut y = b.sqrt();
    for _ in 0..n {
        println!("a host statement splits the function into blocks");
        y = (&y * 0.9).sigmoid() + 0.1;
    }
    y
}

#[test]
fn rows_are_sorted_with_line_ranges_and_ops_per_hit() {
    janus::set_self_check(false);
    for _ in 0..6 {
        two_blocks(&Tensor::ones([8]), 2);
    }
    let text = janus::explain();
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("two_blocks#")).collect();
    let names: Vec<&str> = rows.iter().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names[0], "two_blocks#fn", "{text}");
    // Blocks in source order: by the line they start on.
    let starts: Vec<u32> = (rows[1..].iter())
        .map(|r| r.split_whitespace().nth(1).unwrap().split([':', '-']).nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(starts.len() >= 2 && starts.windows(2).all(|w| w[0] <= w[1]), "{text}");
    // The first block spans the three `let`s: lines 10-12 of this file.
    let src = include_str!("explain.rs");
    let line_of = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let (from, to) = (line_of("let a = (x * 2.0)"), line_of("let mut y = b.sqrt()"));
    assert!(
        rows.iter()
            .any(|r| r.starts_with("two_blocks#0 ") && r.contains(&format!("tests/explain.rs:{from}-{to}"))),
        "{text}"
    );
    let stats = janus::stats();
    let block = stats.fragments.iter().find(|f| f.name == "two_blocks#0").unwrap();
    assert!(block.hits > 0 && block.ops_per_replay >= 5, "{block:?}");
    // Not speculated (a host statement), so nothing is recorded inline, and the whole
    // function's row says why.
    assert!(rows[0].contains("a host statement"), "{}", rows[0]);
}

#[janus]
fn speculated(x: &Tensor) -> Tensor {
    let y = (x * 3.0).tanh() + x.exp();
    y.sqrt()
}

#[test]
fn blocks_recorded_into_a_function_graph_are_not_eager_runs() {
    janus::set_self_check(false);
    for _ in 0..6 {
        speculated(&Tensor::ones([4]));
    }
    let text = janus::explain();
    let block = text.lines().find(|l| l.starts_with("speculated#0")).unwrap();
    assert!(!block.contains("recorded inline"), "{block}");
    assert!(block.contains("run(s) recorded into the function graph"), "{block}");
    assert!(
        text.lines().any(|l| l.starts_with("speculated#fn") && l.contains("speculated: 4 hits")),
        "{text}"
    );
}
