#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let mut v = Vec::new();
    let out = pipeline! { env.from_elements([1, 2]).collect_vec(&mut v) };
    let _ = (out, v);
}
