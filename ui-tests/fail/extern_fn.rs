use janus::prelude::*;

#[janus]
extern "C" fn exported(x: f32) -> f32 {
    x * 2.0
}

fn main() {}
