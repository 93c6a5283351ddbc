//! A partition's `metrics` handles, labelled job/topic/group/partition (see
//! `docs/metrics.md`, included in the [`redis`](super) module docs).
//!
//! Every series is updated once per committed batch (or idle flush, timer commit, fetch,
//! failed record, lag sample), never per record. Handles are registered once and kept:
//! the per-partition ones when the partition is set up, those with an operator or state
//! label when that (operator, state) first shows up.

use std::collections::HashMap;
use std::time::Duration;

/// The labels of a partition's series.
type Labels = Vec<(&'static str, String)>;

/// One (operator, state)'s series.
pub(in crate::redis) struct StateMetrics {
    pub(in crate::redis) reads: metrics::Counter,
    pub(in crate::redis) writes: metrics::Counter,
    pub(in crate::redis) deletes: metrics::Counter,
    pub(in crate::redis) size: metrics::Gauge,
    pub(in crate::redis) hot_keys: metrics::Counter,
}

/// A partition's metric handles. Registered when the job starts: install the recorder
/// before [`RedisEnv::blocking_start`](crate::redis::RedisEnv::blocking_start).
pub(in crate::redis) struct PartMetrics {
    labels: Labels,
    pub(in crate::redis) records: metrics::Counter,
    pub(in crate::redis) failed: metrics::Counter,
    pub(in crate::redis) window_fired: metrics::Counter,
    pub(in crate::redis) window_late_dropped: metrics::Counter,
    pub(in crate::redis) idle_flushes: metrics::Counter,
    pub(in crate::redis) skipped: metrics::Counter,
    pub(in crate::redis) deduplicated: metrics::Counter,
    /// Time a batch spent in the chain (all passes, fetches and failed records included).
    pub(in crate::redis) handle_seconds: metrics::Histogram,
    /// One commit's round trip (script, and `WAIT` when asked).
    pub(in crate::redis) commit_seconds: metrics::Histogram,
    /// One fetch of missed keys' state (one pipelined round trip).
    pub(in crate::redis) fetch_seconds: metrics::Histogram,
    /// Writing the partition's part of one checkpoint (all its copy steps).
    pub(in crate::redis) checkpoint_part_seconds: metrics::Histogram,
    /// Registered at the partition's first event-time watermark (never a placeholder 0).
    watermark: Option<metrics::Gauge>,
    /// Registered with the first watermark or flush.
    watermark_flushed: Option<metrics::Gauge>,
    /// Registered at the first lag sample.
    lag: Option<metrics::Gauge>,
    state: HashMap<(String, String), StateMetrics>,
    timers: HashMap<String, metrics::Gauge>,
}

impl PartMetrics {
    pub(in crate::redis) fn new(job: &str, topic: &str, group: &str, partition: u32) -> Self {
        let labels = vec![
            ("job", job.to_string()),
            ("topic", topic.to_string()),
            ("group", group.to_string()),
            ("partition", partition.to_string()),
        ];
        PartMetrics {
            records: metrics::counter!("streaming_records_total", &labels),
            failed: metrics::counter!("streaming_records_failed_total", &labels),
            window_fired: metrics::counter!("streaming_window_fired_total", &labels),
            window_late_dropped: metrics::counter!("streaming_window_late_dropped_total", &labels),
            idle_flushes: metrics::counter!("streaming_idle_flushes_total", &labels),
            skipped: metrics::counter!("streaming_records_skipped_total", &labels),
            deduplicated: metrics::counter!("streaming_records_deduplicated_total", &labels),
            handle_seconds: metrics::histogram!("streaming_handle_seconds", &labels),
            commit_seconds: metrics::histogram!("streaming_commit_seconds", &labels),
            fetch_seconds: metrics::histogram!("streaming_state_fetch_seconds", &labels),
            checkpoint_part_seconds: metrics::histogram!(
                "streaming_checkpoint_part_seconds",
                &labels
            ),
            watermark: None,
            watermark_flushed: None,
            lag: None,
            state: HashMap::new(),
            timers: HashMap::new(),
            labels,
        }
    }

    /// The partition's labels and `extra`.
    fn with(&self, extra: &[(&'static str, &str)]) -> Labels {
        let mut labels = self.labels.clone();
        labels.extend(extra.iter().map(|(k, v)| (*k, (*v).to_string())));
        labels
    }

    /// The series of `state` of `operator`, registered on first use.
    pub(in crate::redis) fn state(&mut self, operator: &str, state: &str) -> &StateMetrics {
        let key = (operator.to_string(), state.to_string());
        if !self.state.contains_key(&key) {
            let l = self.with(&[("operator", operator), ("state", state)]);
            let m = StateMetrics {
                reads: metrics::counter!("streaming_state_reads_total", &l),
                writes: metrics::counter!("streaming_state_writes_total", &l),
                deletes: metrics::counter!("streaming_state_deletes_total", &l),
                size: metrics::gauge!("streaming_state_size_fields", &l),
                hot_keys: metrics::counter!("streaming_state_hot_key_total", &l),
            };
            self.state.insert(key.clone(), m);
        }
        &self.state[&key]
    }

    /// Sets `operator`'s timer queue size.
    pub(in crate::redis) fn timer_queue(&mut self, operator: &str, size: usize) {
        let gauge = match self.timers.get(operator) {
            Some(g) => g,
            None => {
                let l = self.with(&[("operator", operator)]);
                let g = metrics::gauge!("streaming_timer_queue_size", &l);
                self.timers.entry(operator.to_string()).or_insert(g)
            }
        };
        gauge.set(size as f64);
    }

    /// The watermark after a commit: an event time sets `streaming_watermark_ms` and
    /// clears `streaming_watermark_flushed`; an idle flush (`i64::MAX`) sets the flag and
    /// leaves the last event-time watermark; no watermark yet (`i64::MIN`) sets nothing.
    pub(in crate::redis) fn watermark(&mut self, watermark: i64) {
        let flushed = watermark == crate::time::MAX_WATERMARK;
        if watermark == crate::time::MIN_WATERMARK {
            return;
        }
        if !flushed {
            self.watermark
                .get_or_insert_with(|| metrics::gauge!("streaming_watermark_ms", &self.labels))
                .set(watermark as f64);
        }
        self.watermark_flushed
            .get_or_insert_with(|| metrics::gauge!("streaming_watermark_flushed", &self.labels))
            .set(if flushed { 1.0 } else { 0.0 });
    }

    /// Sets the sampled consumer lag.
    pub(in crate::redis) fn lag(&mut self, lag: u64) {
        self.lag
            .get_or_insert_with(|| metrics::gauge!("streaming_consumer_lag", &self.labels))
            .set(lag as f64);
    }

    /// Counts a failed record's retry (`dead_letter == false`) or dead letter, by error
    /// type (the failure path, not per record: registered here).
    pub(in crate::redis) fn failure(&self, dead_letter: bool, error_type: &str) {
        let l = self.with(&[("error_type", error_type)]);
        if dead_letter {
            metrics::counter!("streaming_dead_letters_total", &l).increment(1);
        } else {
            metrics::counter!("streaming_records_retried_total", &l).increment(1);
        }
    }
}

/// How often an owned partition samples its consumer lag (one `XINFO GROUPS`).
pub(in crate::redis) const LAG_SAMPLE_INTERVAL: Duration = Duration::from_secs(2);

/// Job-level series, labelled `job` (and `topic`, `group` for a pipeline).
pub(in crate::redis) mod job {
    /// `streaming_jobs_started_total`; the job's failure and cancel counters are
    /// registered at 0 with it, so a scrape shows them before they first move.
    pub(in crate::redis) fn started(job: &str) {
        metrics::counter!("streaming_jobs_started_total", "job" => job.to_string()).increment(1);
        metrics::counter!("streaming_job_start_failed_total", "job" => job.to_string())
            .increment(0);
        metrics::counter!("streaming_jobs_cancelled_total", "job" => job.to_string()).increment(0);
    }

    /// `streaming_job_start_failed_total`.
    pub(in crate::redis) fn start_failed(job: &str) {
        metrics::counter!("streaming_job_start_failed_total", "job" => job.to_string())
            .increment(1);
    }

    /// `streaming_jobs_cancelled_total`.
    pub(in crate::redis) fn cancelled(job: &str) {
        metrics::counter!("streaming_jobs_cancelled_total", "job" => job.to_string()).increment(1);
    }

    /// `streaming_pipelines_started_total` or `streaming_pipeline_start_failed_total`.
    pub(in crate::redis) fn pipeline(job: &str, topic: &str, group: &str, started: bool) {
        let labels = [
            ("job", job.to_string()),
            ("topic", topic.to_string()),
            ("group", group.to_string()),
        ];
        if started {
            metrics::counter!("streaming_pipelines_started_total", &labels).increment(1);
            metrics::counter!("streaming_pipeline_start_failed_total", &labels).increment(0);
        } else {
            metrics::counter!("streaming_pipeline_start_failed_total", &labels).increment(1);
        }
    }
}
