//! Dead letters: writing, listing, replaying and purging them.

use std::collections::BTreeMap;

use super::Connection;
use bytes::Bytes;
use redis::{AsyncCommands, Script, Value};
use std::sync::LazyLock;

use crate::mq::lease::Fence;
use crate::mq::message::{
    encode_fields, parse_entries, RawEntry, F_PAYLOAD, F_RETRY_COUNT, F_RETRY_GROUP,
    HEADER_ORIGINAL_ID,
};
use crate::mq::packed::{array_len, unpack_fields, PACKED_FIELD};
use crate::mq::retry::truncate;
use crate::mq::topic::{now_ms, KeySpace};
use crate::Error;

/// A failed entry with more fields than this is dead-lettered with its fields packed into
/// one `dlq.fields` value.
pub(crate) const PACKED_FIELDS_OVER: usize = 1000;

/// Appends an entry to the dead-letter stream (acknowledging it, in XACK mode).
static DEAD_LETTER: LazyLock<Script> =
    fenced_script!(
        include_str!("lua/advance.lua"),
        include_str!("lua/settle.lua"),
        include_str!("lua/dead_letter.lua"),
    );

/// Moves a dead letter back to its partition.
static REPLAY: LazyLock<Script> = lua_script!("replay.lua");

/// Why and where a message is dead-lettered.
pub(crate) struct DeadLetterCause<'a> {
    pub(crate) topic: &'a str,
    pub(crate) partition: u32,
    pub(crate) group: &'a str,
    pub(crate) id: &'a str,
    pub(crate) original_id: &'a str,
    pub(crate) attempts: u32,
    pub(crate) error_type: &'a str,
    pub(crate) error: &'a str,
}

/// Appends `fields` + the `dlq.*` fields to the dead-letter stream, if `fence` still holds
/// the partition's lease; with `ack`, atomically with acknowledging entry `cause.id` for
/// the group and advancing the frontier (else a NOACK reader's: nothing to acknowledge).
/// Returns `false` when, with `ack`, the entry was no longer pending (nothing written).
///
/// # Errors
/// [`Error::Fenced`] (nothing written) when another owner took the lease.
pub(crate) async fn write_dead_letter(
    conn: &mut Connection,
    keys: &KeySpace,
    fence: Fence<'_>,
    ack: bool,
    cause: &DeadLetterCause<'_>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<bool, Error> {
    let (t, p, g) = (cause.topic, cause.partition, cause.group);
    let mut inv = DEAD_LETTER.key(keys.stream(t, p));
    inv.key(keys.acked(t, p, g))
        .key(keys.frontier(t, p, g))
        .key(keys.dlq(t, p));
    fence.push(&mut inv);
    inv.key(keys.settled(t, p, g));
    inv.arg(if ack { "1" } else { "0" })
        .arg(g)
        .arg(cause.id)
        .arg(PACKED_FIELDS_OVER * 2);
    let kept: Vec<_> = fields
        .into_iter()
        .filter(|(f, _)| !f.starts_with(b"dlq."))
        .collect();
    inv.arg(kept.len() * 2);
    for (f, v) in kept {
        inv.arg(f).arg(v);
    }
    inv.arg("dlq.topic")
        .arg(t)
        .arg("dlq.partition")
        .arg(p)
        .arg("dlq.id")
        .arg(cause.id)
        .arg("dlq.original_id")
        .arg(cause.original_id)
        .arg("dlq.group")
        .arg(g)
        .arg("dlq.attempts")
        .arg(cause.attempts)
        .arg("dlq.error_type")
        .arg(truncate(cause.error_type))
        .arg("dlq.error")
        .arg(truncate(cause.error))
        .arg("dlq.failed_ms")
        .arg(now_ms());
    let v: Value = inv.invoke_async(conn).await?;
    Ok(fence.int_reply(&v)? == 1)
}

/// One dead-letter entry as listed by [`crate::mq::Mq::dead_letters`].
///
/// # Dead letters
/// Dead letters: messages that ran out of retries, that the handler sent there, or that
/// could not be decoded.
///
/// Each partition has a dead-letter stream `P:{T:n}:dlq` (the topic's dead letters are the
/// union over its partitions; same hash tag as the partition, so "acknowledge + dead
/// letter" is one Lua script, and a crash cannot lose or duplicate the entry). A dead-letter
/// entry holds the failed message's fields (`p`, `ts`, `k`, `h`, `rc`, `mr`, see
/// [`Message`](crate::mq::Message); a retry's `rg` is not kept, `dlq.group` names the group):
/// a message that decoded and then failed is written from those fields only, so other
/// fields a raw `XADD` put on the entry are not kept; a malformed entry (one that does not
/// decode) keeps whatever fields it had, and one with more than 1000 fields keeps them as
/// one `dlq.fields` value instead, a MessagePack array `[field, value, ...]`. Plus the
/// fields below. A `DeadLetter` unpacks `dlq.fields`: its key, payload, headers,
/// event time and fields are the failed entry's, packed or not.
///
/// | field | content |
/// |-------|---------|
/// | `dlq.topic` | original topic |
/// | `dlq.partition` | original partition (decimal) |
/// | `dlq.id` | id of the failed entry |
/// | `dlq.original_id` | id of the first delivery (`x-original-message-id`, else `dlq.id`) |
/// | `dlq.group` | consumer group that gave up |
/// | `dlq.attempts` | deliveries made (retry count + 1) |
/// | `dlq.error_type` | error type: `malformed`, `retries_exhausted:<type>`, `redeliveries_exhausted`, `fail:<type>`, or the handler's `DeadLetter` type |
/// | `dlq.error` | error message, ≤ 512 chars |
/// | `dlq.failed_ms` | when it was dead-lettered, epoch ms (consumer clock) |
///
/// Admin: [`crate::mq::Mq::dead_letters`] lists (per topic),
/// [`crate::mq::Mq::dead_letters_in`] pages through one partition's,
/// [`crate::mq::Mq::dead_letter`] reads one, [`crate::mq::Mq::replay_dead_letter`]
/// moves one back to its original partition (atomically: `XDEL` from the dead-letter stream
/// and `XADD` to the partition in one script, retry count reset to 0; it refuses one whose
/// entry had more than 1000 fields),
/// [`crate::mq::Mq::delete_dead_letter`] deletes one and
/// [`crate::mq::Mq::purge_dead_letters`] all of a topic's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Id of the entry in the dead-letter stream (use it to replay).
    pub dlq_id: String,
    /// Original topic (`dlq.topic`).
    pub topic: String,
    /// Original partition (`dlq.partition`).
    pub partition: u32,
    /// Id of the failed entry (`dlq.id`).
    pub id: String,
    /// Id of the first delivery (`dlq.original_id`).
    pub original_id: String,
    /// Consumer group that gave up (`dlq.group`).
    pub group: String,
    /// Deliveries made (`dlq.attempts`).
    pub attempts: u32,
    /// Error type (`dlq.error_type`).
    pub error_type: String,
    /// Error message (`dlq.error`).
    pub error: String,
    /// When it was dead-lettered, epoch ms (`dlq.failed_ms`).
    pub failed_ms: i64,
    /// The original key, if the entry had a UTF-8 `k` (read from `dlq.fields` when the
    /// entry's fields were packed, as for the fields below).
    pub key: Option<String>,
    /// The original payload (`p`), empty if the entry had none.
    pub payload: Bytes,
    /// The original headers, if `h` was a JSON string map (else empty).
    pub headers: BTreeMap<String, String>,
    /// The original event time (`ts`), if it parsed.
    pub timestamp_ms: Option<i64>,
    /// Every field of the dead letter as bytes: the failed entry's fields in their order
    /// (unpacked from `dlq.fields` when they were packed; a `dlq.fields` value that is not a
    /// MessagePack array of strings is kept as it is), then the `dlq.*` fields.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

fn field<'a>(e: &'a RawEntry, name: &str) -> Option<&'a [u8]> {
    e.fields
        .iter()
        .find(|(f, _)| f == name.as_bytes())
        .map(|(_, v)| v.as_slice())
}

fn text(e: &RawEntry, name: &str) -> String {
    field(e, name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

/// `fields` with a packed `dlq.fields` value replaced by the fields it holds, in place
/// (kept as it is when it does not unpack).
fn unpacked(fields: Fields) -> Fields {
    if !fields.iter().any(|(f, _)| f == PACKED_FIELD) {
        return fields;
    }
    let mut out = Vec::with_capacity(fields.len());
    for (f, v) in fields {
        match (f == PACKED_FIELD).then(|| unpack_fields(&v)).flatten() {
            Some(packed) => out.extend(packed),
            None => out.push((f, v)),
        }
    }
    out
}

fn to_dead_letter(e: RawEntry) -> DeadLetter {
    let e = RawEntry {
        fields: unpacked(e.fields),
        ..e
    };
    let num = |name: &str| text(&e, name).parse::<i64>().ok();
    let count = |name: &str| text(&e, name).parse::<u32>().unwrap_or(0);
    DeadLetter {
        dlq_id: e.id.clone(),
        topic: text(&e, "dlq.topic"),
        partition: count("dlq.partition"),
        id: text(&e, "dlq.id"),
        original_id: text(&e, "dlq.original_id"),
        group: text(&e, "dlq.group"),
        attempts: count("dlq.attempts"),
        error_type: text(&e, "dlq.error_type"),
        error: text(&e, "dlq.error"),
        failed_ms: num("dlq.failed_ms").unwrap_or(0),
        key: field(&e, "k").and_then(|k| std::str::from_utf8(k).ok().map(str::to_owned)),
        payload: Bytes::copy_from_slice(field(&e, "p").unwrap_or_default()),
        headers: field(&e, "h")
            .and_then(|h| serde_json::from_slice(h).ok())
            .unwrap_or_default(),
        timestamp_ms: num("ts"),
        fields: e.fields,
    }
}

pub(crate) async fn list(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partitions: u32,
    limit_per_partition: usize,
) -> Result<Vec<DeadLetter>, Error> {
    let mut out = Vec::new();
    for p in 0..partitions {
        out.extend(range(conn, keys, (topic, p), ("-", "+"), limit_per_partition).await?);
    }
    Ok(out)
}

/// Up to `count` dead letters of one (topic, partition) with ids in `bounds` (`XRANGE`
/// bounds: `-`, `+`, an id, or `(id` for "after id"), oldest first.
pub(crate) async fn range(
    conn: &mut Connection,
    keys: &KeySpace,
    (topic, partition): (&str, u32),
    (start, end): (&str, &str),
    count: usize,
) -> Result<Vec<DeadLetter>, Error> {
    let v: Value = redis::cmd("XRANGE")
        .arg(keys.dlq(topic, partition))
        .arg(start)
        .arg(end)
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await?;
    Ok(parse_entries(v)?.into_iter().map(to_dead_letter).collect())
}

/// Deletes dead letter `dlq_id` of (topic, partition); whether it existed.
pub(crate) async fn delete(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partition: u32,
    dlq_id: &str,
) -> Result<bool, Error> {
    let n: u64 = conn.xdel(keys.dlq(topic, partition), &[dlq_id]).await?;
    Ok(n > 0)
}

pub(crate) async fn replay(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partition: u32,
    dlq_id: &str,
    payload: Option<&[u8]>,
) -> Result<Option<String>, Error> {
    let v: Value = redis::cmd("XRANGE")
        .arg(keys.dlq(topic, partition))
        .arg(dlq_id)
        .arg(dlq_id)
        .query_async(conn)
        .await?;
    let Some(entry) = parse_entries(v)?.into_iter().next() else {
        return Ok(None);
    };
    let mut fields = replay_fields(&entry, topic, partition, dlq_id)?;
    if let Some(payload) = payload {
        fields.retain(|(f, _)| f != F_PAYLOAD.as_bytes());
        fields.push((F_PAYLOAD.as_bytes().to_vec(), payload.to_vec()));
    }
    let mut inv = REPLAY.key(keys.dlq(topic, partition));
    inv.key(keys.stream(topic, partition)).arg(dlq_id);
    for (f, v) in fields {
        inv.arg(f).arg(v);
    }
    Ok(inv.invoke_async(conn).await?)
}

/// A stream entry's fields as (name, value) byte strings.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The error of a replay that would move more than [`PACKED_FIELDS_OVER`] fields.
fn too_many_fields(dlq_id: &str, n: usize) -> Error {
    Error::Mq {
        op: "replay_dead_letter",
        reason: format!(
            "dead letter {dlq_id} has {n} fields; replay moves at most {PACKED_FIELDS_OVER} (read it with `dead_letters` and send a repaired message instead)"
        ),
    }
}

/// The stream fields that replaying dead letter `entry` appends: the original message's
/// fields (with its original id as a header), addressed to the group that dead-lettered it.
fn replay_fields(
    entry: &RawEntry,
    topic: &str,
    partition: u32,
    dlq_id: &str,
) -> Result<Fields, Error> {
    if let Some((_, packed)) = entry.fields.iter().find(|(f, _)| f == PACKED_FIELD) {
        // The entry's fields were packed at dead-letter time because there were too many.
        let n = array_len(packed).map_or(PACKED_FIELDS_OVER * 2 + 2, |(n, _)| n) / 2;
        return Err(too_many_fields(dlq_id, n));
    }
    let mut fields = original_fields(entry, topic, partition);
    // The replay is addressed to the group that dead-lettered the message: groups that
    // already processed the original skip it (as they skip that group's retries).
    let group = text(entry, "dlq.group");
    if !fields.is_empty() && !group.is_empty() {
        fields.retain(|(f, _)| f != F_RETRY_GROUP.as_bytes());
        fields.push((F_RETRY_GROUP.as_bytes().to_vec(), group.into_bytes()));
    }
    if fields.is_empty() {
        return Err(Error::Mq {
            op: "replay_dead_letter",
            reason: format!("dead letter {dlq_id} has no fields to replay"),
        });
    }
    // The script unpacks the fields onto Lua's stack (~8000 values): bound them first.
    if fields.len() > PACKED_FIELDS_OVER {
        return Err(too_many_fields(dlq_id, fields.len()));
    }
    Ok(fields)
}

/// The original message's fields of dead letter `entry`, re-encoded with a zero retry
/// count; a malformed entry's fields as they were (without the retry count).
fn original_fields(entry: &RawEntry, topic: &str, partition: u32) -> Fields {
    let original_id = text(entry, "dlq.original_id");
    let plain = RawEntry {
        id: text(entry, "dlq.id"),
        fields: entry
            .fields
            .iter()
            .filter(|(f, _)| !f.starts_with(b"dlq."))
            .cloned()
            .collect(),
    };
    match plain.decode(&topic.into(), partition) {
        Ok(m) => {
            let mut headers = m.headers.clone();
            if !original_id.is_empty() {
                headers
                    .entry(HEADER_ORIGINAL_ID.to_owned())
                    .or_insert(original_id);
            }
            encode_fields(
                m.key.as_deref(),
                &m.payload,
                &headers,
                m.timestamp_ms,
                0,
                m.max_retries,
            )
            .into_iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v))
            .collect()
        }
        Err((plain, _)) => plain
            .fields
            .into_iter()
            .filter(|(f, _)| f != F_RETRY_COUNT.as_bytes())
            .collect(),
    }
}

pub(crate) async fn purge(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partitions: u32,
) -> Result<u64, Error> {
    let mut n = 0;
    for p in 0..partitions {
        let key = keys.dlq(topic, p);
        let len: u64 = conn.xlen(&key).await?;
        let _: () = conn.del(&key).await?;
        n += len;
    }
    Ok(n)
}
