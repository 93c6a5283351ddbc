//! [`RedisRuntimeConfig`] read from a configuration file or the environment (serde): every
//! field optional, unknown fields rejected, durations as `humantime` strings, and the
//! result built by [`RedisRuntimeConfig::builder`] and validated by its `build`.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::{
    AckMode, HotKeyPolicy, ProcessingErrorResult, RedisRuntimeConfig, ReplicaWait,
    SchemaMismatchPolicy,
};
use crate::mq::options_file::{deserialize_by_name, MqOptionsFile};

/// Calls the builder's setter of each field the file sets.
macro_rules! set {
    ($file:ident => $builder:ident: $($field:ident),+ $(,)?) => {
        $(if let Some(v) = $file.$field {
            $builder = $builder.$field(v);
        })+
    };
}

/// [`RedisRuntimeConfig`] as written in a file: its fields, each optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RedisRuntimeConfigFile {
    job_name: Option<String>,
    job_instance_id: Option<String>,
    state_key_prefix: Option<String>,
    #[serde(default, with = "humantime_serde")]
    state_ttl: Option<Duration>,
    state_size_report_every_n_writes: Option<u64>,
    keyed_state_shard_count: Option<u32>,
    state_cache_max_entries: Option<u64>,
    hot_key_fields_warn_threshold: Option<u64>,
    #[serde(default, with = "humantime_serde")]
    hot_key_warn_interval: Option<Duration>,
    hot_key_policy: Option<HotKeyPolicy>,
    #[serde(default, with = "humantime_serde")]
    hot_key_throttle_max: Option<Duration>,
    state_schema_evolution_enabled: Option<bool>,
    state_schema_mismatch_policy: Option<SchemaMismatchPolicy>,
    restore_group_from_commit_frontier: Option<bool>,
    sink_deduplication_enabled: Option<bool>,
    #[serde(default, with = "humantime_serde")]
    sink_deduplication_ttl: Option<Duration>,
    sink_dedup_key_prefix: Option<String>,
    pipeline_parallelism: Option<u32>,
    timer_threads: Option<u32>,
    mdc_enabled: Option<bool>,
    mdc_sample_rate: Option<f64>,
    mq_options: Option<MqOptionsFile>,
    processing_error_result: Option<ProcessingErrorResult>,
    ack_mode: Option<AckMode>,
    #[serde(default, with = "humantime_serde")]
    watermark_out_of_orderness: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    watermark_idle_timeout: Option<Duration>,
    window_max_fires_per_record: Option<u32>,
    event_time_timer_max_size: Option<u32>,
    commit_replica_wait: Option<ReplicaWaitFile>,
    #[serde(default, with = "humantime_serde")]
    stalled_after: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    checkpoint_interval: Option<Duration>,
    restore_from_latest_checkpoint: Option<bool>,
    checkpoint_key_prefix: Option<String>,
    checkpoints_to_keep: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    checkpoint_drain_timeout: Option<Duration>,
    checkpoint_threads: Option<u32>,
    defer_ack_until_checkpoint: Option<bool>,
    ack_deferred_messages_on_checkpoint: Option<bool>,
    leader_election_enabled: Option<bool>,
    #[serde(default, with = "humantime_serde")]
    leader_lease_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    leader_renew_interval: Option<Duration>,
}

/// [`ReplicaWait`] as written in a file: `{ replicas = 1, timeout = "500ms" }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplicaWaitFile {
    replicas: u32,
    #[serde(with = "humantime_serde")]
    timeout: Duration,
}

/// Reads the configuration from a file or the environment: the fields of
/// [`RedisRuntimeConfig`] by their getters' names, each optional (its default otherwise),
/// an unknown field is an error. Durations are `humantime` strings (`"1500ms"`, `"2s"`,
/// `"1m 30s"`; `"0s"` turns `state_ttl` and `watermark_idle_timeout` off like `None`);
/// the policies are snake-case names (`hot_key_policy = "fail_fast"`, `ack_mode =
/// "xack"`); `mq_options` is a table read like [`MqOptions`](crate::mq::MqOptions);
/// `commit_replica_wait` a table `{ replicas = 1, timeout = "500ms" }`.
///
/// ```
/// use std::time::Duration;
/// use streaming::redis::{AckMode, RedisRuntimeConfig};
/// let config: RedisRuntimeConfig = serde_json::from_str(
///     r#"{
///         "job_name": "billing",
///         "ack_mode": "xack",
///         "watermark_idle_timeout": "1500ms",
///         "mq_options": { "lease_ttl": "20s" }
///     }"#,
/// )?;
/// assert_eq!(config.job_name(), "billing");
/// assert_eq!(config.ack_mode(), AckMode::Xack);
/// assert_eq!(config.watermark_idle_timeout(), Some(Duration::from_millis(1500)));
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Errors
/// The deserializer's error for an unknown field or a value of the wrong shape, or the
/// message of [`RedisRuntimeConfigBuilder::build`](super::RedisRuntimeConfigBuilder::build)'s
/// [`Error::InvalidConfig`](crate::Error::InvalidConfig), which names the field
/// (`mq_options` with the inner field in the reason).
impl<'de> Deserialize<'de> for RedisRuntimeConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let file = RedisRuntimeConfigFile::deserialize(d)?;
        let mut b = RedisRuntimeConfig::builder();
        set!(file => b: job_name, job_instance_id, state_key_prefix,
            state_size_report_every_n_writes, keyed_state_shard_count, state_cache_max_entries,
            hot_key_fields_warn_threshold, hot_key_warn_interval, hot_key_policy,
            hot_key_throttle_max, state_schema_evolution_enabled, state_schema_mismatch_policy,
            restore_group_from_commit_frontier, sink_deduplication_enabled,
            sink_deduplication_ttl, sink_dedup_key_prefix, pipeline_parallelism, timer_threads,
            mdc_enabled, mdc_sample_rate, processing_error_result, ack_mode,
            watermark_out_of_orderness, window_max_fires_per_record, event_time_timer_max_size,
            stalled_after, checkpoint_interval, restore_from_latest_checkpoint,
            checkpoint_key_prefix, checkpoints_to_keep, checkpoint_drain_timeout,
            checkpoint_threads, defer_ack_until_checkpoint, ack_deferred_messages_on_checkpoint,
            leader_election_enabled, leader_lease_ttl, leader_renew_interval);
        if let Some(ttl) = file.state_ttl {
            b = b.state_ttl(Some(ttl));
        }
        if let Some(timeout) = file.watermark_idle_timeout {
            b = b.watermark_idle_timeout(Some(timeout));
        }
        if let Some(w) = file.commit_replica_wait {
            b = b.commit_replica_wait(Some(ReplicaWait::new(w.replicas, w.timeout)));
        }
        if let Some(mq) = file.mq_options {
            b = b.mq_options(mq.into_options());
        }
        b.build().map_err(D::Error::custom)
    }
}

deserialize_by_name! {
    /// Reads a policy by its snake-case name: `log_only`, `throttle`, `fail_fast`.
    HotKeyPolicy { LogOnly, Throttle, FailFast }
}

deserialize_by_name! {
    /// Reads a policy by its snake-case name: `fail`, `clear`, `ignore`.
    SchemaMismatchPolicy { Fail, Clear, Ignore }
}

deserialize_by_name! {
    /// Reads a result by its snake-case name: `retry`, `dead_letter`, `fail`.
    ProcessingErrorResult { Retry, DeadLetter, Fail }
}

deserialize_by_name! {
    /// Reads a mode by its snake-case name: `xack`, `offset`.
    AckMode { Xack, Offset }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_file_sets_the_fields_it_names() {
        let config: RedisRuntimeConfig = toml::from_str(
            r#"
            job_name = "billing"
            state_ttl = "7days"
            hot_key_policy = "fail_fast"
            processing_error_result = "dead_letter"
            pipeline_parallelism = 4
            watermark_out_of_orderness = "1500ms"
            state_cache_max_entries = 5000
            stalled_after = "90s"
            checkpoint_interval = "1s"
            checkpoints_to_keep = 3
            leader_election_enabled = true
            leader_lease_ttl = "6s"
            leader_renew_interval = "2s"
            commit_replica_wait = { replicas = 1, timeout = "250ms" }
            [mq_options]
            lease_ttl = "20s"
            retry = { max_retries = 5 }
            "#,
        )
        .unwrap();
        assert_eq!(config.job_name(), "billing");
        assert_eq!(config.state_ttl(), Some(Duration::from_secs(7 * 24 * 3600)));
        assert_eq!(config.hot_key_policy(), HotKeyPolicy::FailFast);
        assert_eq!(
            config.processing_error_result(),
            ProcessingErrorResult::DeadLetter
        );
        assert_eq!(config.pipeline_parallelism(), 4);
        assert_eq!(
            config.watermark_out_of_orderness(),
            Duration::from_millis(1500)
        );
        assert_eq!(config.mq_options().lease_ttl, Duration::from_secs(20));
        assert_eq!(config.mq_options().retry.max_retries, 5);
        assert_eq!(config.state_cache_max_entries(), 5000);
        assert_eq!(config.stalled_after(), Duration::from_secs(90));
        assert_eq!(
            config.commit_replica_wait(),
            Some(ReplicaWait::new(1, Duration::from_millis(250)))
        );
        // What the file leaves out keeps its default.
        assert_eq!(config.ack_mode(), AckMode::Offset);
        assert_eq!(config.state_key_prefix(), "streaming:runtime");
        assert_eq!(config.checkpoint_interval(), Duration::from_secs(1));
        assert_eq!(config.checkpoints_to_keep(), 3);
        assert!(config.leader_election_enabled());
        assert_eq!(
            (config.leader_lease_ttl(), config.leader_renew_interval()),
            (Duration::from_secs(6), Duration::from_secs(2))
        );
        assert_eq!(config.checkpoint_drain_timeout(), Duration::from_secs(30));
    }

    #[test]
    fn an_invalid_value_fails_naming_the_field() {
        let e = toml::from_str::<RedisRuntimeConfig>("pipeline_parallelism = 0").unwrap_err();
        assert!(e.to_string().contains("`pipeline_parallelism`"), "{e}");
        let e = serde_json::from_str::<RedisRuntimeConfig>(r#"{"job_name": "a b"}"#).unwrap_err();
        assert!(e.to_string().contains("`job_name`"), "{e}");
        let e = serde_json::from_str::<RedisRuntimeConfig>(
            r#"{"mq_options": {"lease_ttl": "1s", "lease_renew_interval": "600ms"}}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("`mq_options`: lease_renew_interval"),
            "{e}"
        );
        let e = toml::from_str::<RedisRuntimeConfig>(r#"stalled_after = "0s""#).unwrap_err();
        assert!(e.to_string().contains("`stalled_after`"), "{e}");
        let e = toml::from_str::<RedisRuntimeConfig>(r#"ack_mode = "noack""#).unwrap_err();
        assert!(e.to_string().contains("ack_mode"), "{e}");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let e = serde_json::from_str::<RedisRuntimeConfig>(r#"{"jobname": "x"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `jobname`"), "{e}");
        let e = toml::from_str::<RedisRuntimeConfig>("[mq_options]\nleases = 1").unwrap_err();
        assert!(e.to_string().contains("unknown field `leases`"), "{e}");
    }

    #[test]
    fn a_hundred_years_of_state_ttl_is_the_most_a_file_may_set() {
        let ttl = |v: &str| toml::from_str::<RedisRuntimeConfig>(&format!("state_ttl = \"{v}\""));
        assert!(ttl("100years").unwrap().state_ttl().is_some());
        let e = ttl("101years").unwrap_err().to_string();
        assert!(
            e.contains("state_ttl") && e.contains("over 100 years"),
            "{e}"
        );
    }
}
