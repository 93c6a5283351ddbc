//! Outbox entries: one per batch commit and outbox, holding that commit's records (one
//! `XADD` per commit instead of one per record), and the records read back from them.

use crate::api::TopicOutput;
use crate::mq::message::RawEntry;

/// Field of an entry: how many records it holds (decimal).
pub(crate) const F_COUNT: &str = "n";
/// Field of an entry: its records' stable id prefix (`{job}/{group}/{topic}/{partition}/{offset}/`);
/// of a one-record entry without [`F_COUNT`]: the record's whole id.
pub(crate) const F_ID: &str = "id";
/// Field of an entry: the commit time (epoch ms, decimal), the timestamp of its records
/// that carry none of their own.
pub(crate) const F_TS: &str = "ts";
/// Field of a one-record entry without [`F_COUNT`]: the payload.
pub(crate) const F_PAYLOAD: &str = "payload";
/// Field of a one-record entry without [`F_COUNT`]: the message key.
pub(crate) const F_KEY: &str = "key";

/// A record of an outbox entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntryRecord {
    /// Its stable id.
    pub(crate) id: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) timestamp_ms: i64,
    pub(crate) key: Option<String>,
}

/// The fields of the entry of one commit's `outputs`: `n`, `id` (the id prefix), `ts`
/// (`now_ms`), then per record `j` (from 0) `p{j}` (payload) and, when it has them,
/// `k{j}` (key) and `t{j}` (its own timestamp).
pub(crate) fn entry_fields(
    id_prefix: String,
    now_ms: i64,
    outputs: Vec<TopicOutput>,
) -> Vec<(String, String)> {
    let mut fields = Vec::with_capacity(3 + outputs.len());
    fields.push((F_COUNT.to_string(), outputs.len().to_string()));
    fields.push((F_ID.to_string(), id_prefix));
    fields.push((F_TS.to_string(), now_ms.to_string()));
    for (j, o) in outputs.into_iter().enumerate() {
        fields.push((format!("p{j}"), o.payload));
        if let Some(k) = o.key {
            fields.push((format!("k{j}"), k));
        }
        if let Some(t) = o.timestamp_ms {
            fields.push((format!("t{j}"), t.to_string()));
        }
    }
    fields
}

/// The records of entry `e`, in order. An entry without `n` is one record (fields `id`,
/// `payload`, `ts`, `key`: what a service writing to an outbox by hand may append); a
/// record whose payload field is missing is left out.
pub(crate) fn entry_records(e: &RawEntry) -> Vec<EntryRecord> {
    let field = |name: &str| {
        (e.fields.iter())
            .find(|(f, _)| f == name.as_bytes())
            .map(|(_, v)| v)
    };
    let text = |name: &str| field(name).map(|v| String::from_utf8_lossy(v).into_owned());
    let ts = text(F_TS).and_then(|t| t.parse().ok()).unwrap_or(0);
    let Some(n) = text(F_COUNT).and_then(|n| n.parse::<usize>().ok()) else {
        return (field(F_PAYLOAD).into_iter())
            .map(|p| EntryRecord {
                id: text(F_ID).unwrap_or_default(),
                payload: p.clone(),
                timestamp_ms: ts,
                key: text(F_KEY),
            })
            .collect();
    };
    let prefix = text(F_ID).unwrap_or_default();
    // One pass over the fields (an entry holds up to three per record).
    let mut slots: Vec<[Option<&Vec<u8>>; 3]> = vec![[None; 3]; n.min(e.fields.len())];
    for (f, v) in &e.fields {
        let Some((slot, j)) = record_field(f) else {
            continue;
        };
        if let Some(s) = slots.get_mut(j) {
            // The first of a repeated field, as a lookup by name finds it.
            s[slot].get_or_insert(v);
        }
    }
    let text = |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(v).into_owned());
    (0..)
        .zip(slots)
        .filter_map(|(j, [p, k, t])| {
            Some(EntryRecord {
                id: format!("{prefix}{j}"),
                payload: p?.clone(),
                timestamp_ms: text(t).and_then(|t| t.parse().ok()).unwrap_or(ts),
                key: text(k),
            })
        })
        .collect()
}

/// A record's field name `p{j}` / `k{j}` / `t{j}` as (0 payload, 1 key, 2 timestamp; j),
/// `j` written as [`entry_fields`] writes it (decimal digits, no leading zero).
fn record_field(name: &[u8]) -> Option<(usize, usize)> {
    let (&kind, digits) = name.split_first()?;
    let slot = match kind {
        b'p' => 0,
        b'k' => 1,
        b't' => 2,
        _ => return None,
    };
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits[0] != b'0');
    if !canonical {
        return None;
    }
    let j = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((slot, j))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(fields: Vec<(String, String)>) -> RawEntry {
        RawEntry {
            id: "5-0".into(),
            fields: (fields.into_iter())
                .map(|(f, v)| (f.into_bytes(), v.into_bytes()))
                .collect(),
        }
    }

    #[test]
    fn an_entry_holds_its_commits_records_in_order() {
        let out = |key: Option<&str>, ts: Option<i64>, payload: &str| TopicOutput {
            key: key.map(str::to_string),
            timestamp_ms: ts,
            payload: payload.to_string(),
        };
        let fields = entry_fields(
            "job/in/2/17-0/".into(),
            99,
            vec![out(Some("k"), Some(42), "a"), out(None, None, "b")],
        );
        let records = entry_records(&raw(fields));
        let rec = |id: &str, payload: &str, ts: i64, key: Option<&str>| EntryRecord {
            id: id.into(),
            payload: payload.as_bytes().to_vec(),
            timestamp_ms: ts,
            key: key.map(str::to_string),
        };
        assert_eq!(
            records,
            [
                rec("job/in/2/17-0/0", "a", 42, Some("k")),
                rec("job/in/2/17-0/1", "b", 99, None)
            ]
        );
    }

    #[test]
    fn an_entry_without_a_count_is_one_record() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        let one = raw(vec![s("id", "x/1"), s("payload", "v"), s("ts", "7")]);
        let records = entry_records(&one);
        assert_eq!(records.len(), 1);
        assert_eq!(
            (records[0].id.as_str(), records[0].timestamp_ms),
            ("x/1", 7)
        );
        assert!(entry_records(&raw(vec![s("id", "x/1")])).is_empty());
    }

    #[test]
    fn record_fields_are_found_by_name_in_any_order() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        let e = raw(vec![
            s("n", "4"),
            s("ts", "9"),
            s("p2", "c"),
            s("k0", "key"),
            s("p0", "a"),
            // Not written by `entry_fields`: no record's field.
            s("p01", "x"),
            s("p+3", "x"),
            s("t", "1"),
            s("t2", "5"),
            s("id", "pre/"),
            // A repeated field: the first counts.
            s("p2", "second"),
            s("p3", "d"),
        ]);
        let got: Vec<(String, String, i64, Option<String>)> = entry_records(&e)
            .into_iter()
            .map(|r| {
                let payload = String::from_utf8(r.payload).unwrap();
                (r.id, payload, r.timestamp_ms, r.key)
            })
            .collect();
        let want = |id: &str, p: &str, ts: i64, k: Option<&str>| {
            (id.to_string(), p.to_string(), ts, k.map(str::to_string))
        };
        // Record 1 has no payload: left out.
        assert_eq!(
            got,
            [
                want("pre/0", "a", 9, Some("key")),
                want("pre/2", "c", 5, None),
                want("pre/3", "d", 9, None),
            ]
        );
    }
}
