//! Graph exports: a readable text form (`Display`), Graphviz DOT and JSON.

use super::{Graph, Node, NodeOp};
use crate::ops::{Op, TensorType};
use std::fmt::{self, Write};

fn ty_str(t: &TensorType) -> String {
    let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", t.dtype, dims.join(", "))
}

/// `name` plus the op's parameters, e.g. `narrow {dim: 1, start: 0, len: 128}`.
pub(crate) fn describe(op: &NodeOp) -> String {
    match op {
        NodeOp::Input(i) => format!("input {i}"),
        NodeOp::RngState { offset } => format!("rng_state {{offset: {offset}}}"),
        NodeOp::Fused(p) => format!("fused {}", p.describe()),
        NodeOp::Project(k) => format!("project {k}"),
        NodeOp::MatMulAdd => "matmul_add".into(),
        NodeOp::Loop(l) => format!("loop {}", super::loops::describe(l)),
        NodeOp::Op(op) => {
            let name = op.name();
            let dbg = match op {
                Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Where | Op::MatMul | Op::Multinomial => {
                    return name.to_string();
                }
                Op::Constant(c) => return format!("constant {{{} values}}", c.data.len()),
                Op::Full(f) => return format!("full {{value: {:?}}}", f.value),
                other => format!("{other:?}"),
            };
            // Keep only the parameter fields: `Narrow(Narrow { dim: 1 })` -> `{dim: 1}`.
            let params =
                dbg.find('{').map(|i| dbg[i..].trim_end_matches(')').replace("{ ", "{").replace(" }", "}"));
            match params {
                Some(p) => format!("{name} {p}"),
                None => name.to_string(),
            }
        }
    }
}

fn span_str(n: &Node) -> String {
    n.span.map(|s| format!("{}:{}", s.file(), s.line())).unwrap_or_default()
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ins: Vec<String> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, x)| format!("#{i} {:?}: {}", x.name, ty_str(&x.ty)))
            .collect();
        writeln!(f, "graph({}) {{", ins.join(", "))?;
        for (i, n) in self.nodes.iter().enumerate() {
            if matches!(n.op, NodeOp::Input(_)) {
                let NodeOp::Input(k) = n.op else { unreachable!() };
                writeln!(f, "  %{i}: {} = input #{k}", ty_str(&n.ty))?;
                continue;
            }
            let args: Vec<String> = n.inputs.iter().map(|a| format!("%{}", a.0)).collect();
            let at = span_str(n);
            let at = if at.is_empty() { String::new() } else { format!("  # {at}") };
            writeln!(f, "  %{i}: {} = {}({}){at}", ty_str(&n.ty), describe(&n.op), args.join(", "))?;
        }
        let outs: Vec<String> = self.outputs.iter().map(|o| format!("%{}", o.0)).collect();
        writeln!(f, "  return ({})", outs.join(", "))?;
        if let Some(r) = self.rng {
            writeln!(f, "  # random stream: input #{}, {} blocks per run", r.input, r.blocks)?;
        }
        // Loop bodies after the graph, so that node i stays on line i + 1 (the verifier's
        // context relies on it).
        for (i, n) in self.nodes.iter().enumerate() {
            if let NodeOp::Loop(l) = &n.op {
                writeln!(f, "  # body of loop %{i}:")?;
                for line in l.body.to_string().lines() {
                    writeln!(f, "  #   {line}")?;
                }
            }
        }
        f.write_str("}")
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

impl Graph {
    /// Graphviz DOT: one box per node (op, type, source line), edges from operands to users.
    pub fn to_dot(&self) -> String {
        let mut s = String::from(
            "digraph janus {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n",
        );
        for (i, n) in self.nodes.iter().enumerate() {
            let label = match &n.op {
                NodeOp::Input(k) => {
                    format!("%{i} input {}\\n{}", escape(&self.inputs[*k].name), ty_str(&n.ty))
                }
                op => {
                    format!("%{i} {}\\n{}\\n{}", escape(&describe(op)), ty_str(&n.ty), escape(&span_str(n)))
                }
            };
            let style = match n.op {
                NodeOp::Input(_) => ", style=filled, fillcolor=\"#e8f0ff\"",
                NodeOp::Fused(_) => ", style=filled, fillcolor=\"#fff2d0\"",
                _ => "",
            };
            let _ = writeln!(s, "  n{i} [label=\"{label}\"{style}];");
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for a in &n.inputs {
                let _ = writeln!(s, "  n{} -> n{i};", a.0);
            }
        }
        for (k, o) in self.outputs.iter().enumerate() {
            let _ = writeln!(s, "  out{k} [label=\"output {k}\", shape=ellipse];\n  n{} -> out{k};", o.0);
        }
        s.push_str("}\n");
        s
    }

    /// JSON: `{"inputs": [...], "nodes": [...], "outputs": [...], "rng": ...}`.
    pub fn to_json(&self) -> String {
        let ty = |t: &TensorType| {
            let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
            format!("\"dtype\": \"{}\", \"shape\": [{}]", t.dtype, dims.join(", "))
        };
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .map(|x| format!("{{\"name\": \"{}\", {}}}", escape(&x.name), ty(&x.ty)))
            .collect();
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let args: Vec<String> = n.inputs.iter().map(|a| a.0.to_string()).collect();
                format!(
                    "{{\"id\": {i}, \"op\": \"{}\", \"desc\": \"{}\", \"inputs\": [{}], {}, \"span\": \"{}\"}}",
                    n.op.name(),
                    escape(&describe(&n.op)),
                    args.join(", "),
                    ty(&n.ty),
                    escape(&span_str(n))
                )
            })
            .collect();
        let outs: Vec<String> = self.outputs.iter().map(|o| o.0.to_string()).collect();
        let rng = match self.rng {
            Some(r) => format!("{{\"input\": {}, \"blocks\": {}}}", r.input, r.blocks),
            None => "null".into(),
        };
        format!(
            "{{\n  \"inputs\": [{}],\n  \"nodes\": [\n    {}\n  ],\n  \"outputs\": [{}],\n  \"rng\": {rng}\n}}\n",
            inputs.join(", "),
            nodes.join(",\n    "),
            outs.join(", ")
        )
    }
}
