//! A partition's state cache: what taking the partition loads (the index of its state
//! hashes; whole, in `HSCAN` chunks, the states loaded eagerly), what a batch fetches
//! (`HMGET` of the keys it missed, and the Redis key of each of their collections, one
//! pipelined round trip), how a batch is rolled back
//! (the keys it changed are forgotten and fetched again; nothing else is reloaded) and how
//! the cache stays bounded (clean keys evicted after a commit).

use crate::api::state::CollectionKind;
use crate::api::Sink;
use crate::mq::Connection;
use crate::ops::Operator;
use crate::redis::partition::wanted::{CollectionFetch, Fetch, Fetched, Wanted};
use crate::redis::partition::Part;
use crate::redis::state::pending::Pending;
use crate::Error;
use redis::Value;

/// Fields per `HSCAN` call and per `HMGET` command: each command stays short, whatever the
/// state's size.
const CHUNK: usize = 500;

/// Most runs of timers or an idle flush, each after a fetch of the keys the one before
/// missed.
const MAX_RUNS: u32 = 64;

/// A reply of strings: an array (`SMEMBERS`, `LRANGE`, `HGETALL` on RESP2) or a map
/// (`HGETALL` on RESP3), flattened to field, value, field, value, ….
fn flat_strings(reply: Value) -> Result<Vec<String>, Error> {
    match reply {
        Value::Map(pairs) => {
            let mut out = Vec::with_capacity(pairs.len() * 2);
            for (f, v) in pairs {
                out.push(redis::from_redis_value(&f)?);
                out.push(redis::from_redis_value(&v)?);
            }
            Ok(out)
        }
        Value::Nil => Ok(Vec::new()),
        other => Ok(redis::from_redis_value(&other)?),
    }
}

impl<C, S, O> Part<C, S, O>
where
    C: Operator<crate::mq::Message>,
    S: Sink<O>,
{
    /// Loads what a fresh chain needs of the partition's stored state: every store learns
    /// which of its states are stored; states loaded eagerly (window panes, timers,
    /// watermarks) are read whole in `HSCAN` chunks, then the keys with timers are fetched
    /// (their states stay in memory while they have timers). States the schema check
    /// cleared are skipped.
    pub(in crate::redis) async fn load_state(
        &mut self,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let hashes: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.state_keys().index())
            .query_async(conn)
            .await?;
        let schema = self.schema.as_ref();
        let cleared = |op: &str, state: &str| schema.is_some_and(|g| g.cleared(op, state));
        let eager = self.runner.stored(&hashes, cleared);
        for (i, state, hash) in eager {
            let mut cursor = 0u64;
            loop {
                let (next, flat): (u64, Vec<String>) = redis::cmd("HSCAN")
                    .arg(&hash)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(CHUNK)
                    .query_async(conn)
                    .await?;
                let mut entries = Vec::with_capacity(flat.len() / 2);
                let mut it = flat.into_iter();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    entries.push((f, v));
                }
                self.runner.load(i, &state, entries)?;
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        self.fetch_wanted(conn).await
    }

    /// Fetches every wanted key's stored entries (`HMGET`s in chunks) and collections
    /// (`HGETALL`, `SMEMBERS`, `LRANGE` of each key's own Redis key), pipelined: one round
    /// trip, into its store.
    pub(in crate::redis) async fn fetch_wanted(
        &mut self,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let wanted = self.runner.wanted()?;
        let fetched = if wanted.no_reads() {
            Fetched::default()
        } else {
            self.fetch(conn, &wanted).await?
        };
        self.runner.load_fetched(wanted, fetched)
    }

    /// Runs the reads of `wanted` in one pipeline.
    async fn fetch(&mut self, conn: &mut Connection, wanted: &Wanted) -> Result<Fetched, Error> {
        let mut pipe = redis::pipe();
        for f in &wanted.fetches {
            for chunk in f.fields.chunks(CHUNK) {
                pipe.cmd("HMGET").arg(&f.hash).arg(chunk);
            }
        }
        for c in &wanted.collections {
            match c.kind {
                CollectionKind::Map => pipe.cmd("HGETALL").arg(&c.redis_key),
                CollectionKind::Set => pipe.cmd("SMEMBERS").arg(&c.redis_key),
                CollectionKind::List => pipe.cmd("LRANGE").arg(&c.redis_key).arg(0).arg(-1),
            };
        }
        let started = std::time::Instant::now();
        let replies: Vec<Value> = pipe.query_async(conn).await?;
        self.metrics.fetch_seconds.record(started.elapsed());
        self.count_reads(&wanted.fetches, &wanted.collections);
        let mut replies = replies.into_iter();
        let mut fetched = Fetched::default();
        for f in &wanted.fetches {
            let mut entries = Vec::new();
            for chunk in f.fields.chunks(CHUNK) {
                let reply = replies.next().unwrap_or(Value::Nil);
                let values: Vec<Option<String>> = redis::from_redis_value(&reply)?;
                for (field, value) in chunk.iter().zip(values) {
                    if let Some(value) = value {
                        entries.push((field.clone(), value));
                    }
                }
            }
            fetched.entries.push(entries);
        }
        for _ in &wanted.collections {
            fetched
                .collections
                .push(flat_strings(replies.next().unwrap_or(Value::Nil))?);
        }
        Ok(fetched)
    }

    /// A fetch's reads in the metrics: the fields of each state's `HMGET`s, one per
    /// collection.
    fn count_reads(&mut self, fetches: &[Fetch], collections: &[CollectionFetch]) {
        let reads = fetches
            .iter()
            .map(|f| (f.store, &f.state, f.fields.len()))
            .chain(collections.iter().map(|c| (c.store, &c.state, 1)));
        for (store, state, n) in reads {
            let op = self.runner.stores()[store].0.as_str();
            self.metrics.state(op, state).reads.increment(n as u64);
        }
    }

    /// Runs `work` on the chain (timers, an idle flush: work without records) until it
    /// ran with every key it touched in memory: a run that missed keys is rolled back, the
    /// keys fetched, and `work` runs again on the fresh chain.
    ///
    /// # Errors
    /// `work`'s error (the chain is then as `work` left it); a fetch's.
    pub(in crate::redis) async fn run_loaded(
        &mut self,
        conn: &mut Connection,
        mut work: impl FnMut(&mut C) -> Result<(), Error>,
    ) -> Result<(), Error> {
        for _ in 0..MAX_RUNS {
            let r = self.runner.run_work(&mut work);
            if !self.runner.has_wanted() {
                return r;
            }
            self.roll_back(&Pending::default())?;
            self.fetch_wanted(conn).await?;
        }
        Err(Error::Engine {
            op: "load state",
            reason: format!("keys still missing after {MAX_RUNS} fetches"),
        })
    }

    /// Rolls the batch back (see [`Runner::roll_back`](crate::redis::partition::runner::Runner::roll_back));
    /// what the batch buffered for the sinks is dropped.
    ///
    /// # Errors
    /// As [`Runner::roll_back`](crate::redis::partition::runner::Runner::roll_back) (then the partition is
    /// taken again from its last commit).
    pub(in crate::redis) fn roll_back(&mut self, pending: &Pending) -> Result<(), Error> {
        self.discard_outputs();
        self.runner.roll_back(pending)
    }

    /// Replaces the chain with a fresh one that keeps the state cache (see
    /// [`Runner::renew`](crate::redis::partition::runner::Runner::renew)); what the chain buffered for the
    /// sinks is dropped.
    ///
    /// # Errors
    /// As [`roll_back`](Self::roll_back).
    pub(in crate::redis) fn renew_chain(&mut self) -> Result<(), Error> {
        self.discard_outputs();
        self.runner.renew()
    }
}
