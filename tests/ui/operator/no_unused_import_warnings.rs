// A pipeline that fails to compile gives its one error and no "unused import" warning for
// the imports only its text uses.
#![deny(unused_imports)]
use std::time::Duration;
use streaming::api::CollectSink;
use streaming::time::TumblingEventTimeWindows;
use streaming::{pipeline, MemoryEnv};

#[derive(Clone)]
struct Order {
    customer: String,
}

fn main() {
    let env = MemoryEnv::new();
    let out = CollectSink::<u64>::new();
    let _ = pipeline! {
        env.from_elements([Order { customer: "ann".into() }])
            .key_by(|o: &Order| o.customer.clone())
            .windoww(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .count()
            .map(|(_, _, n): (String, _, u64)| n)
            .sink(out.clone())
    };
}
