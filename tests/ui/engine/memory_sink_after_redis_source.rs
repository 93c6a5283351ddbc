#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! { env.from_mq_topic("orders", "billing").map(|m: String| m.len()).collect_vec() };
    let _ = out;
}
