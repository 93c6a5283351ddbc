//! The start's checks of pipelines with several inputs: every input exists with the first
//! topic's partition count (a broadcast input with one partition), and the other inputs
//! the job reads, by pipeline.

use super::{reads, EnvInner, PipelineDef};
use crate::Error;

/// The other inputs (topic, group) of each registered pipeline that reads several, by
/// its own (topic, group).
pub(super) fn other_inputs(
    pipelines: &[Box<dyn PipelineDef>],
) -> crate::redis::job::checkpoint::OtherInputs {
    (pipelines.iter())
        .map(|d| reads(d.as_ref()))
        .filter(|reads| reads.len() > 1)
        .map(|mut reads| {
            let first = reads.remove(0);
            (first, reads)
        })
        .collect()
}

/// The checks of the pipelines with several inputs before a start: every input exists
/// and has the partition count of the pipeline's first topic (co-partitioned).
///
/// # Errors
/// [`Error::InvalidConfig`]: field `inputs` naming the topics and their partition counts
/// (or the topic that does not exist); [`Error::Connect`] / [`Error::Redis`].
pub(super) fn check_at_start(
    inner: &EnvInner,
    pipelines: &[Box<dyn PipelineDef>],
) -> Result<(), Error> {
    let config = &inner.config;
    let several: Vec<(Vec<String>, Vec<String>)> = (pipelines.iter())
        .filter(|d| !d.inputs().is_empty())
        .map(|d| {
            let inputs = d.inputs();
            let partitioned = std::iter::once(d.topic().to_owned()).chain(
                inputs
                    .iter()
                    .filter(|i| !i.broadcast)
                    .map(|i| i.topic.clone()),
            );
            let broadcast = inputs
                .iter()
                .filter(|i| i.broadcast)
                .map(|i| i.topic.clone());
            (partitioned.collect(), broadcast.collect())
        })
        .collect();
    if several.is_empty() {
        return Ok(());
    }
    let timeout = config.mq_options().response_timeout;
    let mut conn = crate::mq::blocking_connection(&inner.endpoint, timeout)?;
    let keys = crate::mq::KeySpace::new(config.mq_options().key_prefix.clone());
    for (topics, broadcast) in &several {
        for topic in broadcast {
            let n: Option<u32> = redis::cmd("HGET")
                .arg(keys.meta(topic))
                .arg("partitions")
                .query(&mut conn)?;
            if n != Some(1) {
                return Err(Error::InvalidConfig {
                    field: "inputs",
                    reason: match n {
                        None => format!("topic `{topic}`, broadcast to the pipeline of `{}`, does not exist: create it with one partition", topics[0]),
                        Some(n) => format!("topic `{topic}` is broadcast to the pipeline of `{}` but has {n} partitions: a broadcast topic has one (every partition of the pipeline reads it whole, in order)", topics[0]),
                    },
                });
            }
        }
        let mut counts = Vec::with_capacity(topics.len());
        for topic in topics {
            let n: Option<u32> = redis::cmd("HGET")
                .arg(keys.meta(topic))
                .arg("partitions")
                .query(&mut conn)?;
            let n = n.ok_or_else(|| Error::InvalidConfig {
                field: "inputs",
                reason: if *topic == topics[0] {
                    format!("topic `{topic}`, the first input of a pipeline of several topics, does not exist")
                } else {
                    format!(
                        "topic `{topic}`, an input of the pipeline of `{}`, does not exist: create it with the partition count of `{}`",
                        topics[0], topics[0]
                    )
                },
            })?;
            counts.push(n);
        }
        if counts.iter().any(|n| *n != counts[0]) {
            let listed: Vec<String> = (topics.iter().zip(&counts))
                .map(|(t, n)| format!("`{t}` has {n}"))
                .collect();
            return Err(Error::InvalidConfig {
                field: "inputs",
                reason: format!(
                    "the inputs are not co-partitioned: {} partitions. A pipeline reads partition n of every input together, so every input needs the same partition count (and producers that pick the partition from the key the same way); repartition one input into a topic of the right count first (a pipeline with a topic sink)",
                    listed.join(", ")
                ),
            });
        }
    }
    Ok(())
}
