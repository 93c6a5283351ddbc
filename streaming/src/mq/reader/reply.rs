//! A fenced read's reply made into entries: read straight from the bytes when it has the
//! shape Redis gives it (the common case: no `redis::Value` in between, each message's
//! strings copied once), else the general way, through redis-rs's parser, with exactly
//! redis-rs's results and errors.

use arcstr::ArcStr;
use redis::Value;

use super::resp::Cursor;
use crate::mq::lease::is_fenced_reply;
use crate::mq::message::{decode_borrowed, parse_read_reply, Message, RawEntry};
use crate::Error;

/// The entries of one read, decoded: messages, malformed entries, ids.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Entries {
    /// The messages of the well-formed entries, in stream order.
    pub(crate) messages: Vec<Message>,
    /// The malformed entries, in stream order, each with the reason and the number of
    /// messages before it in the read (where it stood among them).
    pub(crate) malformed: Vec<Malformed>,
    /// With every id: each entry's id, in stream order (entries deleted while pending, and
    /// so not read, have none); else only the last entry's.
    pub(crate) ids: Vec<String>,
}

/// An entry that does not decode as a message, with the reason (it goes to the
/// dead-letter queue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub(crate) entry: RawEntry,
    pub(crate) reason: String,
    /// How many messages came before it in the read.
    pub(crate) after: usize,
}

impl Entries {
    /// Whether nothing was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn push(&mut self, decoded: Result<Message, Malformed>, every_id: bool) {
        match decoded {
            Ok(m) => {
                if every_id {
                    self.ids.push(m.id.to_string());
                }
                self.messages.push(m);
            }
            Err(mut e) => {
                if every_id {
                    self.ids.push(e.entry.id.clone());
                }
                e.after = self.messages.len();
                self.malformed.push(e);
            }
        }
    }

    /// Sets the last id when only that one is kept.
    fn finish(mut self, every_id: bool) -> Self {
        if !every_id {
            let last_malformed = self.malformed.last().filter(|e| e.after == self.messages.len());
            let last = match last_malformed {
                Some(e) => Some(e.entry.id.as_str()),
                None => self.messages.last().map(|m| m.id.as_str()),
            };
            self.ids.extend(last.map(str::to_owned));
        }
        self
    }
}

/// Decodes each entry of a read of `topic`/`partition` ([`RawEntry::decode`]), keeping
/// every id or only the last.
pub(crate) fn decode_all(
    raw: Vec<RawEntry>,
    (topic, partition): (&ArcStr, u32),
    every_id: bool,
) -> Entries {
    let mut entries = Entries {
        messages: Vec::with_capacity(raw.len()),
        ..Entries::default()
    };
    for e in raw {
        let decoded = e.decode(topic, partition).map_err(|(entry, reason)| Malformed {
            entry,
            reason,
            after: 0,
        });
        entries.push(decoded, every_id);
    }
    entries.finish(every_id)
}

/// What a fenced read's transaction (`MULTI`, guard, `XREADGROUP`, undo, `EXEC`) answered.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct FencedReply {
    /// The guard or the undo found the lease gone: the read was refused (and put back);
    /// nothing else is set.
    pub(crate) fenced: bool,
    /// The group's last-delivered id before the read, when the guard reported one.
    pub(crate) before: Option<String>,
    /// The read answered nil: nothing new.
    pub(crate) nil: bool,
    /// The entries read.
    pub(crate) entries: Entries,
}

/// The reply of a fenced read made from the transaction's values (the guard's, the
/// read's, the undo's), as redis-rs gives them.
///
/// # Errors
/// [`Error::Redis`] for a read reply that is not a stream read's.
pub(crate) fn from_values(
    (guard, read, undone): (Value, Value, Value),
    at: (&ArcStr, u32),
    every_id: bool,
) -> Result<FencedReply, Error> {
    if is_fenced_reply(&guard) || is_fenced_reply(&undone) {
        return Ok(FencedReply {
            fenced: true,
            ..FencedReply::default()
        });
    }
    let before = match guard {
        Value::BulkString(b) if !b.is_empty() => String::from_utf8(b).ok(),
        _ => None,
    };
    let nil = matches!(read, Value::Nil);
    let entries = decode_all(parse_read_reply(read)?, at, every_id);
    Ok(FencedReply {
        fenced: false,
        before,
        nil,
        entries,
    })
}

/// The reply of a fenced read from the bytes of its five replies (`MULTI`'s, the three
/// `QUEUED`, `EXEC`'s): the same as [`from_values`] of what redis-rs makes of them
/// ([`transaction_values`]), errors included.
///
/// # Errors
/// As [`transaction_values`] and [`from_values`].
pub(crate) fn from_frames(
    frames: &[&[u8]],
    at: (&ArcStr, u32),
    every_id: bool,
) -> Result<FencedReply, Error> {
    match read_directly(frames, at, every_id) {
        Some(reply) => Ok(reply),
        None => from_values(transaction_values(frames)?, at, every_id),
    }
}

/// What redis-rs's `Pipeline::query_async::<(Value, Value, Value)>` of an atomic pipeline
/// makes of the replies `frames` (the last is `EXEC`'s): the first error among the
/// replies before `EXEC`, then the first error inside `EXEC`'s reply, else its values.
///
/// # Errors
/// The first error reply, a reply redis-rs cannot parse, or one of another shape.
pub(crate) fn transaction_values(frames: &[&[u8]]) -> redis::RedisResult<(Value, Value, Value)> {
    let Some((exec, queued)) = frames.split_last() else {
        return Err((redis::ErrorKind::ResponseError, "no reply").into());
    };
    for f in queued {
        redis::parse_redis_value(f).and_then(Value::extract_error)?;
    }
    let values = match redis::parse_redis_value(exec)? {
        Value::Nil => Value::Nil,
        Value::Array(items) => Value::Array(items).extract_error()?,
        _ => {
            return Err((
                redis::ErrorKind::ResponseError,
                "Invalid response when parsing multi response",
            )
                .into())
        }
    };
    redis::from_owned_redis_value(values)
}

/// [`from_frames`] for replies of the shape Redis sends (RESP2: `+OK`, `+QUEUED`, and an
/// `EXEC` array of a bulk-string guard reply, the stream read's arrays of bulk strings,
/// an integer or bulk-string undo reply); `None` for anything else.
fn read_directly(frames: &[&[u8]], at: (&ArcStr, u32), every_id: bool) -> Option<FencedReply> {
    let [multi, queued @ .., exec] = frames else {
        return None;
    };
    if *multi != b"+OK\r\n" || queued.len() != 3 || queued.iter().any(|q| *q != b"+QUEUED\r\n") {
        return None;
    }
    let mut c = Cursor::new(exec);
    if c.array()? != Some(3) {
        return None;
    }
    let guard = c.bulk()?;
    let (nil, entries) = stream_read(&mut c, at, every_id)?;
    let undo_fenced = match c.int() {
        Some(_) => false,
        None => c.bulk()? == b"fenced",
    };
    if !c.at_end() {
        return None;
    }
    if guard == b"fenced" || undo_fenced {
        return Some(FencedReply {
            fenced: true,
            ..FencedReply::default()
        });
    }
    let before = match guard {
        [] => None,
        id => std::str::from_utf8(id).ok().map(str::to_owned),
    };
    Some(FencedReply {
        fenced: false,
        before,
        nil,
        entries,
    })
}

/// An `XREADGROUP`/`XREAD` reply as Redis writes it in RESP2: nil, or an array of
/// `[stream name, entries]`, each entry `[id, [field, value, …]]` or, deleted while
/// pending, `[id, nil]` (skipped). Returns whether it was nil, and the entries.
fn stream_read(c: &mut Cursor<'_>, at: (&ArcStr, u32), every_id: bool) -> Option<(bool, Entries)> {
    let Some(streams) = c.array()? else {
        return Some((true, Entries::default()));
    };
    let mut entries = Entries::default();
    // One entry's field/value pairs, reused.
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    for _ in 0..streams {
        if c.array()? != Some(2) {
            return None;
        }
        c.bulk()?;
        let Some(n) = c.array()? else {
            continue;
        };
        entries.messages.reserve(n.min(c.remaining() / 8));
        for _ in 0..n {
            if c.array()? != Some(2) {
                return None;
            }
            let id = std::str::from_utf8(c.bulk()?).ok()?;
            let Some(values) = c.array()? else {
                continue;
            };
            pairs.clear();
            for _ in 0..values / 2 {
                pairs.push((c.bulk()?, c.bulk()?));
            }
            if values % 2 == 1 {
                // An odd value out is dropped, as the general parse drops it.
                c.bulk()?;
            }
            let decoded = decode_borrowed(id, &pairs, at.0, at.1).map_err(|reason| Malformed {
                entry: owned(id, &pairs),
                reason,
                after: 0,
            });
            entries.push(decoded, every_id);
        }
    }
    Some((false, entries.finish(every_id)))
}

fn owned(id: &str, pairs: &[(&[u8], &[u8])]) -> RawEntry {
    RawEntry {
        id: id.to_owned(),
        fields: pairs.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect(),
    }
}

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
