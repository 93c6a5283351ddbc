//! What a running job reports: per-partition progress and the job's diagnostics.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// Progress of one partition of a running job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionProgress {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The partition.
    pub partition: u32,
    /// The subtask owning it.
    pub subtask: u32,
    /// The id of the last entry whose batch committed.
    pub last_committed_id: Option<String>,
    /// Records processed in committed batches (failed records excluded).
    pub records: u64,
    /// Batches committed.
    pub batches: u64,
    /// Records that failed and went to retry or the dead-letter queue (each attempt
    /// counts).
    pub failed: u64,
    /// Entries in committed batches that were skipped, not processed: retries addressed to
    /// another consumer group (their field `rg` names that group). Also the metric
    /// `streaming_records_skipped_total`.
    pub skipped: u64,
    /// Messages in committed batches acknowledged without running the pipeline: their
    /// idempotency key was processed within `sink_deduplication_ttl`
    /// (`sink_deduplication_enabled`). Metric `streaming_records_deduplicated_total`.
    pub deduplicated: u64,
    /// Why the partition stopped, when it did (a state schema mismatch under
    /// [`SchemaMismatchPolicy::Fail`](crate::redis::SchemaMismatchPolicy::Fail), or two
    /// Redis sinks of the pipeline writing one key as different types): it reads nothing
    /// more until the job is started again.
    pub stopped: Option<String>,
    /// Whether its subtask has taken it (lease, read position and state) at least once.
    pub taken: bool,
    /// Whether this process holds the partition's lease now (with several processes of
    /// one job each holds its share; see the [`redis`](crate::redis) module docs).
    pub owned: bool,
    /// Times this process found the partition's lease passed to another owner: a write
    /// (batch, timers, idle flush, retry, dead letter) refused with [`Error::Fenced`](crate::Error::Fenced), or a
    /// lease renewal that found another owner (a stall — GC pause, `SIGSTOP`, a slow
    /// network, or one user function call longer than `lease_ttl`). Each time nothing was
    /// written, and the partition was dropped from memory until its lease is won again.
    pub fenced: u64,
    /// Times this process took the partition (first take and every take-over after a
    /// loss or a rebalance).
    pub takes: u64,
    /// The partition's watermark (ms) as of its last commit: the one its last watermark
    /// operator emitted (`i64::MIN` before the first; `i64::MAX` after an idle flush, until
    /// a record starts the next watermark epoch; `None` until the partition has committed).
    pub watermark: Option<i64>,
    /// Window firings committed (each emission of a window's result).
    pub window_fired: u64,
    /// Elements that arrived after all their windows were past the allowed lateness
    /// (sent to the late side output, if any, and otherwise dropped).
    pub window_late_dropped: u64,
    /// Elements that fell between windows (sliding windows with `slide > size`) and were
    /// not late: they belong to no window and are dropped.
    pub window_gap_dropped: u64,
    /// Idle flushes: times the partition's watermark was flushed to `i64::MAX` after
    /// `watermark_idle_timeout` without input or a generator's `mark_idle`.
    pub idle_flushes: u64,
    /// When the partition last committed (a batch, timers or an idle flush); `None`
    /// before its first commit of this run. A partition that stalls shows an old time
    /// here and a recent [`last_error_at`](Self::last_error_at).
    pub last_commit_at: Option<SystemTime>,
    /// The last error the partition met and is recovering from (e.g. Redis unreachable:
    /// the message names the address). It is kept after the partition recovered: the
    /// partition is still failing only if [`last_error_at`](Self::last_error_at) is later
    /// than [`last_commit_at`](Self::last_commit_at) (see [`stalled`](Self::stalled)).
    pub last_error: Option<String>,
    /// When [`last_error`](Self::last_error) happened.
    pub last_error_at: Option<SystemTime>,
    /// Whether the partition's next idle flush has work: records went through a pipeline
    /// with a watermark since its last idle flush, or it was taken holding windows or
    /// event-time timers a previous run left unfired. Such a partition is flushed after
    /// the idle timeout whatever its watermark (even one that never left `i64::MIN`).
    /// `false` once this process let the partition go: its flush is the next owner's.
    pub awaiting_flush: bool,
    /// The consumer lag last sampled (entries not yet delivered to the group; sampled
    /// every few seconds while the partition is owned); `None` before the first sample or
    /// when Redis cannot tell.
    pub lag: Option<u64>,
    /// When [`lag`](Self::lag) was sampled.
    pub lag_sampled_at: Option<SystemTime>,
    /// When this process first took the partition in this run.
    pub first_taken_at: Option<SystemTime>,
    /// Whether the partition is stalled: owned, with work (a [`lag`](Self::lag) above 0
    /// sampled since its last commit, or an error since then), and no commit for
    /// `stalled_after` (since its first take when it never committed). Computed when
    /// read; also the gauge `streaming_partition_stalled` and the job registry's
    /// `stalled`.
    pub stalled: bool,
}

impl PartitionProgress {
    /// Whether the partition is stalled at `now` (see [`stalled`](Self::stalled)).
    pub(crate) fn is_stalled(&self, stalled_after: Duration, now: SystemTime) -> bool {
        let since_commit = |t: Option<SystemTime>| match (t, self.last_commit_at) {
            (Some(t), Some(commit)) => t > commit,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let lagging = self.lag.is_some_and(|l| l > 0) && since_commit(self.lag_sampled_at);
        let has_work = lagging || since_commit(self.last_error_at);
        let since = self.last_commit_at.or(self.first_taken_at);
        self.owned
            && has_work
            && since.is_some_and(|t| now.duration_since(t).unwrap_or_default() >= stalled_after)
    }
}

/// What [`JobClient::diagnostics`](super::JobClient::diagnostics) reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobDiagnostics {
    /// The configured job name.
    pub job_name: String,
    /// The configured instance id.
    pub job_instance_id: String,
    /// Subtasks per pipeline as configured when the job started.
    pub parallelism: u32,
    /// Subtasks per pipeline now (after [`JobClient::scale_parallelism`](super::JobClient::scale_parallelism)).
    pub live_parallelism: u32,
    /// Partitions this process holds now, over all pipelines (see
    /// [`PartitionProgress::owned`]).
    pub owned_partitions: usize,
    /// Whether the job is paused.
    pub paused: bool,
    /// Records read and not yet committed.
    pub in_flight: u64,
    /// Subtasks still running.
    pub running_subtasks: usize,
    /// Per partition, sorted by (topic, group, partition).
    pub partitions: Vec<PartitionProgress>,
    /// Errors that ended a subtask or that it recovered from (newest last, at most 100),
    /// each with what failed, the partition and when.
    pub errors: Vec<super::JobError>,
    /// Hot-key warnings logged (at most one per hash per `hot_key_warn_interval`).
    pub hot_key_warnings: u64,
    /// Batch commits delayed by [`HotKeyPolicy::Throttle`](crate::redis::HotKeyPolicy::Throttle).
    pub hot_key_throttled: u64,
    /// Records rejected by [`HotKeyPolicy::FailFast`](crate::redis::HotKeyPolicy::FailFast).
    pub hot_key_rejected: u64,
    /// The last sampled field count (`HLEN`) per state hash key (sampled every
    /// `state_size_report_every_n_writes` state writes).
    pub state_sizes: BTreeMap<String, u64>,
    /// Whether this process is the job's leader now (always `false` without
    /// `leader_election_enabled`).
    pub is_leader: bool,
    /// The instance id of the job's leader as last seen by this process (its own when it
    /// leads); `None` without `leader_election_enabled` or while no process leads.
    pub leader_instance_id: Option<String>,
    /// The fencing token of this process's leader term (0 when it does not lead).
    pub fencing_token: u64,
    /// Whether this process is running a checkpoint now.
    pub checkpointing: bool,
    /// The id of the latest checkpoint this process completed or saw complete (`None`
    /// before any).
    pub latest_checkpoint_id: Option<u64>,
}

/// Hot-key and state-size counters shared by the subtasks.
#[derive(Default)]
pub(crate) struct HotStats {
    pub(crate) warnings: u64,
    pub(crate) throttled: u64,
    pub(crate) rejected: u64,
    pub(crate) sizes: BTreeMap<String, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s))
    }

    fn owned() -> PartitionProgress {
        PartitionProgress {
            owned: true,
            first_taken_at: at(0),
            last_commit_at: at(10),
            ..PartitionProgress::default()
        }
    }

    #[test]
    fn a_partition_is_stalled_with_work_and_no_commit_for_stalled_after() {
        let after = Duration::from_secs(60);
        let now = at(100).unwrap();
        let failing = PartitionProgress {
            last_error_at: at(20),
            ..owned()
        };
        assert!(failing.is_stalled(after, now));
        assert!(!failing.is_stalled(after, at(69).unwrap()));
        // An error before the last commit is history, not work.
        let recovered = PartitionProgress {
            last_error_at: at(5),
            ..owned()
        };
        assert!(!recovered.is_stalled(after, now));
        // A lag sampled before the last commit is stale; one sampled after it is work.
        let stale = PartitionProgress {
            lag: Some(3),
            lag_sampled_at: at(9),
            ..owned()
        };
        assert!(!stale.is_stalled(after, now));
        let lagging = PartitionProgress {
            lag_sampled_at: at(11),
            ..stale.clone()
        };
        assert!(lagging.is_stalled(after, now));
        // Never committed: counted from the first take.
        let never = PartitionProgress {
            last_commit_at: None,
            last_error_at: at(1),
            ..owned()
        };
        assert!(never.is_stalled(after, now));
        assert!(!never.is_stalled(after, at(59).unwrap()));
        // Not owned here: not this process's to report.
        let elsewhere = PartitionProgress {
            owned: false,
            ..failing
        };
        assert!(!elsewhere.is_stalled(after, now));
    }
}
