//! A partition's idle-flush bookkeeping: when it last read, whether its next idle flush
//! has work, and what Redis's flush mark (`KeySpace::flush_pending`) holds.

use std::time::Duration;
use tokio::time::Instant;

/// See the module docs.
pub(in crate::redis) struct FlushState {
    /// When the partition last read an entry, or an idle flush last ran or failed (the idle
    /// timeout counts from there).
    last_read: Instant,
    /// The next idle flush has work: records went through the chain since the last one,
    /// or the partition was taken holding unfired windows or event-time timers.
    pub(in crate::redis) awaiting: bool,
    /// Whether Redis marks the partition as awaiting a flush, as of the last commit or
    /// take; `None` when unknown (a commit failed): the next commit writes the mark
    /// whatever it holds.
    pub(in crate::redis) marked: Option<bool>,
}

impl FlushState {
    /// Nothing read, no work, the mark unknown.
    pub(in crate::redis) fn new() -> Self {
        FlushState {
            last_read: Instant::now(),
            awaiting: false,
            marked: None,
        }
    }

    /// The idle timeout starts again now (an entry was read, or a flush ran).
    pub(in crate::redis) fn restart_idle(&mut self) {
        self.last_read = Instant::now();
    }

    /// How long the partition has been idle.
    pub(in crate::redis) fn idle(&self) -> Duration {
        self.last_read.elapsed()
    }

    /// The mark the next commit writes (it follows [`awaiting`](Self::awaiting)) when
    /// Redis may hold another value; the mark is unknown until that commit succeeds.
    pub(in crate::redis) fn mark_to_write(&mut self) -> Option<bool> {
        let awaiting = self.awaiting;
        (self.marked.take() != Some(awaiting)).then_some(awaiting)
    }

    /// A commit succeeded: Redis's mark is what the partition awaits.
    pub(in crate::redis) fn committed(&mut self) {
        self.marked = Some(self.awaiting);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_written_when_redis_may_hold_another_value() {
        let mut f = FlushState::new();
        assert_eq!(f.mark_to_write(), Some(false), "unknown: written");
        f.committed();
        assert_eq!(f.mark_to_write(), None, "Redis holds it");
        // Unknown again until the commit that skipped it succeeds.
        f.awaiting = true;
        assert_eq!(f.mark_to_write(), Some(true));
        assert_eq!(
            f.mark_to_write(),
            Some(true),
            "still unknown: written again"
        );
        f.committed();
        assert_eq!(f.mark_to_write(), None);
    }
}
