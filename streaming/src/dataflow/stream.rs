//! [`DataStream`]: a stream of records and the operators that keep it a stream; the
//! terminal operations that run it.

use super::plan::{Plan, Stage, Then};
use super::stages::*;
use super::types::{DataStream, KeyedStream};
use crate::api::Sink;
use crate::ops::{OperatorId, RecordTimestamp};
use crate::sealed::Sealed;
use crate::time::{EventTime, Offers, StreamTime, TimestampAssigner, WatermarkGenerator};
use crate::BoxError;
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

impl<P> DataStream<P> {
    /// The same stream (source id, position) with its plan replaced by `f(plan)`.
    pub(crate) fn replace_plan<Q>(self, f: impl FnOnce(P) -> Q) -> DataStream<Q> {
        DataStream {
            plan: f(self.plan),
            source_id: self.source_id,
            position: self.position,
            failed: self.failed,
        }
    }
}

impl<P: Plan> DataStream<P> {
    pub(crate) fn new(plan: P, source_id: String) -> Self {
        DataStream {
            plan,
            source_id: source_id.into(),
            position: 0,
            failed: None,
        }
    }

    pub(crate) fn next_id(&self, kind: &str) -> OperatorId {
        OperatorId::new(&self.source_id, self.position + 1, kind)
    }

    /// The id of a part of the source (position 0), e.g. its dead-letter output.
    pub(crate) fn source_part_id(&self, kind: &str) -> OperatorId {
        OperatorId::new(&self.source_id, 0, kind)
    }

    /// The same stream with its plan (a root, before any operator) wrapped by `f`; the
    /// operators added afterwards keep their ids.
    pub(crate) fn wrap_root<Q: Plan>(self, f: impl FnOnce(P) -> Q) -> DataStream<Q> {
        DataStream {
            plan: f(self.plan),
            source_id: self.source_id,
            position: self.position,
            failed: self.failed,
        }
    }

    pub(crate) fn then<S: Stage<P::Out>>(self, stage: S) -> DataStream<Then<P, S>> {
        DataStream {
            plan: Then {
                plan: self.plan,
                stage,
            },
            source_id: self.source_id,
            position: self.position + 1,
            failed: self.failed,
        }
    }

    /// The id the next operator added to this stream gets (for logs and tests).
    pub fn next_operator_id(&self, kind: &str) -> String {
        self.next_id(kind).to_string()
    }

    /// Transforms every element with `f`.
    pub fn map<U, F: FnMut(P::Out) -> U>(self, f: F) -> DataStream<Then<P, MapStage<F, U>>> {
        let id = self.next_id("map");
        self.then(MapStage {
            id,
            f,
            _u: PhantomData,
        })
    }

    /// Transforms every element with a fallible `f`.
    ///
    /// An `Err` fails the source record that led to this element, as an error or panic of
    /// any user function does (the error is [`Error::UserFunction`](crate::Error::UserFunction)
    /// naming this operator, or the crate's own error passed on with `?`, e.g. a decode
    /// error of [`Message::json`](crate::mq::Message::json)). Both engines then do the
    /// same: the record goes to the dead letters with its error type, message and attempts
    /// (a decode error or [`Error::permanent`](crate::Error::permanent) at once, other
    /// errors after the retries of the policy) and the run goes on with the next record;
    /// what the record did before it failed does not remain. The Redis engine follows its
    /// `processing_error_result` and rolls the batch back; the memory engine follows
    /// [`MemoryEnv::on_record_error`](crate::MemoryEnv::on_record_error) (whose
    /// [`OnRecordError::StopRun`](crate::memory::OnRecordError::StopRun) makes the terminal
    /// operation return the error instead) and, as it cannot undo state changes and
    /// delivered output, stops the run with [`Error::RecordNotUndone`](crate::Error::RecordNotUndone)
    /// when the record failed after either. See the guide's "Failing records".
    pub fn try_map<U, E, F>(self, f: F) -> DataStream<Then<P, TryMapStage<F, U, E>>>
    where
        E: Into<BoxError>,
        F: FnMut(P::Out) -> Result<U, E>,
    {
        let id = self.next_id("try_map");
        self.then(TryMapStage {
            id,
            f,
            _u: PhantomData,
        })
    }

    /// Keeps the elements for which `f` returns `true`.
    pub fn filter<F: FnMut(&P::Out) -> bool>(self, f: F) -> DataStream<Then<P, FilterStage<F>>> {
        let id = self.next_id("filter");
        self.then(FilterStage { id, f })
    }

    /// Replaces every element with the items `f` returns (any `IntoIterator`: a `Vec`, an
    /// array, an `Option`, an iterator), each with the element's timestamp.
    pub fn flat_map<I: IntoIterator, F: FnMut(P::Out) -> I>(
        self,
        f: F,
    ) -> DataStream<Then<P, FlatMapStage<F, I>>> {
        let id = self.next_id("flat_map");
        self.then(FlatMapStage {
            id,
            f,
            _i: PhantomData,
        })
    }

    /// Lets `generator` own the watermark from here on, keeping record timestamps.
    ///
    /// Per element: `on_event`, then `on_periodic_emit`, then the element goes on, then the
    /// watermark if it rose (so an element is judged against the watermark before it). An
    /// element a window rejects (window bounds outside `i64`) leaves the generator and the
    /// watermark as they were before it; the generator is `Clone` for that.
    ///
    /// The records must carry chosen event time ([`EventTime`]): a source with timestamps
    /// (a Redis topic, [`MemoryEnv::from_timestamped_collection`](crate::MemoryEnv::from_timestamped_collection),
    /// [`with_ingestion_time`](crate::DataStream::with_ingestion_time)) or an earlier
    /// assigner. On a stream without it this is a compile error: use
    /// [`assign_timestamps_and_watermarks_with`](Self::assign_timestamps_and_watermarks_with).
    pub fn assign_timestamps_and_watermarks<G: WatermarkGenerator<P::Out> + Clone>(
        self,
        generator: G,
    ) -> DataStream<Then<P, WatermarkStage<RecordTimestamp, G>>>
    where
        P::Time: Offers<EventTime>,
    {
        self.assign_timestamps_and_watermarks_with(RecordTimestamp, generator)
    }

    /// Sets each element's event time with `assigner` (e.g. `|f: &Flight, _| f.departure_ms`)
    /// and lets `generator` own the watermark from here on. The stream then has
    /// [`EventTime`], also when it had none before (the assigner's second argument, the
    /// record's timestamp, is then `i64::MIN`).
    pub fn assign_timestamps_and_watermarks_with<TA, G>(
        self,
        assigner: TA,
        generator: G,
    ) -> DataStream<Then<P, WatermarkStage<TA, G>>>
    where
        TA: TimestampAssigner<P::Out>,
        G: WatermarkGenerator<P::Out> + Clone,
    {
        let id = self.next_id("watermarks");
        self.then(WatermarkStage {
            id,
            assigner,
            generator,
            timed: P::Time::IS_EVENT_TIME,
        })
    }

    /// Partitions the stream by the key `key_fn` extracts.
    pub fn key_by<K, KF>(self, key_fn: KF) -> KeyedStream<P, KF, K>
    where
        K: Hash + Eq + Clone + 'static,
        KF: FnMut(&P::Out) -> K,
    {
        let mut stream = self;
        stream.position += 1;
        KeyedStream {
            stream,
            key_fn,
            _key: PhantomData,
        }
    }

    /// Runs the pipeline into `sink`: `open`, `invoke` per record, `close`.
    ///
    /// What "runs" means, and what it returns, depends on the engine of the pipeline's
    /// source: the memory engine runs it to the end of its input now and returns
    /// `Result<`[`JobSummary`](crate::JobSummary)`, Error>`; a Redis pipeline
    /// ([`RedisEnv::from_mq_topic`](crate::redis::RedisEnv::from_mq_topic)) is registered
    /// with its environment, returns `Result<(), Error>`, and starts with
    /// [`RedisEnv::blocking_start`](crate::redis::RedisEnv::blocking_start).
    ///
    /// A closure works as a sink, but its argument type is not inferred through the
    /// [`Sink`] trait: annotate it (`|x: u64| …`) or use [`for_each`](Self::for_each).
    ///
    /// # Errors
    /// Memory engine: the first error of the source or the sink; a failing record's error
    /// (a user function's error or panic, naming the operator) only when the run stops for
    /// it — [`OnRecordError::StopRun`](crate::memory::OnRecordError::StopRun), or
    /// [`Error::RecordNotUndone`](crate::Error::RecordNotUndone) — else the record is
    /// dead-lettered and the run goes on. The sink and the source are closed in every case. Redis engine: see [`RedisEnv`](crate::redis::RedisEnv)'s registration rules.
    pub fn sink<S, O>(self, sink: S) -> O
    where
        S: Sink<P::Out>,
        P::Root: Execute<P, S, Output = O>,
    {
        if let Some(error) = self.failed {
            return <P::Root as Execute<P, S>>::failed(error);
        }
        let id = self.next_id("sink");
        <P::Root as Execute<P, S>>::execute(self.plan, sink, id)
    }

    /// Runs the pipeline, calling `f` for every record (like [`sink`](Self::sink) with a
    /// closure, but the closure's argument type is inferred).
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn for_each<F: FnMut(P::Out)>(self, f: F) -> <P::Root as Execute<P, F>>::Output
    where
        P::Root: Execute<P, F>,
    {
        self.sink(f)
    }

    /// Runs the pipeline and logs every record through `tracing` at INFO (target
    /// `streaming::print`), as `{record:?}`.
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn print(self) -> <P::Root as Execute<P, PrintSink>>::Output
    where
        P::Out: Debug,
        P::Root: Execute<P, PrintSink>,
    {
        self.sink(PrintSink { prefix: None })
    }

    /// Like [`print`](Self::print), each line as `{prefix}> {record:?}`.
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn print_with_prefix(self, prefix: &str) -> <P::Root as Execute<P, PrintSink>>::Output
    where
        P::Out: Debug,
        P::Root: Execute<P, PrintSink>,
    {
        self.sink(PrintSink {
            prefix: Some(prefix.into()),
        })
    }
}

/// The sink of [`DataStream::print`]: logs `{record:?}` (or `{prefix}> {record:?}`) at INFO,
/// target `streaming::print`.
#[derive(Clone, Debug)]
pub struct PrintSink {
    prefix: Option<Arc<str>>,
}

impl<T: Debug> Sink<T> for PrintSink {
    fn invoke(&mut self, v: T) -> Result<(), BoxError> {
        match &self.prefix {
            None => tracing::info!(target: "streaming::print", "{v:?}"),
            Some(prefix) => tracing::info!(target: "streaming::print", "{prefix}> {v:?}"),
        }
        Ok(())
    }
}

/// How a terminal operation runs a pipeline: implemented by each engine's roots (sources).
///
/// Memory roots ([`MemoryEnv`](crate::MemoryEnv)'s sources) run the pipeline at once and
/// return `Result<JobSummary, Error>`; the Redis root registers the pipeline with its
/// [`RedisEnv`](crate::redis::RedisEnv) and returns `Result<(), Error>`.
#[diagnostic::on_unimplemented(
    message = "this pipeline cannot run on the engine of its source `{Self}` with this sink",
    label = "the pipeline or its sink does not fit the engine",
    note = "memory engine: the sink must implement `Sink` of the stream's element type",
    note = "Redis engine: user functions and the sink must be `Clone + Send + 'static` (one copy runs per partition); keyed state keys and values must be serde `Serialize + DeserializeOwned`; window keys, accumulators and custom triggers too"
)]
pub trait Execute<P, S>: Sealed {
    /// What the terminal operation returns.
    type Output;

    /// Runs (or registers) `plan` with `sink` as its end; `sink_id` is the sink's operator id.
    fn execute(plan: P, sink: S, sink_id: OperatorId) -> Self::Output;

    /// What the terminal operation returns for a pipeline that failed while it was
    /// written (a fragment's configuration error): `Err(error)`.
    fn failed(error: crate::Error) -> Self::Output;
}
