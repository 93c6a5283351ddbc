use streaming::api::CollectSink;
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let totals = CollectSink::<u64>::new();
    let _ = pipeline! {
        env.from_elements([1u32, 2]).map(|x: u32| x.to_string()).sink(totals.clone())
    };
}
