//! `tail TOPIC --sink NAME`: follows the per-partition keys a Redis engine job's list or
//! stream sink writes (`NAME:{TOPIC:n}`, or `JOB:NAME:{TOPIC:n}` when job-scoped).

use redis::aio::MultiplexedConnection;
use serde_json::json;
use streaming::mq::Mq;
use streaming::redis::{RedisListSink, SinkScope};

use crate::data::TailArgs;
use crate::output::Output;
use crate::{Failure, Result, Target};

/// Where the follow of one partition's sink key is.
#[derive(Debug)]
enum Position {
    /// The key did not exist when last looked at: everything it gets is new.
    Missing,
    /// A list: the index of the next element.
    List(isize),
    /// A stream: the id of the last entry printed.
    Stream(String),
}

/// One partition's sink key and how far it was followed.
struct Follow {
    partition: u32,
    key: String,
    at: Position,
}

/// Runs `cmd`; a failure names the key it read.
async fn query<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    key: &str,
    cmd: &redis::Cmd,
) -> Result<T> {
    (cmd.query_async(conn).await).map_err(|e| Failure(format!("reading `{key}`: {e}")))
}

/// The start of a follow of `key`: its beginning, or its current end.
async fn start(
    conn: &mut MultiplexedConnection,
    key: &str,
    from_beginning: bool,
) -> Result<Position> {
    let kind: String = query(conn, key, redis::cmd("TYPE").arg(key)).await?;
    Ok(match (kind.as_str(), from_beginning) {
        ("none", _) => Position::Missing,
        ("list", true) => Position::List(0),
        ("list", false) => Position::List(query(conn, key, redis::cmd("LLEN").arg(key)).await?),
        ("stream", true) => Position::Stream("0-0".into()),
        ("stream", false) => {
            let last: Vec<(String, Vec<(String, String)>)> = query(conn, key, redis::cmd("XREVRANGE").arg(key).arg("+").arg("-").arg("COUNT").arg(1))
                    .await?;
            Position::Stream(last.first().map_or("0-0".into(), |(id, _)| id.clone()))
        }
        (other, _) => {
            return Err(Failure(format!(
                "`{key}` is a {other}: `tail --sink` follows list and stream sinks (a hash sink holds the latest record per field: read it with HGETALL)"
            )))
        }
    })
}

/// Up to `max` new entries of `f`'s key as (position, value), moving its position.
async fn read(
    conn: &mut MultiplexedConnection,
    f: &mut Follow,
    max: usize,
) -> Result<Vec<(String, String)>> {
    if let Position::Missing = f.at {
        f.at = start(conn, &f.key, true).await?;
    }
    let count = isize::try_from(max.min(100)).unwrap_or(100);
    Ok(match &mut f.at {
        Position::Missing => Vec::new(),
        Position::List(next) => {
            let values: Vec<String> = query(
                conn,
                &f.key,
                redis::cmd("LRANGE")
                    .arg(&f.key)
                    .arg(*next)
                    .arg(*next + count - 1),
            )
            .await?;
            let first = *next;
            *next += values.len() as isize;
            (values.into_iter().enumerate())
                .map(|(i, v)| ((first + i as isize).to_string(), v))
                .collect()
        }
        Position::Stream(last) => {
            let entries: Vec<(String, Vec<(String, String)>)> = query(
                conn,
                &f.key,
                redis::cmd("XRANGE")
                    .arg(&f.key)
                    .arg(format!("({last}"))
                    .arg("+")
                    .arg("COUNT")
                    .arg(count),
            )
            .await?;
            if let Some((id, _)) = entries.last() {
                last.clone_from(id);
            }
            (entries.into_iter())
                .map(|(id, fields)| {
                    let v = fields.into_iter().find(|(k, _)| k == "v").map(|(_, v)| v);
                    (id, v.unwrap_or_default())
                })
                .collect()
        }
    })
}

/// Follows sink `sink` (of job `args.job` when job-scoped) on the partitions of the topic.
pub(crate) async fn tail(
    mq: &Mq,
    target: &Target,
    args: &TailArgs,
    sink: &str,
    out: &Output,
) -> Result<()> {
    let mut conn = crate::state::connect(target, "tail --sink").await?;
    let base = match &args.job {
        Some(job) => SinkScope::Job.base_name(job, sink),
        None => SinkScope::Shared.base_name("", sink),
    };
    let mut follows = Vec::new();
    for p in args.partitions(mq.partitions(args.topic()).await?) {
        let key = RedisListSink::<()>::key_for(&base, args.topic(), p);
        let at = start(&mut conn, &key, args.starts_at_the_beginning()).await?;
        follows.push(Follow {
            partition: p,
            key,
            at,
        });
    }
    if follows.iter().all(|f| matches!(f.at, Position::Missing)) {
        let first = follows.first().map_or("", |f| f.key.as_str());
        eprintln!(
            "no sink key such as `{first}` exists yet (a job-scoped sink needs --job): waiting for its first output"
        );
    }
    crate::data::follow(args.count(), &mut follows, async |f, left| {
        let partition = f.partition;
        let lines = (read(&mut conn, f, left).await?.into_iter())
            .map(|(position, value)| match out.json {
                true => json!({ "partition": partition, "position": position, "value": value })
                    .to_string(),
                false => format!("{partition} {position} {value}"),
            })
            .collect();
        Ok(lines)
    })
    .await
}
