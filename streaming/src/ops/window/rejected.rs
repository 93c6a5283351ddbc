//! Where a window operator sends elements whose window bounds do not fit in `i64`.

use crate::api::{RejectedElement, Sink};
use crate::BoxError;

/// Where a window operator sends elements whose window bounds do not fit in `i64`
/// ([`RejectedElement`]): [`NoRejectedOutput`] or a sink ([`RejectedTo`]).
#[doc(hidden)]
pub trait RejectedOutput<T> {
    /// Opens the output's sink.
    ///
    /// # Errors
    /// The sink failed to open.
    fn open(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
    /// Sends `rejected` to the sink; `None` when there is no sink.
    fn send(&mut self, rejected: RejectedElement<T>) -> Option<Result<(), BoxError>>;
    /// Ends a batch of the output's sink ([`Sink::flush`]).
    ///
    /// # Errors
    /// The sink failed to flush.
    fn flush(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
    /// Closes the output's sink.
    ///
    /// # Errors
    /// The sink failed to close.
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
}

/// No rejected-element output: the engine's default applies (memory: count in
/// `JobSummary::window_bounds_rejected` and a `tracing` warning when the run stops on the
/// first failure; otherwise, and on Redis: the record fails and is dead-lettered).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRejectedOutput;

impl<T> RejectedOutput<T> for NoRejectedOutput {
    fn send(&mut self, _: RejectedElement<T>) -> Option<Result<(), BoxError>> {
        None
    }
}

/// A sink receiving rejected elements.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct RejectedTo<S>(pub S);

impl<T, S: Sink<RejectedElement<T>>> RejectedOutput<T> for RejectedTo<S> {
    fn open(&mut self) -> Result<(), BoxError> {
        self.0.open()
    }
    fn send(&mut self, rejected: RejectedElement<T>) -> Option<Result<(), BoxError>> {
        Some(self.0.invoke(rejected))
    }
    fn flush(&mut self) -> Result<(), BoxError> {
        self.0.flush()
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.0.close()
    }
}
