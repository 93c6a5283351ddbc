#![allow(unused_imports)]
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! { env.clone().from_elements([1, 2]).collect_vec() };
    assert_eq!(out.unwrap(), [1, 2]);
}
