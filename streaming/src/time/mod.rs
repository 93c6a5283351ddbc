//! The time model shared by both engines: windows, window assigners, triggers and
//! watermark generators.
//!
//! All times are epoch milliseconds in `i64`. The rules follow Flink:
//!
//! - a [`TimeWindow`] is `[start, end)` and its [`max_timestamp`](TimeWindow::max_timestamp)
//!   is `end - 1`;
//! - a window fires when the watermark reaches its `max_timestamp`;
//! - an element is *late* for a window when `max_timestamp + allowed_lateness <= watermark`,
//!   judged against the watermark in force **before** that element was seen;
//! - a window's state is cleared when the watermark reaches `max_timestamp + allowed_lateness`
//!   (the *cleanup time*); contents that were never emitted are emitted once as a final
//!   firing first (our policy; Flink discards them).

mod assigner;
pub(crate) mod clock;
mod event_time;
pub(crate) mod trigger;
mod watermark;
mod window;

pub use assigner::{
    EventTimeSessionWindows, GlobalWindows, SlidingEventTimeWindows, TriggerRequired,
    TumblingEventTimeWindows, WindowAssigner,
};
pub use clock::{Clock, RecordClock, WallClock};
pub use event_time::{EventTime, NoEventTime, Offers, StreamTime};
pub use trigger::{
    ContinuousEventTimeTrigger, CountTrigger, EventTimeTrigger, ProcessingTimeTrigger,
    PurgingTrigger, Trigger, TriggerContext, TriggerResult,
};
pub use watermark::{
    AscendingTimestamps, BoundedOutOfOrderness, NoWatermarks, TimestampAssigner,
    WatermarkGenerator, WatermarkOutput,
};
pub use window::TimeWindow;

use crate::Error;
use std::time::Duration;

/// The lowest watermark: nothing is known about event time yet.
pub const MIN_WATERMARK: i64 = i64::MIN;
/// The watermark at end of input: every event-time timer and window is due.
pub const MAX_WATERMARK: i64 = i64::MAX;

/// Converts a `Duration` into milliseconds as `i64`.
///
/// # Errors
/// [`Error::InvalidConfig`] naming `field` when the duration exceeds `i64::MAX` ms.
pub(crate) fn duration_ms(field: &'static str, d: Duration) -> Result<i64, Error> {
    i64::try_from(d.as_millis()).map_err(|_| Error::InvalidConfig {
        field,
        reason: format!("{d:?} does not fit in i64 milliseconds"),
    })
}
