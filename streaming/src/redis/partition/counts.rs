//! What a partition counts of a batch: its records by fate, and a batch whose commit got
//! no reply (counted once a later take confirms it).

/// The records of one committed batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::redis) struct BatchCounts {
    /// Run through the chain and committed.
    pub(in crate::redis) processed: u64,
    /// Failed, sent to retry or the dead-letter queue.
    pub(in crate::redis) failed: u64,
    /// Skipped: retries addressed to another consumer group (field `rg`).
    pub(in crate::redis) skipped: u64,
    /// Acknowledged without running: their idempotency key was processed already
    /// (`sink_deduplication_enabled`).
    pub(in crate::redis) deduplicated: u64,
}

/// The counts of a batch whose commit is not confirmed.
pub(in crate::redis) struct Unconfirmed {
    pub(in crate::redis) last_id: String,
    pub(in crate::redis) counts: BatchCounts,
    /// Its records stay in the job's `in_flight` until confirmed or dropped, so that
    /// `await_caught_up` does not see the frontier before the counters.
    pub(in crate::redis) in_flight: u64,
}
