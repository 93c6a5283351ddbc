//! [`RedisListSink`]: appends to a Redis list in the batch's commit.

use crate::api::{CommitWrite, CommitWrites, Sink, SinkScope};
use crate::{BoxError, Error};
use serde::Serialize;
use std::marker::PhantomData;
use std::sync::Arc;

/// The JSON encoding of a [`RedisListSink`] (serde_json; [`RedisListSink::new`]): records
/// need only `Serialize`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonList;

/// The text encoding of a [`RedisListSink`] (`Display`; [`RedisListSink::text`]): records
/// need only `Display`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextList;

/// How a list-shaped sink ([`RedisListSink`], [`RedisTopicSink`](crate::redis::RedisTopicSink))
/// turns a record into the string it writes: [`JsonList`] (serde_json, records need
/// `Serialize`) or [`TextList`] (`Display`). Implemented by those two only.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot write records of type `{T}`",
    note = "`JsonList` (`new`) needs `{T}: Serialize`; `TextList` (`text`) needs `{T}: Display`"
)]
pub trait RecordEncoding<T>: crate::sealed::Sealed {
    /// The record as written.
    ///
    /// # Errors
    /// The serializer's error (JSON only; text cannot fail).
    fn encode(value: &T) -> Result<String, BoxError>;
}

impl crate::sealed::Sealed for JsonList {}
impl crate::sealed::Sealed for TextList {}

impl<T: Serialize> RecordEncoding<T> for JsonList {
    fn encode(value: &T) -> Result<String, BoxError> {
        Ok(serde_json::to_string(value)?)
    }
}

impl<T: std::fmt::Display> RecordEncoding<T> for TextList {
    fn encode(value: &T) -> Result<String, BoxError> {
        Ok(value.to_string())
    }
}

/// Appends every record to a Redis list (`RPUSH`), atomically with the batch that produced
/// it: the sink only buffers, and the engine writes the buffer in the batch's commit
/// together with the state changes and the acknowledgement. So a
/// record's output is in the list exactly once per acknowledged input — no duplicates after
/// a crash, unlike sinks that write on their own.
///
/// Encoding: `E` is [`JsonList`] (the default; [`RedisListSink::new`], records need
/// `Serialize`) or [`TextList`] ([`RedisListSink::text`], records need `Display`).
///
/// Key: to stay in the partition's hash slot (Redis Cluster), each partition appends to its
/// own list `{list}:{T:n}` (so `list` itself may not contain braces) — `list` followed by the partition's hash tag (see
/// [`KeySpace::hash_tag`](crate::mq::KeySpace::hash_tag)), e.g. `totals:{orders:3}`;
/// [`RedisListSink::key_for`] names it. Order is the output order within a partition.
/// The key carries no job name or key prefix by default: two jobs (or two runs) that use
/// the same list name on the same topic append to the same lists. [`job_scoped`](Self::job_scoped)
/// puts the job name in front (`{job}:{list}:{T:n}`).
///
/// Redis engine only: on the memory engine nothing drains the buffer, and `close` fails
/// (the terminal operation returns the error) rather than dropping the records silently.
#[derive(Debug)]
pub struct RedisListSink<T, E = JsonList> {
    list: Arc<str>,
    scope: SinkScope,
    pending: Vec<String>,
    _t: PhantomData<fn(T, E)>,
}

impl<T, E> Clone for RedisListSink<T, E> {
    fn clone(&self) -> Self {
        RedisListSink {
            list: Arc::clone(&self.list),
            scope: self.scope,
            pending: Vec::new(),
            _t: PhantomData,
        }
    }
}

/// Checks a sink's list name: non-empty and without `{` or `}` (a brace would open a hash
/// tag of its own, so the list would leave the partition's hash slot on Redis Cluster and the
/// batch's one commit transaction could no longer write it).
fn validate_list_name(list: &str) -> Result<(), Error> {
    let reason = if list.is_empty() {
        "must not be empty".to_string()
    } else if let Some(c) = list.chars().find(|c| matches!(c, '{' | '}')) {
        format!(
            "`{list}` contains `{c}`; the engine adds the partition's hash tag itself, so sink names may not contain braces"
        )
    } else {
        return Ok(());
    };
    Err(Error::InvalidConfig {
        field: "list",
        reason,
    })
}

impl<T> RedisListSink<T> {
    /// A sink appending records as JSON (serde_json) to the lists `{list}:{T:n}`; records
    /// need only `Serialize`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `list`) if `list` is empty or contains `{` or `}`.
    pub fn new(list: impl Into<String>) -> Result<Self, Error> {
        Self::encoded(list.into())
    }

    /// A sink appending records as text (`Display`) to the lists `{list}:{T:n}`; records
    /// need only `Display`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `list`) if `list` is empty or contains `{` or `}`.
    pub fn text(list: impl Into<String>) -> Result<RedisListSink<T, TextList>, Error> {
        RedisListSink::encoded(list.into())
    }

    /// The list key partition `partition` of `topic` appends to: `{list}:{topic:partition}`.
    pub fn key_for(list: &str, topic: &str, partition: u32) -> String {
        format!("{list}:{{{topic}:{partition}}}")
    }
}

scoped_sink!(RedisListSink<T, E>);

impl<T, E> RedisListSink<T, E> {
    fn encoded(list: String) -> Result<Self, Error> {
        validate_list_name(&list)?;
        Ok(RedisListSink {
            list: list.into(),
            scope: SinkScope::Shared,
            pending: Vec::new(),
            _t: PhantomData,
        })
    }

    fn take_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.list),
            scope: self.scope,
            write: CommitWrite::ListAppend(std::mem::take(&mut self.pending)),
        })
    }

    fn close_buffer(&mut self) -> Result<(), BoxError> {
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
}

impl<T, E: RecordEncoding<T>> Sink<T> for RedisListSink<T, E> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self.pending.push(E::encode(&value)?);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.close_buffer()
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        self.take_writes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serializable, not `Display`.
    #[derive(Debug, Serialize)]
    struct Point {
        x: i32,
    }

    /// `Display`, not serializable.
    struct Tag(u8);

    impl std::fmt::Display for Tag {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "tag-{}", self.0)
        }
    }

    #[test]
    fn json_needs_only_serialize_and_text_only_display() {
        let mut json = RedisListSink::<Point>::new("out").unwrap();
        json.invoke(Point { x: 1 }).unwrap();
        json.invoke(Point { x: -2 }).unwrap();
        let w = json.take_commit_writes().unwrap();
        assert_eq!(&*w.list, "out");
        let CommitWrite::ListAppend(values) = w.write else {
            panic!("{w:?}")
        };
        assert_eq!(values, [r#"{"x":1}"#, r#"{"x":-2}"#]);
        assert!(json.close().is_ok(), "nothing buffered");

        let mut text = RedisListSink::<Tag>::text("tags").unwrap();
        text.invoke(Tag(7)).unwrap();
        assert!(text.close().is_err(), "a record no engine wrote");
        let w = text.take_commit_writes().unwrap();
        assert!(
            matches!(&w.write, CommitWrite::ListAppend(v) if v == &["tag-7"]),
            "{w:?}"
        );
        assert_eq!(RedisListSink::<Tag>::key_for("tags", "t", 3), "tags:{t:3}");
    }

    #[test]
    fn list_names_with_braces_are_rejected_at_construction() {
        for bad in ["", "totals{x}", "{orders:3}", "a}b"] {
            match RedisListSink::<Point>::new(bad) {
                Err(Error::InvalidConfig { field, reason }) => {
                    assert_eq!(field, "list");
                    assert!(
                        reason.contains(if bad.is_empty() { "empty" } else { "brace" }),
                        "{reason}"
                    );
                }
                other => panic!("{bad:?} accepted: {other:?}"),
            }
            assert!(RedisListSink::<Tag>::text(bad).is_err(), "{bad:?}");
        }
        let ok = RedisListSink::<Point>::new("app:totals").unwrap();
        assert_eq!(&*ok.list, "app:totals");
        let text = RedisListSink::<Tag>::text("app:tags").unwrap();
        assert_eq!(&*text.list, "app:tags");
    }
}
