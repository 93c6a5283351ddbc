//! The terminal operator that hands records to a [`Sink`].

use super::{guard, user_error, Operator, OperatorId};
use crate::api::Sink;
use crate::Error;

/// Calls [`Sink::invoke`] for every record; opens and closes the sink with the pipeline.
pub(crate) struct SinkOp<S> {
    id: OperatorId,
    sink: S,
}

impl<S> SinkOp<S> {
    /// A sink operator with id `id`.
    pub(crate) fn new(id: OperatorId, sink: S) -> Self {
        SinkOp { id, sink }
    }
}

impl<T, S: Sink<T>> Operator<T> for SinkOp<S> {
    fn open(&mut self) -> Result<(), Error> {
        guard(&self.id, || self.sink.open())?.map_err(|e| user_error(&self.id, e))
    }

    #[inline]
    fn process(&mut self, value: T, _timestamp: i64) -> Result<(), Error> {
        match guard(&self.id, || self.sink.invoke(value))? {
            Ok(()) => Ok(()),
            Err(e) => Err(user_error(&self.id, e)),
        }
    }

    #[inline]
    fn on_watermark(&mut self, _watermark: i64) -> Result<(), Error> {
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        // The memory engine's one batch ends with its input.
        guard(&self.id, || self.sink.flush())?.map_err(|e| user_error(&self.id, e))
    }

    fn close(&mut self) -> Result<(), Error> {
        guard(&self.id, || self.sink.close())?.map_err(|e| user_error(&self.id, e))
    }
}
