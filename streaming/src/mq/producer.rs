//! The producer: `XADD` to a topic's partitions, one at a time or pipelined.
//!
//! Partition choice, in order: the message's explicit partition; else
//! [`partition_for_key`] of its key; else round robin over the partitions (per producer).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{partition_for_key, Connection};
use bytes::Bytes;

use crate::mq::message::{encode_fields, OutgoingMessage, HEADER_ORIGINAL_ID};
use crate::mq::topic::{now_ms, topic_partitions, validate_name, KeySpace};
use crate::Error;

/// An async producer; cheap to clone (clones share the connection and round-robin counter).
#[derive(Clone)]
pub struct Producer {
    conn: Connection,
    keys: KeySpace,
    max_len: Option<usize>,
    rr: Arc<AtomicU64>,
    partitions: Arc<Mutex<HashMap<String, u32>>>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("keys", &self.keys)
            .field("max_len", &self.max_len)
            .finish_non_exhaustive()
    }
}

impl Producer {
    pub(crate) fn new(conn: Connection, keys: KeySpace, max_len: Option<usize>) -> Self {
        Self {
            conn,
            keys,
            max_len,
            rr: Arc::new(AtomicU64::new(0)),
            partitions: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    async fn partition_count(&self, topic: &str) -> Result<u32, Error> {
        if let Some(n) = self
            .partitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
        {
            return Ok(*n);
        }
        validate_name("topic", topic)?;
        let n = topic_partitions(&mut self.conn.clone(), &self.keys, topic).await?;
        self.partitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(topic.to_owned(), n);
        Ok(n)
    }

    fn choose(&self, msg: &OutgoingMessage, partitions: u32) -> Result<u32, Error> {
        match (msg.partition, &msg.key) {
            (Some(p), _) if p < partitions => Ok(p),
            (Some(p), _) => Err(Error::Mq {
                op: "send",
                reason: format!("partition {p} out of range 0..{partitions}"),
            }),
            (None, Some(k)) => Ok(partition_for_key(k, partitions)),
            (None, None) => {
                let n = self.rr.fetch_add(1, Ordering::Relaxed);
                Ok((n % u64::from(partitions)) as u32)
            }
        }
    }

    fn xadd(&self, topic: &str, partition: u32, msg: &OutgoingMessage, cmd: &mut redis::Cmd) {
        cmd.arg("XADD").arg(self.keys.stream(topic, partition));
        if let Some(n) = self.max_len {
            cmd.arg("MAXLEN").arg("~").arg(n);
        }
        cmd.arg("*");
        // Only the queue's own retry and replay paths set the original id: a producer's
        // header of that name is dropped, so a dead letter's original id cannot be forged.
        let stripped;
        let headers = if msg.headers.contains_key(HEADER_ORIGINAL_ID) {
            let mut h = msg.headers.clone();
            h.remove(HEADER_ORIGINAL_ID);
            stripped = h;
            &stripped
        } else {
            &msg.headers
        };
        for (f, v) in encode_fields(
            msg.key.as_deref(),
            &msg.payload,
            headers,
            msg.timestamp_ms.unwrap_or_else(now_ms),
            0,
            msg.max_retries,
        ) {
            cmd.arg(f).arg(v);
        }
    }

    /// Sends `payload` with an optional `key` to `topic`; returns `(partition, entry id)`.
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist, [`Error::InvalidConfig`] for a bad
    /// topic name, [`Error::Redis`] if `XADD` fails.
    pub async fn send(
        &self,
        topic: &str,
        key: Option<&str>,
        payload: impl Into<Bytes>,
    ) -> Result<(u32, String), Error> {
        let mut msg = OutgoingMessage::new(payload);
        msg.key = key.map(str::to_owned);
        self.send_message(topic, msg).await
    }

    /// Sends one message; returns `(partition, entry id)`.
    ///
    /// # Errors
    /// As [`Producer::send`]; also [`Error::Mq`] for an explicit partition out of range.
    pub async fn send_message(
        &self,
        topic: &str,
        msg: impl Borrow<OutgoingMessage>,
    ) -> Result<(u32, String), Error> {
        let msg = msg.borrow();
        let n = self.partition_count(topic).await?;
        let p = self.choose(msg, n)?;
        let mut cmd = redis::Cmd::new();
        self.xadd(topic, p, msg, &mut cmd);
        let id: String = cmd.query_async(&mut self.conn.clone()).await?;
        Ok((p, id))
    }

    /// Sends `msgs` in one pipelined round trip (not a transaction: each `XADD` stands
    /// alone; on a Redis Cluster one pipeline per partition, as a pipeline runs on one
    /// node); returns `(partition, entry id)` per message, in order.
    ///
    /// # Errors
    /// As [`Producer::send_message`]; on a Redis error some messages may have been
    /// added.
    pub async fn send_batch(
        &self,
        topic: &str,
        msgs: &[OutgoingMessage],
    ) -> Result<Vec<(u32, String)>, Error> {
        if msgs.is_empty() {
            return Ok(Vec::new());
        }
        let n = self.partition_count(topic).await?;
        let parts = msgs
            .iter()
            .map(|m| self.choose(m, n))
            .collect::<Result<Vec<u32>, Error>>()?;
        let mut conn = self.conn.clone();
        if !conn.is_cluster() {
            let pipe = self.pipeline(topic, msgs.iter().zip(parts.iter().copied()));
            let ids: Vec<String> = pipe.query_async(&mut conn).await?;
            return Ok(parts.into_iter().zip(ids).collect());
        }
        let mut ids = vec![String::new(); msgs.len()];
        let mut distinct = parts.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for p in distinct {
            let at: Vec<usize> = (0..msgs.len()).filter(|&i| parts[i] == p).collect();
            let pipe = self.pipeline(topic, at.iter().map(|&i| (&msgs[i], p)));
            let got: Vec<String> = pipe.query_async(&mut conn).await?;
            for (i, id) in at.into_iter().zip(got) {
                ids[i] = id;
            }
        }
        Ok(parts.into_iter().zip(ids).collect())
    }

    /// One `XADD` per (message, partition), pipelined.
    fn pipeline<'m>(
        &self,
        topic: &str,
        msgs: impl Iterator<Item = (&'m OutgoingMessage, u32)>,
    ) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        for (m, p) in msgs {
            let mut cmd = redis::Cmd::new();
            self.xadd(topic, p, m, &mut cmd);
            pipe.add_command(cmd);
        }
        pipe
    }
}
