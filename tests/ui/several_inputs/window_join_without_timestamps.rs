// A window join over event-time windows needs event time on its inputs (rustc's error, at
// the assigner, as for any window).
use std::time::Duration;
use streaming::time::TumblingEventTimeWindows;
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let pairs = pipeline! {
        let views = env.from_collection(vec!["ad1"]);
        env.from_collection(vec!["ad1"])
            .connect(views)
            .key_by(|c: &&str| *c, |v: &&str| *v)
            .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
            .join(|c: &&str, v: &&str| (*c, *v))
            .collect_vec()
    };
    let _ = pairs;
}
