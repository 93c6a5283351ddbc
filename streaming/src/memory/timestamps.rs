//! How the records of a memory source get their timestamps: none, the engine's ingestion
//! clock, or given with each element.

use crate::dataflow::DataStream;
use crate::sealed::Sealed;
use crate::time::{EventTime, NoEventTime, StreamTime};

/// How a memory source's records get their timestamps: [`NoTimestamps`],
/// [`IngestionTime`] or [`GivenTimestamps`].
pub trait SourceTimestamps: Sealed + 'static {
    /// What the source's stream knows about event time.
    type Time: StreamTime;
    /// Whether each record's timestamp is given by the source (an element's pair, a user
    /// source's `collect_with_timestamp`) rather than by the ingestion clock.
    #[doc(hidden)]
    const GIVEN: bool;
}

/// The source chose no timestamps: its stream has [`NoEventTime`], so event-time windows
/// and triggers do not compile on it. The memory engine still runs its processing time on
/// the ingestion clock (record `i` of the source arrives at `i` ms).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTimestamps;

/// Ingestion time: a record's event time is when it arrived on the memory engine's
/// ingestion clock, which is deterministic: record `i` of the source (from 0, in input
/// order, across all partitions) arrives at `i` ms. Chosen with
/// [`DataStream::with_ingestion_time`].
#[derive(Clone, Copy, Debug, Default)]
pub struct IngestionTime;

/// Each element comes with its event time: the collection's items are
/// `(element, event time ms)` pairs; a user [`Source`](crate::api::Source) emits with
/// [`collect_with_timestamp`](crate::api::SourceContext::collect_with_timestamp).
#[derive(Clone, Copy, Debug, Default)]
pub struct GivenTimestamps;

impl Sealed for NoTimestamps {}
impl Sealed for IngestionTime {}
impl Sealed for GivenTimestamps {}

impl SourceTimestamps for NoTimestamps {
    type Time = NoEventTime;
    const GIVEN: bool = false;
}

impl SourceTimestamps for IngestionTime {
    type Time = EventTime;
    const GIVEN: bool = false;
}

impl SourceTimestamps for GivenTimestamps {
    type Time = EventTime;
    const GIVEN: bool = true;
}

/// How a collection's item becomes a record: the element and its timestamp, given the
/// item's arrival time on the ingestion clock (its index in the input, ms).
pub trait CollectionItem<Item>: SourceTimestamps {
    /// The element type of the stream.
    type Out;

    /// The element and its record timestamp.
    #[doc(hidden)]
    fn split(item: Item, arrival: i64) -> (Self::Out, i64);
}

impl<Item> CollectionItem<Item> for NoTimestamps {
    type Out = Item;
    #[inline(always)]
    fn split(item: Item, arrival: i64) -> (Item, i64) {
        (item, arrival)
    }
}

impl<Item> CollectionItem<Item> for IngestionTime {
    type Out = Item;
    #[inline(always)]
    fn split(item: Item, arrival: i64) -> (Item, i64) {
        (item, arrival)
    }
}

impl<T> CollectionItem<(T, i64)> for GivenTimestamps {
    type Out = T;
    #[inline(always)]
    fn split(item: (T, i64), _arrival: i64) -> (T, i64) {
        item
    }
}

/// The records of a collection source: each item's element and record timestamp, item `i`
/// (from 0) arriving at `i` ms.
pub(crate) fn records<I, Ts>(items: I) -> impl Iterator<Item = (Ts::Out, i64)>
where
    I: IntoIterator,
    Ts: CollectionItem<I::Item>,
{
    (0i64..)
        .zip(items)
        .map(|(arrival, item)| Ts::split(item, arrival))
}

/// A memory source without timestamps that can run on ingestion time instead
/// ([`DataStream::with_ingestion_time`]).
#[diagnostic::on_unimplemented(
    message = "`with_ingestion_time()` goes right after a memory source without timestamps",
    label = "not right after such a source",
    note = "call it right after `from_collection`, `from_elements`, `from_collection_partitioned` or `add_source` (and their `_with_id` forms); a source with timestamps (`from_timestamped_collection`, a Redis topic) has its event time already"
)]
pub trait IngestionTimeSource<OnIngestionTime>: Sealed + Sized {
    /// The same source on ingestion time.
    #[doc(hidden)]
    fn on_ingestion_time(self) -> OnIngestionTime;
}

impl<P> DataStream<P> {
    /// Runs the stream on ingestion time: each record's event time is its arrival on the
    /// memory engine's ingestion clock, which is deterministic — record `i` of the source
    /// (from 0, in input order, across all partitions) arrives at `i` ms. The stream then
    /// has [`EventTime`]: event-time windows, triggers and timers work on it, with no
    /// watermark before the end of input unless a generator is added
    /// ([`assign_timestamps_and_watermarks`](Self::assign_timestamps_and_watermarks)).
    ///
    /// Only right after a memory source without timestamps (a compile error elsewhere).
    /// A user source on ingestion time emits with
    /// [`collect`](crate::api::SourceContext::collect).
    ///
    /// ```
    /// use std::time::Duration;
    /// use streaming::time::TumblingEventTimeWindows;
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// // Records arrive at 0, 1, 2, 3 ms: windows of 2 ms hold two each.
    /// let out = env
    ///     .from_elements([1, 2, 3, 4])
    ///     .with_ingestion_time()
    ///     .key_by(|_: &i32| ())
    ///     .window(TumblingEventTimeWindows::of(Duration::from_millis(2))?)
    ///     .sum()
    ///     .map(|(_, w, sum)| (w.start(), sum))
    ///     .collect_vec()?;
    /// assert_eq!(out, [(0, 3), (2, 7)]);
    /// # Ok::<(), streaming::Error>(())
    /// ```
    pub fn with_ingestion_time<Q>(self) -> DataStream<Q>
    where
        P: IngestionTimeSource<Q>,
    {
        self.replace_plan(P::on_ingestion_time)
    }
}
