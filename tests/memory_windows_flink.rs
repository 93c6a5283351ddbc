//! Window semantics that follow Flink's `WindowOperator` on the in-memory engine: gaps
//! between sliding windows, the order in which windows are assigned and fire, and the
//! arrival order of merged session panes.

use std::time::Duration;
use streaming::api::RejectedElement;
use streaming::time::{
    AscendingTimestamps, BoundedOutOfOrderness, CountTrigger, EventTimeSessionWindows,
    SlidingEventTimeWindows, TimeWindow, Trigger, TriggerContext, TriggerResult,
    TumblingEventTimeWindows, WatermarkGenerator, WatermarkOutput,
};
use streaming::MemoryEnv;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Sliding windows of 500 ms every 1000 ms: an element in a gap belongs to no window. A
/// gap element that is late (`ts + lateness <= watermark`) goes to the late output; one
/// that is not is dropped and counted in `window_gap_dropped`.
#[test]
fn an_element_between_sliding_windows_is_in_no_window() {
    let events = vec![
        ("a", 100),
        ("a", 700),  // gap, not late: dropped
        ("a", 1200), // watermark 1200
        ("a", 950),  // gap, 950 + 300 > 1200: not late, dropped
        ("a", 600),  // gap, 600 + 300 <= 1200: late
        ("a", 450),  // [0, 500) is past its lateness: late
        ("a", 1100),
    ];
    let (mut out, mut late) = (Vec::new(), Vec::new());
    let summary = MemoryEnv::new()
        .from_collection(events)
        .assign_timestamps_and_watermarks_with(
            |e: &(&str, i64), _| e.1,
            BoundedOutOfOrderness::new(ms(0)).unwrap(),
        )
        .key_by(|e| e.0)
        .window(SlidingEventTimeWindows::of(ms(500), ms(1000)).unwrap())
        .allowed_lateness(ms(300))
        .side_output_late_data(|e: (&str, i64)| late.push(e.1))
        .count()
        .sink(|(_, w, n): (&str, TimeWindow, u64)| out.push((w.start(), w.end(), n)))
        .unwrap();
    assert_eq!(out, vec![(0, 500, 1), (1000, 1500, 2)]);
    assert_eq!(late, vec![600, 450]);
    assert_eq!(summary.late_elements, 2);
    assert_eq!(summary.window_gap_dropped, 2);
}

/// Fires every window it sees once, at event time `at`.
#[derive(Clone)]
struct FireAt(i64);

impl<T> Trigger<T> for FireAt {
    type Time = streaming::time::EventTime;
    fn on_element(
        &mut self,
        _: &T,
        _: i64,
        _: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        ctx.register_event_time_timer(self.0);
        TriggerResult::Continue
    }
    fn on_event_time(
        &mut self,
        time: i64,
        _: &TimeWindow,
        _: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if time == self.0 {
            TriggerResult::Fire
        } else {
            TriggerResult::Continue
        }
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

/// Sliding windows are assigned in descending start order (Flink's
/// `SlidingEventTimeWindows`), so the windows of one element fire in that order: on the
/// element (count trigger) and on one watermark step (timers of equal time).
#[test]
fn sliding_windows_fire_in_descending_start_order() {
    let starts = |trigger_on_watermark: bool| {
        let env = MemoryEnv::new();
        let windowed = env
            .from_elements([7u32])
            .assign_timestamps_and_watermarks_with(|_: &u32, _| 7, streaming::time::NoWatermarks)
            .key_by(|_| ())
            .window(SlidingEventTimeWindows::of(ms(10), ms(5)).unwrap());
        let mut out = Vec::new();
        if trigger_on_watermark {
            windowed
                .trigger(FireAt(8))
                .count()
                .for_each(|(_, w, _)| out.push(w.start()))
                .unwrap();
        } else {
            windowed
                .trigger(CountTrigger::of(1).unwrap())
                .count()
                .for_each(|(_, w, _)| out.push(w.start()))
                .unwrap();
        }
        out
    };
    assert_eq!(starts(false), vec![5, 0]);
    assert_eq!(starts(true), vec![5, 0]);
}

/// A merged session pane keeps its elements in arrival order, not in the order of the
/// sessions it was merged from.
#[test]
fn merged_session_panes_keep_arrival_order() {
    let events = vec![("x", 0), ("y", 20), ("z", 2), ("w", 10)];
    let out = MemoryEnv::new()
        .from_collection(events)
        .assign_timestamps_and_watermarks_with(
            |e: &(&str, i64), _| e.1,
            streaming::time::NoWatermarks,
        )
        .key_by(|_| ())
        .window(EventTimeSessionWindows::with_gap(ms(10)).unwrap())
        .apply(|_, w, items, out| {
            let names: Vec<&str> = items.iter().map(|e| e.0).collect();
            out.collect((w.start(), w.end(), names.concat()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(out, vec![(0, 30, "xyzw".to_string())]);
}

/// Windowed `sum_by` sums a field; `min_by` / `max_by` emit the element with the smallest
/// / largest field (the earliest on ties), windowed per firing and keyed as a rolling value.
#[test]
fn field_aggregations_sum_min_and_max_by_a_field() {
    #[derive(Clone, Debug, PartialEq)]
    struct Order {
        id: u32,
        amount: u64,
    }
    let orders = || {
        [(1, 5), (2, 3), (3, 9), (4, 3), (5, 1)]
            .map(|(id, amount)| Order { id, amount })
            .to_vec()
    };
    // Placed 1 ms apart, from 0 ms.
    let placed = || orders().into_iter().zip(0i64..);
    let window = || streaming::time::TumblingEventTimeWindows::of(ms(3)).unwrap();
    let sums = MemoryEnv::new()
        .from_timestamped_collection(placed())
        .key_by(|_| "all")
        .window(window())
        .sum_by(|o: &Order| o.amount)
        .map(|(_, w, s)| (w.start(), s))
        .collect_vec()
        .unwrap();
    assert_eq!(sums, vec![(0, 17), (3, 4)]);
    let mins = MemoryEnv::new()
        .from_timestamped_collection(placed())
        .key_by(|_| "all")
        .window(window())
        .min_by(|o: &Order| o.amount)
        .map(|o| o.id)
        .collect_vec()
        .unwrap();
    assert_eq!(mins, vec![2, 5]);
    let maxs = MemoryEnv::new()
        .from_timestamped_collection(placed())
        .key_by(|_| "all")
        .window(window())
        .max_by(|o: &Order| o.amount)
        .map(|o| o.id)
        .collect_vec()
        .unwrap();
    assert_eq!(maxs, vec![3, 4]);
    let rolling_min = MemoryEnv::new()
        .from_collection(orders())
        .key_by(|_| "all")
        .min_by(|o: &Order| o.amount)
        .map(|o| o.id)
        .collect_vec()
        .unwrap();
    assert_eq!(rolling_min, vec![1, 2, 2, 2, 5]);
    let rolling_max = MemoryEnv::new()
        .from_collection(orders())
        .key_by(|_| "all")
        .max_by(|o: &Order| o.amount)
        .map(|o| o.id)
        .collect_vec()
        .unwrap();
    assert_eq!(rolling_max, vec![1, 1, 3, 3, 3]);
}

/// Input with a record whose window bounds overflow between two on-time records.
fn around_a_rejected_record() -> Vec<(&'static str, i64)> {
    vec![("a", 5), ("a", i64::MAX), ("a", 7)]
}

/// A record the window rejects does not move the watermark: the record after it is judged
/// against the watermark before the rejected one, with or without a rejected-element
/// output.
#[test]
fn a_rejected_record_does_not_move_the_watermark() {
    for with_output in [false, true] {
        let (mut out, mut late, mut rejected) = (Vec::new(), Vec::new(), Vec::new());
        let windowed = MemoryEnv::new()
            .from_collection(around_a_rejected_record())
            .assign_timestamps_and_watermarks_with(|e: &(&str, i64), _| e.1, AscendingTimestamps)
            .key_by(|e| e.0)
            .window(TumblingEventTimeWindows::of(ms(10)).unwrap())
            .side_output_late_data(|e: (&str, i64)| late.push(e.1));
        let sink = |(_, w, n): (&str, TimeWindow, u64)| out.push((w.start(), w.end(), n));
        let summary = if with_output {
            windowed
                .side_output_rejected(|r: RejectedElement<(&str, i64)>| rejected.push(r.timestamp))
                .count()
                .sink(sink)
                .unwrap()
        } else {
            windowed.count().sink(sink).unwrap()
        };
        assert_eq!(out, vec![(0, 10, 2)], "with_output {with_output}");
        assert_eq!(late, Vec::<i64>::new(), "with_output {with_output}");
        assert_eq!(summary.late_elements, 0);
        assert_eq!(summary.window_bounds_rejected, 1);
        let want = if with_output { vec![i64::MAX] } else { vec![] };
        assert_eq!(rejected, want);
    }
}

/// Keeps the highest timestamp itself and emits it in `on_periodic_emit` (as Flink's
/// periodic generators do): a rejected record must not leave its timestamp behind.
#[derive(Clone, Default)]
struct MaxSeen(Option<i64>);

impl<T> WatermarkGenerator<T> for MaxSeen {
    fn on_event(&mut self, _: &T, timestamp: i64, _: &mut WatermarkOutput) {
        self.0 = Some(self.0.map_or(timestamp, |m| m.max(timestamp)));
    }

    fn on_periodic_emit(&mut self, output: &mut WatermarkOutput) {
        if let Some(m) = self.0 {
            output.raise(m);
        }
    }
}

/// A generator's own state goes back too: the next element's `on_periodic_emit` does not
/// emit the rejected record's timestamp.
#[test]
fn a_rejected_record_leaves_the_generator_state_as_before() {
    let mut late = Vec::new();
    let out = MemoryEnv::new()
        .from_collection(around_a_rejected_record())
        .assign_timestamps_and_watermarks_with(|e: &(&str, i64), _| e.1, MaxSeen::default())
        .key_by(|e| e.0)
        .window(TumblingEventTimeWindows::of(ms(10)).unwrap())
        .side_output_late_data(|e: (&str, i64)| late.push(e.1))
        .count()
        .map(|(_, w, n): (&str, TimeWindow, u64)| (w.start(), n))
        .collect_vec()
        .unwrap();
    assert_eq!(out, vec![(0, 2)]);
    assert!(late.is_empty(), "{late:?}");
}

/// Only a rejection of the record itself holds the watermark: a result of the first window
/// that a second window rejects (its 1 s window would end past `i64::MAX`) leaves the
/// record's watermark in place, so the record after it is late for the first window.
#[test]
fn a_rejected_window_result_does_not_hold_back_the_record_watermark() {
    let near_max = i64::MAX - 5;
    let (mut late, mut rejected) = (Vec::new(), Vec::new());
    let out = MemoryEnv::new()
        .from_collection(vec![("a", 5), ("a", near_max), ("a", 7)])
        .assign_timestamps_and_watermarks_with(|e: &(&str, i64), _| e.1, AscendingTimestamps)
        .key_by(|e| e.0)
        .window(TumblingEventTimeWindows::of(ms(1)).unwrap())
        .trigger(CountTrigger::of(1).unwrap())
        .side_output_late_data(|e: (&str, i64)| late.push(e.1))
        .count()
        .key_by(|r: &(&str, TimeWindow, u64)| r.0)
        .window(TumblingEventTimeWindows::of(ms(1000)).unwrap())
        .side_output_rejected(|r: RejectedElement<(&str, TimeWindow, u64)>| {
            rejected.push(r.timestamp)
        })
        .count()
        .map(|(_, w, n): (&str, TimeWindow, u64)| (w.start(), n))
        .collect_vec()
        .unwrap();
    assert_eq!(rejected, vec![near_max]);
    assert_eq!(late, vec![7]);
    assert_eq!(out, vec![(0, 1)]);
}
