#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_timestamped_collection([("a", 0), ("b", 1)])
            .key_by(|s: &&str| s.len())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .sum()
            .collect_vec()
    };
    let _ = out;
}
