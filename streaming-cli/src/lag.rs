//! `lag [<topic>] [--group G]`.

use clap::Args;
use serde_json::{json, Value};
use streaming::mq::Mq;

use crate::output::{or_dash, Output, Table};
use crate::topics::describe;
use crate::{Failure, Result};

#[derive(Debug, Args)]
pub(crate) struct LagArgs {
    /// Only this topic (default: every topic).
    topic: Option<String>,
    /// Only this consumer group.
    #[arg(long, short)]
    group: Option<String>,
}

/// One row: a consumer group on one partition of a topic.
struct LagRow {
    topic: String,
    group: String,
    partition: u32,
    /// Entries not yet delivered to the group; `None` when Redis cannot tell.
    lag: Option<u64>,
    /// Entries delivered and not acknowledged.
    pending: u64,
}

pub(crate) async fn run(mq: &Mq, args: &LagArgs, out: &Output) -> Result<()> {
    let topics = match &args.topic {
        Some(t) => vec![t.clone()],
        None => mq.list_topics().await?,
    };
    let mut rows = Vec::new();
    for topic in topics {
        let info = describe(mq, &topic).await?;
        for p in &info.partition_info {
            for g in &p.groups {
                if args.group.as_ref().is_some_and(|want| *want != g.name) {
                    continue;
                }
                rows.push(LagRow {
                    topic: topic.clone(),
                    group: g.name.clone(),
                    partition: p.partition,
                    lag: g.lag,
                    pending: g.pending,
                });
            }
        }
    }
    if let (Some(group), true) = (&args.group, rows.is_empty()) {
        return Err(Failure(format!(
            "consumer group `{group}` reads no partition of {}",
            args.topic
                .as_deref()
                .map_or("any topic".to_owned(), |t| format!("topic `{t}`"))
        )));
    }
    // By topic, then group, then partition.
    rows.sort_by(|a, b| (&a.topic, &a.group, a.partition).cmp(&(&b.topic, &b.group, b.partition)));
    let mut table = Table::new(&["TOPIC", "GROUP", "PARTITION", "LAG", "PENDING"]);
    let mut json = Vec::new();
    for r in &rows {
        table.row(vec![
            r.topic.clone(),
            r.group.clone(),
            r.partition.to_string(),
            or_dash(r.lag),
            r.pending.to_string(),
        ]);
        json.push(json!({
            "topic": r.topic,
            "group": r.group,
            "partition": r.partition,
            "lag": r.lag,
            "pending": r.pending,
        }));
    }
    out.print(&table, &Value::Array(json));
    Ok(())
}
