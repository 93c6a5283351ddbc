//! The crate-wide error type.

mod record;
pub(crate) use record::{failed_operator, failure_message, failure_type, is_misuse};

use crate::OperatorId;

/// A boxed error returned by user functions, sources and sinks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every error the `streaming` crate returns.
///
/// Branch on [`kind`](Error::kind) (configuration, a user function, state, the queue, the
/// connection, ...) and ask [`is_retryable`](Error::is_retryable) whether trying again may
/// succeed; the variants carry the details.
///
/// Errors raised while a pipeline runs name the operator (`operator`, e.g.
/// `source-0/3:window-aggregate`, an [`OperatorId`]).
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

    /// A user function returned an error.
    #[error("operator `{operator}` failed: {source}")]
    UserFunction {
        /// The operator whose function failed.
        operator: OperatorId,
        /// The error the function returned.
        #[source]
        source: BoxError,
    },

    /// A user function panicked; the panic was caught.
    #[error("operator `{operator}` panicked: {message}")]
    Panic {
        /// The operator whose function panicked.
        operator: OperatorId,
        /// The panic payload when it is a string, else a placeholder.
        message: String,
    },

    /// A record's window bounds do not fit in `i64` milliseconds: the record is rejected
    /// rather than assigned to a clamped window. Both engines fail such a record with this
    /// error when its window has no rejected-element output — a permanent error, so it is
    /// dead-lettered at once (see [`Error::is_permanent`]); a memory run with
    /// [`OnRecordError::StopRun`](crate::memory::OnRecordError::StopRun) counts it instead
    /// and never stops for it.
    #[error(
        "operator `{operator}`: record with timestamp {timestamp} ms has window bounds outside i64"
    )]
    WindowBounds {
        /// The window operator.
        operator: OperatorId,
        /// The record's event time (ms).
        timestamp: i64,
    },

    /// A keyed state was requested with a descriptor whose kind or type differs from the one
    /// used earlier under the same name in the same operator.
    #[error("operator `{operator}`: state `{state}` was declared as {declared} and is now requested as {requested}")]
    StateType {
        /// The operator owning the state.
        operator: OperatorId,
        /// The state name from the descriptor.
        state: &'static str,
        /// The kind and type first used, e.g. `ValueState<u64>`.
        declared: String,
        /// The kind and type of the failing request, e.g. `ValueState<String>`.
        requested: String,
    },

    /// A source failed while producing records.
    #[error("source `{source_id}` failed: {source}")]
    Source {
        /// The source id.
        source_id: String,
        /// The error the source returned.
        #[source]
        source: BoxError,
    },

    /// No checkpoint with this id exists.
    #[error("checkpoint {0} does not exist")]
    CheckpointNotFound(u64),

    /// A checkpoint was requested while a store was being updated (from inside a user
    /// function of the pipeline that owns the store).
    #[error("checkpoint failed: store `{0}` is in use by a running operator")]
    CheckpointBusy(OperatorId),

    /// A Redis command of the message queue ([`crate::mq`]) or the Redis engine failed:
    /// connection lost or no reply in time ([`ErrorKind::Connection`]), or a server error
    /// reply or a reply of an unexpected shape ([`ErrorKind::Server`]).
    ///
    /// Only with feature `redis`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    #[error("redis: {source}")]
    Redis {
        /// [`ErrorKind::Connection`] or [`ErrorKind::Server`], as [`Error::kind`] returns.
        kind: ErrorKind,
        /// The Redis client's error.
        #[source]
        source: redis::RedisError,
    },
    /// No usable connection to the Redis server at `addr`: refused, no reply within the
    /// response timeout, a wrong or missing password, not a Redis server, or a Redis older
    /// than this crate needs. `reason` says which, in words.
    ///
    /// Only with feature `redis`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    #[error("redis at {addr}: {reason}")]
    Connect {
        /// The address tried, `host:port` (or the socket path).
        addr: String,
        /// What went wrong and, where it helps, what to do.
        reason: String,
        /// The client's error, when there was one.
        #[source]
        source: Option<redis::RedisError>,
    },
    /// The Redis user the connection logs in as (an ACL user) may not run a command the
    /// operation needs, or not on one of its keys: found by the check a Redis engine job
    /// runs at start, before it reads or writes anything. `rule` is what to add to the
    /// user's rules (`ACL SETUSER <user> <rule>`), e.g. `+xadd` or `~mq:*`.
    ///
    /// Only with feature `redis`.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    #[error("the Redis user may not {}: add `{rule}` to its ACL rules (`ACL SETUSER <user> {rule}`)", match key {
        Some(key) => format!("use the key `{key}` (running `{command}`)"),
        None => format!("run `{command}`"),
    })]
    Permission {
        /// The command refused, as ACL rules name it (`xadd`, `xgroup|create`).
        command: String,
        /// The key refused, when the command was allowed but the key was not.
        key: Option<String>,
        /// The rule to add: `+command` or `~pattern`.
        rule: String,
    },
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

    /// A user function's error that no retry can fix, made by [`Error::permanent`]: the
    /// Redis engine and the queue's consumers dead-letter the record at once instead of
    /// retrying it.
    #[error("{source}")]
    Permanent {
        /// The error.
        #[source]
        source: BoxError,
    },

    /// A keyed state used on an engine that stores state outside the process (Redis) has
    /// no JSON codec.
    #[error("operator `{operator}`: state `{state}` ({declared}) cannot be kept in Redis: declare it with `persistent` (e.g. `ValueStateDescriptor::persistent`), which needs serde keys and values")]
    StateNotPersistent {
        /// The operator owning the state.
        operator: OperatorId,
        /// The state name.
        state: &'static str,
        /// The descriptor's kind and type, e.g. `ListState<u64>`.
        declared: String,
    },

    /// A record wrote to a keyed-state hash that the Redis engine found hot (its field
    /// count reached `hot_key_fields_warn_threshold`) while the policy is
    /// [`HotKeyPolicy::FailFast`](crate::redis::HotKeyPolicy::FailFast); the record follows
    /// `processing_error_result` (retry / dead letter).
    #[error("operator `{operator}`: state `{state}` is hot ({fields} fields): record rejected (`HotKeyPolicy::FailFast`)")]
    HotKey {
        /// The operator owning the state.
        operator: OperatorId,
        /// The state name.
        state: String,
        /// The hash's field count when it was last sampled.
        fields: u64,
    },

    /// A keyed state's stored schema fingerprint differs from the pipeline's while
    /// `state_schema_mismatch_policy` is [`SchemaMismatchPolicy::Fail`](crate::redis::SchemaMismatchPolicy::Fail):
    /// the Redis engine does not start the partition.
    #[error("operator `{operator}`: state `{state}` is stored with schema `{stored}` but the pipeline now uses `{current}` (`SchemaMismatchPolicy::Fail`): the partition does not start. Fix: restore the old type to keep the stored state; or set `state_schema_mismatch_policy(SchemaMismatchPolicy::Clear)` to delete it and start empty (or delete the state's hashes yourself); or `SchemaMismatchPolicy::Ignore` to decode the stored entries as the new type")]
    StateSchema {
        /// The operator owning the state.
        operator: OperatorId,
        /// The state name.
        state: String,
        /// The stored fingerprint.
        stored: String,
        /// The pipeline's fingerprint.
        current: String,
    },

    /// A keyed process function registered an event-time timer while the operator's
    /// queue already held `max` (Redis engine `event_time_timer_max_size`). The
    /// record fails and follows `processing_error_result` (retry / dead letter); no timer
    /// is dropped silently.
    #[error("operator `{operator}`: event-time timer queue is full ({max} timers; raise `event_time_timer_max_size` or set it to 0 for unbounded)")]
    TimerQueueFull {
        /// The operator whose queue is full.
        operator: OperatorId,
        /// The bound.
        max: usize,
    },

    /// A keyed process function registered an event-time timer on a stream whose records
    /// carry no chosen event time ([`NoEventTime`](crate::time::NoEventTime)): no watermark
    /// would ever fire it before the end of input. The timer is not registered.
    #[error("operator `{operator}`: event-time timer on a stream whose event time was never chosen; choose it before `key_by` with `.assign_timestamps_and_watermarks_with(assigner, generator)`, or start from a source with timestamps (`MemoryEnv::from_timestamped_collection`, `.with_ingestion_time()` after a memory source, a Redis topic)")]
    NoEventTime {
        /// The process operator.
        operator: OperatorId,
    },

    /// Stored state could not be decoded or encoded (JSON).
    #[error("operator `{operator}`: state `{state}` could not be decoded or encoded: {reason}")]
    StateDecode {
        /// The operator owning the state.
        operator: OperatorId,
        /// The state name.
        state: String,
        /// The serde_json message.
        reason: String,
    },

    /// On the memory engine, a record failed after it had changed keyed state or handed a
    /// record to a sink or side output. The memory engine cannot undo those effects (the
    /// Redis engine rolls its batch back and dead-letters the record), so instead of
    /// dead-lettering the record and leaving the effects of a part of it behind, the run
    /// stops with this error. [`kind`](Error::kind) is the record's error's.
    #[error("a record (timestamp {timestamp}) failed after it changed keyed state or produced output, which the memory engine cannot undo, so the run stops instead of dead-lettering it: {source}")]
    RecordNotUndone {
        /// The record's timestamp as its source gave it (ms).
        timestamp: i64,
        /// The record's error.
        source: Box<Error>,
    },

    /// The Redis engine could not do `op` (registration, start, a job's subtask).
    #[error("redis engine `{op}`: {reason}")]
    Engine {
        /// The operation, e.g. `register`, `blocking_start`.
        op: &'static str,
        /// Why, and what to do about it.
        reason: String,
    },

    /// A partition owner's write was refused because its lease is no longer held under its
    /// fencing token (it expired and another owner took the partition): nothing was
    /// written. The owner drops what it had in memory for the partition and takes it
    /// again from the last commit once the lease is free.
    #[error("partition {partition} of `{topic}` (group `{group}`): fenced, lease token {token} is no longer the owner's; nothing was written")]
    Fenced {
        /// The topic.
        topic: String,
        /// The consumer group.
        group: String,
        /// The partition.
        partition: u32,
        /// The stale fencing token.
        token: u64,
    },
}

/// What an [`Error`] is about, for code that branches on it ([`Error::kind`]).
///
/// New kinds may be added; match with a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A setting or argument is invalid ([`Error::InvalidConfig`]), the pipeline uses
    /// event time it never chose ([`Error::NoEventTime`]), or the Redis user lacks a
    /// permission ([`Error::Permission`]): fix the configuration.
    Config,
    /// A user function, source or sink returned an error or panicked
    /// ([`Error::UserFunction`], [`Error::Panic`], [`Error::Source`], [`Error::Permanent`]).
    UserFunction,
    /// A record or message cannot be processed as it is: it does not decode
    /// ([`Error::MqDecode`]) or its window bounds do not fit in `i64`
    /// ([`Error::WindowBounds`]).
    InvalidRecord,
    /// Keyed state is used against its declaration or cannot be stored: another type under
    /// the same name, no JSON codec, a changed schema, an entry that does not decode
    /// ([`Error::StateType`], [`Error::StateNotPersistent`], [`Error::StateSchema`],
    /// [`Error::StateDecode`]).
    State,
    /// A configured bound refused the record: a hot state hash under the fail-fast policy,
    /// a full event-time timer queue ([`Error::HotKey`], [`Error::TimerQueueFull`]).
    Limit,
    /// A checkpoint does not exist or a store is in use ([`Error::CheckpointNotFound`],
    /// [`Error::CheckpointBusy`]).
    Checkpoint,
    /// A message-queue operation is not possible in the queue's current state: a missing
    /// topic, a partition out of range, a dead letter without fields ([`Error::Mq`]).
    Queue,
    /// Redis could not be reached or did not answer in time, or the connection was lost
    /// ([`Error::Connect`], and [`Error::Redis`] with this kind).
    Connection,
    /// Redis answered with an error reply or a reply of an unexpected shape
    /// ([`Error::Redis`] with this kind).
    Server,
    /// A write was refused because the writer no longer owns the partition
    /// ([`Error::Fenced`]).
    Fenced,
    /// The Redis engine cannot do the operation: a pipeline that cannot be registered, a
    /// job started twice or already cancelled, a subtask that cannot start
    /// ([`Error::Engine`]).
    Engine,
}

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
impl From<redis::RedisError> for Error {
    /// A command the user's ACL rules refuse (`NOPERM … run the 'xadd' command`) becomes
    /// [`Error::Permission`] naming the rule to add; anything else [`Error::Redis`].
    fn from(source: redis::RedisError) -> Self {
        if let Some(command) = refused_command(&source) {
            return Error::Permission {
                rule: format!("+{command}"),
                command,
                key: None,
            };
        }
        let kind = if is_transient(&source) {
            ErrorKind::Connection
        } else {
            ErrorKind::Server
        };
        Error::Redis { kind, source }
    }
}

/// The command a `NOPERM` reply refuses (lower case, `command|subcommand` as ACL rules
/// name it), when the reply names one (a refused key is not named by Redis).
#[cfg(feature = "redis")]
fn refused_command(e: &redis::RedisError) -> Option<String> {
    if e.code() != Some("NOPERM") {
        return None;
    }
    let detail = e.detail()?;
    let after = detail.split("run the '").nth(1)?;
    let command = after.split('\'').next()?.to_ascii_lowercase();
    (!command.is_empty()).then_some(command)
}

/// Whether the client's error comes from the connection or a server that is not ready yet
/// (refused, timed out, dropped, loading its data set, a failover in progress): trying
/// again later may succeed.
#[cfg(feature = "redis")]
fn is_transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || matches!(
            e.kind(),
            redis::ErrorKind::BusyLoadingError
                | redis::ErrorKind::TryAgain
                | redis::ErrorKind::ClusterDown
                | redis::ErrorKind::MasterDown
        )
}

impl Error {
    /// What this error is about.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidConfig { .. } | Error::NoEventTime { .. } => ErrorKind::Config,
            Error::UserFunction { .. }
            | Error::Panic { .. }
            | Error::Source { .. }
            | Error::Permanent { .. } => ErrorKind::UserFunction,
            Error::WindowBounds { .. } | Error::MqDecode { .. } => ErrorKind::InvalidRecord,
            Error::StateType { .. }
            | Error::StateNotPersistent { .. }
            | Error::StateSchema { .. }
            | Error::StateDecode { .. } => ErrorKind::State,
            Error::HotKey { .. } | Error::TimerQueueFull { .. } => ErrorKind::Limit,
            Error::CheckpointNotFound(_) | Error::CheckpointBusy(_) => ErrorKind::Checkpoint,
            Error::Mq { .. } => ErrorKind::Queue,
            #[cfg(feature = "redis")]
            Error::Connect { .. } => ErrorKind::Connection,
            #[cfg(feature = "redis")]
            Error::Permission { .. } => ErrorKind::Config,
            #[cfg(feature = "redis")]
            Error::Redis { kind, .. } => *kind,
            Error::Fenced { .. } => ErrorKind::Fenced,
            Error::Engine { .. } => ErrorKind::Engine,
            Error::RecordNotUndone { source, .. } => source.kind(),
        }
    }

    /// Whether the same call, or the same record, may succeed when tried again unchanged
    /// (after a backoff). `true` for:
    /// - a lost or refused connection, a timeout, a server still loading or failing over
    ///   ([`ErrorKind::Connection`]), except an [`Error::Connect`] without a client error
    ///   (the server answered but is not a usable Redis) or whose client error is a wrong
    ///   password or a reply that is not the Redis protocol;
    /// - a configured bound ([`ErrorKind::Limit`]): the hot-key interval passes, timers fire;
    /// - a checkpoint store in use ([`Error::CheckpointBusy`]);
    /// - a user function's error or panic ([`ErrorKind::UserFunction`]) unless it
    ///   [`is_permanent`](Self::is_permanent): the crate cannot tell a failure that repeats
    ///   from one that passes (a service that is down), so it counts both as retryable, as
    ///   the Redis engine's default [`ProcessingErrorResult::Retry`](crate::redis::ProcessingErrorResult::Retry)
    ///   retries them; return [`Error::permanent`] for an error no retry fixes.
    ///
    /// `false` for everything else, which needs a fix first: configuration, records that
    /// cannot be processed, state misuse, the queue's state, server error replies, a fenced
    /// writer (it must take the partition again), engine misuse.
    pub fn is_retryable(&self) -> bool {
        if self.is_permanent() {
            return false;
        }
        match self {
            #[cfg(feature = "redis")]
            Error::Connect { source, .. } => source.as_ref().is_some_and(is_transient),
            Error::CheckpointBusy(_) => true,
            Error::CheckpointNotFound(_) | Error::RecordNotUndone { .. } => false,
            e => matches!(
                e.kind(),
                ErrorKind::Connection | ErrorKind::Limit | ErrorKind::UserFunction
            ),
        }
    }

    /// Whether a write was refused because the writer no longer owns the partition
    /// ([`Error::Fenced`]).
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced { .. })
    }

    /// Marks `e` as permanent: return it (converted into a [`BoxError`], e.g. with `?` or
    /// `.into()`) from a user function (`try_map`, `process`, a message handler) and the
    /// record is dead-lettered at once, whatever the retry policy. Other errors follow the
    /// configured policy.
    pub fn permanent(e: impl Into<BoxError>) -> Error {
        Error::Permanent { source: e.into() }
    }

    /// Whether no retry can fix this error: it was made by [`Error::permanent`], a
    /// message could not be decoded ([`Error::MqDecode`]: bad JSON, a payload that is not
    /// UTF-8 where text is needed), or a record's window bounds do not fit in `i64`
    /// ([`Error::WindowBounds`]) — also when a user function returned such an error
    /// and it is this error's source (or its source's source, ...).
    pub fn is_permanent(&self) -> bool {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if let Some(e) = e.downcast_ref::<Error>() {
                if matches!(
                    e,
                    Error::Permanent { .. } | Error::MqDecode { .. } | Error::WindowBounds { .. }
                ) {
                    return true;
                }
            }
            cur = e.source();
        }
        false
    }

    /// Whether a message could not be decoded ([`Error::MqDecode`]), here or in this
    /// error's sources.
    pub fn is_decode(&self) -> bool {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cur {
            if matches!(e.downcast_ref::<Error>(), Some(Error::MqDecode { .. })) {
                return true;
            }
            cur = e.source();
        }
        false
    }
}

// The table of every variant builds the Redis client's errors too.
#[cfg(all(test, feature = "redis"))]
mod tests;
