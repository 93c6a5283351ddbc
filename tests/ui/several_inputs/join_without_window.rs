// A window join needs its windows: `window(assigner)` between `key_by` and `join`.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let views = env.from_timestamped_collection(vec![("ad1", 1)]);
        env.from_timestamped_collection(vec![("ad1", 5)])
            .connect(views)
            .key_by(|c: &&str| *c, |v: &&str| *v)
            .join(|c: &&str, v: &&str| (*c, *v))
            .collect_vec()
    };
    let _ = out;
}
