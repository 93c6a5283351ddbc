//! [`Message`] and its encoding as a Redis stream entry.

use std::collections::BTreeMap;

use bytes::Bytes;
use redis::Value;
use serde::de::DeserializeOwned;

use crate::Error;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The stream entry id, `<ms>-<seq>`; a retry is a new entry with a new id (see
    /// [`Message::original_id`]).
    pub id: String,
    /// The topic name.
    pub topic: String,
    /// The partition, `0..partitions`.
    pub partition: u32,
    /// The key; it chose the partition when the producer did not.
    pub key: Option<String>,
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
    pub retry_group: Option<String>,
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

/// A stream entry as read: id and raw field/value pairs (binary-safe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawEntry {
    pub(crate) id: String,
    pub(crate) fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl RawEntry {
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// Decodes the entry of `topic`/`partition` into a [`Message`], moving its id, payload,
    /// key and retry group out of the entry (no copy).
    ///
    /// # Errors
    /// The entry back, with the reason it is malformed (stored in the dead-letter entry).
    pub(crate) fn decode(self, topic: &str, partition: u32) -> Result<Message, (RawEntry, String)> {
        let parsed = match self.parse() {
            Ok(p) => p,
            Err(reason) => return Err((self, reason)),
        };
        let (mut payload, mut key, mut retry_group) = (None, None, None);
        for (f, v) in self.fields {
            let slot = match f.as_slice() {
                b"p" => &mut payload,
                b"k" => &mut key,
                b"rg" => &mut retry_group,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(v);
            }
        }
        // `parse` checked that the payload is present and the key and group are UTF-8.
        let text = |v: Vec<u8>| String::from_utf8(v).unwrap_or_default();
        Ok(Message {
            id: self.id,
            topic: topic.to_owned(),
            partition,
            key: key.map(text),
            payload: Bytes::from(payload.unwrap_or_default()),
            headers: parsed.headers,
            timestamp_ms: parsed.timestamp_ms,
            retry_count: parsed.retry_count,
            max_retries: parsed.max_retries,
            retry_group: retry_group.map(text),
        })
    }

    /// Checks the entry and parses its numbers and headers.
    fn parse(&self) -> Result<Parsed, String> {
        self.get(F_PAYLOAD).ok_or("missing field `p` (payload)")?;
        let ts = self
            .get(F_TIMESTAMP)
            .ok_or("missing field `ts` (timestamp)")?;
        let timestamp_ms = parse_num::<i64>(ts, F_TIMESTAMP)?;
        if let Some(k) = self.get(F_KEY) {
            std::str::from_utf8(k).map_err(|e| format!("field `k` (key) is not UTF-8: {e}"))?;
        }
        let headers = match self.get(F_HEADERS) {
            None => BTreeMap::new(),
            Some(h) => serde_json::from_slice::<BTreeMap<String, String>>(h)
                .map_err(|e| format!("field `h` (headers) is not a JSON string map: {e}"))?,
        };
        let retry_count = match self.get(F_RETRY_COUNT) {
            None => 0,
            Some(v) => parse_num::<u32>(v, F_RETRY_COUNT)?,
        };
        let max_retries = match self.get(F_MAX_RETRIES) {
            None => None,
            Some(v) => Some(parse_num::<u32>(v, F_MAX_RETRIES)?),
        };
        if let Some(g) = self.get(F_RETRY_GROUP) {
            std::str::from_utf8(g)
                .map_err(|e| format!("field `rg` (retry group) is not UTF-8: {e}"))?;
        }
        Ok(Parsed {
            timestamp_ms,
            headers,
            retry_count,
            max_retries,
        })
    }
}

/// The parsed fields of a well-formed entry.
struct Parsed {
    timestamp_ms: i64,
    headers: BTreeMap<String, String>,
    retry_count: u32,
    max_retries: Option<u32>,
}

fn parse_num<T: std::str::FromStr>(v: &[u8], field: &str) -> Result<T, String> {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse::<T>().ok())
        .ok_or_else(|| {
            format!(
                "field `{field}` is not a number: {:?}",
                String::from_utf8_lossy(v)
            )
        })
}

fn bulk(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// [`bulk`] of an owned reply: a bulk string's buffer is moved, not copied.
fn bulk_owned(v: Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

pub(crate) fn value_to_string(v: &Value) -> Option<String> {
    bulk(v).and_then(|b| String::from_utf8(b).ok())
}

fn protocol(what: &str) -> Error {
    Error::from(redis::RedisError::from((
        redis::ErrorKind::TypeError,
        "unexpected reply shape",
        what.to_owned(),
    )))
}

/// Parses one entry `[id, [f, v, f, v, ...]]`, moving its strings out of the reply;
/// `None` for an entry whose fields are nil (deleted while pending).
pub(crate) fn parse_entry(v: Value) -> Result<Option<RawEntry>, Error> {
    let Value::Array(parts) = v else {
        return Err(protocol("stream entry is not an array"));
    };
    let mut parts = parts.into_iter();
    let id = parts
        .next()
        .and_then(bulk_owned)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| protocol("stream entry without id"))?;
    let fields = match parts.next() {
        None | Some(Value::Nil) => return Ok(None),
        Some(Value::Array(kv)) => {
            let mut fields = Vec::with_capacity(kv.len() / 2);
            let mut kv = kv.into_iter();
            while let (Some(f), Some(v)) = (kv.next(), kv.next()) {
                if let (Some(f), Some(v)) = (bulk_owned(f), bulk_owned(v)) {
                    fields.push((f, v));
                }
            }
            fields
        }
        Some(Value::Map(kv)) => kv
            .into_iter()
            .filter_map(|(k, v)| Some((bulk_owned(k)?, bulk_owned(v)?)))
            .collect(),
        Some(_) => return Err(protocol("stream entry fields are not an array")),
    };
    Ok(Some(RawEntry { id, fields }))
}

/// Parses a list of entries (XRANGE reply, or the entries of one stream).
pub(crate) fn parse_entries(v: Value) -> Result<Vec<RawEntry>, Error> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if let Some(e) = parse_entry(item)? {
                    out.push(e);
                }
            }
            Ok(out)
        }
        _ => Err(protocol("entry list is not an array")),
    }
}

/// Parses an `XREADGROUP`/`XREAD` reply for one stream: nil (timeout) or
/// `[[stream, [entries]]]`.
pub(crate) fn parse_read_reply(v: Value) -> Result<Vec<RawEntry>, Error> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Array(streams) => {
            let mut out = Vec::new();
            for s in streams {
                match s {
                    Value::Array(pair) if pair.len() == 2 => {
                        let entries = pair.into_iter().nth(1).unwrap_or(Value::Nil);
                        out.extend(parse_entries(entries)?);
                    }
                    _ => return Err(protocol("XREADGROUP stream is not [name, entries]")),
                }
            }
            Ok(out)
        }
        Value::Map(streams) => {
            let mut out = Vec::new();
            for (_, entries) in streams {
                out.extend(parse_entries(entries)?);
            }
            Ok(out)
        }
        _ => Err(protocol("XREADGROUP reply is not an array")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(fields: &[(&str, &[u8])]) -> RawEntry {
        RawEntry {
            id: "5-1".into(),
            fields: fields
                .iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.to_vec()))
                .collect(),
        }
    }

    #[test]
    fn round_trip() {
        let mut h = BTreeMap::new();
        h.insert("a".to_owned(), "b".to_owned());
        let fields = encode_fields(Some("k1"), b"\x00\xffbin", &h, -42, 2, Some(7));
        let e = RawEntry {
            id: "1-0".into(),
            fields: fields
                .into_iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v))
                .collect(),
        };
        let m = e.decode("t", 3).unwrap();
        assert_eq!(m.id, "1-0");
        assert_eq!(m.topic, "t");
        assert_eq!(m.partition, 3);
        assert_eq!(m.key.as_deref(), Some("k1"));
        assert_eq!(&m.payload[..], b"\x00\xffbin");
        assert_eq!(m.headers, h);
        assert_eq!(m.timestamp_ms, -42);
        assert_eq!(m.retry_count, 2);
        assert_eq!(m.max_retries, Some(7));
        assert!(m.text().is_err());
        assert_eq!(m.original_id(), "1-0");
    }

    #[test]
    fn minimal_entry_has_defaults() {
        let m = raw(&[("p", b"{\"x\":1}"), ("ts", b"10")])
            .decode("t", 0)
            .unwrap();
        assert_eq!(m.key, None);
        assert!(m.headers.is_empty());
        assert_eq!(m.retry_count, 0);
        assert_eq!(m.max_retries, None);
        assert_eq!(m.retry_group, None);
        assert!(m.is_for_group("any"));
        #[derive(serde::Deserialize)]
        struct X {
            x: i32,
        }
        assert_eq!(m.json::<X>().unwrap().x, 1);
    }

    #[test]
    fn retry_group_addresses_one_group() {
        let m = raw(&[("p", b"x"), ("ts", b"1"), ("rc", b"1"), ("rg", b"bad")])
            .decode("t", 0)
            .unwrap();
        assert_eq!(m.retry_group.as_deref(), Some("bad"));
        assert!(m.is_for_group("bad"));
        assert!(!m.is_for_group("good"));
        let r = raw(&[("p", b"x"), ("ts", b"1"), ("rg", b"\xff")])
            .decode("t", 0)
            .unwrap_err()
            .1;
        assert!(r.contains("`rg` (retry group)"), "{r}");
    }

    #[test]
    fn malformed_reasons() {
        let r = raw(&[("ts", b"1")]).decode("t", 0).unwrap_err().1;
        assert!(r.contains("missing field `p`"), "{r}");
        let r = raw(&[("p", b"x")]).decode("t", 0).unwrap_err().1;
        assert!(r.contains("missing field `ts`"), "{r}");
        let r = raw(&[("p", b"x"), ("ts", b"abc")])
            .decode("t", 0)
            .unwrap_err()
            .1;
        assert!(r.contains("`ts` is not a number"), "{r}");
        let r = raw(&[("p", b"x"), ("ts", b"1"), ("h", b"[1]")])
            .decode("t", 0)
            .unwrap_err()
            .1;
        assert!(r.contains("`h` (headers)"), "{r}");
        let r = raw(&[("p", b"x"), ("ts", b"1"), ("k", b"\xff")])
            .decode("t", 0)
            .unwrap_err()
            .1;
        assert!(r.contains("not UTF-8"), "{r}");
    }
}
