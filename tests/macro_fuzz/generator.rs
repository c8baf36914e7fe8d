//! The generator of `generated.rs`: random `#[janus]` functions built from the statement forms
//! the macro has to analyse (new, assigned, shadowed and destructured locals, compound
//! assignment, `&mut` helpers, pushes into a vector, assigned fields of a `&mut` module,
//! closures, data-dependent and host branches, `match` with expression arms, `for` and `while`
//! loops, early returns, nested blocks, `dynamic` scalars and a variant limit of one), and the
//! shapes of issue 9: raw identifiers (keywords such as `r#type`, and `r#v3` for `v3`),
//! `&mut` borrows (of a vector's element, a local, a module's field) held across a host
//! statement, writes through `&mut` fields, and places in lazily evaluated positions (closure
//! bodies, `&&` operands, loops that may run no trip). Every tensor local is an `f64 [2, 4]`, so
//! any expression fits anywhere, and values stay bounded through `tanh`.

use std::fmt::Write;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, xs: &'a [String]) -> &'a str {
        &xs[self.below(xs.len())]
    }
}

/// One function being generated.
struct Func {
    rng: Rng,
    out: String,
    /// Tensor locals visible in each open scope.
    scopes: Vec<Vec<String>>,
    /// Closures `|t: &Tensor| -> Tensor` visible in each open scope.
    closures: Vec<Vec<String>>,
    next: usize,
    depth: usize,
    /// Open loops around the current statement (for `break` and `continue`).
    loops: usize,
    /// Whether this function calls the host helpers (`knob()`, `note(..)`, ...): half of the
    /// functions, so the other half can still speculate as a whole.
    helpers: bool,
}

impl Func {
    fn vars(&self) -> Vec<String> {
        let mut v: Vec<String> = self.scopes.iter().flatten().cloned().collect();
        v.sort();
        v.dedup();
        v
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn line(&mut self, s: &str) {
        let pad = "    ".repeat(self.depth + 1);
        writeln!(self.out, "{pad}{s}").unwrap();
    }

    /// `name`, sometimes written as a raw identifier (`r#v3` is `v3`).
    fn raw(&mut self, name: String) -> String {
        if !name.starts_with("r#") && self.rng.chance(10) { format!("r#{name}") } else { name }
    }

    /// A host statement: it runs on every call and ends the block before it.
    fn host(&mut self) {
        self.line("let _ = format!(\"{n}\");");
    }

    /// An owned `Tensor` expression of shape `[2, 4]`.
    fn expr(&mut self, d: usize) -> String {
        let vars = self.vars();
        if d == 0 || self.rng.chance(25) {
            let v = match self.rng.below(4) {
                0 => "x".to_string(),
                1 => "y".to_string(),
                _ => self.rng.pick(&vars).to_string(),
            };
            return format!("{}.clone()", self.raw(v));
        }
        let closures: Vec<String> = self.closures.iter().flatten().cloned().collect();
        match self.rng.below(13) {
            0 => format!("({}).tanh()", self.expr(d - 1)),
            1 => format!("({}).sigmoid()", self.expr(d - 1)),
            2 => format!("({}).relu()", self.expr(d - 1)),
            3 => format!("-({})", self.expr(d - 1)),
            4 => {
                let op = ["+", "-", "*"][self.rng.below(3)];
                format!("({} {op} {})", self.expr(d - 1), self.expr(d - 1))
            }
            5 => format!("({} * {:.2})", self.expr(d - 1), 0.25 + self.rng.below(8) as f64 * 0.25),
            6 => format!("(0.5 - {})", self.expr(d - 1)),
            7 => format!("(({}).matmul(&m.w) + &m.b)", self.expr(d - 1)),
            8 => format!("(({}).sum(1).unsqueeze(1) * {})", self.expr(d - 1), self.expr(d - 1)),
            9 => format!("({}).softmax(1)", self.expr(d - 1)),
            10 => format!("Tensor::cat(&[&{}, &{}], 0).narrow(0, 1, 2)", self.expr(d - 1), self.expr(d - 1)),
            11 => format!("mix(&{}, &{})", self.expr(d - 1), self.expr(d - 1)),
            _ if !closures.is_empty() => format!("{}(&{})", self.rng.pick(&closures), self.expr(d - 1)),
            _ => format!("(({}).mean_all() * {})", self.expr(d - 1), self.expr(d - 1)),
        }
    }

    /// A block of 1 to `most` statements.
    fn block_of(&mut self, most: usize) {
        let n = 1 + self.rng.below(most);
        self.block(n);
    }

    fn block(&mut self, stmts: usize) {
        self.scopes.push(Vec::new());
        self.closures.push(Vec::new());
        self.depth += 1;
        for _ in 0..stmts {
            self.stmt();
        }
        self.depth -= 1;
        self.scopes.pop();
        self.closures.pop();
    }

    /// A statement calling the host helpers of `main.rs`: values read from globals the test
    /// changes between calls, effects on the log, in the positions the macro treats apart.
    fn helper_stmt(&mut self) {
        let vars = self.vars();
        let e = self.expr(2);
        let v = self.rng.pick(&vars).to_string();
        let tag = self.rng.below(9);
        match self.rng.below(8) {
            0 => {
                // A hoisted helper in a `let`, its value used later in the block.
                let k = self.fresh("k");
                self.line(&format!("let {k} = knob();"));
                self.line(&format!("{v} = ({e} * {k}).tanh();"));
            }
            1 => {
                // A helper first in its statement (hoisted), then one after another call (not).
                self.line(&format!("{v} = ({e} * knob()).tanh();"));
                self.line(&format!("{v} = ({v}.tanh() * knob() + {e}).sigmoid();"));
            }
            2 => {
                // A staged loop whose trip count a helper reads.
                self.line("for _ in 0..depth() {");
                self.line(&format!("    {v} = (&{v} * 0.9 + {e} * 0.1).tanh();"));
                self.line("}");
            }
            3 => {
                // A helper with an effect whose value the block uses.
                let t = self.fresh("t");
                self.line(&format!("let {t} = note({tag});"));
                self.line(&format!("{v} = &{v} * {t};"));
            }
            4 => {
                // A host comparison whose operands both have effects, in source order.
                self.line(&format!("if thr({tag}) < (({e}) * note({})).sum_all().item() {{", tag + 1));
                self.line(&format!("    say({tag});"));
                self.line(&format!("    {v} = ({v}).tanh();"));
                self.line("}");
            }
            5 => {
                // An effect with plain arguments and no value, between tensor statements.
                self.line(&format!("{v} = ({e}).sigmoid();"));
                self.line(&format!("say({tag});"));
                self.line(&format!("{v} = ({v} * 0.5).tanh();"));
            }
            6 => {
                // A closure that counts its calls, read after them.
                let (c, f) = (self.fresh("c"), self.fresh("inc"));
                self.line(&format!("let mut {c} = 0usize;"));
                self.line(&format!("let mut {f} = |t: &Tensor| {{"));
                self.line(&format!("    {c} += 1;"));
                self.line("    t.tanh()");
                self.line("};");
                self.line(&format!("{v} = {f}(&{e});"));
                self.line(&format!("{v} = {f}(&{v});"));
                self.line(&format!("{v} = &{v} * ({c} as f64 * 0.25);"));
            }
            _ => {
                // A helper read inside a closure (not hoisted: the block stays eager).
                let f = self.fresh("f");
                self.line(&format!("let {f} = |t: &Tensor| (t * knob()).tanh();"));
                self.line(&format!("{v} = {f}(&{e});"));
            }
        }
    }

    fn stmt(&mut self) {
        if self.helpers && self.rng.chance(20) {
            return self.helper_stmt();
        }
        let vars = self.vars();
        let nested = self.depth < 2;
        let e = self.expr(3);
        match self.rng.below(if nested { 38 } else { 12 }) {
            33 => {
                // A keyword as a local's name.
                let kw = ["type", "match", "loop", "fn", "in", "ref", "struct", "impl", "move", "gen"];
                let v = format!("r#{}", kw[self.rng.below(kw.len())]);
                self.line(&format!("let mut {v} = ({e}).tanh();"));
                self.scopes.last_mut().unwrap().push(v);
            }
            34 => {
                // A `&mut` into the vector, held across a host statement.
                let (s, t) = (self.fresh("s"), self.fresh("t"));
                let e2 = self.expr(2);
                self.line(&format!("hs.push(({e}).tanh());"));
                match self.rng.below(3) {
                    0 => self.line(&format!("let {s} = hs.last_mut().unwrap();")),
                    1 => self.line(&format!("let {s} = &mut hs[0];")),
                    _ => {
                        let rest = self.fresh("r");
                        self.line(&format!("let ({s}, {rest}) = hs.split_at_mut(1);"));
                        self.line(&format!("let {s} = &mut {s}[0];"));
                    }
                }
                self.line(&format!("let mut {t} = ({e2}).tanh();"));
                self.host();
                self.line(&format!("*{s} = (&*{s} + &{t}).sigmoid();"));
                self.scopes.last_mut().unwrap().push(t);
            }
            35 => {
                // A `&mut` to a local or to a module's field, held across a host statement; the
                // operand is computed first, since the borrow excludes other uses.
                let (s, t) = (self.fresh("s"), self.fresh("t"));
                if self.rng.chance(50) {
                    let v = self.rng.pick(&vars).to_string();
                    let v = self.raw(v);
                    self.line(&format!("let mut {t} = ({e}).tanh();"));
                    self.line(&format!("let {s} = &mut {v};"));
                    self.host();
                    self.line(&format!("*{s} = (&*{s} * 0.5 + &{t}).tanh();"));
                    self.scopes.last_mut().unwrap().push(t);
                } else {
                    self.line(&format!("let {t} = ({e}).mean(0);"));
                    self.line(&format!("let {s} = &mut m.b;"));
                    self.host();
                    self.line(&format!("*{s} = (&*{s} + &{t}).tanh() * 0.5;"));
                }
            }
            36 => {
                // A write through `&mut` to a module's field (a place, not a whole local).
                let u = self.fresh("u");
                self.line(&format!("let {u} = ({e}).mean(0);"));
                self.line(&format!("bump(&mut m.b, &{u});"));
            }
            37 => {
                // Places in lazily evaluated positions: eager mode never evaluates `hs[0]`
                // when `hs` is empty, so neither may the block's inputs. Whether it is empty is
                // decided before a host statement, so the block mentions `hs` only there.
                let (v, b) = (self.fresh("v"), self.fresh("b"));
                self.line(&format!("let {b} = hs.is_empty();"));
                self.host();
                match self.rng.below(4) {
                    0 => {
                        let o = self.fresh("o");
                        self.line(&format!("let {o} = {b}.then(|| ({e}).tanh());"));
                        self.line(&format!("let mut {v} = {o}.unwrap_or_else(|| hs[0].clone() * 0.5);"));
                    }
                    1 => {
                        let c = self.fresh("c");
                        self.line(&format!("let {c} = !{b} && hs[0].dims()[0] == 2;"));
                        self.line(&format!(
                            "let mut {v} = if {c} {{ ({e}).tanh() }} else {{ x.sigmoid() }};"
                        ));
                    }
                    2 => {
                        let k = self.fresh("k");
                        self.line(&format!("let {k} = if {b} {{ 0 }} else {{ n }};"));
                        self.line(&format!("let mut {v} = ({e}).tanh();"));
                        self.line(&format!("for _ in 0..{k} {{"));
                        self.line(&format!("    {v} = (&{v} + &hs[0]).tanh();"));
                        self.line("}");
                    }
                    _ => {
                        let f = self.fresh("f");
                        self.line(&format!(
                            "let {f} = |t: &Tensor| if {b} {{ t.tanh() }} else {{ (t * &hs[0]).tanh() }};"
                        ));
                        self.line(&format!("let mut {v} = {f}(&{e});"));
                    }
                }
                self.scopes.last_mut().unwrap().push(v);
            }
            19 if self.loops > 0 => {
                let jump = ["break", "continue"][self.rng.below(2)];
                self.line(&format!("if ({e}).sum_all().item() > 0.4 {{"));
                self.line(&format!("    {jump};"));
                self.line("}");
            }
            20 => {
                let v = self.rng.pick(&vars).to_string();
                self.line("if !hs.is_empty() {");
                self.line(&format!("    {v} = (&hs[0] + {e}).tanh();"));
                self.line("    let k = hs.len() - 1;");
                self.line("    hs[k] = (&hs[k] * 0.5).sigmoid();");
                self.line("}");
            }
            21 => {
                let v = self.fresh("v");
                self.line(&format!("let mut {v} = hs.iter().fold({e}, |acc, h| (acc + h).tanh());"));
                self.scopes.last_mut().unwrap().push(v);
            }
            22 => {
                let f = self.fresh("f");
                let p = ["x", "y"][self.rng.below(2)];
                self.line(&format!("let {f} = |t: &Tensor| (t * {p}).tanh();"));
                self.closures.last_mut().unwrap().push(f);
            }
            23 => {
                let (v, c) = (self.rng.pick(&vars).to_string(), self.fresh("c"));
                self.line(&format!("let mut {c} = 0;"));
                self.line(&format!("while {v}.abs().max_all().item() > 0.3 && {c} < 3 {{"));
                self.line(&format!("    {v} = &{v} * 0.5 + {e} * 0.01;"));
                self.line(&format!("    {c} += 1;"));
                self.line("}");
            }
            24 => {
                let (v, q) = (self.rng.pick(&vars).to_string(), self.fresh("q"));
                self.line(&format!("let mut {q} = P {{ w: m.w.clone(), b: ({e}).mean(0) }};"));
                self.line(&format!("{q}.b = &{q}.b * 0.5;"));
                self.line(&format!("{v} = ({v}.matmul(&{q}.w) + &{q}.b).tanh();"));
            }
            0 | 1 => {
                let v = self.fresh("v");
                self.line(&format!("let mut {v} = ({e}).tanh();"));
                self.scopes.last_mut().unwrap().push(v);
            }
            2 | 3 => {
                let v = self.rng.pick(&vars).to_string();
                self.line(&format!("{v} = ({e}).tanh();"));
            }
            4 => {
                // Shadowing: a new binding under an existing name.
                let v = self.rng.pick(&vars).to_string();
                self.line(&format!("let mut {v} = ({e}).tanh();"));
                self.scopes.last_mut().unwrap().push(v);
            }
            5 => {
                let v = self.rng.pick(&vars).to_string();
                self.line(&format!("{v} += ({e}) * 0.1;"));
            }
            6 if vars.len() >= 2 => {
                let (a, b) = (self.rng.pick(&vars).to_string(), self.rng.pick(&vars).to_string());
                if a != b {
                    let e2 = self.expr(2);
                    self.line(&format!("({a}, {b}) = (({e}).tanh(), ({e2}).sigmoid());"));
                } else {
                    self.line(&format!("({a}, _) = pair(&{e}, &{b});"));
                }
            }
            7 => {
                let (a, b) = (self.fresh("v"), self.fresh("v"));
                let c = self.rng.pick(&vars).to_string();
                self.line(&format!("let (mut {a}, mut {b}) = pair(&{e}, &{c});"));
                self.scopes.last_mut().unwrap().extend([a, b]);
            }
            8 => self.line(&format!("hs.push(({e}).tanh());")),
            9 => {
                let e2 = self.expr(2);
                self.line(&format!("m.w = &m.w * 0.9 + ({e}).t().matmul(&{e2}) * 0.01;"));
            }
            10 => self.line(&format!("m.b = &m.b * 0.9 + ({e}).mean(0) * 0.1;")),
            11 => {
                // The operand goes through a local: `&mut v` and a read of `v` cannot overlap.
                let (v, t) = (self.rng.pick(&vars).to_string(), self.fresh("t"));
                self.line(&format!("let mut {t} = {e};"));
                self.line(&format!("bump(&mut {v}, &{t});"));
                self.scopes.last_mut().unwrap().push(t);
            }
            12 => {
                let t = ["0.0", "0.3", "-0.2"][self.rng.below(3)];
                self.line(&format!("if ({e}).sum_all().item() > {t} {{"));
                self.block_of(3);
                self.line("} else {");
                self.block_of(2);
                self.line("}");
            }
            13 => {
                self.line("if n % 2 == 0 {");
                self.block_of(3);
                self.line("}");
            }
            14 => {
                let i = self.fresh("i");
                self.line(&format!("for {i} in 0..n {{"));
                if self.rng.chance(30) {
                    let v = self.rng.pick(&vars).to_string();
                    self.line(&format!("    {v} = &{v} * (1.0 / ({i} as f64 + 1.0));"));
                }
                self.loops += 1;
                self.block_of(3);
                self.loops -= 1;
                self.line("}");
            }
            15 => {
                let c = self.fresh("c");
                self.line(&format!("let mut {c} = 0;"));
                self.line(&format!("while {c} < n {{"));
                self.line(&format!("    {c} += 1;"));
                self.loops += 1;
                self.block_of(2);
                self.loops -= 1;
                self.line("}");
            }
            16 => {
                let v = self.rng.pick(&vars).to_string();
                self.line("match n % 3 {");
                self.line(&format!("    0 => {v} = ({e}).tanh(),"));
                self.line("    1 => {");
                self.depth += 1;
                self.block_of(2);
                self.depth -= 1;
                self.line("    }");
                self.line("    _ => {}");
                self.line("}");
            }
            17 => {
                let f = self.fresh("f");
                let k = 0.25 + self.rng.below(4) as f64 * 0.25;
                self.line(&format!("let {f} = |t: &Tensor| (t * {k:.2}).tanh() + s * 0.1;"));
                self.closures.last_mut().unwrap().push(f);
            }
            _ => {
                let (a, b) = (self.rng.pick(&vars).to_string(), self.rng.pick(&vars).to_string());
                let t = ["0.5", "0.9", "1.5"][self.rng.below(3)];
                self.line(&format!("if ({e}).max_all().item() > {t} {{"));
                self.line(&format!("    return ({a}.clone(), {b}.clone() * s, hs);"));
                self.line("}");
            }
        }
    }
}

fn function(k: usize, rng: Rng) -> String {
    let mut f = Func {
        rng,
        out: String::new(),
        scopes: vec![vec!["v0".into(), "v1".into()]],
        closures: vec![Vec::new()],
        next: 1,
        depth: 0,
        loops: 0,
        helpers: k % 2 == 1,
    };
    // Every third function compiles a single variant, so the calls with other keys run the
    // statements (and a staged loop's body dispatches to its own graph); decided by `k`, not
    // the stream, so the functions' bodies do not depend on it.
    let limit = if k % 3 == 2 { ", max_variants = 1" } else { "" };
    let attr = if f.rng.chance(30) {
        format!("#[janus(min_ops = 1{limit}, dynamic(s))]")
    } else {
        format!("#[janus(min_ops = 1{limit})]")
    };
    // Parameters are sometimes raw identifiers, used by their plain names in the body.
    let [x, y, m, n, s] =
        ["x", "y", "m", "n", "s"].map(|p| if f.rng.chance(10) { format!("r#{p}") } else { p.into() });
    let signature = format!(
        "({x}: &Tensor, {y}: &Tensor, {m}: &mut P, {n}: usize, {s}: f64) -> (Tensor, Tensor, Vec<Tensor>) {{"
    );
    f.out.clear();
    f.line("let mut hs: Vec<Tensor> = Vec::new();");
    f.line("let mut v0 = (x * s).tanh();");
    f.line("let mut v1 = (y + &v0).sigmoid();");
    for _ in 0..3 + f.rng.below(5) {
        f.stmt();
    }
    let top = f.scopes[0].clone();
    let (a, b) = (f.rng.pick(&top).to_string(), f.rng.pick(&top).to_string());
    f.line(&format!("({a}.clone(), {b}.clone(), hs)"));
    f.out.push_str("}\n");
    // The same source twice: with the attribute, and without (the reference for evaluation
    // order and host effects, which eager mode of the expansion cannot be).
    format!(
        "{attr}\npub fn f{k}{signature}\n{body}\n/// `f{k}` without the attribute.\npub fn f{k}_plain{signature}\n{body}",
        body = f.out
    )
}

/// Functions per generated file (each file stays readable in one sitting).
const PER_FILE: usize = 16;

/// The files of `generated/`, as `(name, source)`: `mod.rs` with the table of all functions,
/// and `part{i}.rs` with `PER_FILE` functions each, `count` in all from `seed`.
pub fn generate(seed: u64, count: usize) -> Vec<(String, String)> {
    let header = |what: &str| {
        format!(
            "//! {what} Generated by `generator.rs` (seed {seed}, {count} functions); \
             `JANUS_BLESS=1 cargo test --release --test macro_fuzz` rewrites it.\n"
        )
    };
    let parts = count.div_ceil(PER_FILE);
    let mut files = Vec::new();
    let mut table = header("Random `#[janus]` functions.");
    for p in 0..parts {
        writeln!(table, "mod part{p};").unwrap();
    }
    table += "\n/// Every generated function, by name, with its twin without the attribute.\npub const FUNCTIONS: &[(&str, super::Generated, super::Generated)] = &[\n";
    for p in 0..parts {
        let mut s = header("Part of the random functions.");
        s += "#![allow(unused, clippy::all)]\n\nuse super::super::{P, bump, decay, depth, knob, mix, note, pair, say, thr};\nuse janus::prelude::*;\n";
        for k in p * PER_FILE..((p + 1) * PER_FILE).min(count) {
            s += "\n";
            s += &function(k, Rng(seed.wrapping_mul(1_000_003).wrapping_add(k as u64)));
            writeln!(table, "    (\"f{k}\", part{p}::f{k}, part{p}::f{k}_plain),").unwrap();
        }
        files.push((format!("part{p}.rs"), s));
    }
    table += "];\n";
    files.insert(0, ("mod.rs".to_string(), table));
    files
}

/// All of [`generate`]'s files as one, its parts as inline modules (for `include!`; used by
/// `build.rs`, which includes this file).
#[allow(dead_code)]
pub fn generate_inline(seed: u64, count: usize) -> String {
    let files = generate(seed, count);
    let mut table = files[0].1.clone();
    for (name, text) in &files[1..] {
        let module = name.trim_end_matches(".rs");
        table = table.replace(&format!("mod {module};\n"), &format!("mod {module} {{\n{text}}}\n"));
    }
    table.lines().filter(|l| !l.starts_with("//! Random")).collect::<Vec<_>>().join("\n")
}
