use janus::prelude::*;

#[derive(Module)]
union Bits {
    f: f32,
    u: u32,
}

fn main() {}
