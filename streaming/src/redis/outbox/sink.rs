//! [`RedisOutboxSink`]: a pipeline's records into its outbox, in the batch commit.

use crate::api::{CommitWrite, CommitWrites, Sink};
use crate::{BoxError, Error};
use serde::Serialize;
use std::sync::Arc;

/// Appends each record, as JSON, to the outbox `name` of its source partition
/// (`{mq prefix}:outbox:{name}:{T:n}`, see the [module docs](super)) in the batch commit:
/// a record is in the outbox exactly when the batch that produced it committed, once,
/// also across crashes and takeovers. A [`RedisOutboxDispatcher`](super::RedisOutboxDispatcher)
/// built with the same `name` and source topic (and the job's queue key prefix) delivers
/// the records to an [`OutboxTarget`](super::OutboxTarget), at least once, each with its
/// stable [`OutboxRecord::id`](super::OutboxRecord::id).
///
/// Redis engine only: on the memory engine `close` fails rather than dropping records.
#[derive(Debug)]
pub struct RedisOutboxSink<T> {
    name: Arc<str>,
    pending: Vec<String>,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<T> Clone for RedisOutboxSink<T> {
    fn clone(&self) -> Self {
        RedisOutboxSink {
            name: Arc::clone(&self.name),
            pending: Vec::new(),
            _t: std::marker::PhantomData,
        }
    }
}

impl<T> RedisOutboxSink<T> {
    /// A sink appending to the outbox `name`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `name`) unless `name` is 1..=200 characters of
    /// `[A-Za-z0-9_.-]` (the names a [`RedisOutboxDispatcher`](super::RedisOutboxDispatcher)
    /// accepts).
    pub fn new(name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        crate::mq::topic::validate_name("name", &name)?;
        Ok(RedisOutboxSink {
            name: name.into(),
            pending: Vec::new(),
            _t: std::marker::PhantomData,
        })
    }
}

impl<T: Serialize> Sink<T> for RedisOutboxSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self.pending.push(serde_json::to_string(&value)?);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        Err(format!(
            "RedisOutboxSink `{}` holds {} records no engine wrote: it only writes on the Redis engine",
            self.name,
            self.pending.len()
        )
        .into())
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.name),
            // The dispatcher reads the outbox by its name: never scoped to the job.
            scope: crate::api::SinkScope::Shared,
            write: CommitWrite::OutboxAppend(std::mem::take(&mut self.pending)),
        })
    }
}
