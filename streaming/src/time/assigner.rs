//! Window assigners: which windows an element with a given timestamp belongs to.

use super::trigger::EventTimeTrigger;
use super::{duration_ms, TimeWindow};
use crate::Error;
use std::time::Duration;

/// Assigns each element to zero or more [`TimeWindow`]s (Flink `WindowAssigner`).
///
/// An assigner says which trigger a window gets by default and whether its windows merge
/// (session windows do).
pub trait WindowAssigner: Clone + 'static {
    /// The trigger a window gets when the pipeline sets none.
    type DefaultTrigger: Clone + 'static;

    /// What the assigner needs of the stream: [`EventTime`](super::EventTime) when its
    /// windows are cut by element timestamps and end by the watermark (a compile error on
    /// a stream whose event time was never chosen); [`NoEventTime`](super::NoEventTime)
    /// when it needs neither ([`GlobalWindows`]).
    type Time: super::StreamTime;

    /// Calls `emit` once for every window that contains `timestamp` (ms) — none when the
    /// timestamp falls between windows (sliding windows with `slide > size`) — in
    /// descending order of window start (Flink's order: windows created by one element
    /// register their timers, and so fire on one watermark step, in this order).
    ///
    /// # Errors
    /// `Err(timestamp)` when a window bound does not fit in `i64` (such a record is
    /// rejected, not clamped).
    fn assign_windows(&self, timestamp: i64, emit: impl FnMut(TimeWindow)) -> Result<(), i64>;

    /// The trigger used when the pipeline sets none.
    fn default_trigger(&self) -> Self::DefaultTrigger;

    /// Whether windows of this assigner merge when they intersect or touch (session
    /// windows). The default is `false`: the windows are fixed when assigned.
    fn is_merging(&self) -> bool {
        false
    }

    /// Whether the windows end in event time (Flink `isEventTime`): by default whether
    /// [`Time`](Self::Time) is [`EventTime`](super::EventTime).
    /// When false ([`GlobalWindows`]) no element is late, allowed lateness does not
    /// apply, and a window is cleaned up only by the final watermark (`i64::MAX`: end of
    /// input on the memory engine, an idle flush on the Redis engine), which first emits
    /// contents never emitted.
    fn is_event_time(&self) -> bool {
        <Self::Time as super::StreamTime>::IS_EVENT_TIME
    }
}

/// The start of the window of length `size` (ms) with `offset` that contains `timestamp`:
/// `timestamp - floor_mod(timestamp - offset, size)` (Flink `TimeWindow.getWindowStartWithOffset`,
/// with a floor modulo so negative timestamps and offsets work: `-500` with size 1000 is
/// in `[-1000, 0)`). Computed in `i128`, so it cannot overflow.
pub(crate) fn window_start(timestamp: i64, offset: i64, size: i64) -> i128 {
    let ts = i128::from(timestamp);
    ts - (ts - i128::from(offset)).rem_euclid(i128::from(size))
}

fn window_of(start: i128, size: i64, timestamp: i64) -> Result<TimeWindow, i64> {
    let end = start + i128::from(size);
    match (i64::try_from(start), i64::try_from(end)) {
        (Ok(s), Ok(e)) => Ok(TimeWindow::new(s, e)),
        _ => Err(timestamp),
    }
}

fn positive_ms(field: &'static str, d: Duration) -> Result<i64, Error> {
    let ms = duration_ms(field, d)?;
    if ms <= 0 {
        return Err(Error::InvalidConfig {
            field,
            reason: format!("must be at least 1 ms, got {d:?}"),
        });
    }
    Ok(ms)
}

fn check_offset(offset: i64, bound_field: &'static str, bound: i64) -> Result<(), Error> {
    if offset.unsigned_abs() >= bound.unsigned_abs() {
        return Err(Error::InvalidConfig {
            field: "offset",
            reason: format!(
                "|offset| must be smaller than `{bound_field}` ({bound} ms), got {offset} ms"
            ),
        });
    }
    Ok(())
}

/// Fixed-size, non-overlapping event-time windows (Flink `TumblingEventTimeWindows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TumblingEventTimeWindows {
    size: i64,
    offset: i64,
}

impl TumblingEventTimeWindows {
    /// Windows of length `size`, aligned to the epoch.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `size` when `size` is under 1 ms or over
    /// `i64::MAX` ms.
    pub fn of(size: Duration) -> Result<Self, Error> {
        Self::with_offset(size, 0)
    }

    /// Windows of length `size` shifted by `offset_ms` milliseconds (may be negative, e.g.
    /// `-8 h` for days in UTC+8).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `size` as in [`of`](Self::of), or field `offset`
    /// when `|offset_ms| >= size`.
    pub fn with_offset(size: Duration, offset_ms: i64) -> Result<Self, Error> {
        let size = positive_ms("size", size)?;
        check_offset(offset_ms, "size", size)?;
        Ok(TumblingEventTimeWindows {
            size,
            offset: offset_ms,
        })
    }

    /// The window length in ms.
    pub fn size_ms(&self) -> i64 {
        self.size
    }
}

impl WindowAssigner for TumblingEventTimeWindows {
    type Time = super::EventTime;
    type DefaultTrigger = EventTimeTrigger;

    fn assign_windows(&self, timestamp: i64, mut emit: impl FnMut(TimeWindow)) -> Result<(), i64> {
        let start = window_start(timestamp, self.offset, self.size);
        emit(window_of(start, self.size, timestamp)?);
        Ok(())
    }

    fn default_trigger(&self) -> EventTimeTrigger {
        EventTimeTrigger
    }
}

/// Fixed-size event-time windows that start every `slide` (Flink `SlidingEventTimeWindows`);
/// an element belongs to every window `[start, start + size)` that contains it:
/// `ceil(size / slide)` windows or one fewer, and none when `slide > size` and its
/// timestamp falls in the gap between two windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingEventTimeWindows {
    size: i64,
    slide: i64,
    offset: i64,
}

impl SlidingEventTimeWindows {
    /// Windows of length `size` starting every `slide`, aligned to the epoch.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `size` or `slide` when either is under 1 ms or
    /// over `i64::MAX` ms.
    pub fn of(size: Duration, slide: Duration) -> Result<Self, Error> {
        Self::with_offset(size, slide, 0)
    }

    /// Like [`of`](Self::of), shifted by `offset_ms` milliseconds.
    ///
    /// # Errors
    /// As [`of`](Self::of), or field `offset` when `|offset_ms| >= slide`.
    pub fn with_offset(size: Duration, slide: Duration, offset_ms: i64) -> Result<Self, Error> {
        let size = positive_ms("size", size)?;
        let slide = positive_ms("slide", slide)?;
        check_offset(offset_ms, "slide", slide)?;
        Ok(SlidingEventTimeWindows {
            size,
            slide,
            offset: offset_ms,
        })
    }
}

impl WindowAssigner for SlidingEventTimeWindows {
    type Time = super::EventTime;
    type DefaultTrigger = EventTimeTrigger;

    fn assign_windows(&self, timestamp: i64, mut emit: impl FnMut(TimeWindow)) -> Result<(), i64> {
        let (ts, size, slide) = (
            i128::from(timestamp),
            i128::from(self.size),
            i128::from(self.slide),
        );
        let last_start = window_start(timestamp, self.offset, self.slide);
        // The earliest start whose window still contains `timestamp`. With `slide > size`
        // it can lie above `last_start`: the timestamp falls between windows, in none.
        let first_start = last_start - (last_start - (ts - size + 1)).div_euclid(slide) * slide;
        if first_start > last_start {
            return Ok(());
        }
        // Check every bound before emitting, so a rejected record touches no window.
        window_of(first_start, self.size, timestamp)?;
        window_of(last_start, self.size, timestamp)?;
        // Descending window start, as Flink assigns (and so fires) them.
        let mut start = last_start;
        while start >= first_start {
            emit(window_of(start, self.size, timestamp)?);
            start -= slide;
        }
        Ok(())
    }

    fn default_trigger(&self) -> EventTimeTrigger {
        EventTimeTrigger
    }
}

/// Session windows (Flink `EventTimeSessionWindows.withGap`): each element opens
/// `[t, t + gap)`, and windows of one key that intersect **or touch** merge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTimeSessionWindows {
    gap: i64,
}

impl EventTimeSessionWindows {
    /// Sessions closed by `gap` of inactivity.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `gap` when `gap` is under 1 ms or over
    /// `i64::MAX` ms.
    pub fn with_gap(gap: Duration) -> Result<Self, Error> {
        Ok(EventTimeSessionWindows {
            gap: positive_ms("gap", gap)?,
        })
    }

    /// The session gap in ms.
    pub fn gap_ms(&self) -> i64 {
        self.gap
    }
}

impl WindowAssigner for EventTimeSessionWindows {
    type Time = super::EventTime;
    type DefaultTrigger = EventTimeTrigger;

    fn assign_windows(&self, timestamp: i64, mut emit: impl FnMut(TimeWindow)) -> Result<(), i64> {
        emit(window_of(i128::from(timestamp), self.gap, timestamp)?);
        Ok(())
    }

    fn default_trigger(&self) -> EventTimeTrigger {
        EventTimeTrigger
    }

    fn is_merging(&self) -> bool {
        true
    }
}

/// The default trigger of an assigner that has none ([`GlobalWindows`]). It is not a
/// [`Trigger`](super::Trigger), so a windowed stream of [`GlobalWindows`] offers no window
/// function until `.trigger(..)` sets one: a compile error instead of windows that never
/// fire (Flink's `GlobalWindows` defaults to a trigger that never fires).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriggerRequired;

/// One window per key holding all of its elements (Flink `GlobalWindows`). It never ends
/// in event time, so it emits only when its trigger fires: set one with `.trigger(..)`,
/// e.g. `CountTrigger::of(100)` or `PurgingTrigger::of(CountTrigger::of(100))` for
/// windows of 100 elements (a pipeline without a trigger does not compile).
///
/// The window is `[i64::MIN, i64::MAX)` ([`TimeWindow::GLOBAL`]); results carry its
/// `max_timestamp`, `i64::MAX - 1`. Every timestamp belongs to it, no element is late and
/// allowed lateness has no effect. Contents never emitted are emitted once by the final
/// watermark (`i64::MAX`): at end of input on the memory engine, at an idle flush on the
/// Redis engine (`watermark_idle_timeout`), which then starts an empty window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalWindows;

impl GlobalWindows {
    /// The global window assigner.
    pub fn create() -> Self {
        GlobalWindows
    }
}

impl WindowAssigner for GlobalWindows {
    type Time = super::NoEventTime;
    type DefaultTrigger = TriggerRequired;

    fn assign_windows(&self, _timestamp: i64, mut emit: impl FnMut(TimeWindow)) -> Result<(), i64> {
        emit(TimeWindow::GLOBAL);
        Ok(())
    }

    fn default_trigger(&self) -> TriggerRequired {
        TriggerRequired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::any;

    fn windows(a: &impl WindowAssigner, ts: i64) -> Vec<TimeWindow> {
        let mut v = Vec::new();
        a.assign_windows(ts, |w| v.push(w)).unwrap();
        v
    }

    #[test]
    fn tumbling_uses_floor_modulo() {
        let a = TumblingEventTimeWindows::of(Duration::from_millis(1000)).unwrap();
        assert_eq!(windows(&a, 0), vec![TimeWindow::new(0, 1000)]);
        assert_eq!(windows(&a, 999), vec![TimeWindow::new(0, 1000)]);
        assert_eq!(windows(&a, 1000), vec![TimeWindow::new(1000, 2000)]);
        assert_eq!(windows(&a, -500), vec![TimeWindow::new(-1000, 0)]);
        assert_eq!(windows(&a, -1000), vec![TimeWindow::new(-1000, 0)]);
        assert_eq!(windows(&a, -1001), vec![TimeWindow::new(-2000, -1000)]);
    }

    #[test]
    fn tumbling_with_negative_offset() {
        let a = TumblingEventTimeWindows::with_offset(Duration::from_millis(1000), -300).unwrap();
        assert_eq!(windows(&a, 0), vec![TimeWindow::new(-300, 700)]);
        assert_eq!(windows(&a, 700), vec![TimeWindow::new(700, 1700)]);
        assert_eq!(windows(&a, -301), vec![TimeWindow::new(-1300, -300)]);
    }

    #[test]
    fn sliding_assigns_every_overlapping_window() {
        let a =
            SlidingEventTimeWindows::of(Duration::from_millis(1000), Duration::from_millis(500))
                .unwrap();
        assert_eq!(
            windows(&a, 1200),
            vec![TimeWindow::new(1000, 2000), TimeWindow::new(500, 1500)]
        );
        assert_eq!(
            windows(&a, -1),
            vec![TimeWindow::new(-500, 500), TimeWindow::new(-1000, 0)]
        );
        let uneven =
            SlidingEventTimeWindows::of(Duration::from_millis(1000), Duration::from_millis(300))
                .unwrap();
        // starts 0, 300, 600, 900 contain 950; -300 does not (ends at 700).
        assert_eq!(
            windows(&uneven, 950)
                .iter()
                .map(|w| w.start())
                .collect::<Vec<_>>(),
            vec![900, 600, 300, 0]
        );
    }

    #[test]
    fn sliding_with_slide_over_size_leaves_gaps_in_no_window() {
        let a =
            SlidingEventTimeWindows::of(Duration::from_millis(500), Duration::from_millis(1000))
                .unwrap();
        assert_eq!(windows(&a, 700), vec![]);
        assert_eq!(windows(&a, 999), vec![]);
        assert_eq!(windows(&a, 500), vec![]);
        assert_eq!(windows(&a, 499), vec![TimeWindow::new(0, 500)]);
        assert_eq!(windows(&a, 1000), vec![TimeWindow::new(1000, 1500)]);
        assert_eq!(windows(&a, -300), vec![]);
        assert_eq!(windows(&a, -1000), vec![TimeWindow::new(-1000, -500)]);
        let hop = SlidingEventTimeWindows::with_offset(
            Duration::from_millis(5),
            Duration::from_millis(10),
            -3,
        )
        .unwrap();
        // windows [-3, 2), [7, 12), ...
        assert_eq!(windows(&hop, 1), vec![TimeWindow::new(-3, 2)]);
        assert_eq!(windows(&hop, 2), vec![]);
        assert_eq!(windows(&hop, 6), vec![]);
        assert_eq!(windows(&hop, 7), vec![TimeWindow::new(7, 12)]);
    }

    /// The windows of `ts` by brute force: every `start = offset + k * slide` with
    /// `start <= ts < start + size`, descending.
    fn reference(size: i64, slide: i64, offset: i64, ts: i64) -> Vec<TimeWindow> {
        let base = ts - (ts - offset).rem_euclid(slide);
        (0..=size / slide + 1)
            .map(|k| base - k * slide)
            .filter(|&s| s <= ts && ts < s + size)
            .map(|s| TimeWindow::new(s, s + size))
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn sliding_windows_contain_their_timestamp(
            size in 1i64..200,
            slide in 1i64..200,
            offset_seed in any::<i64>(),
            ts in -10_000i64..10_000,
        ) {
            let offset = offset_seed % slide;
            let a = SlidingEventTimeWindows::with_offset(
                Duration::from_millis(size as u64),
                Duration::from_millis(slide as u64),
                offset,
            )
            .unwrap();
            let got = windows(&a, ts);
            for w in &got {
                proptest::prop_assert!(w.contains(ts), "{w:?} does not contain {ts}");
                proptest::prop_assert_eq!(w.end() - w.start(), size);
                proptest::prop_assert_eq!((w.start() - offset).rem_euclid(slide), 0);
            }
            proptest::prop_assert_eq!(got, reference(size, slide, offset, ts));
        }

        #[test]
        fn tumbling_window_contains_its_timestamp(
            size in 1i64..200,
            offset_seed in any::<i64>(),
            ts in -10_000i64..10_000,
        ) {
            let offset = offset_seed % size;
            let a = TumblingEventTimeWindows::with_offset(Duration::from_millis(size as u64), offset)
                .unwrap();
            proptest::prop_assert_eq!(windows(&a, ts), reference(size, size, offset, ts));
        }
    }

    #[test]
    fn session_window_is_gap_long() {
        let a = EventTimeSessionWindows::with_gap(Duration::from_millis(10)).unwrap();
        assert_eq!(windows(&a, 5), vec![TimeWindow::new(5, 15)]);
        assert!(a.is_merging());
    }

    #[test]
    fn overflowing_bounds_are_rejected() {
        let a = TumblingEventTimeWindows::of(Duration::from_millis(1000)).unwrap();
        assert_eq!(a.assign_windows(i64::MAX, |_| {}), Err(i64::MAX));
        assert_eq!(a.assign_windows(i64::MIN, |_| {}), Err(i64::MIN));
        let s = EventTimeSessionWindows::with_gap(Duration::from_millis(10)).unwrap();
        assert_eq!(s.assign_windows(i64::MAX - 5, |_| {}), Err(i64::MAX - 5));
        let sl =
            SlidingEventTimeWindows::of(Duration::from_millis(1000), Duration::from_millis(10))
                .unwrap();
        let mut n = 0;
        assert!(sl.assign_windows(i64::MAX - 5, |_| n += 1).is_err());
        assert_eq!(n, 0, "a rejected record touches no window");
    }

    #[test]
    fn invalid_configuration_names_the_field() {
        let field = |r: Result<_, Error>| match r {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        assert_eq!(
            field(TumblingEventTimeWindows::of(Duration::ZERO).map(|_| ())),
            "size"
        );
        assert_eq!(
            field(TumblingEventTimeWindows::with_offset(Duration::from_millis(10), 10).map(|_| ())),
            "offset"
        );
        assert_eq!(
            field(
                TumblingEventTimeWindows::with_offset(Duration::from_millis(10), -10).map(|_| ())
            ),
            "offset"
        );
        assert_eq!(
            field(
                SlidingEventTimeWindows::of(Duration::from_millis(10), Duration::ZERO).map(|_| ())
            ),
            "slide"
        );
        assert_eq!(
            field(
                SlidingEventTimeWindows::with_offset(
                    Duration::from_millis(10),
                    Duration::from_millis(5),
                    5
                )
                .map(|_| ())
            ),
            "offset"
        );
        assert_eq!(
            field(EventTimeSessionWindows::with_gap(Duration::ZERO).map(|_| ())),
            "gap"
        );
        assert_eq!(
            field(TumblingEventTimeWindows::of(Duration::from_secs(u64::MAX)).map(|_| ())),
            "size"
        );
    }
}
