//! The terminal operators: the one that hands records to a [`Sink`], and the end of a
//! chain whose owner takes its records.

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

/// The end of a chain that hands each record, with its timestamp (ms), to `push` (a
/// buffer, an operator the chain does not own). Its lifecycle does nothing: opening,
/// watermarks, `finish` and `close` belong to whoever owns what `push` reaches.
pub(crate) struct ChainEnd<F>(F);

impl<F> ChainEnd<F> {
    /// The end of a chain of `T` records that calls `push(record, timestamp)`.
    pub(crate) fn new<T>(push: F) -> Self
    where
        F: FnMut(T, i64) -> Result<(), Error>,
    {
        ChainEnd(push)
    }
}

impl<T, F: FnMut(T, i64) -> Result<(), Error>> Operator<T> for ChainEnd<F> {
    fn open(&mut self) -> Result<(), Error> {
        Ok(())
    }

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        (self.0)(value, timestamp)
    }

    fn on_watermark(&mut self, _watermark: i64) -> Result<(), Error> {
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn close(&mut self) -> Result<(), Error> {
        Ok(())
    }
}
