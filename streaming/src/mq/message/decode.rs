//! Stream entries as read, binary-safe, and their decoding into [`Message`]s (the
//! encoding is documented on [`Message`]): from redis-rs's reply values, or from slices
//! of a reply read as bytes.

use std::collections::BTreeMap;

use arcstr::ArcStr;
use bytes::Bytes;
use redis::Value;

use super::{Message, F_MAX_RETRIES, F_RETRY_COUNT, F_TIMESTAMP};
use crate::Error;

/// A stream entry as read: id and raw field/value pairs (binary-safe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawEntry {
    pub(crate) id: String,
    pub(crate) fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl RawEntry {
    /// Decodes the entry of `topic`/`partition` into a [`Message`], moving its id, payload,
    /// key and retry group out of the entry (no copy).
    ///
    /// # Errors
    /// The entry back, with the reason it is malformed (stored in the dead-letter entry).
    pub(crate) fn decode(self, topic: &ArcStr, partition: u32) -> Result<Message, (RawEntry, String)> {
        let known = Known::of(self.fields.iter().map(|(f, v)| (f.as_slice(), v.as_slice())));
        let parsed = match known.parse() {
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
        let text = |v: Vec<u8>| ArcStr::from(String::from_utf8(v).unwrap_or_default());
        Ok(parsed.message(
            self.id.into(),
            topic,
            partition,
            (
                Bytes::from(payload.unwrap_or_default()),
                key.map(text),
                retry_group.map(text),
            ),
        ))
    }
}

/// Decodes an entry read as borrowed slices — its id and its field/value pairs in stream
/// order — exactly as [`RawEntry::decode`] decodes the same entry owned, copying what the
/// [`Message`] keeps.
///
/// # Errors
/// The reason the entry is malformed ([`RawEntry::decode`]'s).
pub(crate) fn decode_borrowed(
    id: &str,
    fields: &[(&[u8], &[u8])],
    topic: &ArcStr,
    partition: u32,
) -> Result<Message, String> {
    let known = Known::of(fields.iter().copied());
    let parsed = known.parse()?;
    // `parse` checked that the payload is present and the key and group are UTF-8.
    let text = |v: &[u8]| ArcStr::from(std::str::from_utf8(v).unwrap_or_default());
    Ok(parsed.message(
        id.into(),
        topic,
        partition,
        (
            Bytes::copy_from_slice(known.payload.unwrap_or_default()),
            known.key.map(text),
            known.retry_group.map(text),
        ),
    ))
}

/// The first value of each field of the encoding in an entry (an entry written by hand
/// may repeat a field: the first one counts).
#[derive(Default)]
struct Known<'a> {
    payload: Option<&'a [u8]>,
    timestamp: Option<&'a [u8]>,
    key: Option<&'a [u8]>,
    headers: Option<&'a [u8]>,
    retry_count: Option<&'a [u8]>,
    max_retries: Option<&'a [u8]>,
    retry_group: Option<&'a [u8]>,
}

impl<'a> Known<'a> {
    fn of(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Self {
        let mut k = Known::default();
        for (f, v) in fields {
            let slot = match f {
                b"p" => &mut k.payload,
                b"ts" => &mut k.timestamp,
                b"k" => &mut k.key,
                b"h" => &mut k.headers,
                b"rc" => &mut k.retry_count,
                b"mr" => &mut k.max_retries,
                b"rg" => &mut k.retry_group,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(v);
            }
        }
        k
    }

    /// Checks the entry and parses its numbers and headers.
    fn parse(&self) -> Result<Parsed, String> {
        self.payload.ok_or("missing field `p` (payload)")?;
        let ts = self.timestamp.ok_or("missing field `ts` (timestamp)")?;
        let timestamp_ms = parse_num::<i64>(ts, F_TIMESTAMP)?;
        if let Some(k) = self.key {
            std::str::from_utf8(k).map_err(|e| format!("field `k` (key) is not UTF-8: {e}"))?;
        }
        let headers = match self.headers {
            None => BTreeMap::new(),
            Some(h) => serde_json::from_slice::<BTreeMap<String, String>>(h)
                .map_err(|e| format!("field `h` (headers) is not a JSON string map: {e}"))?,
        };
        let retry_count = match self.retry_count {
            None => 0,
            Some(v) => parse_num::<u32>(v, F_RETRY_COUNT)?,
        };
        let max_retries = match self.max_retries {
            None => None,
            Some(v) => Some(parse_num::<u32>(v, F_MAX_RETRIES)?),
        };
        if let Some(g) = self.retry_group {
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

impl Parsed {
    /// The message of entry `id` with these fields and `(payload, key, retry group)`.
    fn message(
        self,
        id: ArcStr,
        topic: &ArcStr,
        partition: u32,
        (payload, key, retry_group): (Bytes, Option<ArcStr>, Option<ArcStr>),
    ) -> Message {
        Message {
            id,
            topic: topic.clone(),
            partition,
            key,
            payload,
            headers: self.headers,
            timestamp_ms: self.timestamp_ms,
            retry_count: self.retry_count,
            max_retries: self.max_retries,
            retry_group,
        }
    }
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
    use crate::mq::message::encode_fields;

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
        let m = e.decode(&arcstr::literal!("t"), 3).unwrap();
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
            .decode(&arcstr::literal!("t"), 0)
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
            .decode(&arcstr::literal!("t"), 0)
            .unwrap();
        assert_eq!(m.retry_group.as_deref(), Some("bad"));
        assert!(m.is_for_group("bad"));
        assert!(!m.is_for_group("good"));
        let r = raw(&[("p", b"x"), ("ts", b"1"), ("rg", b"\xff")])
            .decode(&arcstr::literal!("t"), 0)
            .unwrap_err()
            .1;
        assert!(r.contains("`rg` (retry group)"), "{r}");
    }

    #[test]
    fn malformed_reasons() {
        let r = raw(&[("ts", b"1")]).decode(&arcstr::literal!("t"), 0).unwrap_err().1;
        assert!(r.contains("missing field `p`"), "{r}");
        let r = raw(&[("p", b"x")]).decode(&arcstr::literal!("t"), 0).unwrap_err().1;
        assert!(r.contains("missing field `ts`"), "{r}");
        let r = raw(&[("p", b"x"), ("ts", b"abc")])
            .decode(&arcstr::literal!("t"), 0)
            .unwrap_err()
            .1;
        assert!(r.contains("`ts` is not a number"), "{r}");
        let r = raw(&[("p", b"x"), ("ts", b"1"), ("h", b"[1]")])
            .decode(&arcstr::literal!("t"), 0)
            .unwrap_err()
            .1;
        assert!(r.contains("`h` (headers)"), "{r}");
        let r = raw(&[("p", b"x"), ("ts", b"1"), ("k", b"\xff")])
            .decode(&arcstr::literal!("t"), 0)
            .unwrap_err()
            .1;
        assert!(r.contains("not UTF-8"), "{r}");
    }

    mod hostile {
        //! Hostile entries (issue: fuzzed parsers): any fields with any bytes decode without
        //! a panic, owned and borrowed alike, and a decoded message holds exactly the
        //! entry's first value of each field.
        use super::*;
        use proptest::collection::vec;
        use proptest::prelude::*;

        /// A field name: one of the encoding's, repeated ones included, or anything.
        fn name() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                8 => prop::sample::select(vec!["p", "ts", "k", "h", "rc", "mr", "rg"])
                    .prop_map(|n| n.as_bytes().to_vec()),
                1 => vec(any::<u8>(), 0..4),
            ]
        }

        /// A value: random bytes, or text a field's parser must judge (numbers at and past
        /// their type's range, JSON that is almost a string map, invalid UTF-8).
        fn value() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                vec(any::<u8>(), 0..24),
                any::<i64>().prop_map(|n| n.to_string().into_bytes()),
                any::<u64>().prop_map(|n| format!("{n}0").into_bytes()),
                prop::sample::select(vec![
                    "{}", "{\"a\":\"b\"}", "{\"a\":1}", "[]", "null", "{\"a\":\"\\ud800\"}",
                    "-0", "+1", " 1", "4294967295", "4294967296", "9223372036854775808",
                    "\u{ff}", "",
                ])
                .prop_map(|t| t.as_bytes().to_vec()),
                Just(vec![0xff, 0xfe]),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn any_entry_decodes_alike_owned_and_borrowed(
                fields in vec((name(), value()), 0..9),
            ) {
                let topic = arcstr::literal!("t");
                let entry = RawEntry { id: "7-1".into(), fields: fields.clone() };
                let slices: Vec<(&[u8], &[u8])> =
                    fields.iter().map(|(f, v)| (f.as_slice(), v.as_slice())).collect();
                let borrowed = decode_borrowed("7-1", &slices, &topic, 2);
                let owned = entry.decode(&topic, 2);
                match (&owned, &borrowed) {
                    (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                    (Err((back, a)), Err(b)) => {
                        prop_assert_eq!(a, b);
                        prop_assert_eq!(&back.fields, &fields, "the malformed entry comes back whole");
                    }
                    _ => prop_assert!(false, "owned {owned:?} but borrowed {borrowed:?}"),
                }
                if let Ok(m) = owned {
                    let first = |n: &[u8]| fields.iter().find(|(f, _)| f == n).map(|(_, v)| v.clone());
                    prop_assert_eq!(Some(m.payload.to_vec()), first(b"p"));
                    prop_assert_eq!(m.key.map(|k| k.as_bytes().to_vec()), first(b"k"));
                    prop_assert_eq!(
                        Some(m.timestamp_ms.to_string().into_bytes()),
                        first(b"ts").map(|t| String::from_utf8(t).unwrap().parse::<i64>().unwrap().to_string().into_bytes())
                    );
                }
            }
        }
    }
}
