//! Whether a stream's records carry event time someone chose: a type, so an event-time
//! operator on a stream without it is a compile error.

use crate::sealed::Sealed;

/// What a stream knows about its records' event time: [`EventTime`] (chosen timestamps) or
/// [`NoEventTime`]. Every stream has one ([`Plan::Time`](crate::dataflow::Plan::Time)):
/// its source sets it, a timestamp assigner makes it [`EventTime`] and every other operator
/// keeps it.
pub trait StreamTime: Sealed + 'static {
    /// Whether records carry chosen event time.
    const IS_EVENT_TIME: bool;
}

/// The records of the stream carry event time that was chosen: a source's timestamps (a
/// Redis message's timestamp, a timestamped memory source, the memory engine's ingestion
/// clock when asked for) or a timestamp assigner's
/// ([`DataStream::assign_timestamps_and_watermarks_with`](crate::DataStream::assign_timestamps_and_watermarks_with)).
///
/// As what an operator needs ([`WindowAssigner::Time`](super::WindowAssigner::Time),
/// [`Trigger::Time`](super::Trigger::Time)): it runs on event time and watermarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventTime;

/// Nobody chose the records' event time (a memory source without timestamps): event-time
/// windows and triggers and [`assign_timestamps_and_watermarks`](crate::DataStream::assign_timestamps_and_watermarks)
/// do not compile on such a stream, and a keyed process function's event-time timer is an
/// error.
///
/// As what an operator needs: nothing about time ([`GlobalWindows`](super::GlobalWindows),
/// [`CountTrigger`](super::CountTrigger)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoEventTime;

impl Sealed for EventTime {}
impl Sealed for NoEventTime {}

impl StreamTime for EventTime {
    const IS_EVENT_TIME: bool = true;
}

impl StreamTime for NoEventTime {
    const IS_EVENT_TIME: bool = false;
}

/// A stream whose time is `Self` can run an operator that needs `Need`: anything runs an
/// operator that needs [`NoEventTime`]; only an [`EventTime`] stream runs one that needs
/// [`EventTime`].
#[diagnostic::on_unimplemented(
    message = "this operator needs event time, but the stream's timestamps were never chosen",
    label = "needs the records' event time, which nothing chose",
    note = "choose it before `key_by`: `.assign_timestamps_and_watermarks_with(|e: &T, _previous: i64| e.time_ms, generator)`",
    note = "or start from a source with timestamps: `MemoryEnv::from_timestamped_collection` (pairs of element and event time ms), `.with_ingestion_time()` right after a memory source (record i at i ms), or a Redis topic (the message timestamp)"
)]
pub trait Offers<Need>: StreamTime {}

impl<T: StreamTime> Offers<NoEventTime> for T {}
impl Offers<EventTime> for EventTime {}
// A second impl for `NoEventTime`, so that rustc does not infer `Need = NoEventTime` from
// the only one and report a type mismatch instead of the message above.
impl Offers<NothingNeedsThis> for NoEventTime {}

/// A requirement no operator has: it only keeps [`NoEventTime`]'s impls of [`Offers`] from
/// being unique.
#[doc(hidden)]
#[derive(Debug)]
pub enum NothingNeedsThis {}
