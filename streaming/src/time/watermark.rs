//! Watermark generators and timestamp assigners (Flink `WatermarkStrategy` pieces).

use super::{duration_ms, MIN_WATERMARK};
use crate::Error;
use std::time::Duration;

/// Where a [`WatermarkGenerator`] reports progress. The watermark only moves forward:
/// [`raise`](Self::raise) with a lower value is ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatermarkOutput {
    watermark: i64,
    idle: bool,
}

impl Default for WatermarkOutput {
    fn default() -> Self {
        WatermarkOutput {
            watermark: MIN_WATERMARK,
            idle: false,
        }
    }
}

impl WatermarkOutput {
    /// Raises the watermark to `watermark` (ms) if that is higher than the current one;
    /// returns whether it moved. Raising also marks the output active.
    pub fn raise(&mut self, watermark: i64) -> bool {
        self.idle = false;
        if watermark > self.watermark {
            self.watermark = watermark;
            true
        } else {
            false
        }
    }

    /// The current watermark (ms); `i64::MIN` until the first raise.
    pub fn current(&self) -> i64 {
        self.watermark
    }

    /// Declares the input idle. On the Redis engine an idle partition stops holding back
    /// the others; the in-memory engine reads a single input and only records the flag.
    pub fn mark_idle(&mut self) {
        self.idle = true;
    }

    /// Declares the input active again.
    pub fn mark_active(&mut self) {
        self.idle = false;
    }

    /// Whether the input is marked idle.
    pub fn is_idle(&self) -> bool {
        self.idle
    }
}

/// Produces watermarks from the elements it sees (Flink `WatermarkGenerator`).
///
/// Both callbacks run once per element, `on_event` first: `on_periodic_emit` is driven by
/// elements, not by a wall clock, so results do not depend on timing.
///
/// `assign_timestamps_and_watermarks` needs the generator to be `Clone`: when a window
/// downstream rejects an element (its window bounds do not fit in `i64`), the generator
/// goes back to a copy taken before that element, so the element does not move the
/// watermark. Keep the generator cheap to clone; it is copied before each element when the
/// pipeline has a window.
pub trait WatermarkGenerator<T> {
    /// Sees every element with its event timestamp (ms).
    fn on_event(&mut self, event: &T, timestamp: i64, output: &mut WatermarkOutput);

    /// Called after every `on_event`; the default does nothing.
    fn on_periodic_emit(&mut self, output: &mut WatermarkOutput) {
        let _ = output;
    }
}

/// Watermark = highest timestamp seen minus a fixed bound: after a record with timestamp
/// `t` the watermark is `max(previous, t - out_of_orderness)` (Flink
/// `BoundedOutOfOrdernessWatermarks`, emitted per element).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundedOutOfOrderness {
    out_of_orderness: i64,
}

impl BoundedOutOfOrderness {
    /// Tolerates elements up to `out_of_orderness` behind the highest timestamp seen.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `out_of_orderness` when it exceeds `i64::MAX` ms.
    pub fn new(out_of_orderness: Duration) -> Result<Self, Error> {
        Ok(BoundedOutOfOrderness {
            out_of_orderness: duration_ms("out_of_orderness", out_of_orderness)?,
        })
    }

    /// The bound in ms.
    pub fn out_of_orderness_ms(&self) -> i64 {
        self.out_of_orderness
    }
}

impl<T> WatermarkGenerator<T> for BoundedOutOfOrderness {
    fn on_event(&mut self, _event: &T, timestamp: i64, output: &mut WatermarkOutput) {
        output.raise(timestamp.saturating_sub(self.out_of_orderness));
    }
}

/// Watermark = highest timestamp seen, for inputs whose timestamps never decrease
/// (Flink `AscendingTimestampsWatermarks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AscendingTimestamps;

impl<T> WatermarkGenerator<T> for AscendingTimestamps {
    fn on_event(&mut self, _event: &T, timestamp: i64, output: &mut WatermarkOutput) {
        output.raise(timestamp);
    }
}

/// Never emits a watermark: event-time windows fire only at end of input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoWatermarks;

impl<T> WatermarkGenerator<T> for NoWatermarks {
    fn on_event(&mut self, _event: &T, _timestamp: i64, _output: &mut WatermarkOutput) {}
}

/// Extracts an element's event time (Flink `TimestampAssigner`). Implemented for closures
/// `FnMut(&T, i64) -> i64` receiving the element and its current record timestamp (ms;
/// `i64::MIN` on a stream whose event time was never chosen: the record has none).
pub trait TimestampAssigner<T> {
    /// The element's event time in ms.
    fn extract_timestamp(&mut self, element: &T, record_timestamp: i64) -> i64;
}

impl<T, F: FnMut(&T, i64) -> i64> TimestampAssigner<T> for F {
    fn extract_timestamp(&mut self, element: &T, record_timestamp: i64) -> i64 {
        self(element, record_timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_out_of_orderness_is_max_of_previous_and_t_minus_bound() {
        let mut g = BoundedOutOfOrderness::new(Duration::from_millis(10)).unwrap();
        let mut out = WatermarkOutput::default();
        let mut seen = Vec::new();
        for t in [100, 95, 120, 50, 121] {
            WatermarkGenerator::<()>::on_event(&mut g, &(), t, &mut out);
            seen.push(out.current());
        }
        assert_eq!(seen, vec![90, 90, 110, 110, 111]);
    }

    #[test]
    fn raise_is_monotone_and_reactivates() {
        let mut out = WatermarkOutput::default();
        assert_eq!(out.current(), i64::MIN);
        assert!(out.raise(5));
        assert!(!out.raise(4));
        assert_eq!(out.current(), 5);
        out.mark_idle();
        assert!(out.is_idle());
        out.raise(1);
        assert!(!out.is_idle());
    }

    #[test]
    fn saturates_near_i64_min() {
        let mut g = BoundedOutOfOrderness::new(Duration::from_millis(10)).unwrap();
        let mut out = WatermarkOutput::default();
        WatermarkGenerator::<()>::on_event(&mut g, &(), i64::MIN + 3, &mut out);
        assert_eq!(out.current(), i64::MIN);
    }
}
