//! The queue's options read from a configuration file or the environment (serde): every
//! field optional (its default otherwise), unknown fields rejected, durations written as
//! `humantime` strings, then validated like the builders do.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::options::{Assignment, MqOptions, RetryPolicy, StartPolicy, SubscriptionOptions};

/// Moves each field the file sets onto `target` (the defaults stay for the others).
macro_rules! apply {
    ($file:ident => $target:ident: $($field:ident),+ $(,)?) => {
        $(if let Some(v) = $file.$field {
            $target.$field = v;
        })+
    };
}

/// `impl Deserialize` for an enum of unit variants, each read by its snake-case name
/// (`FrontierOrLatest` is `"frontier_or_latest"`); another name is the deserializer's
/// error.
macro_rules! deserialize_by_name {
    ($(#[$doc:meta])* $ty:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        ///
        /// # Errors
        /// The deserializer's error for another name.
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(serde::Deserialize)]
                #[serde(rename_all = "snake_case")]
                enum Name {
                    $($variant),+
                }
                Ok(match Name::deserialize(d)? {
                    $(Name::$variant => $ty::$variant),+
                })
            }
        }
    };
}
pub(crate) use deserialize_by_name;

/// [`MqOptions`] as written in a file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MqOptionsFile {
    key_prefix: Option<String>,
    worker_count: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    lease_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    lease_renew_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    claim_idle: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    retry_poll_interval: Option<Duration>,
    retry: Option<RetryPolicyFile>,
    max_len: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    response_timeout: Option<Duration>,
}

impl MqOptionsFile {
    /// The defaults with the file's fields set, not validated yet (the Redis engine's
    /// configuration validates them as its field `mq_options`).
    pub(crate) fn into_options(self) -> MqOptions {
        let mut opts = MqOptions::default();
        let file = self;
        apply!(file => opts: key_prefix, worker_count, lease_ttl, lease_renew_interval,
            claim_idle, retry_poll_interval, response_timeout);
        if let Some(retry) = file.retry {
            opts.retry = retry.into_policy();
        }
        opts.max_len = file.max_len.or(opts.max_len);
        opts
    }
}

/// [`RetryPolicy`] as written in a file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryPolicyFile {
    max_retries: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    initial_backoff: Option<Duration>,
    multiplier: Option<f64>,
    #[serde(default, with = "humantime_serde")]
    max_backoff: Option<Duration>,
    jitter: Option<f64>,
}

impl RetryPolicyFile {
    fn into_policy(self) -> RetryPolicy {
        let mut policy = RetryPolicy::default();
        let file = self;
        apply!(file => policy: max_retries, initial_backoff, multiplier, max_backoff, jitter);
        policy
    }
}

/// Reads the options from a file or the environment: every field is optional (the
/// default of [`MqOptions::default`] otherwise), an unknown field is an error, durations
/// are `humantime` strings (`"500ms"`, `"10s"`, `"1m 30s"`), `retry` is a table of
/// [`RetryPolicy`]'s fields.
///
/// ```
/// use std::time::Duration;
/// let opts: streaming::mq::MqOptions = serde_json::from_str(
///     r#"{"key_prefix": "orders", "lease_ttl": "20s", "retry": {"max_retries": 5}}"#,
/// )?;
/// assert_eq!(opts.lease_ttl, Duration::from_secs(20));
/// assert_eq!(opts.retry.max_retries, 5);
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Errors
/// The deserializer's error for an unknown field or a value of the wrong shape, or the
/// message of [`MqOptions::validate`]'s [`Error::InvalidConfig`](crate::Error::InvalidConfig),
/// which names the field (e.g. "invalid configuration `lease_renew_interval`: …").
impl<'de> Deserialize<'de> for MqOptions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let opts = MqOptionsFile::deserialize(d)?.into_options();
        opts.validate().map_err(D::Error::custom)?;
        Ok(opts)
    }
}

/// Reads a retry policy from a file: as the `retry` table of [`MqOptions`]'s
/// deserialization, then [`RetryPolicy::validate`].
///
/// # Errors
/// As for [`MqOptions`]; the field is named `retry.*`.
impl<'de> Deserialize<'de> for RetryPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let policy = RetryPolicyFile::deserialize(d)?.into_policy();
        policy.validate().map_err(D::Error::custom)?;
        Ok(policy)
    }
}

/// [`SubscriptionOptions`] as written in a file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscriptionOptionsFile {
    batch_count: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    poll_timeout: Option<Duration>,
    start: Option<StartPolicy>,
    consumer_name: Option<String>,
    assignment: Option<Assignment>,
}

/// Reads subscription options from a file or the environment: every field optional (its
/// default otherwise), unknown fields rejected, `poll_timeout` a `humantime` string,
/// `start` one of `frontier_or_latest`, `frontier_or_earliest`, `latest`, `earliest`,
/// `assignment` a table `{ subtask, parallelism }`.
///
/// ```
/// use streaming::mq::{StartPolicy, SubscriptionOptions};
/// let sub: SubscriptionOptions =
///     serde_json::from_str(r#"{"batch_count": 500, "poll_timeout": "250ms", "start": "earliest"}"#)?;
/// assert_eq!((sub.batch_count, sub.start), (500, StartPolicy::Earliest));
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Errors
/// The deserializer's error for an unknown field or a value of the wrong shape, or the
/// message of [`SubscriptionOptions::validate`] (or [`Assignment::try_new`]), which names
/// the field.
impl<'de> Deserialize<'de> for SubscriptionOptions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let file = SubscriptionOptionsFile::deserialize(d)?;
        let mut opts = SubscriptionOptions::default();
        apply!(file => opts: batch_count, poll_timeout, start);
        opts.consumer_name = file.consumer_name;
        opts.assignment = file.assignment;
        opts.validate().map_err(D::Error::custom)?;
        Ok(opts)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
