//! The [`Sink`] trait: where a pipeline's records end.

use crate::BoxError;

/// Receives a pipeline's output records.
///
/// Lifecycle: `open` once before the first record, `invoke` per record, `close`
/// once at the end — also when the pipeline fails. Closures `FnMut(T)` are sinks.
pub trait Sink<T> {
    /// Prepares the sink. The default does nothing.
    ///
    /// # Errors
    /// Any error aborts the pipeline before it reads input.
    fn open(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Writes one record.
    ///
    /// # Errors
    /// Any error aborts the pipeline; the terminal operation returns it, naming the sink.
    fn invoke(&mut self, value: T) -> Result<(), BoxError>;

    /// Releases the sink. Called after the last record and after a failure.
    ///
    /// # Errors
    /// Reported by the terminal operation when the pipeline itself succeeded.
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Output the sink buffered to be written atomically with the input batch that
    /// produced it (the Redis engine's commit). Sinks writing elsewhere return `None` (the
    /// default).
    #[doc(hidden)]
    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        None
    }
}

/// Values a sink appends to a Redis list in the batch commit (see
/// [`RedisListSink`](crate::redis::RedisListSink)).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct CommitWrites {
    /// The list's base name; the engine appends the partition's hash tag.
    pub list: std::sync::Arc<str>,
    /// The values, in output order.
    pub values: Vec<String>,
}

impl<T, F: FnMut(T)> Sink<T> for F {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self(value);
        Ok(())
    }
}

/// An element a window operator rejected because the bounds of a window it belongs to do
/// not fit in `i64` milliseconds (e.g. a timestamp near `i64::MAX`): what the window's
/// rejected-element side output receives. The element took no part in any window; the
/// pipeline went on with the next element. It does not move the watermark: the watermark
/// generators before the window go back to their state before it, so the elements after it
/// are judged against the watermark before it (a timestamp near `i64::MAX` makes nothing
/// late).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RejectedElement<T> {
    /// The element as it reached the window.
    pub element: T,
    /// Its event time (ms).
    pub timestamp: i64,
    /// The id of the window operator that rejected it, e.g. `orders/3:window-count`.
    pub operator: String,
}
