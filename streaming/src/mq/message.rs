//! [`Message`] and its encoding as a Redis stream entry.

use std::collections::BTreeMap;

use arcstr::ArcStr;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::Error;

mod decode;

pub(crate) use decode::{
    decode_borrowed, parse_entries, parse_entry, parse_read_reply, value_to_string, RawEntry,
};

/// Field of the payload bytes.
pub(crate) const F_PAYLOAD: &str = "p";
/// Field of the timestamp (epoch ms).
pub(crate) const F_TIMESTAMP: &str = "ts";
/// Field of the key.
pub(crate) const F_KEY: &str = "k";
/// Field of the headers JSON.
pub(crate) const F_HEADERS: &str = "h";
/// Field of the retry count.
pub(crate) const F_RETRY_COUNT: &str = "rc";
/// Field of the max retries.
pub(crate) const F_MAX_RETRIES: &str = "mr";
/// Field of the retry group (the group a retry entry is addressed to).
pub(crate) const F_RETRY_GROUP: &str = "rg";

/// Header naming the id of the first delivery of a retried or replayed message.
pub const HEADER_ORIGINAL_ID: &str = "x-original-message-id";
/// Header with the error type of the last failed attempt (set on retry).
pub const HEADER_ERROR_TYPE: &str = "x-error-type";
/// Header with the error message of the last failed attempt, ≤ 512 chars (set on retry).
pub const HEADER_ERROR_MESSAGE: &str = "x-error-message";
/// Header naming a message's idempotency key, set by the producer
/// ([`OutgoingMessage::idempotency_key`]): the Redis engine's input deduplication
/// (`sink_deduplication_enabled`) processes one message per key within its TTL, so a
/// producer's retried send is harmless.
pub const HEADER_IDEMPOTENCY_KEY: &str = "x-idempotency-key";

/// One message of a topic, as delivered to a handler.
///
/// # Stream entry encoding
///
/// One message is one stream entry; its id is the entry id (`<ms>-<seq>`). Fields (all
/// values are Redis bulk strings):
///
/// | field | content | required |
/// |-------|---------|----------|
/// | `p`   | payload, raw bytes (any binary) | yes |
/// | `ts`  | event timestamp, epoch milliseconds, decimal `i64` | yes |
/// | `k`   | key, UTF-8 text | no (absent = no key) |
/// | `h`   | headers, a JSON object of string → string | no (absent = no headers) |
/// | `rc`  | retry count, decimal `u32` | no (absent = 0) |
/// | `mr`  | max retries of this message, decimal `u32` | no (absent = the subscription's [`crate::mq::RetryPolicy::max_retries`]) |
/// | `rg`  | retry group: the one consumer group this entry is addressed to, UTF-8 text | no (absent = every group reads it) |
///
/// `rg` is set on retry entries only ([`RetryPolicy`](crate::mq::RetryPolicy)): a retry belongs to the group
/// whose handler failed. Every other group's reader skips it without running its handler
/// (a subscription acknowledges it, an [`crate::mq::ExclusiveReader`] just reads past it),
/// so a failing group never makes another group process a message twice.
///
/// Topic and partition are not stored: they are the stream the entry is in. An entry that
/// breaks these rules (missing `p`/`ts`, non-UTF-8 key, bad header JSON, unparsable
/// number) is *malformed*: the consumer moves it to the dead-letter stream with the reason
/// and goes on.
///
/// A clone copies no text: the id, topic, key and retry group are [`ArcStr`]s (reference
/// counted, compared and dereferenced as `str`; build them with `.into()` from a `&str`
/// or `String`) and the payload is [`Bytes`]; only headers are copied (none cost nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The stream entry id, `<ms>-<seq>`; a retry is a new entry with a new id (see
    /// [`Message::original_id`]).
    pub id: ArcStr,
    /// The topic name (one shared string for all the messages of a read).
    pub topic: ArcStr,
    /// The partition, `0..partitions`.
    pub partition: u32,
    /// The key; it chose the partition when the producer did not.
    pub key: Option<ArcStr>,
    /// The payload bytes (cheap to clone).
    pub payload: Bytes,
    /// Headers, ordered by name.
    pub headers: BTreeMap<String, String>,
    /// Event time, epoch milliseconds: producer-supplied or the send time.
    pub timestamp_ms: i64,
    /// How many times this message was retried before this delivery (0 = first).
    pub retry_count: u32,
    /// This message's own retry limit; `None` uses the subscription's policy.
    pub max_retries: Option<u32>,
    /// The consumer group this entry is addressed to (field `rg`): set on a retry entry,
    /// which only the group that failed processes; `None` for an entry every group reads.
    /// Handlers only ever see `None` or their own group: readers skip the others' retries.
    pub retry_group: Option<ArcStr>,
}

impl Message {
    /// The payload as UTF-8 text.
    ///
    /// # Errors
    /// [`Error::MqDecode`] (`what = "payload"`) when the bytes are not UTF-8.
    pub fn text(&self) -> Result<&str, Error> {
        std::str::from_utf8(&self.payload).map_err(|e| Error::MqDecode {
            what: "payload",
            reason: e.to_string(),
        })
    }

    /// The payload decoded from JSON.
    ///
    /// # Errors
    /// [`Error::MqDecode`] (`what = "payload"`) with serde_json's message.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.payload).map_err(|e| Error::MqDecode {
            what: "payload",
            reason: e.to_string(),
        })
    }

    /// The id of the first delivery: header [`HEADER_ORIGINAL_ID`] on a retried message,
    /// else this entry's id.
    pub fn original_id(&self) -> &str {
        self.headers
            .get(HEADER_ORIGINAL_ID)
            .map(String::as_str)
            .unwrap_or(&self.id)
    }

    /// Whether `group` processes this entry: `true` unless it is a retry addressed to
    /// another group ([`Message::retry_group`]).
    pub fn is_for_group(&self, group: &str) -> bool {
        self.retry_group.as_deref().is_none_or(|g| g == group)
    }
}

/// A message to send; see [`crate::mq::Producer::send_message`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutgoingMessage {
    /// The key; chooses the partition when `partition` is `None`.
    pub key: Option<String>,
    /// The payload bytes.
    pub payload: Bytes,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// Event time, epoch ms; `None` = now (the producer's clock).
    pub timestamp_ms: Option<i64>,
    /// An explicit partition, `< partitions`.
    pub partition: Option<u32>,
    /// A per-message retry limit (field `mr`).
    pub max_retries: Option<u32>,
}

impl OutgoingMessage {
    /// A message with this payload and nothing else.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Self {
            payload: payload.into(),
            ..Self::default()
        }
    }

    /// A message whose payload is `value` as JSON.
    ///
    /// # Errors
    /// [`Error::MqDecode`] (`what = "payload"`) when serde_json cannot encode `value`.
    pub fn json<T: serde::Serialize>(value: &T) -> Result<Self, Error> {
        let bytes = serde_json::to_vec(value).map_err(|e| Error::MqDecode {
            what: "payload",
            reason: e.to_string(),
        })?;
        Ok(Self::new(bytes))
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the idempotency key (header [`HEADER_IDEMPOTENCY_KEY`]): give a message and
    /// its retried sends the same key, e.g. the business id of what it records.
    pub fn idempotency_key(self, key: impl Into<String>) -> Self {
        self.header(HEADER_IDEMPOTENCY_KEY, key)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the event time, epoch ms.
    pub fn timestamp_ms(mut self, ts: i64) -> Self {
        self.timestamp_ms = Some(ts);
        self
    }

    /// Sets an explicit partition.
    pub fn partition(mut self, partition: u32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the per-message retry limit.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = Some(n);
        self
    }
}

/// The field/value pairs of an entry, in the documented encoding.
#[allow(clippy::too_many_arguments)]
impl Message {
    /// This message's stream entry fields as they stand (same retry count and headers), as
    /// byte pairs for a Lua script's arguments: what a dead letter keeps of it.
    pub(crate) fn entry_fields(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        encode_fields(
            self.key.as_deref(),
            &self.payload,
            &self.headers,
            self.timestamp_ms,
            self.retry_count,
            self.max_retries,
        )
        .into_iter()
        .map(|(f, v)| (f.as_bytes().to_vec(), v))
        .collect()
    }
}

pub(crate) fn encode_fields(
    key: Option<&str>,
    payload: &[u8],
    headers: &BTreeMap<String, String>,
    timestamp_ms: i64,
    retry_count: u32,
    max_retries: Option<u32>,
) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::with_capacity(6);
    out.push((F_PAYLOAD, payload.to_vec()));
    out.push((F_TIMESTAMP, timestamp_ms.to_string().into_bytes()));
    if let Some(k) = key {
        out.push((F_KEY, k.as_bytes().to_vec()));
    }
    if !headers.is_empty() {
        // A map of strings always serialises.
        out.push((
            F_HEADERS,
            serde_json::to_vec(headers).unwrap_or_else(|_| b"{}".to_vec()),
        ));
    }
    if retry_count > 0 {
        out.push((F_RETRY_COUNT, retry_count.to_string().into_bytes()));
    }
    if let Some(mr) = max_retries {
        out.push((F_MAX_RETRIES, mr.to_string().into_bytes()));
    }
    out
}
