//! A collection replayed as N partitions on the memory engine: one chain, keyed state and
//! watermark per partition, partitioned like the Redis producer (`partition_for_key`).

use std::cell::Cell;
use std::time::Duration;
use streaming::mq::partition_for_key;
use streaming::time::{BoundedOutOfOrderness, TimeWindow, TumblingEventTimeWindows};
use streaming::{Error, MemoryEnv};

/// (key, event time ms) events; 1-second tumbling counts per key with watermark = highest
/// event time (no out-of-orderness), as (key, window start, count), and the late events.
fn counts(
    events: &[(&'static str, i64)],
    partitions: Option<u32>,
) -> (Vec<(&'static str, i64, u64)>, u64, u64) {
    let env = MemoryEnv::new();
    let late = Cell::new(0u64);
    let mut out = Vec::new();
    macro_rules! rest {
        ($source:expr) => {
            $source
                .assign_timestamps_and_watermarks_with(
                    |e: &(&str, i64), _| e.1,
                    BoundedOutOfOrderness::new(Duration::ZERO).unwrap(),
                )
                .key_by(|e: &(&str, i64)| e.0)
                .window(TumblingEventTimeWindows::of(Duration::from_secs(1)).unwrap())
                .side_output_late_data(|_e: (&str, i64)| late.set(late.get() + 1))
                .count()
                .for_each(|(k, w, n): (&'static str, TimeWindow, u64)| out.push((k, w.start(), n)))
                .unwrap()
        };
    }
    let summary = match partitions {
        None => rest!(env.from_collection(events.to_vec())),
        Some(n) => {
            rest!(env.from_collection_partitioned(events.to_vec(), n, |e: &(&str, i64)| Some(e.0)))
        }
    };
    (out, late.get(), summary.late_elements)
}

/// "slow" → partition 0 of 4, "fast" → partition 3 of 4.
const LATENESS: [(&str, i64); 4] = [
    ("fast", 10_000),
    ("slow", 1_000),
    ("slow", 1_500),
    ("fast", 10_500),
];

#[test]
fn the_partitions_of_the_test_keys() {
    assert_eq!(partition_for_key("slow", 4), 0);
    assert_eq!(partition_for_key("fast", 4), 3);
}

#[test]
fn a_fast_key_makes_a_slow_key_late_in_one_stream_only() {
    // One stream: "fast" at 10 000 ms moves the watermark to 10 000, so both "slow"
    // events (window [1000, 2000)) are late and dropped.
    let (out, late, counted) = counts(&LATENESS, None);
    assert_eq!(out, [("fast", 10_000, 2)]);
    assert_eq!((late, counted), (2, 2));
    // One partition = one stream.
    assert_eq!(
        counts(&LATENESS, Some(1)),
        (vec![("fast", 10_000, 2)], 2, 2)
    );
    // Four partitions: "slow" has its own watermark in partition 0, nothing is late; the
    // output is partition 0's ("slow") then partition 3's ("fast").
    let (out, late, counted) = counts(&LATENESS, Some(4));
    assert_eq!(out, [("slow", 1_000, 2), ("fast", 10_000, 2)]);
    assert_eq!((late, counted), (0, 0));
}

fn rolling_counts(words: &[&'static str], partitions: Option<u32>) -> Vec<(&'static str, u64)> {
    let env = MemoryEnv::new();
    match partitions {
        None => env
            .from_collection(words.to_vec())
            .map(|w| (w, 1u64))
            .key_by(|p: &(&str, u64)| p.0)
            .reduce(|a, b| (a.0, a.1 + b.1))
            .collect_vec(),
        Some(n) => env
            .from_collection_partitioned(words.to_vec(), n, |w: &&str| Some(*w))
            .map(|w| (w, 1u64))
            .key_by(|p: &(&str, u64)| p.0)
            .reduce(|a, b| (a.0, a.1 + b.1))
            .collect_vec(),
    }
    .unwrap()
}

#[test]
fn one_partition_equals_the_plain_collection() {
    let words = ["b", "a", "c", "a", "d", "b", "a", "e"];
    let plain = rolling_counts(&words, None);
    assert_eq!(
        plain,
        [
            ("b", 1),
            ("a", 1),
            ("c", 1),
            ("a", 2),
            ("d", 1),
            ("b", 2),
            ("a", 3),
            ("e", 1)
        ]
    );
    assert_eq!(rolling_counts(&words, Some(1)), plain);
}

#[test]
fn keyed_rolling_counts_do_not_depend_on_the_partitions_when_keyed_by_the_partition_key() {
    let words = ["b", "a", "c", "a", "d", "b", "a", "e"];
    let four = rolling_counts(&words, Some(4));
    // a, e → 0; b → 1; c → 2; d → 3: partition order, input order within a partition.
    assert_eq!(
        four,
        [
            ("a", 1),
            ("a", 2),
            ("a", 3),
            ("e", 1),
            ("b", 1),
            ("b", 2),
            ("c", 1),
            ("d", 1)
        ]
    );
    let mut plain = rolling_counts(&words, None);
    let mut sorted = four.clone();
    plain.sort();
    sorted.sort();
    assert_eq!(sorted, plain);
}

#[test]
fn partition_assignment_and_timestamps() {
    let env = MemoryEnv::new();
    let keys: Vec<String> = (0..40).map(|i| format!("key-{i}")).collect();
    let out = env
        .from_collection_partitioned(keys.clone(), 3, |k: &String| Some(k.clone()))
        .with_ingestion_time()
        .key_by(|k: &String| k.clone())
        .process(|k: String, ctx, out| {
            out.collect((k, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    // Stable sort of the input by partition, each key with its input index as timestamp
    // (ingestion time counts the whole input).
    let mut expected: Vec<(String, i64)> = keys.iter().cloned().zip(0i64..).collect();
    expected.sort_by_key(|(k, _)| partition_for_key(k, 3));
    assert_eq!(out, expected);
    // Given timestamps go with their elements into the partitions.
    let given = env
        .from_timestamped_collection_partitioned(
            keys.iter().cloned().zip((0i64..).map(|i| 7_000 - i * 100)),
            3,
            |k: &String| Some(k.clone()),
        )
        .key_by(|k: &String| k.clone())
        .process(|k: String, ctx, out| {
            out.collect((k, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    let expected: Vec<(String, i64)> = expected
        .into_iter()
        .map(|(k, i)| (k, 7_000 - i * 100))
        .collect();
    assert_eq!(given, expected);
    let sizes: Vec<usize> = (0..3)
        .map(|p| keys.iter().filter(|k| partition_for_key(k, 3) == p).count())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 40);
    assert!(sizes.iter().all(|&s| s > 0), "{sizes:?}");
}

#[test]
fn keyless_elements_go_round_robin_in_input_order() {
    let env = MemoryEnv::new();
    // Keyless: 10, 11, 12, 13, 14 → partitions 0, 1, 2, 0, 1; "b" (keyed) → partition 1.
    let items = [
        (None, 10),
        (Some("b"), 20),
        (None, 11),
        (None, 12),
        (None, 13),
        (None, 14),
    ];
    assert_eq!(partition_for_key("b", 3), 1);
    let out = env
        .from_collection_partitioned(items, 3, |e: &(Option<&str>, i32)| e.0)
        .map(|e| e.1)
        .collect_vec()
        .unwrap();
    assert_eq!(out, [10, 13, 20, 11, 14, 12]);
}

#[test]
fn checkpointing_with_several_partitions_is_rejected() {
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let err = env
        .from_collection_partitioned(["a", "b"], 2, |w: &&str| Some(*w))
        .map(|w| w.len())
        .collect_vec()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "partitions",
                ..
            }
        ),
        "{err}"
    );
    // One partition checkpoints as usual.
    let out = env
        .from_collection_partitioned(["a", "bb"], 1, |w: &&str| Some(*w))
        .map(|w| w.len())
        .collect_vec()
        .unwrap();
    assert_eq!(out, [1, 2]);
}

#[test]
fn the_sink_opens_and_closes_once_and_errors_name_the_operator() {
    use streaming::api::Sink;
    use streaming::BoxError;
    struct Counting<'a>(&'a Cell<(u32, u32, u32)>);
    impl Sink<u32> for Counting<'_> {
        fn open(&mut self) -> Result<(), BoxError> {
            let (o, i, c) = self.0.get();
            self.0.set((o + 1, i, c));
            Ok(())
        }
        fn invoke(&mut self, _v: u32) -> Result<(), BoxError> {
            let (o, i, c) = self.0.get();
            self.0.set((o, i + 1, c));
            Ok(())
        }
        fn close(&mut self) -> Result<(), BoxError> {
            let (o, i, c) = self.0.get();
            self.0.set((o, i, c + 1));
            Ok(())
        }
    }
    let calls = Cell::new((0, 0, 0));
    let env = MemoryEnv::new();
    env.from_collection_partitioned(0..10u32, 4, |_: &u32| None::<&str>)
        .sink(Counting(&calls))
        .unwrap();
    assert_eq!(calls.get(), (1, 10, 1));

    // Dead-lettered by default: partition 1's 0 fails, its 3 still runs.
    let calls = Cell::new((0, 0, 0));
    let summary = env
        .from_collection_partitioned_with_id("nums", [1u32, 0, 2, 3], 2, |_: &u32| None::<&str>)
        .map(|x| 6 / x)
        .sink(Counting(&calls))
        .unwrap();
    assert_eq!(summary.dead_letters, 1);
    assert_eq!(calls.get(), (1, 3, 1));

    env.on_record_error(streaming::memory::OnRecordError::StopRun);
    let calls = Cell::new((0, 0, 0));
    let err = env
        .from_collection_partitioned_with_id("nums", [1u32, 0, 2, 3], 2, |_: &u32| None::<&str>)
        .map(|x| 6 / x)
        .sink(Counting(&calls))
        .unwrap_err();
    assert!(err.to_string().contains("nums/1:map"), "{err}");
    // Partition 0 (1, 2) ran: 6, 3; partition 1 failed on 0; the sink closed.
    assert_eq!(calls.get(), (1, 2, 1));
}
