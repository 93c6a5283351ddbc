use std::cell::Cell;
use std::time::Duration;
use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    // "a" → partition 0, "b" → partition 1 (of 2): each keeps its own watermark, so the
    // "a" at 500 ms is not late after the "b" at 1500 ms.
    let words = [("b", 1500i64), ("a", 500), ("a", 700)];
    let late = Cell::new(0u32);
    let counts = pipeline! {
        env.from_collection_partitioned(words, 2, |w: &(&str, i64)| Some(w.0))
            .assign_timestamps_and_watermarks_with(|w: &(&str, i64), _| w.1, AscendingTimestamps)
            .map(|w: (&str, i64)| (w.0, 1u64))
            .key_by(|p: &(&str, u64)| p.0)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .side_output_late_data(|_p: (&str, u64)| late.set(late.get() + 1))
            .reduce(|a, b| (a.0, a.1 + b.1))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(counts, [("a", 2), ("b", 1)]);
    assert_eq!(late.get(), 0);
}
