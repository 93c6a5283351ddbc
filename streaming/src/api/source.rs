//! The [`Source`] trait for user-defined inputs of the in-memory engine.

use crate::Error;

/// Produces the records of a bounded input.
///
/// How it is added says whether its records carry event time:
/// [`MemoryEnv::add_source`](crate::MemoryEnv::add_source) — none, the source emits with
/// [`SourceContext::collect`]; [`MemoryEnv::add_timestamped_source`](crate::MemoryEnv::add_timestamped_source)
/// — every record's, the source emits with [`SourceContext::collect_with_timestamp`].
///
/// Lifecycle: `open`, `run` until the input is exhausted, then `close` — also when `run` or
/// the pipeline fails. `run` pushes records through the [`SourceContext`]; each record is
/// processed by the whole pipeline before `collect` returns, so memory is bounded by the
/// pipeline's state, not by the input length.
pub trait Source<T> {
    /// Prepares the source. The default does nothing.
    ///
    /// # Errors
    /// Any error aborts the pipeline before it reads input.
    fn open(&mut self) -> Result<(), crate::BoxError> {
        Ok(())
    }

    /// Emits every record through `ctx`.
    ///
    /// # Errors
    /// Return the error of `ctx.collect` as it is (it names the failing operator) and wrap
    /// your own failures in [`Error::Source`].
    fn run<C: SourceContext<T>>(&mut self, ctx: &mut C) -> Result<(), Error>;

    /// Releases the source. The default does nothing.
    ///
    /// # Errors
    /// Reported by the terminal operation when the pipeline itself succeeded.
    fn close(&mut self) -> Result<(), crate::BoxError> {
        Ok(())
    }
}

/// The handle a [`Source`] emits records through.
pub trait SourceContext<T> {
    /// Emits `value` without a timestamp (Flink `collect`): the record carries no event
    /// time (a source added with [`add_source`](crate::MemoryEnv::add_source)), or on
    /// [ingestion time](crate::DataStream::with_ingestion_time) its arrival: the number of
    /// records this source emitted before it, in ms.
    ///
    /// # Errors
    /// The error of a downstream operator; stop and return it. [`Error::Source`] in a
    /// source added with [`add_timestamped_source`](crate::MemoryEnv::add_timestamped_source),
    /// whose every record needs its event time.
    fn collect(&mut self, value: T) -> Result<(), Error>;

    /// Emits `value` with event time `timestamp` (epoch ms; Flink `collectWithTimestamp`).
    ///
    /// # Errors
    /// The error of a downstream operator; stop and return it. [`Error::Source`] in a
    /// source added with [`add_source`](crate::MemoryEnv::add_source) (its records carry
    /// no event time, so the timestamp would be lost): add it with
    /// [`add_timestamped_source`](crate::MemoryEnv::add_timestamped_source).
    fn collect_with_timestamp(&mut self, value: T, timestamp: i64) -> Result<(), Error>;
}
