// Both inputs of a union carry event time, or neither does.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let untimed = env.from_collection(vec![2u32]);
        env.from_timestamped_collection(vec![(1u32, 10i64)]).union(untimed).collect_vec()
    };
    let _ = out;
}
