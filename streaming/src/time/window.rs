//! [`TimeWindow`]: a half-open interval of event time.

use std::fmt;

/// A window of event time `[start, end)` in epoch milliseconds.
///
/// Follows Flink's `TimeWindow`: `max_timestamp() == end - 1` is the last timestamp that
/// belongs to the window and the time at which an event-time trigger fires it.
///
/// Serialized (serde) as `{"start": .., "end": ..}`; deserializing rejects `end <= start`.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "RawWindow")]
pub struct TimeWindow {
    start: i64,
    end: i64,
}

#[derive(serde::Deserialize)]
struct RawWindow {
    start: i64,
    end: i64,
}

impl TryFrom<RawWindow> for TimeWindow {
    type Error = String;
    fn try_from(w: RawWindow) -> Result<Self, String> {
        if w.end > w.start {
            Ok(TimeWindow {
                start: w.start,
                end: w.end,
            })
        } else {
            Err(format!("empty window [{}, {})", w.start, w.end))
        }
    }
}

impl TimeWindow {
    /// The window of [`GlobalWindows`](super::GlobalWindows): `[i64::MIN, i64::MAX)`.
    pub const GLOBAL: TimeWindow = TimeWindow {
        start: i64::MIN,
        end: i64::MAX,
    };

    /// Creates the window `[start, end)`.
    ///
    /// # Panics
    /// If `end <= start` (an empty window is a bug in the caller, not bad input).
    pub fn new(start: i64, end: i64) -> Self {
        assert!(
            end > start,
            "TimeWindow requires start < end, got [{start}, {end})"
        );
        TimeWindow { start, end }
    }

    /// The first millisecond of the window (inclusive).
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The end of the window (exclusive).
    pub fn end(&self) -> i64 {
        self.end
    }

    /// The last millisecond in the window: `end - 1`.
    pub fn max_timestamp(&self) -> i64 {
        self.end - 1
    }

    /// Whether `timestamp` lies in `[start, end)`.
    pub fn contains(&self, timestamp: i64) -> bool {
        self.start <= timestamp && timestamp < self.end
    }

    /// Whether the two windows overlap **or touch** (Flink's `TimeWindow.intersects`,
    /// which is inclusive: `[0, 10)` and `[10, 20)` intersect). Session windows merge
    /// windows for which this holds.
    pub fn intersects(&self, other: &TimeWindow) -> bool {
        self.start <= other.end && self.end >= other.start
    }

    /// The smallest window that covers both.
    pub fn cover(&self, other: &TimeWindow) -> TimeWindow {
        TimeWindow {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// The time at which a window with this `allowed_lateness` (ms) is cleaned up:
    /// `max_timestamp + allowed_lateness`, saturating at `i64::MAX`.
    pub fn cleanup_time(&self, allowed_lateness: i64) -> i64 {
        self.max_timestamp().saturating_add(allowed_lateness)
    }

    /// Whether an element arriving when the watermark is `watermark` is late for this
    /// window: `max_timestamp + allowed_lateness <= watermark` (Flink `isWindowLate`).
    pub fn is_late(&self, allowed_lateness: i64, watermark: i64) -> bool {
        self.cleanup_time(allowed_lateness) <= watermark
    }
}

impl fmt::Debug for TimeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimeWindow[{}, {})", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_timestamp_is_end_minus_one() {
        let w = TimeWindow::new(1000, 2000);
        assert_eq!(w.max_timestamp(), 1999);
        assert!(w.contains(1000));
        assert!(w.contains(1999));
        assert!(!w.contains(2000));
    }

    #[test]
    fn touching_windows_intersect() {
        let a = TimeWindow::new(0, 10);
        assert!(a.intersects(&TimeWindow::new(10, 20)));
        assert!(TimeWindow::new(10, 20).intersects(&a));
        assert!(!a.intersects(&TimeWindow::new(11, 20)));
        assert_eq!(a.cover(&TimeWindow::new(10, 20)), TimeWindow::new(0, 20));
    }

    #[test]
    fn lateness_is_inclusive_of_the_cleanup_time() {
        let w = TimeWindow::new(0, 1000);
        assert!(!w.is_late(0, 998));
        assert!(w.is_late(0, 999));
        assert!(!w.is_late(500, 1498));
        assert!(w.is_late(500, 1499));
        assert_eq!(TimeWindow::new(0, i64::MAX).cleanup_time(10), i64::MAX);
    }
}
