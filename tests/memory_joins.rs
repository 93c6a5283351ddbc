//! Joins on the memory engine: the keyed interval join and the window join against
//! brute-force nested loops over random inputs (out of order; the interval join with and
//! without late elements, which go to its side outputs), bounds, and co-groups with an
//! empty side.

use proptest::prelude::*;
use std::time::Duration;
use streaming::api::CollectSink;
use streaming::time::{BoundedOutOfOrderness, TimeWindow, TumblingEventTimeWindows};
use streaming::{Error, MemoryEnv};

/// An element: (key, id), with its event time beside it.
type Element = ((u8, u32), i64);
/// A joined pair: (key, first id, second id).
type Pair = (u8, u32, u32);
/// What a join gives: its pairs and the ids of the second input's late elements, sorted.
type Joined = (Vec<Pair>, Vec<u32>);

/// Runs the join of `first` and `second` within `[lower, upper]`; with `ooo = Some(ms)`
/// the second input's watermark trails its elements by `ms` (so some of its elements can
/// be late); with `None` by so much that no element is.
fn join(first: &[Element], second: &[Element], lower: i64, upper: i64, ooo: Option<u64>) -> Joined {
    let env = MemoryEnv::new();
    let trail = Duration::from_millis(ooo.unwrap_or(1 << 40));
    let a = env
        .from_timestamped_collection(first.to_vec())
        .key_by(|e: &(u8, u32)| e.0);
    let b = env
        .from_timestamped_collection(second.to_vec())
        .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(trail).unwrap())
        .key_by(|e: &(u8, u32)| e.0);
    let (late_firsts, late_seconds) = (CollectSink::new(), CollectSink::new());
    let mut out = a
        .interval_join(b)
        .between(lower, upper)
        .unwrap()
        .side_output_late_firsts(late_firsts.clone())
        .side_output_late_seconds(late_seconds.clone())
        .process(|x: &(u8, u32), y: &(u8, u32)| (x.0, x.1, y.1))
        .collect_vec()
        .unwrap();
    out.sort_unstable();
    assert_eq!(
        late_firsts.len(),
        0,
        "the first input runs before any watermark"
    );
    let mut late: Vec<u32> = late_seconds.snapshot().iter().map(|e| e.1).collect();
    late.sort_unstable();
    (out, late)
}

/// The reference: every pair of the same key with `ta + lower <= tb <= ta + upper`, the
/// second input's late elements (behind the watermark `max(t - ooo)` of the elements
/// before them; one at the watermark is on time) left out and listed. The first input runs first, before any watermark:
/// never late.
fn nested_loop(
    first: &[Element],
    second: &[Element],
    lower: i64,
    upper: i64,
    ooo: Option<u64>,
) -> Joined {
    let mut watermark = i64::MIN;
    let (mut out, mut late_ids) = (Vec::new(), Vec::new());
    for &((kb, idb), tb) in second {
        let late = ooo.is_some() && tb < watermark;
        if let Some(ms) = ooo {
            watermark = watermark.max(tb - ms as i64);
        }
        if late {
            late_ids.push(idb);
            continue;
        }
        for &((ka, ida), ta) in first {
            if ka == kb && ta + lower <= tb && tb <= ta + upper {
                out.push((ka, ida, idb));
            }
        }
    }
    out.sort_unstable();
    late_ids.sort_unstable();
    (out, late_ids)
}

fn elements(max: usize) -> impl Strategy<Value = Vec<Element>> {
    prop::collection::vec((0u8..3, 0i64..200), 0..max).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (k, t))| ((k, i as u32), t))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_join_is_the_nested_loop(
        first in elements(25),
        second in elements(25),
        lower in -30i64..30,
        width in 0i64..40,
        ooo in prop::option::of(0u64..40),
    ) {
        let upper = lower + width;
        prop_assert_eq!(
            join(&first, &second, lower, upper, ooo),
            nested_loop(&first, &second, lower, upper, ooo)
        );
    }

    #[test]
    fn the_window_join_is_the_nested_loop(
        first in elements(25),
        second in elements(25),
        size in 1i64..80,
    ) {
        let expected = {
            let mut out = Vec::new();
            for &((ka, ida), ta) in &first {
                for &((kb, idb), tb) in &second {
                    if ka == kb && ta.div_euclid(size) == tb.div_euclid(size) {
                        out.push((ka, ida, idb));
                    }
                }
            }
            out.sort_unstable();
            out
        };
        prop_assert_eq!(window_join(&first, &second, size), expected);
    }
}

/// Pairs of the same key in the same tumbling window of `size` ms.
fn window_join(first: &[Element], second: &[Element], size: i64) -> Vec<Pair> {
    let env = MemoryEnv::new();
    let a = env.from_timestamped_collection(first.to_vec());
    let b = env.from_timestamped_collection(second.to_vec());
    let mut out = a
        .connect(b)
        .key_by(|x: &(u8, u32)| x.0, |y: &(u8, u32)| y.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(size as u64)).unwrap())
        .join(|x, y| (x.0, x.1, y.1))
        .collect_vec()
        .unwrap();
    out.sort_unstable();
    out
}

#[test]
fn a_co_group_sees_windows_with_one_side_empty() {
    let env = MemoryEnv::new();
    let clicks = env.from_timestamped_collection(vec![("ad1", 5i64), ("ad1", 15), ("ad2", 7)]);
    let views = env.from_timestamped_collection(vec![(("ad1", 1u32), 3i64), (("ad1", 2), 8)]);
    let mut out = clicks
        .connect(views)
        .key_by(|c: &&str| *c, |v: &(&str, u32)| v.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)).unwrap())
        .co_group(|key, window: &TimeWindow, clicks, views, out| {
            out.collect((*key, window.start(), clicks.len(), views.len()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    out.sort_unstable();
    assert_eq!(out, [("ad1", 0, 1, 2), ("ad1", 10, 1, 0), ("ad2", 0, 1, 0)]);
}

#[test]
fn both_bounds_are_inclusive() {
    let first = [((0, 0), 100)];
    let second = [
        ((0, 1), 98),
        ((0, 2), 97),
        ((0, 3), 103),
        ((0, 4), 104),
        ((1, 5), 100),
    ];
    assert_eq!(join(&first, &second, -2, 3, None).0, [(0, 0, 1), (0, 0, 3)]);
}

#[test]
fn a_lower_bound_above_the_upper_is_refused_naming_it() {
    let env = MemoryEnv::new();
    let a = env
        .from_timestamped_collection(vec![(1u8, 0i64)])
        .key_by(|x: &u8| *x);
    let b = env
        .from_timestamped_collection(vec![(1u8, 0i64)])
        .key_by(|x: &u8| *x);
    let err = a.interval_join(b).between(5, 4).err().expect("refused");
    assert!(
        matches!(err, Error::InvalidConfig { field: "lower", .. }),
        "{err}"
    );
}

/// An element at the watermark is on time (Flink's `timestamp < watermark` is late): with
/// an out-of-orderness of 0 the watermark reaches the latest element's own time, and a
/// second element of the same millisecond still joins, as does one meeting a first-input
/// element exactly `upper` before it.
#[test]
fn elements_at_the_watermark_are_on_time() {
    let env = MemoryEnv::new();
    let a = env
        .from_timestamped_collection(vec![((0u8, 9u32), 100i64), ((0, 8), 95)])
        .key_by(|e: &(u8, u32)| e.0);
    let b = env
        .from_timestamped_collection(vec![((0u8, 0u32), 100i64), ((0, 1), 100), ((0, 2), 100)])
        .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(Duration::ZERO).unwrap())
        .key_by(|e: &(u8, u32)| e.0);
    let late_seconds = CollectSink::new();
    let pairs = CollectSink::new();
    let summary = a
        .interval_join(b)
        .between(0, 5)
        .unwrap()
        .side_output_late_seconds(late_seconds.clone())
        .process(|x: &(u8, u32), y: &(u8, u32)| (x.1, y.1))
        .sink(pairs.clone())
        .unwrap();
    let mut pairs = pairs.snapshot();
    pairs.sort_unstable();
    assert_eq!(pairs, [(8, 0), (8, 1), (8, 2), (9, 0), (9, 1), (9, 2)]);
    assert_eq!(late_seconds.len(), 0);
    assert_eq!(summary.late_elements, 0);
}

/// A second-input element behind the watermark joins nothing, goes to the second input's
/// late output (not the first's) and counts as a late element of the run. (On the memory
/// engine the first input runs first, while the second's watermark is still at its start,
/// so its elements are never late.)
#[test]
fn a_late_element_goes_to_its_own_inputs_late_output() {
    let env = MemoryEnv::new();
    let a = env
        .from_timestamped_collection(vec![((0u8, 9u32), 52i64)])
        .key_by(|e: &(u8, u32)| e.0);
    let b = env
        .from_timestamped_collection(vec![((0u8, 0u32), 100i64), ((0, 1), 50)])
        .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(Duration::ZERO).unwrap())
        .key_by(|e: &(u8, u32)| e.0);
    let (late_firsts, late_seconds) = (CollectSink::new(), CollectSink::new());
    let pairs = CollectSink::new();
    let summary = a
        .interval_join(b)
        .between(-5, 5)
        .unwrap()
        .side_output_late_firsts(late_firsts.clone())
        .side_output_late_seconds(late_seconds.clone())
        .process(|x: &(u8, u32), y: &(u8, u32)| (x.1, y.1))
        .sink(pairs.clone())
        .unwrap();
    // Element 1 (at 50) would meet element 9 (at 52), but it came after the watermark 100.
    assert_eq!(pairs.snapshot(), Vec::<(u32, u32)>::new());
    assert_eq!(late_seconds.snapshot(), [(0, 1)]);
    assert_eq!(late_firsts.len(), 0);
    assert_eq!(summary.late_elements, 1);
}
