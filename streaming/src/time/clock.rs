//! Processing time: what "now" is for a keyed process function's processing-time timers.

/// Where an engine's processing time comes from. A keyed process operator asks its clock
/// for the processing time at every record.
pub trait Clock: 'static {
    /// Processing time (epoch ms) when a record with event time `record_timestamp` arrives.
    fn processing_time(record_timestamp: i64) -> i64;
}

/// Processing time is the highest record timestamp seen so far, so a bounded run is
/// deterministic (the memory engine).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordClock;

impl Clock for RecordClock {
    #[inline(always)]
    fn processing_time(record_timestamp: i64) -> i64 {
        record_timestamp
    }
}

/// Processing time is the wall clock (the Redis engine).
#[derive(Clone, Copy, Debug, Default)]
pub struct WallClock;

impl Clock for WallClock {
    #[inline]
    fn processing_time(_record_timestamp: i64) -> i64 {
        wall_clock_ms()
    }
}

/// The wall clock in epoch milliseconds.
pub(crate) fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
