#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! { env.from_elements([1, 2]).frobnicate(|x: i32| x).collect_vec() };
    assert_eq!(out.unwrap(), [1, 2]);
}
