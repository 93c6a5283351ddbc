//! Window semantics on the in-memory engine (DESIGN invariant 2).

use std::time::Duration;
use streaming::api::{AggregateFunction, RejectedElement};
use streaming::time::{
    BoundedOutOfOrderness, CountTrigger, EventTimeSessionWindows, SlidingEventTimeWindows,
    TimeWindow, Trigger, TriggerContext, TriggerResult, TumblingEventTimeWindows,
};
use streaming::{Error, MemoryEnv};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A window result: (key, start, end, count).
type Firing = (&'static str, i64, i64, u64);

/// (key, timestamp) events; watermark = t - ooo; count per window as (key, start, end, n).
fn tumbling_counts(
    events: &[(&'static str, i64)],
    size: u64,
    ooo: u64,
    lateness: u64,
) -> (Vec<Firing>, Vec<i64>, u64) {
    let env = MemoryEnv::new();
    let mut late = Vec::new();
    let mut out = Vec::new();
    let summary = env
        .from_collection(events.to_vec())
        .assign_timestamps_and_watermarks_with(
            |e: &(&str, i64), _| e.1,
            BoundedOutOfOrderness::new(ms(ooo)).unwrap(),
        )
        .key_by(|e| e.0)
        .window(TumblingEventTimeWindows::of(ms(size)).unwrap())
        .allowed_lateness(ms(lateness))
        .side_output_late_data(|e: (&str, i64)| late.push(e.1))
        .count()
        .sink(|(k, w, n): (&'static str, TimeWindow, u64)| out.push((k, w.start(), w.end(), n)))
        .unwrap();
    (out, late, summary.late_elements)
}

#[test]
fn tumbling_fires_when_watermark_reaches_max_timestamp() {
    let (out, late, n_late) = tumbling_counts(
        &[("a", 1), ("a", 5), ("b", 9), ("a", 10), ("a", 25)],
        10,
        0,
        0,
    );
    // [0,10) fires after the element at 9 raised the watermark to 9 = max_timestamp.
    assert_eq!(
        out,
        vec![
            ("a", 0, 10, 2),
            ("b", 0, 10, 1),
            ("a", 10, 20, 1),
            ("a", 20, 30, 1)
        ]
    );
    assert!(late.is_empty());
    assert_eq!(n_late, 0);
}

#[test]
fn lateness_is_judged_against_the_watermark_before_the_element() {
    // After 9 the watermark is 9: window [0,10) is fired and cleaned; 5 is late.
    let (out, late, n_late) = tumbling_counts(&[("a", 1), ("a", 9), ("a", 5)], 10, 0, 0);
    assert_eq!(out, vec![("a", 0, 10, 2)]);
    assert_eq!(late, vec![5]);
    assert_eq!(n_late, 1);
    // An element equal to the watermark but in a window not yet past it is on time.
    let (out, late, _) = tumbling_counts(&[("a", 8), ("a", 10), ("a", 10)], 10, 0, 0);
    assert_eq!(out, vec![("a", 0, 10, 1), ("a", 10, 20, 2)]);
    assert!(late.is_empty());
}

#[test]
fn allowed_lateness_refires_with_updated_result_then_drops() {
    // lateness 5: [0,10) fires at watermark 9, is kept until watermark 14.
    let (out, late, _) = tumbling_counts(
        &[("a", 1), ("a", 12), ("a", 3), ("a", 14), ("a", 4)],
        10,
        0,
        5,
    );
    assert_eq!(
        out,
        vec![("a", 0, 10, 1), ("a", 0, 10, 2), ("a", 10, 20, 2)]
    );
    assert_eq!(late, vec![4]);
}

#[test]
fn out_of_orderness_holds_windows_open() {
    let (out, late, _) = tumbling_counts(
        &[("a", 1), ("a", 12), ("a", 3), ("a", 16), ("a", 4)],
        10,
        5,
        0,
    );
    // watermark after 12 is 7, after 16 is 11 → [0,10) fires with 1, 3 (4 arrives after).
    assert_eq!(out, vec![("a", 0, 10, 2), ("a", 10, 20, 2)]);
    assert_eq!(late, vec![4]);
}

#[test]
fn negative_timestamps_use_floor_windows() {
    let (out, _, _) = tumbling_counts(&[("a", -500), ("a", -1), ("a", 0)], 1000, 0, 0);
    assert_eq!(out, vec![("a", -1000, 0, 2), ("a", 0, 1000, 1)]);
}

#[test]
fn sliding_windows_count_each_element_in_every_window() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![0i64, 4, 7])
        .assign_timestamps_and_watermarks_with(
            |t: &i64, _| *t,
            BoundedOutOfOrderness::new(ms(0)).unwrap(),
        )
        .key_by(|_| ())
        .window(SlidingEventTimeWindows::of(ms(10), ms(5)).unwrap())
        .count()
        .map(|(_, w, n)| (w.start(), n))
        .collect_vec()
        .unwrap();
    assert_eq!(out, vec![(-5, 2), (0, 3), (5, 1)]);
}

#[test]
fn sessions_merge_when_touching_and_split_beyond_the_gap() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![("x", 0i64), ("x", 10), ("x", 31), ("y", 5), ("x", 20)])
        .assign_timestamps_and_watermarks_with(
            |e: &(&str, i64), _| e.1,
            BoundedOutOfOrderness::new(ms(100)).unwrap(),
        )
        .key_by(|e| e.0)
        .window(EventTimeSessionWindows::with_gap(ms(10)).unwrap())
        .count()
        .map(|(k, w, n)| (k, w.start(), w.end(), n))
        .collect_vec()
        .unwrap();
    // x: 0, 10, 20 chain by touching windows [0,10) [10,20) [20,30); 31 starts [31,41).
    let mut out = out;
    out.sort();
    assert_eq!(
        out,
        vec![("x", 0, 30, 3), ("x", 31, 41, 1), ("y", 5, 15, 1)]
    );
}

#[test]
fn a_late_element_bridging_two_sessions_merges_them() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![0i64, 30, 15])
        .assign_timestamps_and_watermarks_with(
            |t: &i64, _| *t,
            BoundedOutOfOrderness::new(ms(50)).unwrap(),
        )
        .key_by(|_| ())
        .window(EventTimeSessionWindows::with_gap(ms(15)).unwrap())
        .count()
        .map(|(_, w, n)| (w.start(), w.end(), n))
        .collect_vec()
        .unwrap();
    assert_eq!(out, vec![(0, 45, 3)]);
}

#[test]
fn count_trigger_leftovers_are_emitted_once_at_cleanup() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![1i64, 2, 3, 4, 5])
        .with_ingestion_time()
        .key_by(|_| ())
        .window(TumblingEventTimeWindows::of(ms(100)).unwrap())
        .trigger(CountTrigger::of(2).unwrap())
        .sum()
        .map(|(_, _, s)| s)
        .collect_vec()
        .unwrap();
    // fires at 2 and 4 elements (keeping contents), final emission with all 5 at cleanup.
    assert_eq!(out, vec![3, 10, 15]);
}

/// Fires and purges every element: each emission holds exactly one element.
#[derive(Clone)]
struct EveryElement;
impl<T> Trigger<T> for EveryElement {
    type Time = streaming::time::NoEventTime;
    fn on_element(
        &mut self,
        _: &T,
        _: i64,
        _: &TimeWindow,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        TriggerResult::FireAndPurge
    }
    fn on_event_time(
        &mut self,
        _: i64,
        _: &TimeWindow,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        TriggerResult::Continue
    }
    fn on_processing_time(
        &mut self,
        _: i64,
        _: &TimeWindow,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        TriggerResult::Continue
    }
}

#[test]
fn user_trigger_fire_and_purge() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![5i64, 6, 7])
        .with_ingestion_time()
        .key_by(|_| ())
        .window(TumblingEventTimeWindows::of(ms(100)).unwrap())
        .trigger(EveryElement)
        .reduce(|a, b| a + b)
        .collect_vec()
        .unwrap();
    assert_eq!(
        out,
        vec![5, 6, 7],
        "purged contents are not emitted again at cleanup"
    );
}

struct Avg;
impl AggregateFunction<f64> for Avg {
    type Acc = (f64, u32);
    type Out = f64;
    fn create_accumulator(&self) -> (f64, u32) {
        (0.0, 0)
    }
    fn add(&self, acc: &mut (f64, u32), v: f64) {
        acc.0 += v;
        acc.1 += 1;
    }
    fn get_result(&self, acc: &(f64, u32)) -> f64 {
        acc.0 / f64::from(acc.1)
    }
    fn merge(&self, a: (f64, u32), b: (f64, u32)) -> (f64, u32) {
        (a.0 + b.0, a.1 + b.1)
    }
}

#[test]
fn aggregate_apply_and_window_results_carry_max_timestamp() {
    let env = MemoryEnv::new();
    let out = env
        .from_timestamped_collection(vec![(1.0, 0), (2.0, 1), (6.0, 2)])
        .key_by(|_| 0)
        .window(TumblingEventTimeWindows::of(ms(2)).unwrap())
        .aggregate_with(Avg, |_, w, avg| (w.start(), avg))
        .collect_vec()
        .unwrap();
    // timestamps 0,1 → [0,2); 2 → [2,4)
    assert_eq!(out, vec![(0, 1.5), (2, 6.0)]);
    let plain = env
        .from_timestamped_collection(vec![(1.0, 0), (3.0, 4)])
        .key_by(|_| 0)
        .window(TumblingEventTimeWindows::of(ms(5)).unwrap())
        .aggregate(Avg)
        .collect_vec()
        .unwrap();
    assert_eq!(plain, vec![2.0]);

    let applied = env
        .from_timestamped_collection(vec![("a", 0), ("b", 1), ("c", 2)])
        .key_by(|_| "k")
        .window(TumblingEventTimeWindows::of(ms(2)).unwrap())
        .apply(|key, w, items, out| {
            out.collect(format!("{key}@{}:{}", w.start(), items.join("")));
            Ok(())
        })
        .key_by(|_| 0)
        .process(|s, ctx, out| {
            out.collect((s, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(
        applied,
        vec![("k@0:ab".to_string(), 1), ("k@2:c".to_string(), 3)]
    );
}

/// A record whose window bounds overflow is rejected, and the pipeline goes on: the
/// other records are windowed and the final flush happens. Without a rejected-element
/// output it is counted; with one it arrives there, typed.
#[test]
fn window_bounds_overflow_rejects_the_record_and_the_pipeline_goes_on() {
    let env = MemoryEnv::new();
    let mut out = Vec::new();
    let summary = env
        .add_timestamped_source_with_id("edge", EdgeSource)
        .key_by(|_| 0)
        .window(TumblingEventTimeWindows::of(ms(1000)).unwrap())
        .count()
        .sink(|(_, w, n): (i32, TimeWindow, u64)| out.push((w.start(), n)))
        .unwrap();
    assert_eq!(out, vec![(0, 2), (1000, 1)]);
    assert_eq!(summary.window_bounds_rejected, 1);

    let mut rejected = Vec::new();
    let mut out = Vec::new();
    let summary = env
        .add_timestamped_source_with_id("edge2", EdgeSource)
        .key_by(|_| 0)
        .window(TumblingEventTimeWindows::of(ms(1000)).unwrap())
        .side_output_rejected(|r: RejectedElement<u8>| rejected.push(r))
        .count()
        .sink(|(_, w, n): (i32, TimeWindow, u64)| out.push((w.start(), n)))
        .unwrap();
    assert_eq!(out, vec![(0, 2), (1000, 1)]);
    assert_eq!(summary.window_bounds_rejected, 1);
    assert_eq!(
        rejected,
        vec![RejectedElement {
            element: 2,
            timestamp: i64::MAX,
            operator: "edge2/2:window-count".to_string(),
        }]
    );
}

struct EdgeSource;
impl streaming::api::Source<u8> for EdgeSource {
    fn run<C: streaming::api::SourceContext<u8>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        ctx.collect_with_timestamp(1, 5)?;
        ctx.collect_with_timestamp(2, i64::MAX)?;
        ctx.collect_with_timestamp(3, 7)?;
        ctx.collect_with_timestamp(4, 1500)
    }
}
