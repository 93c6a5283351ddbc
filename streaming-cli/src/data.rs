//! `produce TOPIC` and `tail TOPIC`: feeding a topic from a shell, and following it.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use streaming::mq::{Message, Mq, OutgoingMessage};

use crate::output::{write_out, Output};
use crate::{Failure, Result};

#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// The topic.
    topic: String,
    /// The payload. Without it (and without `--file`), each line of stdin is one message.
    payload: Option<String>,
    /// The key: chooses the partition (as a producer's key does).
    #[arg(long)]
    key: Option<String>,
    /// The event time: epoch milliseconds or an RFC 3339 time (`2026-12-05T10:00:00Z`);
    /// default now.
    #[arg(long)]
    time: Option<String>,
    /// A header `NAME=VALUE`; give it again for more.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// A JSON-lines file, one message per line: `{"payload": …, "key": …, "time": …,
    /// "headers": {…}}` (a payload that is not a string is sent as its JSON text; `key`,
    /// `time` and `headers` optional, the options above as defaults).
    #[arg(long, conflicts_with = "payload")]
    file: Option<PathBuf>,
}

/// One line of a `--file`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    payload: Value,
    key: Option<String>,
    time: Option<Value>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// A `--time` or a line's `time`: epoch ms, or an RFC 3339 time.
fn event_time(text: &str) -> Result<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let t = humantime::parse_rfc3339_weak(text).map_err(|e| {
        Failure(format!(
            "time `{text}` is neither epoch milliseconds nor an RFC 3339 time: {e}"
        ))
    })?;
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| Failure(format!("time `{text}` is before 1970")))?
        .as_millis();
    i64::try_from(ms).map_err(|_| Failure(format!("time `{text}` is too far out")))
}

impl ProduceArgs {
    /// The message of `payload` with this command's key, time and headers.
    fn message(&self, payload: String) -> Result<OutgoingMessage> {
        let mut msg = OutgoingMessage::new(payload);
        if let Some(key) = &self.key {
            msg = msg.key(key.as_str());
        }
        if let Some(t) = &self.time {
            msg = msg.timestamp_ms(event_time(t)?);
        }
        for h in &self.headers {
            let (name, value) = h
                .split_once('=')
                .ok_or_else(|| Failure(format!("header `{h}` is not NAME=VALUE")))?;
            msg = msg.header(name, value);
        }
        Ok(msg)
    }

    /// The message of one `--file` line (numbered `n` from 1).
    fn line_message(&self, n: usize, text: &str) -> Result<OutgoingMessage> {
        let bad = |e: String| Failure(format!("line {n} of the file: {e}"));
        let line: Line = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let payload = match line.payload {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let mut msg = self.message(payload)?;
        if let Some(key) = line.key {
            msg = msg.key(key);
        }
        match line.time {
            Some(Value::Number(n)) => {
                let ms = n
                    .as_i64()
                    .ok_or_else(|| bad(format!("time {n} is not whole milliseconds")))?;
                msg = msg.timestamp_ms(ms);
            }
            Some(Value::String(t)) => {
                msg = msg.timestamp_ms(event_time(&t).map_err(|Failure(e)| bad(e))?)
            }
            Some(other) => {
                return Err(bad(format!(
                    "time {other} is neither a number nor a string"
                )))
            }
            None => {}
        }
        for (name, value) in line.headers {
            msg = msg.header(name, value);
        }
        Ok(msg)
    }

    /// The messages to send: the payload argument, the file's lines, or stdin's lines.
    fn messages(&self) -> Result<Vec<OutgoingMessage>> {
        if let Some(p) = &self.payload {
            return Ok(vec![self.message(p.clone())?]);
        }
        let lines: Vec<String> = match &self.file {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| Failure(format!("cannot read `{}`: {e}", path.display())))?
                .lines()
                .map(str::to_owned)
                .collect(),
            None => std::io::stdin()
                .lock()
                .lines()
                .collect::<std::io::Result<_>>()
                .map_err(|e| Failure(format!("reading stdin: {e}")))?,
        };
        let numbered = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        match &self.file {
            Some(_) => numbered.map(|(i, l)| self.line_message(i + 1, l)).collect(),
            None => numbered.map(|(_, l)| self.message(l.clone())).collect(),
        }
    }
}

/// Sends the messages; prints where each went (`partition id`).
pub(crate) async fn produce(mq: &Mq, args: &ProduceArgs, out: &Output) -> Result<()> {
    let messages = args.messages()?;
    let producer = mq.producer();
    let mut sent = Vec::with_capacity(messages.len());
    for msg in &messages {
        let (partition, id) = producer.send_message(&args.topic, msg).await?;
        sent.push(json!({ "partition": partition, "id": id }));
    }
    let lines: Vec<String> = (sent.iter())
        .map(|s| {
            format!(
                "{} {}",
                s["partition"],
                s["id"].as_str().unwrap_or_default()
            )
        })
        .collect();
    out.print_line(&lines.join("\n"), &Value::Array(sent));
    Ok(())
}

#[derive(Debug, Args)]
pub(crate) struct TailArgs {
    /// The topic.
    topic: String,
    /// Start at the first entry of each partition (default: only what comes next).
    #[arg(long)]
    from_beginning: bool,
    /// Stop after this many messages (default: follow until interrupted).
    #[arg(long)]
    count: Option<usize>,
    /// Only this partition.
    #[arg(long)]
    partition: Option<u32>,
    /// Follow the list or stream sink NAME of a job that reads TOPIC instead of the topic
    /// itself: its keys `NAME:{TOPIC:n}` (a `RedisListSink` or `RedisStreamSink`).
    #[arg(long, value_name = "NAME")]
    pub(crate) sink: Option<String>,
    /// With `--sink`: the sink is job-scoped (`job_scoped()`), its keys
    /// `JOB:NAME:{TOPIC:n}`.
    #[arg(long, requires = "sink")]
    pub(crate) job: Option<String>,
}

impl TailArgs {
    /// The topic whose partitions name what is followed.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }
    /// The partitions asked for (`--partition`), else all `n`.
    pub(crate) fn partitions(&self, n: u32) -> Vec<u32> {
        match self.partition {
            Some(p) => vec![p],
            None => (0..n).collect(),
        }
    }
    /// Whether to start at the beginning (`--from-beginning`).
    pub(crate) fn starts_at_the_beginning(&self) -> bool {
        self.from_beginning
    }
    /// How many entries to print before stopping (`--count`), else no limit.
    pub(crate) fn count(&self) -> usize {
        self.count.unwrap_or(usize::MAX)
    }
}

/// One message as `tail` prints it: a line for a human, an object for `--json` (one per
/// line).
fn shown(m: &std::result::Result<Message, streaming::mq::MalformedEntry>, json: bool) -> String {
    match (m, json) {
        (Ok(m), false) => format!(
            "{} {} key={} time={} {}",
            m.partition,
            m.id,
            m.key.as_deref().unwrap_or("-"),
            crate::jobs::time_text(m.timestamp_ms),
            String::from_utf8_lossy(&m.payload)
        ),
        (Ok(m), true) => json!({
            "partition": m.partition, "id": m.id.as_str(), "key": m.key.as_deref(),
            "timestamp_ms": m.timestamp_ms, "headers": m.headers,
            "payload": String::from_utf8_lossy(&m.payload),
        })
        .to_string(),
        (Err(e), false) => format!("{} malformed: {}", e.id, e.reason),
        (Err(e), true) => json!({ "id": e.id, "malformed": e.reason }).to_string(),
    }
}

/// Follows the topic's partitions, printing each message as it arrives.
pub(crate) async fn tail(mq: &Mq, args: &TailArgs, out: &Output) -> Result<()> {
    let mut followed = Vec::new();
    for p in args.partitions(mq.partitions(&args.topic).await?) {
        let start = match args.from_beginning {
            true => "0-0".to_owned(),
            false => mq
                .partition_end(&args.topic, p)
                .await?
                .unwrap_or_else(|| "0-0".into()),
        };
        followed.push((p, start));
    }
    follow(args.count(), &mut followed, async |(p, position), left| {
        let read = mq
            .read_partition(&args.topic, *p, position, left.min(100), Duration::ZERO)
            .await?;
        let mut lines = Vec::with_capacity(read.len());
        for m in &read {
            *position = match m {
                Ok(m) => m.id.to_string(),
                Err(e) => e.id.clone(),
            };
            lines.push(shown(m, out.json));
        }
        Ok(lines)
    })
    .await
}

/// Prints the lines `read` gives for each of `followed` in turn (`read(f, left)`: at
/// most `left` new lines of `f`, moving its position) until `count` lines were printed;
/// a round that read nothing waits 100 ms.
pub(crate) async fn follow<F>(
    count: usize,
    followed: &mut [F],
    mut read: impl AsyncFnMut(&mut F, usize) -> Result<Vec<String>>,
) -> Result<()> {
    let mut left = count;
    while left > 0 {
        let mut any = false;
        for f in followed.iter_mut() {
            for line in read(f, left).await? {
                write_out(&format!("{line}\n"));
                left -= 1;
                any = true;
                if left == 0 {
                    return Ok(());
                }
            }
        }
        if !any {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
