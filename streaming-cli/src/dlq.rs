//! `dlq list|show|replay|purge`.

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use streaming::mq::{DeadLetter, Mq};

use crate::output::{or_dash, Output, Table};
use crate::topics::partitions;
use crate::{Failure, Result};

/// Dead letters read per round trip while scanning a partition.
const PAGE: usize = 500;

#[derive(Debug, Subcommand)]
pub(crate) enum DlqCommand {
    /// Dead letters of a topic, oldest first per partition.
    List {
        /// The topic.
        topic: String,
        #[command(flatten)]
        filter: Filter,
        /// Show at most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One dead letter with its payload, headers and every field.
    Show {
        /// The topic.
        topic: String,
        /// The dead letter's id (`DLQ-ID` of `dlq list`).
        id: String,
        /// Its partition (default: searched in every partition).
        #[arg(long, short)]
        partition: Option<u32>,
    },
    /// Moves the matching dead letters back to their original partition (retry count 0,
    /// addressed to the group that dead-lettered them; the dead letter is removed in the
    /// same step).
    Replay {
        /// The topic.
        topic: String,
        #[command(flatten)]
        selection: Selection,
        /// With `--id`: replay it with this payload instead of its own (a corrected
        /// message; key, headers and timestamp stay).
        #[arg(long, requires = "id")]
        payload: Option<String>,
    },
    /// Deletes the matching dead letters.
    Purge {
        /// The topic.
        topic: String,
        #[command(flatten)]
        selection: Selection,
    },
}

/// Which dead letters of a topic a command applies to.
#[derive(Debug, Args, Default)]
pub(crate) struct Filter {
    /// Only this partition.
    #[arg(long, short)]
    partition: Option<u32>,
    /// Only those the consumer group gave up on.
    #[arg(long, short)]
    group: Option<String>,
    /// Only this error type; `retries_exhausted` also matches `retries_exhausted:<type>`.
    #[arg(long)]
    error_type: Option<String>,
}

impl Filter {
    /// The dead letters of `partition`, gave up on by `group`, of `error_type` (each
    /// `None`: any).
    pub(crate) fn new(
        partition: Option<u32>,
        group: Option<String>,
        error_type: Option<String>,
    ) -> Self {
        Filter {
            partition,
            group,
            error_type,
        }
    }

    fn is_empty(&self) -> bool {
        self.partition.is_none() && self.group.is_none() && self.error_type.is_none()
    }

    fn matches(&self, d: &DeadLetter) -> bool {
        let group = self.group.as_ref().is_none_or(|g| *g == d.group);
        let error_type = self.error_type.as_ref().is_none_or(|t| {
            d.error_type == *t
                || d.error_type
                    .strip_prefix(t.as_str())
                    .is_some_and(|rest| rest.starts_with(':'))
        });
        group && error_type
    }
}

/// The dead letters a replay or purge moves: by filter, by id, or all with `--all`.
#[derive(Debug, Args)]
pub(crate) struct Selection {
    #[command(flatten)]
    filter: Filter,
    /// Only the dead letter with this id (with `--partition`, or searched in every one).
    #[arg(long)]
    id: Option<String>,
    /// Every dead letter of the topic (required when no other option selects).
    #[arg(long)]
    all: bool,
}

pub(crate) async fn run(mq: &Mq, cmd: &DlqCommand, out: &Output) -> Result<()> {
    match cmd {
        DlqCommand::List {
            topic,
            filter,
            limit,
        } => {
            let letters = scan(mq, topic, filter, *limit).await?;
            out.print(
                &list_table(&letters),
                &Value::Array(letters.iter().map(summary_json).collect()),
            );
            Ok(())
        }
        DlqCommand::Show {
            topic,
            id,
            partition,
        } => {
            let d = find(mq, topic, id, *partition).await?;
            out.print_line(&show_text(&d), &detail_json(&d));
            Ok(())
        }
        DlqCommand::Replay {
            topic,
            selection,
            payload,
        } => replay(mq, topic, selection, payload.as_deref(), out).await,
        DlqCommand::Purge { topic, selection } => purge(mq, topic, selection, out).await,
    }
}

/// Up to `limit` dead letters of `topic` that `filter` matches, by partition, oldest first.
pub(crate) async fn scan(
    mq: &Mq,
    topic: &str,
    filter: &Filter,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    let n = partitions(mq, topic).await?;
    let parts = match filter.partition {
        Some(p) if p >= n => return Err(partition_out_of_range(topic, p, n)),
        Some(p) => p..p + 1,
        None => 0..n,
    };
    let mut found = Vec::new();
    for p in parts {
        let mut after: Option<String> = None;
        while found.len() < limit {
            let page = mq.dead_letters_in(topic, p, after.as_deref(), PAGE).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.dlq_id.clone());
            let full = page.len() == PAGE;
            found.extend(page.into_iter().filter(|d| filter.matches(d)));
            if !full {
                break;
            }
        }
    }
    found.truncate(limit);
    Ok(found)
}

/// Dead letter `id` of `topic`, in `partition` or searched in every partition.
async fn find(mq: &Mq, topic: &str, id: &str, partition: Option<u32>) -> Result<DeadLetter> {
    let n = partitions(mq, topic).await?;
    let parts = match partition {
        Some(p) if p >= n => return Err(partition_out_of_range(topic, p, n)),
        Some(p) => p..p + 1,
        None => 0..n,
    };
    let mut found = Vec::new();
    for p in parts {
        let letter = mq
            .dead_letter(topic, p, id)
            .await
            .map_err(|e| bad_id(id, e))?;
        found.extend(letter);
    }
    match found.len() {
        0 => Err(Failure(format!(
            "topic `{topic}` has no dead letter `{id}`"
        ))),
        1 => Ok(found.remove(0)),
        _ => Err(Failure(format!(
            "dead letter id `{id}` exists in several partitions of `{topic}`: pass `--partition`"
        ))),
    }
}

/// The dead letters `selection` names.
async fn select(mq: &Mq, topic: &str, selection: &Selection) -> Result<Vec<DeadLetter>> {
    if let Some(id) = &selection.id {
        let d = find(mq, topic, id, selection.filter.partition).await?;
        return Ok(if selection.filter.matches(&d) {
            vec![d]
        } else {
            Vec::new()
        });
    }
    if selection.filter.is_empty() && !selection.all {
        return Err(Failure(
            "select dead letters with `--partition`, `--group`, `--error-type` or `--id`, or pass `--all` for every one".to_owned(),
        ));
    }
    scan(mq, topic, &selection.filter, usize::MAX).await
}

async fn replay(
    mq: &Mq,
    topic: &str,
    selection: &Selection,
    payload: Option<&str>,
    out: &Output,
) -> Result<()> {
    let mut table = Table::new(&["PARTITION", "DLQ-ID", "NEW-ID"]);
    let mut json = Vec::new();
    for d in select(mq, topic, selection).await? {
        // `None`: someone else replayed or purged it meanwhile.
        let new_id = match payload {
            Some(p) => {
                (mq.replay_dead_letter_with_payload(topic, d.partition, &d.dlq_id, p.as_bytes()))
                    .await?
            }
            None => mq.replay_dead_letter(topic, d.partition, &d.dlq_id).await?,
        };
        table.row(vec![
            d.partition.to_string(),
            d.dlq_id.clone(),
            or_dash(new_id.as_deref()),
        ]);
        json.push(json!({ "partition": d.partition, "dlq_id": d.dlq_id, "new_id": new_id }));
    }
    out.print(&table, &Value::Array(json));
    Ok(())
}

async fn purge(mq: &Mq, topic: &str, selection: &Selection, out: &Output) -> Result<()> {
    let purged = if selection.all && selection.filter.is_empty() && selection.id.is_none() {
        partitions(mq, topic).await?;
        mq.purge_dead_letters(topic).await?
    } else {
        let mut n = 0;
        for d in select(mq, topic, selection).await? {
            n += u64::from(mq.delete_dead_letter(topic, d.partition, &d.dlq_id).await?);
        }
        n
    };
    let json = json!({ "topic": topic, "purged": purged });
    out.print_line(&format!("purged {purged} dead letters of `{topic}`"), &json);
    Ok(())
}

fn partition_out_of_range(topic: &str, p: u32, n: u32) -> Failure {
    Failure(format!(
        "topic `{topic}` has partitions 0..{n}, not partition {p}"
    ))
}

pub(crate) fn bad_id(id: &str, e: streaming::Error) -> Failure {
    match e {
        streaming::Error::Redis { .. } => Failure(format!(
            "`{id}` is not a dead-letter id (a stream id such as `1700000000000-0`): {e}"
        )),
        e => e.into(),
    }
}

fn list_table(letters: &[DeadLetter]) -> Table {
    let mut t = Table::new(&[
        "PARTITION",
        "DLQ-ID",
        "ORIGINAL-ID",
        "GROUP",
        "ATTEMPTS",
        "ERROR-TYPE",
        "ERROR",
    ]);
    for d in letters {
        t.row(vec![
            d.partition.to_string(),
            d.dlq_id.clone(),
            d.original_id.clone(),
            d.group.clone(),
            d.attempts.to_string(),
            d.error_type.clone(),
            one_line(&d.error, 60),
        ]);
    }
    t
}

/// `s` on one line, cut to `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max - 1).chain(['…']).collect()
    }
}

fn summary_json(d: &DeadLetter) -> Value {
    json!({
        "dlq_id": d.dlq_id,
        "topic": d.topic,
        "partition": d.partition,
        "id": d.id,
        "original_id": d.original_id,
        "group": d.group,
        "attempts": d.attempts,
        "error_type": d.error_type,
        "error": d.error,
        "failed_ms": d.failed_ms,
        "key": d.key,
        "timestamp_ms": d.timestamp_ms,
    })
}

/// The payload as text when it is UTF-8, else `null` (`payload_base16` holds the bytes).
fn detail_json(d: &DeadLetter) -> Value {
    let mut v = summary_json(d);
    let text = std::str::from_utf8(&d.payload).ok();
    v["payload"] = json!(text);
    if text.is_none() {
        v["payload_base16"] = json!(hex(&d.payload));
    }
    v["headers"] = json!(d.headers);
    v["fields"] = Value::Object(
        d.fields
            .iter()
            .map(|(f, val)| {
                (
                    String::from_utf8_lossy(f).into_owned(),
                    json!(String::from_utf8_lossy(val)),
                )
            })
            .collect(),
    );
    v
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn show_text(d: &DeadLetter) -> String {
    let mut lines = vec![
        format!("dlq id:       {}", d.dlq_id),
        format!("topic:        {} (partition {})", d.topic, d.partition),
        format!("failed entry: {} (first delivery {})", d.id, d.original_id),
        format!("group:        {}", d.group),
        format!("attempts:     {}", d.attempts),
        format!("error type:   {}", d.error_type),
        format!("error:        {}", d.error),
        format!("failed at:    {} ms", d.failed_ms),
        format!("key:          {}", or_dash(d.key.as_deref())),
        format!("timestamp:    {}", or_dash(d.timestamp_ms)),
    ];
    match std::str::from_utf8(&d.payload) {
        Ok(text) => lines.push(format!("payload:      {text}")),
        Err(_) => lines.push(format!("payload (hex): {}", hex(&d.payload))),
    }
    for (k, v) in &d.headers {
        lines.push(format!("header:       {k} = {v}"));
    }
    // The failed entry's own fields as stored (e.g. a malformed entry's raw values).
    for (k, v) in d.fields.iter().filter(|(k, _)| !k.starts_with(b"dlq.")) {
        let k = String::from_utf8_lossy(k);
        match std::str::from_utf8(v) {
            Ok(text) => lines.push(format!("field:        {k} = {text}")),
            Err(_) => lines.push(format!("field (hex):  {k} = {}", hex(v))),
        }
    }
    lines.join("\n")
}
