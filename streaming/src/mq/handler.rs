//! What a subscription calls per message, and what the handler answers.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::mq::message::Message;

/// Why a message failed: a short type (e.g. `timeout`, `decode`) and a message. Both are
/// stored in headers / dead-letter fields, truncated to 512 chars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Error type, e.g. the error's kind or Rust type name.
    pub error_type: String,
    /// Human-readable message.
    pub message: String,
}

impl Failure {
    /// A failure of this type and message.
    pub fn new(error_type: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            error_type: error_type.into(),
            message: message.into(),
        }
    }

    /// A failure from an error value: type = `error`, message = its `Display`.
    pub fn from_error(e: &dyn std::error::Error) -> Self {
        Self::new("error", e.to_string())
    }
}

/// The handler's verdict on one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandleResult {
    /// Done: the message is acknowledged (with the rest of its batch, after the handler's
    /// effects are done, since the handler returned).
    Success,
    /// Try again after the backoff ([`crate::mq::RetryPolicy`]); once the retry count
    /// reaches the message's max retries it goes to the dead-letter stream with error type
    /// `retries_exhausted:<type>`.
    Retry(Failure),
    /// Give up now: move to the dead-letter stream and acknowledge, atomically.
    DeadLetter(Failure),
    /// An unrecoverable failure: treated like `DeadLetter` but with error type
    /// `fail:<type>` and logged at error level.
    Fail(Failure),
}

impl HandleResult {
    /// The verdict on a handler error: [`DeadLetter`](Self::DeadLetter) at once when no
    /// retry can fix it ([`Error::is_permanent`](crate::Error::is_permanent): a message
    /// that does not decode, or an error made by [`Error::permanent`](crate::Error::permanent)),
    /// else [`Retry`](Self::Retry). The failure's type is `decode` for a decoding error,
    /// else `error`.
    pub fn from_error(e: &crate::Error) -> Self {
        let kind = if e.is_decode() { "decode" } else { "error" };
        let failure = Failure::new(kind, e.to_string());
        if e.is_permanent() {
            HandleResult::DeadLetter(failure)
        } else {
            HandleResult::Retry(failure)
        }
    }
}

/// An async message handler. Implemented for every
/// `Fn(Message) -> impl Future<Output = HandleResult>` closure that is `Send + Sync`.
///
/// One partition's messages are handled one at a time, in stream order; different
/// partitions run concurrently. A panic in the handler is caught and handled as
/// `Retry(Failure { error_type: "panic", .. })`.
pub trait MessageHandler: Send + Sync + 'static {
    /// Handles one message.
    fn handle(&self, msg: Message) -> impl Future<Output = HandleResult> + Send;
}

impl<F, Fut> MessageHandler for F
where
    F: Fn(Message) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandleResult> + Send,
{
    fn handle(&self, msg: Message) -> impl Future<Output = HandleResult> + Send {
        self(msg)
    }
}

/// Polls a future, turning a panic into `Err(panic message)`.
pub(crate) struct CatchUnwind<'a, F>(pub(crate) Pin<&'a mut F>);

impl<F: Future> Future for CatchUnwind<'_, F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panic".to_owned());
                Poll::Ready(Err(msg))
            }
        }
    }
}
