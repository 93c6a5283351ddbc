use std::time::Duration;
use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let lines = [("a b a", 0i64), ("b", 1500)];
    let mut counts = pipeline! {
        env.from_collection(lines)
            .assign_timestamps_and_watermarks_with(|l: &(&str, i64), _| l.1, AscendingTimestamps)
            .flat_map(|l: (&str, i64)| l.0.split(' ').map(|w| (w.to_string(), 1u64)).collect::<Vec<_>>())
            .key_by(|p: &(String, u64)| p.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .allowed_lateness(Duration::from_secs(5))
            .reduce(|a, b| (a.0, a.1 + b.1))
            .collect_vec()
    }
    .unwrap();
    counts.sort();
    assert_eq!(counts, [("a".to_string(), 2), ("b".to_string(), 1), ("b".to_string(), 1)]);
}
