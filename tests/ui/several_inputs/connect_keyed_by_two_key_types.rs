// Connected streams are keyed by one key type: the second key function returns another.
// One error, at that key.
use std::time::Duration;
use streaming::time::TumblingEventTimeWindows;
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let names = env.from_timestamped_collection(vec![((1u32, "ada".to_string()), 0)]);
        env.from_timestamped_collection(vec![(1u32, 0)])
            .connect(names)
            .key_by(|id: &u32| *id, |n: &(u32, String)| n.1.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .join(|id: &u32, n: &(u32, String)| (*id, n.1.clone()))
            .collect_vec()
    };
    let _ = out;
}
