// `assign_timestamps_and_watermarks(generator)` keeps the records' timestamps, and these
// have none: the assigner form is needed.
use std::time::Duration;
use streaming::time::BoundedOutOfOrderness;
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([(1, 0i64), (2, 500)])
            .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(Duration::from_secs(1)))
            .collect_vec()
    };
    let _ = out;
}
