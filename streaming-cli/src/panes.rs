//! `state get --state panes`: a key's window panes, labelled. The engine keeps one hash
//! field per pane, `[key, window start, window end]` (JSON), valued
//! `[accumulator, trigger state, flags, event-time timers, last arrival]`, flags bit 0 =
//! the pane has content, bit 1 = that content was not emitted yet.

use redis::aio::MultiplexedConnection;
use serde_json::{json, Value};

use crate::jobs::time_text;
use crate::{Failure, Result};

/// The state name of window panes.
pub(crate) const PANES: &str = "panes";

/// `text` with the glob characters of `HSCAN … MATCH` escaped.
fn glob_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One stored pane as printed: its window (ms and UTC times), accumulator, trigger
/// state, flags and timers.
fn labelled(field: &str, value: &str) -> Result<Value> {
    let bad = |what: &str| {
        Failure(format!(
            "pane `{field}` is not a stored pane ({what}): {value}"
        ))
    };
    let (_, start, end): (Value, i64, i64) =
        serde_json::from_str(field).map_err(|e| bad(&e.to_string()))?;
    let (acc, trigger, flags, timers, last): (Value, Value, u8, Vec<i64>, u64) =
        serde_json::from_str(value).map_err(|e| bad(&e.to_string()))?;
    Ok(json!({
        "window": { "start": start, "end": end, "start_time": time_text(start), "end_time": time_text(end) },
        "accumulator": acc,
        "trigger_state": trigger,
        "has_content": flags & 1 != 0,
        "not_emitted_yet": flags & 2 != 0,
        "timers": timers.iter().map(|t| json!({ "at": t, "time": time_text(*t) })).collect::<Vec<_>>(),
        "last_arrival": last,
    }))
}

/// A pane as one line for a human.
fn line(p: &Value) -> String {
    let w = &p["window"];
    let timers: Vec<&str> = (p["timers"].as_array().into_iter().flatten())
        .filter_map(|t| t["time"].as_str())
        .collect();
    let mut flags = Vec::new();
    if p["has_content"] == true {
        flags.push("content");
    }
    if p["not_emitted_yet"] == true {
        flags.push("not emitted yet");
    }
    format!(
        "window {} .. {}  accumulator {}  timers [{}]  {}",
        w["start_time"].as_str().unwrap_or(""),
        w["end_time"].as_str().unwrap_or(""),
        p["accumulator"],
        timers.join(", "),
        flags.join(", ")
    )
}

/// The panes of key `field` (the key as JSON) in the hashes `hashes` (one, or every
/// shard), sorted by window: as (text, JSON array), `None` when it has none.
pub(crate) async fn read(
    conn: &mut MultiplexedConnection,
    hashes: &[String],
    field: &str,
) -> Result<Option<(String, Value)>> {
    // `[key,` then anything: the field's own `[` escaped like the key's glob characters.
    let pattern = format!("{},*", glob_escaped(&format!("[{field}")));
    let mut panes = Vec::new();
    for hash in hashes {
        let mut cursor = 0u64;
        loop {
            let (next, entries): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                .arg(hash)
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(conn)
                .await
                .map_err(|e| Failure(format!("reading `{hash}`: {e}")))?;
            for (f, v) in &entries {
                panes.push(labelled(f, v)?);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    if panes.is_empty() {
        return Ok(None);
    }
    panes.sort_by_key(|p| p["window"]["start"].as_i64());
    let text: Vec<String> = panes.iter().map(line).collect();
    Ok(Some((text.join("\n"), Value::Array(panes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_pane_is_labelled() {
        let p = labelled(r#"["k",0,60000]"#, r#"[3,null,3,[59999],0]"#).unwrap();
        assert_eq!(p["window"]["start_time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(p["window"]["end"], 60000);
        assert_eq!(
            (p["accumulator"].clone(), p["has_content"].clone()),
            (json!(3), json!(true))
        );
        assert_eq!(p["not_emitted_yet"], true);
        assert_eq!(p["timers"][0]["time"], "1970-01-01T00:00:59.999Z");
        assert_eq!(
            line(&p),
            "window 1970-01-01T00:00:00.000Z .. 1970-01-01T00:01:00.000Z  accumulator 3  timers [1970-01-01T00:00:59.999Z]  content, not emitted yet"
        );
        assert!(labelled("[\"k\"]", "[]").is_err());
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escaped(r#"["a*",1]"#), r#"\["a\*",1\]"#);
    }
}
