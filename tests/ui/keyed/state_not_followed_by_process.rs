#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2])
            .key_by(|x: &i32| *x)
            .state(count: ValueState<u32> = 0)
            .reduce(|a, b| a + b)
            .collect_vec()
    };
    let _ = out;
}
