//! The in-memory engine: bounded input, single thread, deterministic.
//!
//! Build a pipeline from a [`MemoryEnv`] with the builder API; a terminal operation
//! ([`DataStream::sink`](crate::DataStream::sink),
//! [`DataStream::print`](crate::DataStream::print),
//! [`DataStream::collect_vec`](crate::DataStream::collect_vec), or iterating
//! the stream) runs it at once, pulling the source lazily: memory is bounded by the
//! pipeline's state, not by the input length.
//!
//! Semantics:
//! - event time is never invented: every source says whether its records carry event
//!   time, and the stream's type carries it ([`Plan::Time`](crate::dataflow::Plan::Time)).
//!   [`MemoryEnv::from_collection`], [`MemoryEnv::from_elements`],
//!   [`MemoryEnv::from_collection_partitioned`] and [`MemoryEnv::add_source`] give none
//!   ([`NoTimestamps`]): an event-time window or trigger, or
//!   `assign_timestamps_and_watermarks(generator)`, on such a stream is a compile error,
//!   an event-time timer of a keyed process function fails the record
//!   ([`Error::NoEventTime`](crate::Error::NoEventTime)), and `ctx.timestamp()` is
//!   `i64::MIN`. Event time comes from the elements
//!   ([`MemoryEnv::from_timestamped_collection`] and its partitioned form take
//!   `(element, event time ms)` pairs; [`MemoryEnv::add_timestamped_source`] takes a
//!   source that emits with `collect_with_timestamp`), from a timestamp assigner
//!   ([`DataStream::assign_timestamps_and_watermarks_with`](crate::DataStream::assign_timestamps_and_watermarks_with)),
//!   or from the ingestion clock when asked for
//!   ([`DataStream::with_ingestion_time`](crate::DataStream::with_ingestion_time)):
//!   record `i` of the source, from 0 in input order, arrives at `i` ms;
//! - [`MemoryEnv::from_collection_partitioned`] replays a collection as N partitions, one
//!   chain (state, watermark) per partition, like the Redis engine;
//! - without `assign_timestamps_and_watermarks` there is no watermark until end of input;
//! - at end of input the watermark becomes `i64::MAX`: every event-time timer fires, every
//!   window reaches its cleanup time and emits what it never emitted;
//! - triggers' processing-time timers are never served; process functions' processing time
//!   is the highest record timestamp seen (on a stream without event time, the ingestion
//!   clock: record `i` at `i` ms);
//! - keyed state (user state, rolling reduce/sum, windows) is snapshotted by the
//!   [`CheckpointCoordinator`] when checkpointing is enabled;
//! - a source record that fails (a user function's error or panic, a decode error, window
//!   bounds) is dead-lettered by the [`OnRecordError`] policy and the run goes on, as on
//!   the Redis engine; its dead letters go to
//!   [`DataStream::side_output_dead_letters`](crate::DataStream::side_output_dead_letters).
//!   A record that fails after it changed keyed state or delivered output stops the run
//!   ([`Error::RecordNotUndone`](crate::Error::RecordNotUndone)): the memory engine cannot
//!   undo either.

mod checkpoint;
mod dead_letters;
pub(crate) mod env;
mod environment;
pub(crate) mod failures;
pub(crate) mod partition;
pub(crate) mod run;
pub(crate) mod runtime;
mod timestamps;
pub(crate) mod union;

pub use checkpoint::CheckpointCoordinator;
pub use dead_letters::WithDeadLetters;
pub use environment::MemoryEnv;
pub use failures::{DeadLetter, OnRecordError};
pub use run::JobSummary;
pub use timestamps::{
    CollectionItem, GivenTimestamps, IngestionTime, IngestionTimeSource, NoTimestamps,
    SourceTimestamps,
};

pub use runtime::DrivenClock;
pub(crate) use runtime::{drive, MemoryRuntime};
