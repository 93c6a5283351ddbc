//! A failed record goes to retry or the dead-letter queue (the partition reader's), with
//! `x-runtime-*` headers that say why.

use crate::error::{failure_message, failure_type, is_misuse};
use crate::mq::reader::PartitionReader;
use crate::mq::Connection;
use crate::mq::{Failure, HandleResult, Message, RetryOutcome};
use crate::redis::partition::context::Ctx;
use crate::redis::{ProcessingErrorResult, RedisRuntimeConfig};
use crate::Error;

/// Header naming the job of a retried or dead-lettered record.
pub const HEADER_RUNTIME_JOB: &str = "x-runtime-job";
/// Header naming the consumer group.
pub const HEADER_RUNTIME_GROUP: &str = "x-runtime-group";
/// Header with the failure's type (`user_function`, `panic`, ...).
pub const HEADER_RUNTIME_ERROR_TYPE: &str = "x-runtime-error-type";
/// Header with the failure's message, at most 512 characters.
pub const HEADER_RUNTIME_ERROR_MESSAGE: &str = "x-runtime-error-message";

/// A record's failure, as retry and dead letter see it.
struct Failed {
    /// The error type (header `x-runtime-error-type`).
    kind: &'static str,
    /// The message, at most 512 characters.
    text: String,
    /// Whether a retry may help (the policy retries; not a misuse, not permanent).
    retry: bool,
    /// Dead-lettered without retrying as a failure (error type `fail:<type>`).
    fail: bool,
}

impl Failed {
    fn new(config: &RedisRuntimeConfig, e: &Error) -> Self {
        let kind = failure_type(e);
        let misuse = is_misuse(e);
        // A misuse or a permanent error (bad input, `Error::permanent`): no retry helps.
        let retry = config.processing_error_result() == ProcessingErrorResult::Retry
            && !misuse
            && !e.is_permanent();
        Failed {
            kind,
            text: failure_message(e),
            retry,
            fail: config.processing_error_result() == ProcessingErrorResult::Fail && !misuse,
        }
    }

    /// What the reader does with the record: retry (dead letter once retries are used
    /// up), or dead letter now.
    fn verdict(&self) -> HandleResult {
        let f = Failure::new(self.kind, self.text.clone());
        match (self.retry, self.fail) {
            (true, _) => HandleResult::Retry(f),
            (false, true) => HandleResult::Fail(f),
            (false, false) => HandleResult::DeadLetter(f),
        }
    }

    /// `msg` with the `x-runtime-*` headers.
    fn headers(&self, ctx: &Ctx<'_>, group: &str, msg: &Message) -> Message {
        let mut m = msg.clone();
        m.headers.insert(
            HEADER_RUNTIME_JOB.into(),
            ctx.spec.config.job_name().to_owned(),
        );
        m.headers
            .insert(HEADER_RUNTIME_GROUP.into(), group.to_owned());
        m.headers
            .insert(HEADER_RUNTIME_ERROR_TYPE.into(), self.kind.into());
        m.headers
            .insert(HEADER_RUNTIME_ERROR_MESSAGE.into(), self.text.clone());
        m
    }
}

/// Sends a failed record, with the `x-runtime-*` headers, to retry or the dead-letter
/// queue of its input (`reader`'s partition and group); returns its error type and what became of it.
pub(in crate::redis) async fn fail(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    reader: &mut PartitionReader,
    msg: &Message,
    e: &Error,
) -> Result<(&'static str, Option<RetryOutcome>), Error> {
    let failed = Failed::new(&ctx.spec.config, e);
    let m = failed.headers(ctx, reader.group(), msg);
    let outcome = reader.settle(conn, &m, &failed.verdict()).await?;
    Ok((failed.kind, outcome))
}
