// Both inputs of a union must carry event time, or neither: the merged watermark would
// otherwise be invented for the input that has none.
use streaming::MemoryEnv;

fn main() {
    let env = MemoryEnv::new();
    let timed = env.from_timestamped_collection(vec![(1u32, 10i64)]);
    let untimed = env.from_collection(vec![2u32]);
    let _ = timed.union(untimed).collect_vec();
}
