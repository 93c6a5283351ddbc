//! The crate-wide error type.

/// A boxed error returned by user functions and sinks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every error the `streaming` crate returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is invalid; `field` names the offending setting.
    #[error("invalid configuration `{field}`: {reason}")]
    InvalidConfig {
        /// The name of the setting, e.g. `size` or `slide`.
        field: &'static str,
        /// Why the value was rejected.
        reason: String,
    },
    /// A Redis command of the message queue ([`crate::mq`]) failed: connection lost, server
    /// error reply, or a reply of an unexpected shape.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A message-queue operation could not be done; `op` names the operation (e.g.
    /// `create_topic`), `reason` says why (e.g. the topic does not exist).
    #[error("mq `{op}`: {reason}")]
    Mq {
        /// The operation, e.g. `send`, `subscribe`, `replay_dead_letter`.
        op: &'static str,
        /// Why it failed.
        reason: String,
    },
    /// A message's payload or field could not be decoded as asked (not UTF-8, not the
    /// expected JSON); `what` names the part, e.g. `payload`.
    #[error("cannot decode message {what}: {reason}")]
    MqDecode {
        /// The part of the message: `payload`, `headers`, `key`, ...
        what: &'static str,
        /// Why decoding failed (the decoder's message).
        reason: String,
    },
}
