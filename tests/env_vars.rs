//! `docs/env_vars.md` lists exactly the `JANUS_*` variables the repository reads: every one
//! named in a string literal of Rust code (`std::env::var("JANUS_..")`, `option_env!`) or
//! anywhere in CI and scripts, and no other; and at most 12 of them are meant for users.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `JANUS_*` names in `text`: in Rust, only those that open a string literal; elsewhere,
/// every one.
fn names(text: &str, rust: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(k) = text[from..].find("JANUS_") {
        let at = from + k;
        let end = at
            + text[at..]
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(text.len() - at);
        let quoted = at > 0 && bytes[at - 1] == b'"' && bytes.get(end) == Some(&b'"');
        if (!rust || quoted) && end > at + "JANUS_".len() {
            out.insert(text[at..end].to_string());
        }
        from = end;
    }
    out
}

/// Files of the repository that code or scripts live in (not `target/`, not the docs).
fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "docs" | "node_modules") {
                walk(&path, found);
            }
        } else {
            found.push(path);
        }
    }
}

fn read_by_code() -> BTreeSet<String> {
    let mut files = Vec::new();
    walk(&root(), &mut files);
    let mut read = BTreeSet::new();
    for f in files {
        let rel = f.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        let rust = rel.ends_with(".rs");
        let script = rel.starts_with(".ci/")
            || rel.ends_with(".sh")
            || rel.ends_with(".py")
            || rel.ends_with(".toml") && !rel.ends_with("Cargo.toml");
        if !(rust || script) || rel == "tests/env_vars.rs" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        read.extend(names(&text, rust));
    }
    read
}

/// The table's rows: (section, variable name).
fn documented() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("docs/env_vars.md")).expect("docs/env_vars.md");
    let mut section = String::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.to_string();
        } else if let Some(cell) = line.strip_prefix("| `") {
            let name: String = cell
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            assert!(name.starts_with("JANUS_"), "a row of docs/env_vars.md names no variable: {line}");
            rows.push((section.clone(), name));
        }
    }
    rows
}

#[test]
fn the_table_lists_exactly_the_variables_the_code_reads() {
    let read = read_by_code();
    let rows = documented();
    let listed: BTreeSet<String> = rows.iter().map(|(_, n)| n.clone()).collect();
    assert_eq!(listed.len(), rows.len(), "a variable is listed twice in docs/env_vars.md");
    let missing: Vec<_> = read.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&read).collect();
    assert!(missing.is_empty(), "read by the code but not in docs/env_vars.md: {missing:?}");
    assert!(stale.is_empty(), "in docs/env_vars.md but read nowhere: {stale:?}");
    assert!(read.contains("JANUS_MODE") && read.len() > 10, "the scan found {read:?}");
}

#[test]
fn at_most_twelve_variables_are_for_users() {
    let rows = documented();
    let users: Vec<_> = rows.iter().filter(|(s, _)| s == "For users").map(|(_, n)| n).collect();
    assert!(!users.is_empty(), "docs/env_vars.md has no \"For users\" section");
    assert!(users.len() <= 12, "{} variables for users: {users:?}", users.len());
    for kept in [
        "JANUS_MODE",
        "JANUS_SELF_CHECK",
        "JANUS_CHECK_EVERY",
        "JANUS_LOG",
        "JANUS_DUMP",
        "JANUS_CUDA_LIB_DIR",
    ] {
        assert!(users.iter().any(|n| *n == kept), "{kept} is documented for users");
    }
    let sections: BTreeSet<_> = rows.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(sections, BTreeSet::from(["For users", "Testing and development"]));
}
