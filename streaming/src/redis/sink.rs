//! Sinks of the Redis engine: [`RedisListSink`] (commits with the batch) and
//! [`CollectSink`] (for tests).

use crate::api::{CommitWrites, Sink};
use crate::BoxError;
use serde::Serialize;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// How a [`RedisListSink`] turns a record into a list element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Json,
    Text,
}

/// Appends every record to a Redis list (`RPUSH`), atomically with the batch that produced
/// it: the sink only buffers, and the engine writes the buffer in the batch's commit script
/// together with the state changes and the acknowledgement (DESIGN invariants 3–5). So a
/// record's output is in the list exactly once per acknowledged input — no duplicates after
/// a crash, unlike sinks that write on their own.
///
/// Key: to stay in the partition's hash slot (Redis Cluster), each partition appends to its
/// own list `{list}:{T:n}` — `list` followed by the partition's hash tag (see
/// [`KeySpace::hash_tag`](crate::mq::KeySpace::hash_tag)), e.g. `totals:{orders:3}`;
/// [`RedisListSink::key_for`] names it. Order is the output order within a partition.
///
/// Redis engine only: on the memory engine nothing drains the buffer, and `close` fails
/// (the terminal operation returns the error) rather than dropping the records silently.
#[derive(Debug)]
pub struct RedisListSink<T> {
    list: Arc<str>,
    encoding: Encoding,
    pending: Vec<String>,
    _t: PhantomData<fn(T)>,
}

impl<T> Clone for RedisListSink<T> {
    fn clone(&self) -> Self {
        RedisListSink {
            list: Arc::clone(&self.list),
            encoding: self.encoding,
            pending: Vec::new(),
            _t: PhantomData,
        }
    }
}

impl<T> RedisListSink<T> {
    /// A sink appending records as JSON (serde_json) to the lists `{list}:{T:n}`.
    pub fn new(list: impl Into<String>) -> Self {
        RedisListSink {
            list: list.into().into(),
            encoding: Encoding::Json,
            pending: Vec::new(),
            _t: PhantomData,
        }
    }

    /// A sink appending records as text (`Display`) to the lists `{list}:{T:n}`.
    pub fn text(list: impl Into<String>) -> Self {
        RedisListSink {
            encoding: Encoding::Text,
            ..Self::new(list)
        }
    }

    /// The list key partition `partition` of `topic` appends to: `{list}:{topic:partition}`.
    pub fn key_for(list: &str, topic: &str, partition: u32) -> String {
        format!("{list}:{{{topic}:{partition}}}")
    }
}

/// What [`RedisListSink`] can write: JSON for [`RedisListSink::new`], text for
/// [`RedisListSink::text`].
pub trait ListValue {
    /// As JSON.
    ///
    /// # Errors
    /// serde_json's error.
    fn to_json(&self) -> Result<String, BoxError>;
    /// As text.
    fn to_text(&self) -> String;
}

impl<T: Serialize + std::fmt::Display> ListValue for T {
    fn to_json(&self) -> Result<String, BoxError> {
        Ok(serde_json::to_string(self)?)
    }
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl<T: ListValue> Sink<T> for RedisListSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        let v = match self.encoding {
            Encoding::Json => value.to_json()?,
            Encoding::Text => value.to_text(),
        };
        self.pending.push(v);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "RedisListSink `{}` holds {} records no engine wrote: it only writes on the Redis engine",
                self.list,
                self.pending.len()
            )
            .into())
        }
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.list),
            values: std::mem::take(&mut self.pending),
        })
    }
}

/// Collects records into a shared `Vec` (for tests and small jobs). Clones share the
/// vector, so every partition's copy appends to it. Records arrive after their batch was
/// processed and before it commits: after a crash or a failed commit a batch's output can
/// appear twice (at-least-once), unlike [`RedisListSink`].
#[derive(Debug)]
pub struct CollectSink<T> {
    items: Arc<Mutex<Vec<T>>>,
}

impl<T> Clone for CollectSink<T> {
    fn clone(&self) -> Self {
        CollectSink {
            items: Arc::clone(&self.items),
        }
    }
}

impl<T> Default for CollectSink<T> {
    fn default() -> Self {
        CollectSink {
            items: Arc::default(),
        }
    }
}

impl<T> CollectSink<T> {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared vector.
    pub fn items(&self) -> Arc<Mutex<Vec<T>>> {
        Arc::clone(&self.items)
    }

    /// A copy of what was collected so far.
    pub fn snapshot(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.items.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// How many records were collected so far.
    pub fn len(&self) -> usize {
        self.items.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// Whether nothing was collected yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Sink<T> for CollectSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self.items
            .lock()
            .map_err(|_| "collect sink poisoned")?
            .push(value);
        Ok(())
    }
}
