//! Timestamp assignment and watermark generation.

use super::{guard, Operator, OperatorId};
use crate::time::{TimestampAssigner, WatermarkGenerator, WatermarkOutput, MAX_WATERMARK};
use crate::Error;

/// Keeps each record's current timestamp (the assigner of
/// `assign_timestamps_and_watermarks(generator)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordTimestamp;

impl<T> TimestampAssigner<T> for RecordTimestamp {
    #[inline]
    fn extract_timestamp(&mut self, _element: &T, record_timestamp: i64) -> i64 {
        record_timestamp
    }
}

/// Assigns event time with a [`TimestampAssigner`] and owns the watermark from here on:
/// per element it calls the generator's `on_event` then `on_periodic_emit`, forwards the
/// element, then forwards the watermark if it rose. Watermarks from upstream are dropped,
/// except the end-of-input watermark (Flink's `TimestampsAndWatermarksOperator`).
pub struct AssignWatermarks<TA, G, N> {
    id: OperatorId,
    assigner: TA,
    generator: G,
    output: WatermarkOutput,
    emitted: i64,
    next: N,
}

impl<TA, G, N> AssignWatermarks<TA, G, N> {
    /// An assigner operator with id `id` feeding `next`.
    pub fn new(id: OperatorId, assigner: TA, generator: G, next: N) -> Self {
        AssignWatermarks {
            id,
            assigner,
            generator,
            output: WatermarkOutput::default(),
            emitted: i64::MIN,
            next,
        }
    }
}

impl<T, TA, G, N> Operator<T> for AssignWatermarks<TA, G, N>
where
    TA: TimestampAssigner<T>,
    G: WatermarkGenerator<T>,
    N: Operator<T>,
{
    fn open(&mut self) -> Result<(), Error> {
        self.next.open()
    }

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let (assigner, generator, output) =
            (&mut self.assigner, &mut self.generator, &mut self.output);
        let ts = guard(&self.id, || {
            let ts = assigner.extract_timestamp(&value, timestamp);
            generator.on_event(&value, ts, output);
            generator.on_periodic_emit(output);
            ts
        })?;
        // The element is judged against the watermark in force before it.
        self.next.process(value, ts)?;
        let current = self.output.current();
        if current > self.emitted {
            self.emitted = current;
            self.next.on_watermark(current)?;
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        if watermark == MAX_WATERMARK && self.emitted < MAX_WATERMARK {
            self.emitted = MAX_WATERMARK;
            return self.next.on_watermark(MAX_WATERMARK);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.next.finish()
    }

    fn close(&mut self) -> Result<(), Error> {
        self.next.close()
    }
}
