#![allow(unused_imports)]
use std::time::Duration;
use streaming::time::{CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    struct Numbers;
    impl streaming::api::Source<u32> for Numbers {
        fn run<C: streaming::api::SourceContext<u32>>(&mut self, ctx: &mut C) -> Result<(), streaming::Error> {
            ctx.collect(1)
        }
    }
    let out = pipeline! { env.add_source_with_id("", Numbers).collect_vec() };
    let _ = out;
}
