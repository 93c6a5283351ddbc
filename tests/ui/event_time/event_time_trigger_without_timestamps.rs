// Global windows need no event time, but an event-time trigger on them does.
use std::time::Duration;
use streaming::time::{ContinuousEventTimeTrigger, GlobalWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2, 3])
            .key_by(|_: &i32| ())
            .window(GlobalWindows::create())
            .trigger(ContinuousEventTimeTrigger::of(Duration::from_millis(2)))
            .sum()
            .collect_vec()
    };
    let _ = out;
}
