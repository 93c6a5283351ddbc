//! How both engines describe a record's failure: its type (the Redis engine's
//! `x-runtime-error-type` header), its message and the operator it names.

use super::Error;
use crate::OperatorId;

/// The longest failure message kept with a retried or dead-lettered record (characters).
pub(crate) const MAX_FAILURE_CHARS: usize = 512;

/// The failure type of a record's error: `decode`, `user_function`, `panic`, `state`,
/// `state_decode`, `hot_key`, `timer_queue_full`, `window_bounds`, else `error`.
pub(crate) fn failure_type(e: &Error) -> &'static str {
    match e {
        e if e.is_decode() => "decode",
        Error::UserFunction { .. } => "user_function",
        Error::Panic { .. } => "panic",
        Error::StateType { .. } | Error::StateNotPersistent { .. } => "state",
        Error::StateDecode { .. } => "state_decode",
        Error::MqDecode { .. } => "decode",
        Error::HotKey { .. } => "hot_key",
        Error::TimerQueueFull { .. } => "timer_queue_full",
        Error::WindowBounds { .. } => "window_bounds",
        _ => "error",
    }
}

/// The failure message of a record's error: its text, at most [`MAX_FAILURE_CHARS`]
/// characters.
pub(crate) fn failure_message(e: &Error) -> String {
    e.to_string().chars().take(MAX_FAILURE_CHARS).collect()
}

/// Whether `e` is a misuse of keyed state (against its declaration, or state the engine
/// cannot keep): no retry helps, and the failure is never recorded as `fail:<type>`.
pub(crate) fn is_misuse(e: &Error) -> bool {
    matches!(
        e,
        Error::StateNotPersistent { .. } | Error::StateType { .. } | Error::StateDecode { .. }
    )
}

/// The operator `e` names, if any.
pub(crate) fn failed_operator(e: &Error) -> Option<&OperatorId> {
    match e {
        Error::UserFunction { operator, .. }
        | Error::Panic { operator, .. }
        | Error::WindowBounds { operator, .. }
        | Error::StateType { operator, .. }
        | Error::StateNotPersistent { operator, .. }
        | Error::HotKey { operator, .. }
        | Error::StateSchema { operator, .. }
        | Error::TimerQueueFull { operator, .. }
        | Error::StateDecode { operator, .. }
        | Error::CheckpointBusy(operator) => Some(operator),
        _ => None,
    }
}
