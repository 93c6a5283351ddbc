#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::GlobalWindows;
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2])
            .key_by(|x: &i32| *x)
            .window(GlobalWindows::create())
            .allowed_lateness(Duration::from_secs(1))
            .sum()
            .collect_vec()
    };
    let _ = out;
}
