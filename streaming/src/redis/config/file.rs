//! How a configuration file writes the Redis engine's own value types: a replica wait
//! as a table, the policies by snake-case name. (The file form of [`RedisRuntimeConfig`](super::RedisRuntimeConfig)
//! itself comes from its options table.)

use std::time::Duration;

use serde::Deserialize;

use super::{AckMode, HotKeyPolicy, ProcessingErrorResult, ReplicaWait, SchemaMismatchPolicy};
use crate::options::{deserialize_by_name, FileValue};

/// [`ReplicaWait`] as written in a file: `{ replicas = 1, timeout = "500ms" }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplicaWaitFile {
    replicas: u32,
    #[serde(with = "humantime_serde")]
    timeout: Duration,
}

/// `commit_replica_wait` in a file: its table sets the wait.
impl FileValue for Option<ReplicaWait> {
    type File = ReplicaWaitFile;
    fn merge(&mut self, file: ReplicaWaitFile) {
        *self = Some(ReplicaWait::new(file.replicas, file.timeout));
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
    use super::super::RedisRuntimeConfig;
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
