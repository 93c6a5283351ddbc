//! A partition's other inputs: in a pipeline that reads several co-partitioned topics,
//! partition `n` of the first topic is the job partition, and partition `n` of every other
//! topic is read by the same owner.
//!
//! Each other input has its own lease (its partition's, under its own group), so its
//! reads, retries and dead letters are fenced like the first topic's. Its position is an
//! offset kept in the *first* topic's partition (`P:{T:n}:input:G:B:GB`, one hash slot
//! with the partition's state), written in the batch commit's transaction: one commit
//! covers the state and every input's position, on one server and on a Redis Cluster.
//! The input's consumer group is moved to that offset when the partition is taken, and
//! its reads (`NOACK`) move the group's last-delivered id on: a hint that tools reading
//! the group (lag, `topics describe`) see, never what the job resumes from. The input's
//! own commit frontier is not written.

use crate::mq::message::parse_entries;
use crate::mq::reader::{PartitionReader, Position, ReadBatch, ReadMode};
use crate::mq::topic::parse_xinfo_groups;
use crate::mq::{Connection, Message, StartPolicy};
use crate::redis::job::checkpoint::INPUT_FIELD;
use crate::redis::partition::align::Queue;
use crate::redis::partition::context::{Ctx, InputSpec};
use crate::Error;
use std::time::Duration;

/// One other input of a partition.
struct Input {
    spec: InputSpec,
    /// Its position's key, in the first topic's partition.
    key: String,
    reader: Option<PartitionReader>,
    /// The position the last commit left (or the take chose).
    committed: Option<String>,
    /// The last id the uncommitted batch released (see [`align`](super::align)): the
    /// position its commit writes.
    read: Option<String>,
    /// Its entries read and not released yet.
    queue: Queue,
    /// The take chose the position (none was stored): the next commit writes it.
    chosen: bool,
    /// Its `streaming_consumer_lag` gauge, registered at its first sample.
    lag: Option<metrics::Gauge>,
    /// The input's partition this job partition reads: the same index, or 0 for a
    /// broadcast input.
    partition: u32,
    /// A broadcast input read by a job partition other than 0: read with `XRANGE` from
    /// its position, without a lease (job partition 0 holds the lease, and its retries
    /// and dead letters).
    follower: bool,
}

/// A partition's other inputs (none for a pipeline of one topic).
pub(in crate::redis) struct OtherInputs {
    inputs: Vec<Input>,
}

impl OtherInputs {
    /// The other inputs of partition `p` of the pipeline of `ctx`, not taken.
    pub(in crate::redis) fn new(ctx: &Ctx<'_>, p: u32) -> Self {
        let (spec, keys) = (ctx.spec, &ctx.keys);
        let inputs = (spec.inputs.iter())
            .map(|i| Input {
                key: keys.input_position(&spec.topic, p, &spec.group, &i.topic, &i.group),
                spec: i.clone(),
                reader: None,
                committed: None,
                read: None,
                queue: Queue::default(),
                chosen: false,
                lag: None,
                partition: if i.broadcast { 0 } else { p },
                follower: i.broadcast && p != 0,
            })
            .collect();
        OtherInputs { inputs }
    }

    /// No other input.
    #[cfg(test)]
    pub(in crate::redis) fn none() -> Self {
        OtherInputs { inputs: Vec::new() }
    }

    /// Takes every input's lease and moves its group to the position the last commit
    /// left; an input without one starts where its start policy says (its own commit
    /// frontier, the start or the end of its stream), written by the next commit.
    ///
    /// # Errors
    /// [`is_leased_elsewhere`](crate::mq::reader::is_leased_elsewhere) when another owner
    /// holds an input's lease; [`Error::Redis`].
    pub(in crate::redis) async fn take(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let options = ctx.spec.config.mq_options();
        for input in &mut self.inputs {
            let (topic, group) = (input.spec.topic.as_str(), input.spec.group.as_str());
            input.read = None;
            input.queue.clear();
            let stored: Option<String> =
                redis::cmd("GET").arg(&input.key).query_async(conn).await?;
            input.chosen = stored.is_none();
            let position = match stored {
                Some(position) => position,
                None => start_position(ctx, conn, &input.spec, input.partition).await?,
            };
            if !input.follower {
                let at = (topic, input.partition, group);
                let reader = input.reader.get_or_insert_with(|| {
                    PartitionReader::owner(ReadMode::NoAck, &ctx.keys, at, &ctx.consumer, options)
                });
                let at = Position {
                    start: input.spec.start,
                    from_frontier: false,
                    committed: Some(&position),
                };
                reader.take(conn, at).await?;
            }
            input.committed = Some(position);
        }
        Ok(())
    }

    /// The committed positions as a checkpoint part records them: per input, field
    /// `input:{topic}:{group}` and the position stored in Redis ('' when none). Read at a
    /// batch boundary of the owner, they go with the state the part copies.
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub(in crate::redis) async fn checkpoint_fields(
        &self,
        conn: &mut Connection,
    ) -> Result<Vec<(String, String)>, Error> {
        let mut fields = Vec::with_capacity(self.inputs.len());
        for input in &self.inputs {
            let stored: Option<String> =
                redis::cmd("GET").arg(&input.key).query_async(conn).await?;
            let field = format!("{INPUT_FIELD}{}:{}", input.spec.topic, input.spec.group);
            fields.push((field, stored.unwrap_or_default()));
        }
        Ok(fields)
    }

    /// Whether a take chose a position that no commit wrote yet.
    pub(in crate::redis) fn unwritten(&self) -> bool {
        self.inputs.iter().any(|i| i.chosen)
    }

    /// Whether an input is read in step with the first topic by event time (every input
    /// but a broadcast one; see [`align`](super::align)).
    pub(in crate::redis) fn aligned(&self) -> bool {
        self.inputs.iter().any(|i| !i.spec.broadcast)
    }

    /// Reads up to `count` entries of each input (without waiting) into its queue — but
    /// of an input whose queue still holds entries (it is ahead).
    ///
    /// # Errors
    /// [`Error::Fenced`] when an input's lease was lost; [`Error::Redis`].
    pub(in crate::redis) async fn read(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        count: usize,
    ) -> Result<(), Error> {
        for input in &mut self.inputs {
            if input.queue.holds() {
                input.queue.not_read();
                continue;
            }
            let batch = if input.follower {
                follow(ctx, conn, input, count).await?
            } else {
                let reader = input.reader.as_mut().ok_or_else(not_taken)?;
                reader.read(conn, count, Duration::ZERO).await?
            };
            input.queue.push(batch, count);
        }
        Ok(())
    }

    /// The queues of the inputs read in step (not the broadcast ones).
    pub(in crate::redis) fn queues(&self) -> impl Iterator<Item = &Queue> {
        (self.inputs.iter())
            .filter(|i| !i.spec.broadcast)
            .map(|i| &i.queue)
    }

    /// Releases each input's entries up to event time `upto` (`None`: all; a broadcast
    /// input's always all), in the inputs' order; the last id released is the input's
    /// position when the batch commits.
    pub(in crate::redis) fn release_entries(&mut self, upto: Option<i64>) -> Vec<Vec<Message>> {
        (self.inputs.iter_mut())
            .map(|input| {
                let released = input.queue.release(upto.filter(|_| !input.spec.broadcast));
                if released.last.is_some() {
                    input.read = released.last;
                }
                released.msgs
            })
            .collect()
    }

    /// Whether the batch read anything of the other inputs.
    pub(in crate::redis) fn read_any(&self) -> bool {
        self.inputs.iter().any(|i| i.read.is_some())
    }

    /// The positions the commit writes: (key, id) of each input the batch read, or whose
    /// position the take chose.
    pub(in crate::redis) fn positions(&self) -> Vec<(String, String)> {
        (self.inputs.iter())
            .filter_map(|i| {
                let id = i
                    .read
                    .as_ref()
                    .or(i.committed.as_ref().filter(|_| i.chosen))?;
                Some((i.key.clone(), id.clone()))
            })
            .collect()
    }

    /// The batch committed: its positions are the committed ones.
    pub(in crate::redis) fn committed(&mut self) {
        for input in &mut self.inputs {
            if let Some(read) = input.read.take() {
                input.committed = Some(read);
            }
            input.chosen = false;
        }
    }

    /// Where a failed record of `topic` goes, when `topic` is one of these inputs:
    /// `Some(Some(reader))` to that input's retry and dead letters, `Some(None)` nowhere —
    /// a broadcast element on a job partition other than 0, which partition 0 retries or
    /// dead-letters (every partition fails the same way on it).
    pub(in crate::redis) fn failure_reader(
        &mut self,
        topic: &str,
    ) -> Option<Option<&mut PartitionReader>> {
        let input = self.inputs.iter_mut().find(|i| i.spec.topic == topic)?;
        Some(input.reader.as_mut().filter(|_| !input.follower))
    }

    /// Samples each input's consumer lag (its group's, as `XINFO GROUPS` gives it: entries
    /// after the group's last-delivered id, which the job's reads move) into
    /// `streaming_consumer_lag` with the input's topic and group. A failed sample is
    /// skipped.
    pub(in crate::redis) async fn sample_lag(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        p: u32,
    ) {
        for input in self.inputs.iter_mut().filter(|i| !i.follower) {
            let (topic, group) = (&input.spec.topic, &input.spec.group);
            let groups: Result<redis::Value, _> = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(ctx.keys.stream(topic, input.partition))
                .query_async(conn)
                .await;
            let lag = match groups {
                Ok(v) => parse_xinfo_groups(&v)
                    .into_iter()
                    .find(|g| g.name == *group)
                    .and_then(|g| g.lag),
                Err(e) => {
                    tracing::debug!(topic, partition = p, "lag sample failed: {e}");
                    None
                }
            };
            if let Some(lag) = lag {
                let labels = [
                    ("job", ctx.job_name.clone()),
                    ("topic", topic.clone()),
                    ("group", group.clone()),
                    ("partition", input.partition.to_string()),
                ];
                (input.lag)
                    .get_or_insert_with(|| metrics::gauge!("streaming_consumer_lag", &labels))
                    .set(lag as f64);
            }
        }
    }

    /// Extends every input's lease; `false` when one expired or passed to another owner.
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub(in crate::redis) async fn renew(&self, conn: &mut Connection) -> Result<bool, Error> {
        for input in self.inputs.iter().filter(|i| !i.follower) {
            let renewed = match &input.reader {
                Some(r) => r.renew(conn).await?,
                None => false,
            };
            if !renewed {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Releases every input's lease (if still held).
    pub(in crate::redis) async fn release(&mut self, conn: &mut Connection) {
        for input in &mut self.inputs {
            if let Some(mut r) = input.reader.take() {
                let _ = r.release(conn).await;
            }
        }
    }

    /// The leases were lost: the readers are dropped with them.
    pub(in crate::redis) fn lost(&mut self) {
        for input in &mut self.inputs {
            input.reader = None;
            input.read = None;
            input.queue.clear();
        }
    }
}

fn not_taken() -> Error {
    Error::Engine {
        op: "read",
        reason: "an input's partition is not taken".into(),
    }
}

/// Where input `spec` of partition `p` starts when the job stored no position for it: its
/// group's own commit frontier when its start policy resumes there and one is stored,
/// else the start of its stream (`0-0`) or its end (its last entry's id).
async fn start_position(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    spec: &InputSpec,
    p: u32,
) -> Result<String, Error> {
    let (topic, group) = (spec.topic.as_str(), spec.group.as_str());
    let frontier = match spec.start {
        StartPolicy::FrontierOrEarliest | StartPolicy::FrontierOrLatest => {
            crate::mq::frontier::read(conn, &ctx.keys, topic, p, group).await?
        }
        StartPolicy::Earliest | StartPolicy::Latest => None,
    };
    if let Some(frontier) = frontier {
        return Ok(frontier);
    }
    if matches!(
        spec.start,
        StartPolicy::Earliest | StartPolicy::FrontierOrEarliest
    ) {
        return Ok("0-0".into());
    }
    let last: Vec<(String, redis::Value)> = redis::cmd("XREVRANGE")
        .arg(ctx.keys.stream(topic, p))
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await?;
    Ok(last
        .into_iter()
        .next()
        .map_or_else(|| "0-0".into(), |(id, _)| id))
}

/// The entries of several inputs as one batch: repeatedly the input whose next entry has
/// the lowest timestamp gives it (the earlier input on a tie), so each input keeps its own
/// order and the inputs interleave by event time (what Kafka Streams does across the
/// partitions of a task) — an order enriched from a customer stream meets the customer
/// records of its time in the batch rather than all of the batch's.
pub(in crate::redis) fn merge_by_time(inputs: Vec<Vec<Message>>) -> Vec<Message> {
    if inputs.iter().filter(|m| !m.is_empty()).count() <= 1 {
        return inputs.into_iter().flatten().collect();
    }
    let mut merged = Vec::with_capacity(inputs.iter().map(Vec::len).sum());
    let mut heads: Vec<std::iter::Peekable<std::vec::IntoIter<Message>>> = inputs
        .into_iter()
        .map(|m| m.into_iter().peekable())
        .collect();
    loop {
        let next = (heads.iter_mut().enumerate())
            .filter_map(|(i, h)| Some((h.peek()?.timestamp_ms, i)))
            .min();
        let Some((_, i)) = next else {
            return merged;
        };
        merged.extend(heads[i].next());
    }
}

/// Reads up to `count` entries of broadcast input `input` after its position, without a
/// lease or a group (`XRANGE`): a retry addressed to another group is skipped, a
/// malformed entry too (job partition 0's reader dead-letters it); both still move the
/// position.
async fn follow(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    input: &Input,
    count: usize,
) -> Result<ReadBatch, Error> {
    let after = (input.read.as_ref().or(input.committed.as_ref())).map_or("0-0", String::as_str);
    let (topic, group) = (&input.spec.topic, input.spec.group.as_str());
    let reply: redis::Value = redis::cmd("XRANGE")
        .arg(ctx.keys.stream(topic, input.partition))
        .arg(format!("({after}"))
        .arg("+")
        .arg("COUNT")
        .arg(count.max(1))
        .query_async(conn)
        .await?;
    let topic = arcstr::ArcStr::from(topic.as_str());
    let mut batch = ReadBatch::default();
    for entry in parse_entries(reply)? {
        let id = entry.id.clone();
        match entry.decode(&topic, input.partition) {
            Ok(m) if m.retry_group.as_deref().is_none_or(|g| g == group) => batch.messages.push(m),
            Ok(_) => batch.skipped += 1,
            Err(_) => batch.dead_lettered += 1,
        }
        batch.ids = vec![id];
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(topic: &str, ts: i64) -> Message {
        Message {
            id: format!("{ts}-0").into(),
            topic: topic.into(),
            partition: 0,
            key: None,
            payload: Vec::new().into(),
            headers: Default::default(),
            timestamp_ms: ts,
            retry_count: 0,
            max_retries: None,
            retry_group: None,
        }
    }

    #[test]
    fn inputs_interleave_by_event_time_each_in_its_own_order() {
        let a = vec![at("a", 1), at("a", 5), at("a", 3), at("a", 9)];
        let b = vec![at("b", 2), at("b", 5), at("b", 8)];
        let merged: Vec<(String, i64)> = merge_by_time(vec![a, b, Vec::new()])
            .into_iter()
            .map(|m| (m.topic.to_string(), m.timestamp_ms))
            .collect();
        let expect = |v: &[(&str, i64)]| -> Vec<(String, i64)> {
            v.iter().map(|(t, ts)| (t.to_string(), *ts)).collect()
        };
        // a's 3 stays after its 5 (its own order); on a tie the earlier input goes first.
        assert_eq!(
            merged,
            expect(&[
                ("a", 1),
                ("b", 2),
                ("a", 5),
                ("a", 3),
                ("b", 5),
                ("b", 8),
                ("a", 9)
            ])
        );
    }
}
