//! The runtime's layering (docs/design.md, "Crates and layers"; `janus-runtime/src/lib.rs`):
//! modules follow the pipeline, and a module may import only from its own layer or the layers
//! below. The value core (tensor <-> autograd <-> ops) is the one layer whose modules import
//! each other freely.
//! Unit tests (`#[cfg(test)]` onwards) and macro bodies (`$crate::`) are not checked.

use std::collections::BTreeMap;
use std::path::Path;

/// Layers, lowest first.
const LAYERS: &[(&str, &[&str])] = &[
    ("leaves", &["config", "error", "device", "shape", "layout", "panics", "profile"]),
    (
        "value core",
        &[
            "tensor",
            "storage",
            "recorder",
            "ops",
            "api",
            "autograd",
            "backend",
            "random",
            "module",
            "nn",
            "data",
            "checkpoint",
            "cuda",
        ],
    ),
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
    ("manual_seed", "random"),
    ("stream_position", "random"),
    ("set_stream_position", "random"),
    ("CheckpointError", "error"),
    ("DeviceError", "error"),
    ("Scalar", "api"),
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

/// The layering violations among `files` (path relative to `src/`, contents).
fn violations(files: &[(String, String)]) -> Vec<String> {
    let reexports: BTreeMap<&str, &str> = REEXPORTS.iter().copied().collect();
    let mut out = Vec::new();
    for (path, text) in files {
        let home = path.split(['/', '.']).next().unwrap();
        if home == "lib" {
            continue;
        }
        let Some(from) = layer_of(home) else {
            out.push(format!("{path}: module `{home}` is in no layer (add it to tests/layering.rs)"));
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            if line.trim_start().starts_with("//") {
                continue;
            }
            let line = line.replace("$crate::", "");
            let mut targets: Vec<String> = Vec::new();
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    let inner = &group[..group.find('}').unwrap_or(group.len())];
                    targets
                        .extend(inner.split(',').map(|s| s.trim().split("::").next().unwrap().to_string()));
                } else {
                    let name: String =
                        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    targets.push(name);
                }
            }
            for t in targets.into_iter().filter(|t| !t.is_empty() && t != "self") {
                // A module's own name wins over a re-exported item's (`crate::trace::start`).
                let module = match layer_of(&t) {
                    Some(_) => t.clone(),
                    None => reexports.get(t.as_str()).map_or(t.clone(), |m| m.to_string()),
                };
                match layer_of(&module) {
                    None => out.push(format!("{path}:{}: `crate::{t}` names no known module", n + 1)),
                    Some(to) if to > from => out.push(format!(
                        "{path}:{}: `{home}` ({}) imports `{module}` ({}), a higher layer",
                        n + 1,
                        LAYERS[from].0,
                        LAYERS[to].0
                    )),
                    Some(_) => {}
                }
            }
        }
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
fn an_injected_upward_import_is_caught() {
    let mut files = runtime_sources();
    let (_, text) = files.iter_mut().find(|(p, _)| p == "tensor.rs").expect("tensor.rs");
    text.insert_str(0, "use crate::rt::Fragment;\n");
    let v = violations(&files);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("tensor.rs:1: `tensor` (value core) imports `rt`"), "{}", v[0]);
    // A grouped import of the tracer from the value core is caught too.
    let mut files = runtime_sources();
    let (_, text) = files.iter_mut().find(|(p, _)| p == "ops/mod.rs").expect("ops/mod.rs");
    text.insert_str(0, "use crate::{tensor::Tensor, trace::start};\n");
    let v = violations(&files);
    assert!(v.len() == 1 && v[0].contains("imports `trace`"), "{v:?}");
}
