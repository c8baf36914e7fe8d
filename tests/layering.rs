//! The runtime's layering (docs/design.md, "Crates and layers"; `janus-runtime/src/lib.rs`):
//! top-level modules follow the pipeline, a module imports only from its own layer or the
//! layers below, and no import cycle joins two top-level modules, whatever their layers.
//! Imports count as `crate::x` paths, `use crate::{..}` lists (over several lines too) and
//! names the crate root re-exports. Files inside one module may import each other freely.
//! Unit tests (`#[cfg(test)]` onwards) and macro bodies (`$crate::`) are not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Layers, lowest first.
const LAYERS: &[(&str, &[&str])] = &[
    ("leaves", &["config", "error", "device", "shape", "layout", "panics", "profile"]),
    ("storage", &["storage"]),
    ("tensor values", &["tensor"]),
    ("ops: data and shape rules", &["ops"]),
    ("the recording hook", &["recorder"]),
    ("backends", &["backend", "cuda"]),
    ("autograd", &["autograd"]),
    ("eager execution of one op", &["eager"]),
    ("random streams", &["random"]),
    ("the tensor API", &["api"]),
    ("modules, layers, data, checkpoints", &["module", "nn", "data", "checkpoint"]),
    ("graph IR", &["graph"]),
    ("recording and passes", &["trace", "passes"]),
    ("symbolic derivation", &["grad_graph"]),
    ("execution", &["exec"]),
    ("compilation", &["compile"]),
    ("the #[janus] runtime", &["rt"]),
    ("library above rt", &["optim"]),
];

/// Names the crate root re-exports, by the module they come from.
const REEXPORTS: &[(&str, &str)] = &[
    ("Tensor", "tensor"),
    ("DType", "leaf"),
    ("Element", "leaf"),
    ("Device", "device"),
    ("Shape", "shape"),
    ("Dim", "shape"),
    ("ReshapeSpec", "shape"),
    ("broadcast_shapes", "shape"),
    ("Grads", "autograd"),
    ("no_grad", "autograd"),
    ("is_grad_enabled", "autograd"),
    ("Module", "module"),
    ("Mode", "config"),
    ("ExecOptions", "config"),
    ("exec_options", "config"),
    ("set_exec_options", "config"),
    ("manual_seed", "random"),
    ("stream_position", "random"),
    ("set_stream_position", "random"),
    ("CheckpointError", "error"),
    ("DeviceError", "error"),
    ("Scalar", "api"),
    ("Conv2dOptions", "api"),
    ("load", "checkpoint"),
    ("save", "checkpoint"),
    ("Compiled", "compile"),
    ("Traced", "compile"),
    ("trace", "compile"),
    ("profile_report", "profile"),
];

fn layer_of(module: &str) -> Option<usize> {
    if module == "leaf" {
        return Some(0);
    }
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

/// The first path segments of the items of a `{..}` group starting at `text[0] == '{'`, with
/// the group's length; nested groups (`{a::{B, C}, d}`) count by their first segment.
fn group_items(text: &str) -> (Vec<String>, usize) {
    let (mut depth, mut items, mut item) = (0usize, Vec::new(), String::new());
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(std::mem::take(&mut item));
                    return (items, i + 1);
                }
            }
            ',' if depth == 1 => items.push(std::mem::take(&mut item)),
            _ if depth == 1 => item.push(c),
            _ => {}
        }
    }
    (items, text.len())
}

/// Each imported top-level module of `text` (a file of module `home`), with its line.
fn imports(text: &str) -> Vec<(String, usize)> {
    // Code only: up to the unit tests, without line comments or macro bodies' `$crate::`.
    let code: String = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .map(|l| if l.trim_start().starts_with("//") { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n")
        .replace("$crate::", "$krate::");
    let reexports: BTreeMap<&str, &str> = REEXPORTS.iter().copied().collect();
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line = code[..i].matches('\n').count() + 1;
        let rest = &code[i + "crate::".len()..];
        let names = if rest.starts_with('{') {
            group_items(rest).0
        } else {
            vec![rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()]
        };
        for name in names {
            let t = name.trim().split("::").next().unwrap().trim().to_string();
            if t.is_empty() || t == "self" {
                continue;
            }
            // A module's own name wins over a re-exported item's (`crate::trace::start`).
            let module = match layer_of(&t) {
                Some(_) => t,
                None => reexports.get(t.as_str()).map_or(t.clone(), |m| m.to_string()),
            };
            out.push((module, line));
        }
    }
    out
}

/// The module graph of `files` (path relative to `src/`, contents): from -> to -> a place.
fn module_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut g: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (path, text) in files {
        let home = path.split(['/', '.']).next().unwrap().to_string();
        if home == "lib" {
            continue;
        }
        g.entry(home.clone()).or_default();
        for (module, line) in imports(text) {
            if module != home && module != "leaf" {
                g.get_mut(&home).unwrap().entry(module).or_insert_with(|| format!("{path}:{line}"));
            }
        }
    }
    g
}

/// The layering violations among `files`.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (home, targets) in module_graph(files) {
        let Some(from) = layer_of(&home) else {
            out.push(format!("module `{home}` is in no layer (add it to tests/layering.rs)"));
            continue;
        };
        for (module, at) in targets {
            match layer_of(&module) {
                None => out.push(format!("{at}: `crate::{module}` names no known module")),
                Some(to) if to > from => out.push(format!(
                    "{at}: `{home}` ({}) imports `{module}` ({}), a higher layer",
                    LAYERS[from].0, LAYERS[to].0
                )),
                Some(_) => {}
            }
        }
    }
    out
}

/// The import cycles among top-level modules: the strongly connected components of more than
/// one module, each with one edge per member.
fn cycles(files: &[(String, String)]) -> Vec<String> {
    let g = module_graph(files);
    // Which modules each reaches (the graph is small): a cycle is a pair reaching each other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(m) = stack.pop() {
            for next in g.get(&m).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in g.keys() {
        if done.contains(m) || !reaches[m].contains(m) {
            continue;
        }
        let members: Vec<&String> =
            g.keys().filter(|n| reaches[m].contains(*n) && reaches[*n].contains(m)).collect();
        let edges: Vec<String> = members
            .iter()
            .flat_map(|a| {
                g[*a]
                    .iter()
                    .filter(|(b, _)| members.contains(b))
                    .map(move |(b, at)| format!("{a} -> {b} ({at})"))
            })
            .collect();
        done.extend(members.iter().map(|n| (*n).clone()));
        out.push(format!("{members:?}: {}", edges.join(", ")));
    }
    out
}

fn sources(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if p.is_dir() {
            sources(&p, &format!("{name}/"), out);
        } else if name.ends_with(".rs") {
            out.push((name, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

fn runtime_sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("janus-runtime/src"), "", &mut files);
    files.sort();
    files
}

#[test]
fn runtime_imports_point_down_the_pipeline() {
    let files = runtime_sources();
    assert!(files.len() > 50, "found only {} runtime files", files.len());
    let v = violations(&files);
    assert!(v.is_empty(), "layering violations:\n{}", v.join("\n"));
}

#[test]
fn no_import_cycle_joins_two_runtime_modules() {
    let files = runtime_sources();
    let c = cycles(&files);
    assert!(c.is_empty(), "import cycles between top-level modules:\n{}", c.join("\n"));
    // The scan sees the imports it must: `api` reads tensors, ops and eager execution.
    let g = module_graph(&files);
    for m in ["tensor", "ops", "eager"] {
        assert!(g["api"].contains_key(m), "api -> {m} not found: {:?}", g["api"]);
    }
}

fn with_line(files: &[(String, String)], path: &str, line: &str) -> Vec<(String, String)> {
    let mut files = files.to_vec();
    let (_, text) = files.iter_mut().find(|(p, _)| p == path).unwrap_or_else(|| panic!("{path}"));
    text.insert_str(0, line);
    files
}

#[test]
fn an_injected_upward_import_is_caught() {
    let files = runtime_sources();
    let v = violations(&with_line(&files, "tensor.rs", "use crate::rt::Fragment;\n"));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("tensor.rs:1: `tensor` (tensor values) imports `rt`"), "{}", v[0]);
    // A grouped import over several lines, of the tracer from the ops, is caught too.
    let v = violations(&with_line(
        &files,
        "ops/mod.rs",
        "use crate::{\n    tensor::Tensor,\n    trace::start,\n};\n",
    ));
    assert!(
        v.len() == 1 && v[0].contains("ops/mod.rs:1: `ops`") && v[0].contains("imports `trace`"),
        "{v:?}"
    );
    // And an import through a re-export of the crate root.
    let v = violations(&with_line(&files, "ops/mod.rs", "use crate::{Grads, Tensor};\n"));
    assert!(v.len() == 1 && v[0].contains("imports `autograd`"), "{v:?}");
}

#[test]
fn an_injected_cycle_inside_one_layer_is_caught() {
    let files = runtime_sources();
    // `error` imports `shape`; `shape` importing `error` closes a cycle within the leaves.
    let c = cycles(&with_line(&files, "shape.rs", "use crate::error::bail;\n"));
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(c[0].contains("shape -> error") && c[0].contains("error -> shape"), "{}", c[0]);
}

// The macro crate's files (`janus-macros/src/`, docs/design.md, "Crates and layers"): no import
// cycle among them. An edge is a path naming another file's module: `super::x`, `super::{a, b}`,
// `crate::janus::x`, `self::x`, or (in a file that declares `mod x;`) `x::..`; in code, outside
// comments and literals, before a file's `#[cfg(test)]` tail. A path followed by `(` or `!`
// names a function or macro, so the module is the one holding it (`super::expand(..)` in
// `snapshots.rs` is `mod.rs`'s function). Inline non-test modules are not modelled.

/// The macro crate's files (path relative to `janus-macros/src/`, contents).
fn macro_sources() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, prefix: &str, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            if e.path().is_dir() {
                walk(&e.path(), &format!("{name}/"), out);
            } else if name.ends_with(".rs") {
                out.push((name, std::fs::read_to_string(e.path()).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("janus-macros/src"), "", &mut files);
    files.sort();
    files
}

/// `text` with comments and the contents of string and character literals blanked, newlines
/// kept (so offsets still give line numbers).
fn macro_code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(b.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < b.len() {
        let (c, next) = (b[i], b.get(i + 1).copied());
        let prev_ident = i > 0 && ident(b[i - 1]);
        // The length of a raw string's opening `r#*"`, if one starts here.
        let raw = (c == 'r' && !prev_ident)
            .then(|| b[i + 1..].iter().take_while(|&&h| h == '#').count())
            .filter(|&h| b.get(i + 1 + h) == Some(&'"'));
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let end = (i + 2..b.len()).find(|&j| b[j] == '*' && b.get(j + 1) == Some(&'/'));
            let end = end.map_or(b.len(), |j| j + 2);
            out.extend(b[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if let Some(hashes) = raw {
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let start = i + 2 + hashes;
            let end =
                (start..b.len()).find(|&j| b[j..].starts_with(&close)).map_or(b.len(), |j| j + close.len());
            out.extend(b[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            out.extend(b[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else if c == '\'' && (next == Some('\\') || b.get(i + 2) == Some(&'\'')) {
            // A character literal (`'"'`, `'\''`), not a lifetime.
            let mut j = i + 1;
            while j < b.len() && b[j] != '\'' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            out.extend(b[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// The paths of the use tree or path at the start of `s` (`a::b`, `a::{b, c::{d, e}}`,
/// `a::*`), each as segments after `prefix`. A path followed by `(` or `!` names a function or
/// macro: its last segment is dropped.
fn macro_paths(s: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut segs = prefix;
    let mut rest = s.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut start) = (1, 0);
            for (j, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        // (A trailing comma leaves an empty item.)
                        if !group[start..j].trim().is_empty() {
                            macro_paths(&group[start..j], segs.clone(), out);
                        }
                        start = j + 1;
                        if ch == '}' {
                            return;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            return;
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            out.push(segs); // `*`, or the end of a group
            return;
        }
        let after = &rest[name.len()..];
        segs.push(name);
        if let Some(more) = after.trim_start().strip_prefix("::") {
            rest = more.trim_start();
            continue;
        }
        if after.trim_start().starts_with(['(', '!']) {
            segs.pop();
        }
        out.push(segs);
        return;
    }
}

/// The module path of a file (`janus/expand.rs`: `janus::expand`; `janus/mod.rs`: `janus`).
fn macro_module_of(path: &str) -> Vec<String> {
    let path = path.trim_end_matches(".rs");
    let mut segs: Vec<String> = path.split('/').map(String::from).collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        segs.pop();
    }
    segs
}

/// The file-import graph of `files` (path relative to `src/`, contents): for each file, the
/// files it names and the first line naming each.
fn macro_import_graph(
    files: &[(String, String)],
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>> {
    let modules: std::collections::BTreeMap<Vec<String>, &str> =
        files.iter().map(|(p, _)| (macro_module_of(p), p.as_str())).collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut graph = std::collections::BTreeMap::new();
    for (path, text) in files {
        let own = macro_module_of(path);
        let code = macro_code_only(text);
        // The code before the `#[cfg(test)]` tail.
        let end = code
            .match_indices("#[cfg(test)]")
            .map(|(i, _)| i)
            .find(|&i| code[..i].rsplit('\n').next().is_some_and(|l| l.trim().is_empty()))
            .unwrap_or(code.len());
        let code = &code[..end];
        // Child modules declared here (`mod x;`) are named bare (`x::f`).
        let mut starts = vec!["crate".to_string(), "super".to_string(), "self".to_string()];
        for (i, _) in code.match_indices("mod ") {
            if i > 0 && ident(code[..i].chars().last().unwrap()) {
                continue;
            }
            let rest = &code[i + 4..];
            let name: String = rest.chars().take_while(|&c| ident(c)).collect();
            if !name.is_empty() && rest[name.len()..].trim_start().starts_with(';') {
                starts.push(name);
            }
        }
        let edges: &mut std::collections::BTreeMap<String, usize> = graph.entry(path.clone()).or_default();
        for start in &starts {
            for (i, _) in code.match_indices(&format!("{start}::")) {
                if code[..i].chars().last().is_some_and(|c| ident(c) || matches!(c, ':' | '$' | '#')) {
                    continue;
                }
                let line = code[..i].matches('\n').count() + 1;
                let mut found = Vec::new();
                macro_paths(&code[i..], Vec::new(), &mut found);
                for segs in found {
                    // Resolve `crate`, `super` and `self` against this file's module.
                    let mut at = if segs[0] == "crate" { Vec::new() } else { own.clone() };
                    for s in &segs {
                        match s.as_str() {
                            "crate" | "self" => {}
                            "super" => {
                                at.pop();
                            }
                            _ => at.push(s.clone()),
                        }
                    }
                    // The file is the longest prefix that is a module.
                    while !at.is_empty() && !modules.contains_key(&at) {
                        at.pop();
                    }
                    if let Some(&to) = modules.get(&at)
                        && to != path
                    {
                        edges.entry(to.to_string()).or_insert(line);
                    }
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, as `a -> b -> a` with the line naming each step, if there is one.
fn macro_import_cycle(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>>,
) -> Option<String> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, usize>>,
        done: &mut std::collections::BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if !done.insert(node.to_string()) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(next, graph, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = std::collections::BTreeSet::new();
    let cycle = graph.keys().find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))?;
    let steps: Vec<String> =
        cycle.windows(2).map(|w| format!("{}:{} names {}", w[0], graph[&w[0]][&w[1]], w[1])).collect();
    Some(format!("{} ({})", cycle.join(" -> "), steps.join("; ")))
}

#[test]
fn macro_files_import_no_cycle() {
    let files = macro_sources();
    assert!(files.len() >= 12, "found only {} macro files", files.len());
    let graph = macro_import_graph(&files);
    // The scan sees the imports (one that saw none would pass whatever the code does).
    for (from, to) in [
        ("lib.rs", "janus/mod.rs"),
        ("janus/mod.rs", "janus/expand.rs"),
        ("janus/expand.rs", "janus/partition.rs"),
        ("janus/expand.rs", "janus/host_calls.rs"),
        ("janus/speculate.rs", "janus/emit.rs"),
        ("janus/host_calls.rs", "janus/classify.rs"),
        ("janus/options.rs", "derive_module.rs"),
    ] {
        assert!(graph.get(from).is_some_and(|e| e.contains_key(to)), "no edge {from} -> {to}: {graph:?}");
    }
    if let Some(cycle) = macro_import_cycle(&graph) {
        panic!("import cycle among janus-macros/src files: {cycle}");
    }
}

#[test]
fn macro_an_injected_import_cycle_is_caught() {
    let with = |path: &str, at_start: &str, at_end: &str| {
        let mut files = macro_sources();
        let (_, text) = files.iter_mut().find(|(p, _)| p == path).expect(path);
        text.insert_str(0, at_start);
        text.push_str(at_end);
        macro_import_cycle(&macro_import_graph(&files))
    };
    // The cycle this crate had: emission naming the driver's context.
    let c = with("janus/emit.rs", "use super::expand::Ctx;\n", "").expect("a cycle");
    assert!(c.contains("janus/emit.rs:1 names janus/expand.rs"), "{c}");
    // A grouped import, over lines (reported at the line where its path starts).
    let c = with("janus/reads.rs", "use super::{\n    scope::name,\n    emit::Fragment,\n};\n", "");
    assert!(c.as_ref().is_some_and(|c| c.contains("janus/reads.rs:1 names janus/emit.rs")), "{c:?}");
    // A `crate::janus::` path in code.
    let c = with("janus/classify.rs", "fn f() -> Vec<u8> { crate::janus::partition::g() }\n", "");
    assert!(c.as_ref().is_some_and(|c| c.contains("janus/classify.rs:1 names janus/partition.rs")), "{c:?}");
    // Not edges: comments, literals, the `#[cfg(test)]` tail.
    let c = with(
        "janus/scope.rs",
        "// use super::expand::Ctx;\nconst S: &str = \"super::emit\";\n",
        "\n#[cfg(test)]\nmod t {\n    use super::super::expand::Ctx;\n}\n",
    );
    assert_eq!(c, None);
}
