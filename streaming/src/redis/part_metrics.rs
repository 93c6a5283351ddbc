//! A partition's `metrics` handles, labelled job/topic/group/partition (see the
//! [`redis`](super) module docs).

/// A partition's metric handles. Registered when the job starts: install the recorder
/// before [`RedisEnv::execute_async`](super::RedisEnv::execute_async).
pub(super) struct PartMetrics {
    pub(super) records: metrics::Counter,
    pub(super) failed: metrics::Counter,
    pub(super) window_fired: metrics::Counter,
    pub(super) window_late_dropped: metrics::Counter,
    pub(super) idle_flushes: metrics::Counter,
    pub(super) skipped: metrics::Counter,
    pub(super) watermark: metrics::Gauge,
}

impl PartMetrics {
    pub(super) fn new(job: &str, topic: &str, group: &str, partition: u32) -> Self {
        let labels = [
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
            watermark: metrics::gauge!("streaming_watermark_ms", &labels),
        }
    }
}
