//! How a configuration file writes the queue's own value types: a start policy by its
//! snake-case name, an assignment as a table. (The file forms of
//! [`MqOptions`](super::MqOptions), [`RetryPolicy`](super::RetryPolicy) and
//! [`SubscriptionOptions`](super::SubscriptionOptions) come from their options tables.)

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::options::{Assignment, StartPolicy};
use crate::options::{deserialize_by_name, FileValue};

deserialize_by_name! {
    /// Reads a start policy by its snake-case name: `frontier_or_latest`,
    /// `frontier_or_earliest`, `latest`, `earliest`.
    StartPolicy { FrontierOrLatest, FrontierOrEarliest, Latest, Earliest }
}

/// [`Assignment`] as written in a file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssignmentFile {
    subtask: u32,
    parallelism: u32,
}

/// Reads an assignment `{ subtask, parallelism }`, checked by [`Assignment::try_new`].
///
/// # Errors
/// The deserializer's error for a missing or unknown field, or the message of
/// [`Assignment::try_new`] (fields `assignment.subtask`, `assignment.parallelism`).
impl<'de> Deserialize<'de> for Assignment {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let a = AssignmentFile::deserialize(d)?;
        Assignment::try_new(a.subtask, a.parallelism).map_err(D::Error::custom)
    }
}

/// `assignment` in a file: its table sets the assignment.
impl FileValue for Option<Assignment> {
    type File = Assignment;
    fn merge(&mut self, file: Assignment) {
        *self = Some(file);
    }
}

#[cfg(test)]
mod tests {
    use super::super::options::{MqOptions, RetryPolicy, SubscriptionOptions};
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_toml_file_sets_the_fields_it_names() {
        let opts: MqOptions = toml::from_str(
            r#"
            key_prefix = "orders"
            lease_ttl = "20s"
            lease_renew_interval = "1500ms"
            max_len = 100000
            [retry]
            max_retries = 5
            initial_backoff = "250ms"
            "#,
        )
        .unwrap();
        let expected = MqOptions {
            key_prefix: "orders".into(),
            lease_ttl: Duration::from_secs(20),
            lease_renew_interval: Duration::from_millis(1500),
            max_len: Some(100_000),
            retry: RetryPolicy {
                max_retries: 5,
                initial_backoff: Duration::from_millis(250),
                ..RetryPolicy::default()
            },
            ..MqOptions::default()
        };
        assert_eq!(opts, expected);
        let empty: MqOptions = toml::from_str("").unwrap();
        assert_eq!(empty, MqOptions::default());
    }

    #[test]
    fn an_invalid_value_fails_naming_the_field() {
        let e = serde_json::from_str::<MqOptions>(r#"{"lease_ttl": "1s", "lease_renew_interval": "600ms"}"#)
            .unwrap_err();
        assert!(e.to_string().contains("`lease_renew_interval`"), "{e}");
        let e = serde_json::from_str::<MqOptions>(r#"{"retry": {"jitter": 1.5}}"#).unwrap_err();
        assert!(e.to_string().contains("`retry.jitter`"), "{e}");
        // A malformed duration: TOML's error shows the line, so the key.
        let e = toml::from_str::<MqOptions>(r#"lease_ttl = "ten seconds""#).unwrap_err();
        assert!(e.to_string().contains("lease_ttl"), "{e}");
        assert!(e.to_string().contains("expected a duration"), "{e}");
        let e = serde_json::from_str::<SubscriptionOptions>(r#"{"batch_count": 0}"#).unwrap_err();
        assert!(e.to_string().contains("`batch_count`"), "{e}");
        let e = serde_json::from_str::<SubscriptionOptions>(
            r#"{"assignment": {"subtask": 2, "parallelism": 2}}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("`assignment.subtask`"), "{e}");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let e = serde_json::from_str::<MqOptions>(r#"{"lease_tll": "10s"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `lease_tll`"), "{e}");
        let e = serde_json::from_str::<MqOptions>(r#"{"retry": {"retries": 1}}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `retries`"), "{e}");
        let e = toml::from_str::<SubscriptionOptions>("batch = 5").unwrap_err();
        assert!(e.to_string().contains("unknown field `batch`"), "{e}");
    }

    #[test]
    fn subscription_options_read_every_field() {
        let sub: SubscriptionOptions = toml::from_str(
            r#"
            batch_count = 500
            poll_timeout = "250ms"
            start = "frontier_or_earliest"
            consumer_name = "billing-1"
            assignment = { subtask = 1, parallelism = 3 }
            "#,
        )
        .unwrap();
        let expected = SubscriptionOptions {
            batch_count: 500,
            poll_timeout: Duration::from_millis(250),
            start: StartPolicy::FrontierOrEarliest,
            consumer_name: Some("billing-1".into()),
            assignment: Some(Assignment::try_new(1, 3).unwrap()),
        };
        assert_eq!(sub, expected);
    }
}
