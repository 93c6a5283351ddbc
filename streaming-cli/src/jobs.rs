//! `jobs list` and `jobs show <job>`: the Redis engine's job registry (each running job
//! instance's heartbeat).

use std::time::{SystemTime, UNIX_EPOCH};

use clap::Subcommand;
use serde_json::{json, Value};
use streaming::mq::Mq;
use streaming::redis::{registered_instances, RegisteredInstance};

use crate::output::{or_dash, write_out, Output, Table};
use crate::{Failure, Result};

#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// Lists the running job instances: parallelism, partitions owned, stalled partitions
    /// and the age of the last heartbeat, marked `(late)` past two heartbeat intervals
    /// (the instance was killed, stalled or cut off; its record expires at three).
    List,
    /// Shows one job: per instance and owned partition, the committed offset, watermark,
    /// last commit, last error and whether it is stalled.
    Show {
        /// The job's name (`RedisRuntimeConfig::job_name`).
        job: String,
    },
}

pub(crate) async fn run(mq: &Mq, cmd: &JobsCommand, out: &Output) -> Result<()> {
    match cmd {
        JobsCommand::List => list(mq, out).await,
        JobsCommand::Show { job } => show(mq, job, out).await,
    }
}

/// Milliseconds since the Unix epoch now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How long ago `at_ms` was, e.g. `1.2s` (`0.0s` for a clock ahead of ours).
pub(crate) fn age(at_ms: u64, now_ms: u64) -> String {
    format!("{:.1}s", now_ms.saturating_sub(at_ms) as f64 / 1000.0)
}

/// Whether `i` missed a heartbeat: its record is older than two intervals (it expires
/// after three), so the instance was killed, stalled or cut off from Redis.
pub(crate) fn late(i: &RegisteredInstance, now_ms: u64) -> bool {
    i.heartbeat_interval_ms > 0
        && now_ms.saturating_sub(i.heartbeat_at_ms) > i.heartbeat_interval_ms.saturating_mul(2)
}

/// The heartbeat column: the record's age, marked `(late)` when [`late`].
pub(crate) fn heartbeat_text(i: &RegisteredInstance, now_ms: u64) -> String {
    let a = age(i.heartbeat_at_ms, now_ms);
    if late(i, now_ms) {
        format!("{a} (late)")
    } else {
        a
    }
}

/// A partition's watermark as the table shows it: the event time as a UTC time with
/// milliseconds (`2026-12-05T01:02:03.456Z`), or `end of input` once an idle flush
/// advanced it to the end (`i64::MAX`); the JSON keeps the number.
pub(crate) fn watermark_text(watermark: i64) -> String {
    match watermark {
        i64::MAX => "end of input".to_string(),
        i64::MIN => "none yet".to_string(),
        t => time_text(t),
    }
}

/// An event time (epoch ms) as a UTC time with milliseconds, or the number with `ms`
/// before 1970.
pub(crate) fn time_text(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(ms) => humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
        )
        .to_string(),
        // Before 1970: the number itself.
        Err(_) => format!("{ms} ms"),
    }
}

fn stalled_count(i: &RegisteredInstance) -> usize {
    i.partitions.iter().filter(|p| p.stalled).count()
}

async fn list(mq: &Mq, out: &Output) -> Result<()> {
    let instances = registered_instances(mq, None).await?;
    let now = now_ms();
    let mut table = Table::new(&[
        "JOB",
        "INSTANCE",
        "PARALLELISM",
        "PARTITIONS",
        "STALLED",
        "PAUSED",
        "HEARTBEAT",
    ]);
    let mut rows = Vec::new();
    for i in &instances {
        table.row(vec![
            i.job.clone(),
            i.instance.clone(),
            i.parallelism.to_string(),
            i.partitions.len().to_string(),
            stalled_count(i).to_string(),
            i.paused.to_string(),
            heartbeat_text(i, now),
        ]);
        rows.push(json!({
            "job": i.job,
            "instance": i.instance,
            "parallelism": i.parallelism,
            "partitions": i.partitions.len(),
            "stalled": stalled_count(i),
            "paused": i.paused,
            "heartbeat_age_ms": now.saturating_sub(i.heartbeat_at_ms),
            "heartbeat_interval_ms": i.heartbeat_interval_ms,
            "late": late(i, now),
        }));
    }
    out.print(&table, &Value::Array(rows));
    Ok(())
}

async fn show(mq: &Mq, job: &str, out: &Output) -> Result<()> {
    let instances = registered_instances(mq, Some(job)).await?;
    if instances.is_empty() {
        // As `jobs list` with no job running: an empty answer, not a failure.
        eprintln!("no running instance of job `{job}` in the registry (`jobs list` shows the running jobs)");
    }
    let now = now_ms();
    let mut table = Table::new(&[
        "INSTANCE",
        "TOPIC",
        "GROUP",
        "PARTITION",
        "OFFSET",
        "LAG",
        "WATERMARK",
        "LAST COMMIT",
        "STALLED",
        "LAST ERROR",
    ]);
    for i in &instances {
        for p in &i.partitions {
            table.row(vec![
                i.instance.clone(),
                p.topic.clone(),
                p.group.clone(),
                p.partition.to_string(),
                or_dash(p.offset.clone()),
                or_dash(p.lag),
                or_dash(p.watermark.map(watermark_text)),
                or_dash(p.last_commit_at_ms.map(|t| format!("{} ago", age(t, now)))),
                p.stalled.to_string(),
                or_dash(p.last_error.clone()),
            ]);
        }
    }
    let json = serde_json::to_value(&instances).map_err(|e| Failure(e.to_string()))?;
    out.print(&table, &json);
    if !out.json {
        if let Some(inputs) = inputs_table(&instances) {
            write_out(&format!("\n{}", inputs.render()));
        }
        write_out(&format!("\n{}", states_table(&instances).render()));
    }
    Ok(())
}

/// The other inputs of the pipelines that read several topics (each once): the pipeline's
/// first topic and group, and each other topic with the group it is read with; `None`
/// when every pipeline reads one topic.
fn inputs_table(instances: &[RegisteredInstance]) -> Option<Table> {
    let mut rows = std::collections::BTreeSet::new();
    for p in instances.iter().flat_map(|i| &i.pipelines) {
        for input in &p.inputs {
            rows.insert([&p.topic, &p.group, &input.topic, &input.group].map(String::clone));
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut table = Table::new(&["TOPIC", "GROUP", "ALSO READS", "AS GROUP"]);
    for row in rows {
        table.row(row.into());
    }
    Some(table)
}

/// The keyed states the instances' pipelines opened (each once): the `--topic`,
/// `--group`, `--operator` and `--state` of `state get`.
fn states_table(instances: &[RegisteredInstance]) -> Table {
    let mut rows = std::collections::BTreeSet::new();
    for p in instances.iter().flat_map(|i| &i.pipelines) {
        for st in &p.states {
            let row = [&p.topic, &p.group, &st.operator, &st.state, &st.schema];
            rows.insert(row.map(String::clone));
        }
    }
    let mut table = Table::new(&["TOPIC", "GROUP", "OPERATOR", "STATE", "TYPE"]);
    for row in rows {
        table.row(row.into());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flushed_watermark_reads_as_the_end_of_input() {
        assert_eq!(watermark_text(i64::MAX), "end of input");
        assert_eq!(
            watermark_text(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(watermark_text(-5), "-5 ms");
        assert_eq!(watermark_text(i64::MIN), "none yet");
    }

    fn instance(heartbeat_at_ms: u64, heartbeat_interval_ms: Option<u64>) -> RegisteredInstance {
        let mut v = json!({
            "job": "j", "instance": "i", "parallelism": 1, "paused": false,
            "heartbeat_at_ms": heartbeat_at_ms, "pipelines": [], "partitions": [],
        });
        if let Some(ms) = heartbeat_interval_ms {
            v["heartbeat_interval_ms"] = json!(ms);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_record_older_than_two_intervals_is_late() {
        let i = instance(10_000, Some(1_000));
        assert_eq!(heartbeat_text(&i, 11_500), "1.5s");
        assert_eq!(heartbeat_text(&i, 12_000), "2.0s");
        assert_eq!(heartbeat_text(&i, 12_001), "2.0s (late)");
        // A record without the interval (an older library) is never called late.
        assert!(!late(&instance(10_000, None), 99_000));
    }
}
