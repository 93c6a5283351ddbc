// A keyed co-process function needs keyed connected streams: `key_by` first.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let b = env.from_collection(vec![2u64]);
        env.from_collection(vec![1u32])
            .connect(b)
            .process(function)
            .collect_vec()
    };
    let _ = out;
}
