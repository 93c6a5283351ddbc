//! Triggers decide when a window emits its contents (Flink `Trigger`).
//!
//! Every (key, window) bucket owns its own trigger instance, cloned from the pipeline's
//! prototype when the bucket is created, so a trigger keeps its per-window state in `self`.

use super::{duration_ms, TimeWindow};
use crate::Error;
use std::time::Duration;

/// What a window does after a trigger callback (Flink `TriggerResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerResult {
    /// Do nothing.
    Continue,
    /// Emit the window's current result and keep its contents (later firings include them).
    Fire,
    /// Drop the window's contents without emitting them (the trigger asked for it).
    Purge,
    /// Emit the window's current result, then drop its contents.
    FireAndPurge,
}

impl TriggerResult {
    /// Whether the window emits.
    pub fn is_fire(self) -> bool {
        matches!(self, TriggerResult::Fire | TriggerResult::FireAndPurge)
    }

    /// Whether the window's contents are dropped.
    pub fn is_purge(self) -> bool {
        matches!(self, TriggerResult::Purge | TriggerResult::FireAndPurge)
    }
}

/// A timer a trigger asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TriggerTimerRequest {
    /// Call [`Trigger::on_event_time`] when the watermark reaches this time (ms).
    EventTime(i64),
    /// Call [`Trigger::on_processing_time`] when processing time reaches this time (ms).
    ProcessingTime(i64),
}

/// What a trigger can see and do during a callback: the current watermark and processing
/// time, and timer registration for its own window.
#[derive(Debug)]
pub struct TriggerContext<'a> {
    pub(crate) watermark: i64,
    pub(crate) processing_time: i64,
    pub(crate) timers: &'a mut Vec<TriggerTimerRequest>,
}

impl TriggerContext<'_> {
    /// The watermark in force (ms); `i64::MIN` before the first watermark.
    pub fn current_watermark(&self) -> i64 {
        self.watermark
    }

    /// The current processing time (ms). On the in-memory engine this is the timestamp of
    /// the record being processed.
    pub fn current_processing_time(&self) -> i64 {
        self.processing_time
    }

    /// Asks for [`Trigger::on_event_time`] once the watermark reaches `time` (ms).
    /// Registering the same time twice for one window gives one callback.
    pub fn register_event_time_timer(&mut self, time: i64) {
        self.timers.push(TriggerTimerRequest::EventTime(time));
    }

    /// Asks for [`Trigger::on_processing_time`] once processing time reaches `time` (ms).
    /// Neither engine calls `on_processing_time` for windows yet (the memory engine has
    /// no wall clock; the Redis engine serves processing-time timers of keyed process functions
    /// only): such windows emit when they are cleaned up.
    pub fn register_processing_time_timer(&mut self, time: i64) {
        self.timers.push(TriggerTimerRequest::ProcessingTime(time));
    }
}

/// Decides when a window fires and when its contents are purged (Flink `Trigger`).
///
/// On the Redis engine a trigger's state is kept in Redis with its window, as JSON: a
/// custom trigger used there must also implement serde `Serialize + DeserializeOwned`
/// (the built-in ones do).
///
/// `T` is the element type. Implement it for custom triggers; the built-in ones are
/// [`EventTimeTrigger`] (the default of every event-time assigner), [`CountTrigger`],
/// [`ContinuousEventTimeTrigger`], [`ProcessingTimeTrigger`] and the wrapper
/// [`PurgingTrigger`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a window trigger for elements of type `{T}`",
    label = "not a `Trigger<{T}>`",
    note = "`GlobalWindows` has no default trigger: set one with `.trigger(..)` after `.window(..)`, e.g. `.trigger(CountTrigger::of(100)?)`"
)]
pub trait Trigger<T>: Clone + 'static {
    /// What the trigger needs of the stream: [`EventTime`](super::EventTime) when it
    /// registers event-time timers or reads element timestamps (such a trigger does not
    /// compile on a stream whose event time was never chosen), else
    /// [`NoEventTime`](super::NoEventTime).
    type Time: super::StreamTime;

    /// Called for every element added to `window`, with the element's timestamp (ms).
    fn on_element(
        &mut self,
        element: &T,
        timestamp: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult;

    /// Called when an event-time timer registered for `window` is due (`time` in ms).
    /// The default continues (for triggers that register no event-time timers).
    fn on_event_time(
        &mut self,
        time: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        let _ = (time, window, ctx);
        TriggerResult::Continue
    }

    /// Called when a processing-time timer registered for `window` is due. Not called by
    /// either engine yet (see
    /// [`TriggerContext::register_processing_time_timer`]). The default continues.
    fn on_processing_time(
        &mut self,
        time: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        let _ = (time, window, ctx);
        TriggerResult::Continue
    }

    /// Called when session windows merge: `self` is the trigger of one of the merged
    /// windows, `other` of another, and `window` the merged window. Combine state and
    /// register the timers the merged window needs. The default keeps `self`'s state and
    /// registers nothing (the window still emits at cleanup).
    fn on_merge(&mut self, other: Self, window: &TimeWindow, ctx: &mut TriggerContext<'_>) {
        let _ = (other, window, ctx);
    }
}

/// Fires a window once the watermark passes its end (Flink `EventTimeTrigger`), and again
/// for every element that arrives within the allowed lateness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventTimeTrigger;

impl<T> Trigger<T> for EventTimeTrigger {
    type Time = super::EventTime;

    fn on_element(
        &mut self,
        _element: &T,
        _timestamp: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if window.max_timestamp() <= ctx.current_watermark() {
            // A late-but-allowed element: fire again with the updated result.
            TriggerResult::Fire
        } else {
            ctx.register_event_time_timer(window.max_timestamp());
            TriggerResult::Continue
        }
    }

    fn on_event_time(
        &mut self,
        time: i64,
        window: &TimeWindow,
        _ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if time == window.max_timestamp() {
            TriggerResult::Fire
        } else {
            TriggerResult::Continue
        }
    }

    fn on_merge(&mut self, _other: Self, window: &TimeWindow, ctx: &mut TriggerContext<'_>) {
        if window.max_timestamp() > ctx.current_watermark() {
            ctx.register_event_time_timer(window.max_timestamp());
        }
    }
}

/// Fires every `count` elements (Flink `CountTrigger`), keeping the contents. Leftover
/// elements are emitted once when the window is cleaned up (our policy; Flink drops them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CountTrigger {
    max_count: u64,
    count: u64,
}

impl CountTrigger {
    /// Fires each time `max_count` elements have arrived since the last firing.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `count` when `max_count < 1`.
    pub fn of(max_count: u64) -> Result<Self, Error> {
        if max_count < 1 {
            return Err(Error::InvalidConfig {
                field: "count",
                reason: "a count trigger needs a count of at least 1".into(),
            });
        }
        Ok(CountTrigger {
            max_count,
            count: 0,
        })
    }
}

impl<T> Trigger<T> for CountTrigger {
    type Time = super::NoEventTime;

    fn on_element(
        &mut self,
        _element: &T,
        _timestamp: i64,
        _window: &TimeWindow,
        _ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        self.count += 1;
        if self.count >= self.max_count {
            self.count = 0;
            TriggerResult::Fire
        } else {
            TriggerResult::Continue
        }
    }

    fn on_merge(&mut self, other: Self, _window: &TimeWindow, _ctx: &mut TriggerContext<'_>) {
        self.count += other.count;
    }
}

/// Fires a window when processing time passes its end (Flink `ProcessingTimeTrigger`).
///
/// Neither engine serves processing-time timers of windows yet (the memory engine has no
/// processing-time clock for windows; the Redis engine's wall clock drives keyed process
/// functions only), so `on_processing_time` is not called: such windows emit once when
/// cleaned up (at the latest at end of input or at an idle flush).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessingTimeTrigger;

impl<T> Trigger<T> for ProcessingTimeTrigger {
    type Time = super::NoEventTime;

    fn on_element(
        &mut self,
        _element: &T,
        _timestamp: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        ctx.register_processing_time_timer(window.max_timestamp());
        TriggerResult::Continue
    }

    fn on_processing_time(
        &mut self,
        _time: i64,
        _window: &TimeWindow,
        _ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        TriggerResult::Fire
    }

    fn on_merge(&mut self, _other: Self, window: &TimeWindow, ctx: &mut TriggerContext<'_>) {
        ctx.register_processing_time_timer(window.max_timestamp());
    }
}

/// Makes every firing of `Tr` also purge the window (Flink `PurgingTrigger`): `Fire`
/// becomes `FireAndPurge`, so each firing emits only the elements added since the last
/// one. The other results, timers and merging are `Tr`'s.
///
/// Serialized (Redis engine) as `Tr`'s state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct PurgingTrigger<Tr> {
    inner: Tr,
}

impl<Tr> PurgingTrigger<Tr> {
    /// Wraps `trigger`, e.g. `PurgingTrigger::of(CountTrigger::of(100)?)`: a window of
    /// every 100 elements.
    pub fn of(trigger: Tr) -> Self {
        PurgingTrigger { inner: trigger }
    }

    /// The wrapped trigger.
    pub fn inner(&self) -> &Tr {
        &self.inner
    }
}

fn purging(r: TriggerResult) -> TriggerResult {
    match r {
        TriggerResult::Fire => TriggerResult::FireAndPurge,
        r => r,
    }
}

impl<T, Tr: Trigger<T>> Trigger<T> for PurgingTrigger<Tr> {
    type Time = Tr::Time;

    fn on_element(
        &mut self,
        element: &T,
        timestamp: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        purging(self.inner.on_element(element, timestamp, window, ctx))
    }

    fn on_event_time(
        &mut self,
        time: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        purging(self.inner.on_event_time(time, window, ctx))
    }

    fn on_processing_time(
        &mut self,
        time: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        purging(self.inner.on_processing_time(time, window, ctx))
    }

    fn on_merge(&mut self, other: Self, window: &TimeWindow, ctx: &mut TriggerContext<'_>) {
        self.inner.on_merge(other.inner, window, ctx);
    }
}

/// Fires a window every `interval` of event time and when the watermark passes its end
/// (Flink `ContinuousEventTimeTrigger`), keeping the contents: early, cumulative results
/// of a long window.
///
/// The first element of a window schedules a firing at the next multiple of `interval`
/// after its timestamp (floor modulo: `-500` with interval 1000 fires at 0); each firing
/// schedules the next one `interval` later, at most at the window's `max_timestamp`,
/// where the window fires as with [`EventTimeTrigger`]. Firings happen when the watermark
/// reaches them, so a watermark step over several intervals fires once per scheduled time
/// that is due, in time order. An element for a window whose `max_timestamp` the
/// watermark has reached (within the allowed lateness) fires it at once. Merging windows
/// keep the earlier of their scheduled firings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContinuousEventTimeTrigger {
    interval: i64,
    /// The scheduled periodic firing (ms), if any.
    next_fire: Option<i64>,
}

impl ContinuousEventTimeTrigger {
    /// Fires every `interval` of event time (ms precision).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `interval` when `interval` is under 1 ms or over
    /// `i64::MAX` ms.
    pub fn of(interval: Duration) -> Result<Self, Error> {
        let ms = duration_ms("interval", interval)?;
        if ms <= 0 {
            return Err(Error::InvalidConfig {
                field: "interval",
                reason: format!("must be at least 1 ms, got {interval:?}"),
            });
        }
        Ok(ContinuousEventTimeTrigger {
            interval: ms,
            next_fire: None,
        })
    }

    /// The interval in ms.
    pub fn interval_ms(&self) -> i64 {
        self.interval
    }

    /// Schedules the periodic firing after `time` (saturating), capped at the window's end.
    fn schedule(&mut self, time: i64, window: &TimeWindow, ctx: &mut TriggerContext<'_>) {
        let next = time
            .saturating_add(self.interval)
            .min(window.max_timestamp());
        self.next_fire = Some(next);
        ctx.register_event_time_timer(next);
    }
}

impl<T> Trigger<T> for ContinuousEventTimeTrigger {
    type Time = super::EventTime;

    fn on_element(
        &mut self,
        _element: &T,
        timestamp: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if window.max_timestamp() <= ctx.current_watermark() {
            return TriggerResult::Fire;
        }
        ctx.register_event_time_timer(window.max_timestamp());
        if self.next_fire.is_none() {
            let start = timestamp - timestamp.rem_euclid(self.interval);
            self.schedule(start, window, ctx);
        }
        TriggerResult::Continue
    }

    fn on_event_time(
        &mut self,
        time: i64,
        window: &TimeWindow,
        ctx: &mut TriggerContext<'_>,
    ) -> TriggerResult {
        if time == window.max_timestamp() {
            return TriggerResult::Fire;
        }
        if self.next_fire == Some(time) {
            self.schedule(time, window, ctx);
            return TriggerResult::Fire;
        }
        TriggerResult::Continue
    }

    fn on_merge(&mut self, other: Self, window: &TimeWindow, ctx: &mut TriggerContext<'_>) {
        self.next_fire = match (self.next_fire, other.next_fire) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = self.next_fire {
            ctx.register_event_time_timer(t);
        }
        if window.max_timestamp() > ctx.current_watermark() {
            ctx.register_event_time_timer(window.max_timestamp());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(timers: &mut Vec<TriggerTimerRequest>, watermark: i64) -> TriggerContext<'_> {
        TriggerContext {
            watermark,
            processing_time: 0,
            timers,
        }
    }

    #[test]
    fn event_time_trigger_registers_then_fires_at_max_timestamp() {
        let w = TimeWindow::new(0, 100);
        let mut timers = Vec::new();
        let mut t = EventTimeTrigger;
        let r = Trigger::<u8>::on_element(&mut t, &1, 5, &w, &mut ctx(&mut timers, 50));
        assert_eq!(r, TriggerResult::Continue);
        assert_eq!(timers, vec![TriggerTimerRequest::EventTime(99)]);
        assert_eq!(
            Trigger::<u8>::on_event_time(&mut t, 98, &w, &mut ctx(&mut timers, 98)),
            TriggerResult::Continue
        );
        assert_eq!(
            Trigger::<u8>::on_event_time(&mut t, 99, &w, &mut ctx(&mut timers, 99)),
            TriggerResult::Fire
        );
        // late but within lateness: fires at once
        let r = Trigger::<u8>::on_element(&mut t, &1, 5, &w, &mut ctx(&mut timers, 99));
        assert_eq!(r, TriggerResult::Fire);
    }

    #[test]
    fn count_trigger_fires_every_n() {
        let w = TimeWindow::new(0, 100);
        let mut timers = Vec::new();
        let mut t = CountTrigger::of(2).unwrap();
        let results: Vec<_> = (0..5)
            .map(|i| Trigger::<u8>::on_element(&mut t, &1, i, &w, &mut ctx(&mut timers, i64::MIN)))
            .collect();
        use TriggerResult::*;
        assert_eq!(results, vec![Continue, Fire, Continue, Fire, Continue]);
        assert!(timers.is_empty());
        assert!(matches!(
            CountTrigger::of(0),
            Err(Error::InvalidConfig { field: "count", .. })
        ));
    }

    #[test]
    fn purging_trigger_purges_on_every_firing() {
        let w = TimeWindow::new(0, 100);
        let mut timers = Vec::new();
        let mut t = PurgingTrigger::of(CountTrigger::of(2).unwrap());
        let results: Vec<_> = (0..3)
            .map(|i| Trigger::<u8>::on_element(&mut t, &1, i, &w, &mut ctx(&mut timers, i64::MIN)))
            .collect();
        use TriggerResult::*;
        assert_eq!(results, vec![Continue, FireAndPurge, Continue]);
        let mut e = PurgingTrigger::of(EventTimeTrigger);
        assert_eq!(
            Trigger::<u8>::on_event_time(&mut e, 99, &w, &mut ctx(&mut timers, 99)),
            FireAndPurge
        );
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            serde_json::to_string(t.inner()).unwrap()
        );
    }

    #[test]
    fn continuous_trigger_fires_every_interval_and_at_the_end() {
        let w = TimeWindow::new(0, 100);
        let mut timers = Vec::new();
        let mut t = ContinuousEventTimeTrigger::of(Duration::from_millis(30)).unwrap();
        use TriggerResult::*;
        let r = Trigger::<u8>::on_element(&mut t, &1, 35, &w, &mut ctx(&mut timers, 0));
        assert_eq!(r, Continue);
        assert_eq!(
            timers,
            vec![
                TriggerTimerRequest::EventTime(99),
                TriggerTimerRequest::EventTime(60)
            ]
        );
        timers.clear();
        // A second element schedules nothing new besides the end.
        Trigger::<u8>::on_element(&mut t, &1, 50, &w, &mut ctx(&mut timers, 0));
        assert_eq!(timers, vec![TriggerTimerRequest::EventTime(99)]);
        timers.clear();
        let fire = |t: &mut ContinuousEventTimeTrigger, time, timers: &mut Vec<_>| {
            Trigger::<u8>::on_event_time(t, time, &w, &mut ctx(timers, time))
        };
        assert_eq!(fire(&mut t, 60, &mut timers), Fire);
        assert_eq!(timers, vec![TriggerTimerRequest::EventTime(90)]);
        timers.clear();
        assert_eq!(fire(&mut t, 90, &mut timers), Fire);
        // The next periodic firing is capped at the window's end.
        assert_eq!(timers, vec![TriggerTimerRequest::EventTime(99)]);
        assert_eq!(fire(&mut t, 75, &mut timers), Continue);
        assert_eq!(fire(&mut t, 99, &mut timers), Fire);
        // Floor modulo for negative timestamps: -500 with 1000 fires first at 0.
        let w = TimeWindow::new(-5000, 5000);
        let mut t = ContinuousEventTimeTrigger::of(Duration::from_secs(1)).unwrap();
        timers.clear();
        Trigger::<u8>::on_element(&mut t, &1, -500, &w, &mut ctx(&mut timers, i64::MIN));
        assert_eq!(timers[1], TriggerTimerRequest::EventTime(0));
        assert!(matches!(
            ContinuousEventTimeTrigger::of(Duration::from_micros(10)),
            Err(Error::InvalidConfig {
                field: "interval",
                ..
            })
        ));
    }

    #[test]
    fn result_flags() {
        assert!(TriggerResult::FireAndPurge.is_fire() && TriggerResult::FireAndPurge.is_purge());
        assert!(!TriggerResult::Purge.is_fire() && TriggerResult::Purge.is_purge());
        assert!(TriggerResult::Fire.is_fire() && !TriggerResult::Fire.is_purge());
        assert!(!TriggerResult::Continue.is_fire() && !TriggerResult::Continue.is_purge());
    }
}
