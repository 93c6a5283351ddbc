// Keyed state needs a key: connected streams get state only through a keyed co-process
// function, after `key_by` with a key function per input.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let b = env.from_collection(vec![2u64]);
        env.from_collection(vec![1u32])
            .connect(b)
            .state(seen: ValueState<u64> = 0)
            .process(|x: u32, ctx, out| { out.collect(x); Ok(()) })
            .collect_vec()
    };
    let _ = out;
}
