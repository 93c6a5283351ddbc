#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{ContinuousEventTimeTrigger, PurgingTrigger, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2])
            .key_by(|x: &i32| *x)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .trigger(PurgingTrigger::of(ContinuousEventTimeTrigger::of(Duration::ZERO)))
            .sum()
            .collect_vec()
    };
    let _ = out;
}
