//! `topics list|describe|create|delete`.

use clap::Subcommand;
use serde_json::{json, Value};
use streaming::mq::{Mq, TopicInfo};

use crate::output::{or_dash, Output, Table};
use crate::{Failure, Result};

#[derive(Debug, Subcommand)]
pub(crate) enum TopicsCommand {
    /// Every topic with its partition count.
    List,
    /// Per partition: length, scheduled retries, dead letters, and each consumer group's
    /// pending entries, lag, last delivered id and commit frontier.
    Describe {
        /// The topic.
        topic: String,
    },
    /// Creates a topic (nothing changes if it exists with that partition count).
    Create {
        /// The topic: 1..=200 characters of `[A-Za-z0-9_.-]`.
        topic: String,
        /// Partition count, 1..=4096.
        #[arg(long, short)]
        partitions: u32,
    },
    /// Deletes a topic and all its keys: streams, retries, dead letters, leases,
    /// frontiers. Stop its consumers first.
    Delete {
        /// The topic.
        topic: String,
    },
}

pub(crate) async fn run(mq: &Mq, cmd: &TopicsCommand, out: &Output) -> Result<()> {
    match cmd {
        TopicsCommand::List => list(mq, out).await,
        TopicsCommand::Describe { topic } => {
            let info = describe(mq, topic).await?;
            out.print(&describe_table(&info), &describe_json(&info));
            Ok(())
        }
        TopicsCommand::Create { topic, partitions } => {
            let created = mq.create_topic(topic, *partitions).await?;
            let line = if created {
                format!("created topic `{topic}` with {partitions} partitions")
            } else {
                format!("topic `{topic}` already exists with {partitions} partitions")
            };
            let json = json!({ "topic": topic, "partitions": partitions, "created": created });
            out.print_line(&line, &json);
            Ok(())
        }
        TopicsCommand::Delete { topic } => {
            if !mq.delete_topic(topic).await? {
                return Err(unknown_topic(topic));
            }
            let json = json!({ "topic": topic, "deleted": true });
            out.print_line(&format!("deleted topic `{topic}`"), &json);
            Ok(())
        }
    }
}

async fn list(mq: &Mq, out: &Output) -> Result<()> {
    let mut table = Table::new(&["TOPIC", "PARTITIONS"]);
    let mut json = Vec::new();
    for topic in mq.list_topics().await? {
        let partitions = mq.partitions(&topic).await?;
        table.row(vec![topic.clone(), partitions.to_string()]);
        json.push(json!({ "topic": topic, "partitions": partitions }));
    }
    out.print(&table, &Value::Array(json));
    Ok(())
}

/// The topic's description; an unknown topic is a failure that says so.
pub(crate) async fn describe(mq: &Mq, topic: &str) -> Result<TopicInfo> {
    partitions(mq, topic).await?;
    Ok(mq.describe_topic(topic).await?)
}

/// The topic's partition count; an unknown topic is a failure that says so.
pub(crate) async fn partitions(mq: &Mq, topic: &str) -> Result<u32> {
    match mq.partitions(topic).await {
        Ok(n) => Ok(n),
        // The queue's only `Mq` error here is a missing topic's metadata.
        Err(streaming::Error::Mq { .. }) => Err(unknown_topic(topic)),
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn unknown_topic(topic: &str) -> Failure {
    Failure(format!(
        "topic `{topic}` does not exist (`topics list` shows the topics)"
    ))
}

fn describe_table(info: &TopicInfo) -> Table {
    let mut t = Table::new(&[
        "PARTITION",
        "LENGTH",
        "RETRIES",
        "DEAD",
        "GROUP",
        "CONSUMERS",
        "PENDING",
        "LAG",
        "LAST-DELIVERED",
        "FRONTIER",
    ]);
    for p in &info.partition_info {
        let head = [
            u64::from(p.partition),
            p.length,
            p.retry_scheduled,
            p.dead_letters,
        ]
        .map(|n| n.to_string());
        if p.groups.is_empty() {
            let mut row = head.to_vec();
            row.extend(["-", "-", "-", "-", "-", "-"].map(String::from));
            t.row(row);
        }
        for g in &p.groups {
            let mut row = head.to_vec();
            row.extend([
                g.name.clone(),
                g.consumers.to_string(),
                g.pending.to_string(),
                or_dash(g.lag),
                g.last_delivered_id.clone(),
                or_dash(g.frontier.as_deref()),
            ]);
            t.row(row);
        }
    }
    t
}

fn describe_json(info: &TopicInfo) -> Value {
    let partitions: Vec<Value> = info
        .partition_info
        .iter()
        .map(|p| {
            let groups: Vec<Value> = p
                .groups
                .iter()
                .map(|g| {
                    json!({
                        "group": g.name,
                        "consumers": g.consumers,
                        "pending": g.pending,
                        "lag": g.lag,
                        "last_delivered_id": g.last_delivered_id,
                        "commit_frontier": g.frontier,
                    })
                })
                .collect();
            json!({
                "partition": p.partition,
                "length": p.length,
                "retry_scheduled": p.retry_scheduled,
                "dead_letters": p.dead_letters,
                "groups": groups,
            })
        })
        .collect();
    json!({ "topic": info.name, "partitions": info.partitions, "partition_info": partitions })
}
