//! The memory engine's sources on [`MemoryEnv`]: collections and user sources.

use super::failures::RecordFailures;
use super::run::{MemoryRoot, SingleChain};
use super::runtime::drive_records;
use super::timestamps::{
    records, CollectionItem, GivenTimestamps, IngestionTime, IngestionTimeSource, NoTimestamps,
    SourceTimestamps,
};
use super::{drive, MemoryEnv, MemoryRuntime};
use crate::api::{Source, SourceContext};
use crate::dataflow::{BuildPlan, DataStream, Plan};
use crate::ops::{Operator, OperatorId};
use crate::sealed::Sealed;
use crate::Error;
use std::marker::PhantomData;

impl MemoryEnv {
    /// A stream of the items of `items`, consumed lazily, without timestamps: its
    /// event time was never chosen ([`NoEventTime`](crate::time::NoEventTime)), so
    /// event-time windows do not compile on it. For event time give each element its
    /// timestamp ([`from_timestamped_collection`](Self::from_timestamped_collection)), add
    /// a timestamp assigner
    /// ([`assign_timestamps_and_watermarks_with`](DataStream::assign_timestamps_and_watermarks_with)),
    /// or choose ingestion time ([`with_ingestion_time`](DataStream::with_ingestion_time)).
    /// The source id is `source-{n}` for the environment's n-th source.
    pub fn from_collection<I: IntoIterator>(&self, items: I) -> DataStream<CollectionSource<I>> {
        let id = self.next_source_id();
        self.from_collection_with_id(id, items)
    }

    /// Like [`from_collection`](Self::from_collection) with an explicit source id, which
    /// prefixes the ids of its operators and so keys their checkpointed state: running the
    /// same pipeline again with the same id continues from the newest checkpoint.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]`.
    pub fn from_collection_with_id<I: IntoIterator>(
        &self,
        source_id: impl Into<String>,
        items: I,
    ) -> DataStream<CollectionSource<I>> {
        self.collection(source_id.into(), items)
    }

    /// Like [`from_collection`](Self::from_collection), for a fixed list of elements.
    pub fn from_elements<T, const N: usize>(
        &self,
        elements: [T; N],
    ) -> DataStream<CollectionSource<[T; N]>> {
        self.from_collection(elements)
    }

    /// A stream of the elements of `items`, pairs of `(element, event time ms)`, consumed
    /// lazily: each element's event time is the one it comes with (Flink
    /// `collectWithTimestamp`), so event-time windows run on it. There is no watermark
    /// before the end of input unless a generator is added
    /// ([`assign_timestamps_and_watermarks`](DataStream::assign_timestamps_and_watermarks)).
    /// The source id is `source-{n}` for the environment's n-th source.
    ///
    /// ```
    /// use std::time::Duration;
    /// use streaming::time::TumblingEventTimeWindows;
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// // Three orders three minutes apart: three one-minute windows.
    /// let orders = [(("ann", 10), 0), (("ann", 20), 180_000), (("ann", 30), 360_000)];
    /// let out = env
    ///     .from_timestamped_collection(orders)
    ///     .key_by(|o: &(&str, i32)| o.0)
    ///     .window(TumblingEventTimeWindows::of(Duration::from_secs(60))?)
    ///     .sum_by(|o: &(&str, i32)| o.1)
    ///     .map(|(_, w, sum)| (w.start(), sum))
    ///     .collect_vec()?;
    /// assert_eq!(out, [(0, 10), (180_000, 20), (360_000, 30)]);
    /// # Ok::<(), streaming::Error>(())
    /// ```
    pub fn from_timestamped_collection<I, T>(
        &self,
        items: I,
    ) -> DataStream<CollectionSource<I, GivenTimestamps>>
    where
        I: IntoIterator<Item = (T, i64)>,
    {
        let id = self.next_source_id();
        self.from_timestamped_collection_with_id(id, items)
    }

    /// Like [`from_timestamped_collection`](Self::from_timestamped_collection) with an
    /// explicit source id (see [`from_collection_with_id`](Self::from_collection_with_id)).
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]`.
    pub fn from_timestamped_collection_with_id<I, T>(
        &self,
        source_id: impl Into<String>,
        items: I,
    ) -> DataStream<CollectionSource<I, GivenTimestamps>>
    where
        I: IntoIterator<Item = (T, i64)>,
    {
        self.collection(source_id.into(), items)
    }

    fn collection<I, Ts>(&self, id: String, items: I) -> DataStream<CollectionSource<I, Ts>>
    where
        I: IntoIterator,
        Ts: CollectionItem<I::Item>,
    {
        check_source_id(&id);
        DataStream::new(
            CollectionSource {
                env: self.clone(),
                items,
                _ts: PhantomData,
            },
            id,
        )
    }

    /// A stream fed by a user [`Source`] that emits without timestamps
    /// ([`SourceContext::collect`]): like [`from_collection`](Self::from_collection), its
    /// event time was never chosen. Its id is `source-{n}`.
    pub fn add_source<T, S: Source<T>>(&self, source: S) -> DataStream<UserSource<S, T>> {
        let id = self.next_source_id();
        self.add_source_with_id(id, source)
    }

    /// A stream fed by a user [`Source`] with an explicit source id, which prefixes the ids
    /// of its operators and so keys their checkpointed state.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]` (the rule
    /// for every source id).
    pub fn add_source_with_id<T, S: Source<T>>(
        &self,
        source_id: impl Into<String>,
        source: S,
    ) -> DataStream<UserSource<S, T>> {
        self.user_source(source_id.into(), source)
    }

    /// A stream fed by a user [`Source`] that gives every record its event time
    /// ([`SourceContext::collect_with_timestamp`]; `collect` fails the run): event-time
    /// windows run on it. Its id is `source-{n}`.
    pub fn add_timestamped_source<T, S: Source<T>>(
        &self,
        source: S,
    ) -> DataStream<UserSource<S, T, GivenTimestamps>> {
        let id = self.next_source_id();
        self.add_timestamped_source_with_id(id, source)
    }

    /// Like [`add_timestamped_source`](Self::add_timestamped_source) with an explicit
    /// source id.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]`.
    pub fn add_timestamped_source_with_id<T, S: Source<T>>(
        &self,
        source_id: impl Into<String>,
        source: S,
    ) -> DataStream<UserSource<S, T, GivenTimestamps>> {
        self.user_source(source_id.into(), source)
    }

    fn user_source<S, T, Ts>(&self, id: String, source: S) -> DataStream<UserSource<S, T, Ts>>
    where
        S: Source<T>,
        Ts: SourceTimestamps,
    {
        check_source_id(&id);
        DataStream::new(
            UserSource {
                env: self.clone(),
                source,
                id: id.clone(),
                _t: PhantomData,
            },
            id,
        )
    }
}

pub(crate) fn check_source_id(id: &str) {
    assert!(
        !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
        "source id `{id}` must be non-empty and use only [A-Za-z0-9_.-]"
    );
}

/// The plan of [`MemoryEnv::from_collection`] and
/// [`MemoryEnv::from_timestamped_collection`]; `Ts` says how its records get timestamps.
pub struct CollectionSource<I, Ts = NoTimestamps> {
    env: MemoryEnv,
    items: I,
    _ts: PhantomData<fn() -> Ts>,
}

impl<I: Clone, Ts> Clone for CollectionSource<I, Ts> {
    fn clone(&self) -> Self {
        CollectionSource {
            env: self.env.clone(),
            items: self.items.clone(),
            _ts: PhantomData,
        }
    }
}

impl<I, Ts> Sealed for CollectionSource<I, Ts> {}

impl<I: IntoIterator, Ts: CollectionItem<I::Item>> Plan for CollectionSource<I, Ts> {
    type Out = Ts::Out;
    type Root = Self;
    type Head = Ts::Out;
    type Time = Ts::Time;

    fn root(&self) -> &Self {
        self
    }
}

impl<I: IntoIterator, Ts: CollectionItem<I::Item>> BuildPlan<MemoryRuntime>
    for CollectionSource<I, Ts>
{
    fn build<O: Operator<Ts::Out>>(
        self,
        _rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<(Self, impl Operator<Ts::Out> + use<I, Ts, O>), Error> {
        Ok((self, downstream))
    }
}

impl<I: IntoIterator, Ts: CollectionItem<I::Item>> MemoryRoot for CollectionSource<I, Ts> {
    type Item = Ts::Out;
    type Runner = SingleChain;

    fn env(&self) -> &MemoryEnv {
        &self.env
    }

    fn drive<O: Operator<Ts::Out>>(
        self,
        mut op: O,
        failures: &mut RecordFailures<'_, Ts::Out>,
    ) -> Result<(), Error> {
        drive_records(&mut op, records::<I, Ts>(self.items), failures)
    }
}

impl<I> IngestionTimeSource<CollectionSource<I, IngestionTime>>
    for CollectionSource<I, NoTimestamps>
{
    fn on_ingestion_time(self) -> CollectionSource<I, IngestionTime> {
        CollectionSource {
            env: self.env,
            items: self.items,
            _ts: PhantomData,
        }
    }
}

/// The plan of [`MemoryEnv::add_source`] and [`MemoryEnv::add_timestamped_source`]; `Ts`
/// says how its records get timestamps.
pub struct UserSource<S, T, Ts = NoTimestamps> {
    env: MemoryEnv,
    source: S,
    id: String,
    _t: PhantomData<fn() -> (T, Ts)>,
}

/// What a user source emits through: the chain, the ingestion clock, the rule for
/// timestamps (`Ts`) and what becomes of a record that fails.
struct Ctx<'a, 'f, O, T, Ts> {
    op: &'a mut O,
    id: &'a str,
    emitted: i64,
    failures: &'a mut RecordFailures<'f, T>,
    _ts: PhantomData<Ts>,
}

impl<O, T, Ts: SourceTimestamps> Ctx<'_, '_, O, T, Ts> {
    /// The error of a record emitted against the source's rule for timestamps.
    fn misuse(&self, reason: &str) -> Error {
        Error::Source {
            source_id: self.id.to_string(),
            source: reason.into(),
        }
    }
}

impl<T, O: Operator<T>, Ts: SourceTimestamps> SourceContext<T> for Ctx<'_, '_, O, T, Ts> {
    #[inline]
    fn collect(&mut self, value: T) -> Result<(), Error> {
        if Ts::GIVEN {
            return Err(self.misuse(
                "`collect` in a source added with `add_timestamped_source`, which gives every record its event time: emit with `collect_with_timestamp`, or add the source with `add_source`",
            ));
        }
        let arrival = self.emitted;
        self.emitted += 1;
        self.failures.feed(self.op, value, arrival)
    }

    #[inline]
    fn collect_with_timestamp(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        if !Ts::GIVEN {
            return Err(self.misuse(
                "`collect_with_timestamp` in a source added with `add_source`, whose records have no event time: add it with `add_timestamped_source` to keep the timestamps, or emit with `collect`",
            ));
        }
        self.emitted += 1;
        self.failures.feed(self.op, value, timestamp)
    }
}

impl<S, T, Ts> Sealed for UserSource<S, T, Ts> {}

impl<T, S: Source<T>, Ts: SourceTimestamps> Plan for UserSource<S, T, Ts> {
    type Out = T;
    type Root = Self;
    type Head = T;
    type Time = Ts::Time;

    fn root(&self) -> &Self {
        self
    }
}

impl<T, S: Source<T>, Ts: SourceTimestamps> BuildPlan<MemoryRuntime> for UserSource<S, T, Ts> {
    fn build<O: Operator<T>>(
        self,
        _rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<(Self, impl Operator<T> + use<S, T, Ts, O>), Error> {
        Ok((self, downstream))
    }
}

impl<T, S: Source<T>, Ts: SourceTimestamps> MemoryRoot for UserSource<S, T, Ts> {
    type Item = T;
    type Runner = SingleChain;

    fn env(&self) -> &MemoryEnv {
        &self.env
    }

    fn drive<O: Operator<T>>(
        mut self,
        mut op: O,
        failures: &mut RecordFailures<'_, T>,
    ) -> Result<(), Error> {
        let source_error = |id: &str, source| Error::Source {
            source_id: id.to_string(),
            source,
        };
        self.source.open().map_err(|e| source_error(&self.id, e))?;
        let guard_id = OperatorId::new(&self.id, 0, "source");
        let (source, id) = (&mut self.source, self.id.as_str());
        let result = drive(&mut op, |op| {
            crate::ops::guard(&guard_id, || {
                source.run(&mut Ctx::<O, T, Ts> {
                    op,
                    id,
                    emitted: 0,
                    failures,
                    _ts: PhantomData,
                })
            })?
        });
        let closed = self.source.close().map_err(|e| source_error(&self.id, e));
        result.and(closed)
    }
}

impl<S, T> IngestionTimeSource<UserSource<S, T, IngestionTime>> for UserSource<S, T, NoTimestamps> {
    fn on_ingestion_time(self) -> UserSource<S, T, IngestionTime> {
        UserSource {
            env: self.env,
            source: self.source,
            id: self.id,
            _t: PhantomData,
        }
    }
}
