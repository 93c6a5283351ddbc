#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out: Vec<String> = pipeline! { env.from_elements([1, 2]).map(|x: i32| x + 1).collect_vec() }.unwrap();
    let _ = out;
}
