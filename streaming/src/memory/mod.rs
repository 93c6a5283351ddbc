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
//! - records from [`MemoryEnv::from_collection`] get timestamps `0..N-1`;
//! - [`MemoryEnv::from_collection_partitioned`] replays a collection as N partitions, one
//!   chain (state, watermark) per partition, like the Redis engine;
//! - without `assign_timestamps_and_watermarks` there is no watermark until end of input;
//! - at end of input the watermark becomes `i64::MAX`: every event-time timer fires, every
//!   window reaches its cleanup time and emits what it never emitted;
//! - triggers' processing-time timers are never served; process functions' processing time
//!   is the highest record timestamp seen;
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
pub(crate) mod failures;
pub(crate) mod partition;
pub(crate) mod run;
pub(crate) mod runtime;

pub use checkpoint::CheckpointCoordinator;
pub use dead_letters::WithDeadLetters;
pub use env::MemoryEnv;
pub use failures::{DeadLetter, OnRecordError};
pub use run::JobSummary;

pub(crate) use runtime::{drive, MemoryRuntime};
