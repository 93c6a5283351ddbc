// The three orders three minutes apart, with their event time chosen: given with each
// element, by a timestamp assigner, or (for ordering tests) the ingestion clock.
use std::time::Duration;
use streaming::time::{NoWatermarks, TimeWindow, TumblingEventTimeWindows};
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let orders = [("ann", 10u64, 0i64), ("ann", 20, 180_000), ("ann", 30, 360_000)];
    let given = pipeline! {
        env.from_timestamped_collection(orders.map(|o| (o, o.2)))
            .key_by(|o: &(&str, u64, i64)| o.0)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .sum_by(|o: &(&str, u64, i64)| o.1)
            .map(|(_, w, sum): (&str, TimeWindow, u64)| (w.start(), sum))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(given, [(0, 10), (180_000, 20), (360_000, 30)]);
    let assigned = pipeline! {
        env.from_collection(orders)
            .assign_timestamps_and_watermarks_with(|o: &(&str, u64, i64), _| o.2, NoWatermarks)
            .key_by(|o: &(&str, u64, i64)| o.0)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .sum_by(|o: &(&str, u64, i64)| o.1)
            .map(|(_, w, sum): (&str, TimeWindow, u64)| (w.start(), sum))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(assigned, given);
    // Ingestion time: the orders arrive at 0, 1 and 2 ms, all in the first minute.
    let ingested = pipeline! {
        env.from_collection(orders)
            .with_ingestion_time()
            .key_by(|o: &(&str, u64, i64)| o.0)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .sum_by(|o: &(&str, u64, i64)| o.1)
            .map(|(_, w, sum): (&str, TimeWindow, u64)| (w.start(), sum))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(ingested, [(0, 60)]);
}
