use janus::prelude::*;

#[janus]
const fn three() -> usize {
    3
}

fn main() {}
