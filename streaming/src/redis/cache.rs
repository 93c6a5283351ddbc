//! A partition's state cache: what taking the partition loads (the index of its state
//! hashes; whole, in `HSCAN` chunks, the states loaded eagerly), what a batch fetches
//! (`HMGET` of the keys it missed, and the Redis key of each of their collections, one
//! pipelined round trip), how a batch is rolled back
//! (the keys it changed are forgotten and fetched again; nothing else is reloaded) and how
//! the cache stays bounded (clean keys evicted after a commit).

use super::chain::Make;
use super::part::Part;
use super::pending::{KeyKind, Pending};
use crate::api::state::CollectionKind;
use crate::api::Sink;
use crate::mq::Connection;
use crate::ops::Operator;
use crate::Error;
use redis::Value;
use std::collections::HashMap;

/// Fields per `HSCAN` call and per `HMGET` command: each command stays short, whatever the
/// state's size.
const CHUNK: usize = 500;

/// Most runs of timers or an idle flush, each after a fetch of the keys the one before
/// missed.
const MAX_RUNS: u32 = 64;

/// One `HMGET` of a fetch: the store (by index), its state, the hash and the fields.
struct Fetch {
    store: usize,
    state: String,
    hash: String,
    fields: Vec<String>,
}

/// One key's collection to fetch: the store (by index), the state, the key as JSON, the
/// collection's kind and its Redis key.
struct CollectionFetch {
    store: usize,
    state: String,
    key: String,
    kind: CollectionKind,
    redis_key: String,
}

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
    pub(super) async fn load_state(&mut self, conn: &mut Connection) -> Result<(), Error> {
        let hashes: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.state_keys.index())
            .query_async(conn)
            .await?;
        let mut eager: Vec<(usize, String, String)> = Vec::new();
        for hash in &hashes {
            for (i, (op, store)) in self.stores.iter().enumerate() {
                let Some(state) = self.state_keys.state_of(hash, op.as_str()) else {
                    continue;
                };
                if (self.schema.as_ref()).is_some_and(|g| g.cleared(op.as_str(), state)) {
                    continue;
                }
                let mut store = store.borrow_mut();
                store.stored(state);
                if !store.lazy(state) {
                    eager.push((i, state.to_string(), hash.clone()));
                }
            }
        }
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
                let (op, store) = &self.stores[i];
                store.borrow_mut().load(op.as_str(), &state, entries)?;
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
    pub(super) async fn fetch_wanted(&mut self, conn: &mut Connection) -> Result<(), Error> {
        let mut fetches: Vec<Fetch> = Vec::new();
        let mut collections: Vec<CollectionFetch> = Vec::new();
        let mut wanting = Vec::new();
        for (i, (op, store)) in self.stores.iter().enumerate() {
            let mut store = store.borrow_mut();
            if !store.has_wanted() {
                continue;
            }
            wanting.push(i);
            let keys = &self.state_keys;
            let mut open: HashMap<String, usize> = HashMap::new();
            store.wanted(op.as_str(), &mut |state, field| {
                let hash = keys.hash(op.as_str(), state, &field);
                let at = *open.entry(hash.clone()).or_insert_with(|| {
                    fetches.push(Fetch {
                        store: i,
                        state: state.to_string(),
                        hash,
                        fields: Vec::new(),
                    });
                    fetches.len() - 1
                });
                fetches[at].fields.push(field);
            })?;
            store.wanted_collections(op.as_str(), &mut |state, key, kind| {
                collections.push(CollectionFetch {
                    store: i,
                    redis_key: keys.collection(op.as_str(), state, &key),
                    state: state.to_string(),
                    key,
                    kind,
                });
            })?;
        }
        if !fetches.is_empty() || !collections.is_empty() {
            self.fetch(conn, fetches, collections).await?;
        }
        for i in wanting {
            self.stores[i].1.borrow_mut().fetched();
        }
        Ok(())
    }

    /// Runs `fetches` and `collections` in one pipeline and loads the replies.
    async fn fetch(
        &mut self,
        conn: &mut Connection,
        fetches: Vec<Fetch>,
        collections: Vec<CollectionFetch>,
    ) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        for f in &fetches {
            for chunk in f.fields.chunks(CHUNK) {
                pipe.cmd("HMGET").arg(&f.hash).arg(chunk);
            }
        }
        for c in &collections {
            match c.kind {
                CollectionKind::Map => pipe.cmd("HGETALL").arg(&c.redis_key),
                CollectionKind::Set => pipe.cmd("SMEMBERS").arg(&c.redis_key),
                CollectionKind::List => pipe.cmd("LRANGE").arg(&c.redis_key).arg(0).arg(-1),
            };
        }
        let started = std::time::Instant::now();
        let replies: Vec<Value> = pipe.query_async(conn).await?;
        self.metrics.fetch_seconds.record(started.elapsed());
        self.count_reads(&fetches, &collections);
        let mut replies = replies.into_iter();
        for f in fetches {
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
            if !entries.is_empty() {
                let (op, store) = &self.stores[f.store];
                store.borrow_mut().load(op.as_str(), &f.state, entries)?;
            }
        }
        for c in collections {
            let stored = flat_strings(replies.next().unwrap_or(Value::Nil))?;
            let (op, store) = &self.stores[c.store];
            (store.borrow_mut()).load_collection(op.as_str(), &c.state, &c.key, stored)?;
        }
        Ok(())
    }

    /// A fetch's reads in the metrics: the fields of each state's `HMGET`s, one per
    /// collection.
    fn count_reads(&mut self, fetches: &[Fetch], collections: &[CollectionFetch]) {
        let reads = fetches
            .iter()
            .map(|f| (f.store, &f.state, f.fields.len()))
            .chain(collections.iter().map(|c| (c.store, &c.state, 1)));
        for (store, state, n) in reads {
            let op = self.stores[store].0.as_str();
            self.metrics.state(op, state).reads.increment(n as u64);
        }
    }

    /// Runs `work` on the chain (timers, an idle flush: work without records) until it
    /// ran with every key it touched in memory: a run that missed keys is rolled back, the
    /// keys fetched, and `work` runs again on the fresh chain.
    ///
    /// # Errors
    /// `work`'s error (the chain is then as `work` left it); a fetch's.
    pub(super) async fn run_loaded<F: Make<C, O>>(
        &mut self,
        plan: &F,
        conn: &mut Connection,
        mut work: impl FnMut(&mut C) -> Result<(), Error>,
    ) -> Result<(), Error> {
        for _ in 0..MAX_RUNS {
            let r = work(&mut self.chain);
            if !self.has_wanted() {
                return r;
            }
            self.roll_back(plan, &Pending::default())?;
            self.fetch_wanted(conn).await?;
        }
        Err(Error::Engine {
            op: "load state",
            reason: format!("keys still missing after {MAX_RUNS} fetches"),
        })
    }

    /// Rolls the batch back: every store forgets the keys the batch changed (those
    /// already drained into `pending` too) and wants them fetched again, and a fresh chain
    /// (no outputs, no side outputs, operators as built) takes over the stores' contents.
    ///
    /// # Errors
    /// [`Error::StateDecode`] for a written field that does not decode; [`Error::Engine`]
    /// when the fresh chain's stores are not those of the old one (then the partition is
    /// taken again from its last commit).
    pub(super) fn roll_back<F: Make<C, O>>(
        &mut self,
        plan: &F,
        pending: &Pending,
    ) -> Result<(), Error> {
        for (op, store) in &self.stores {
            let written: Vec<(&str, &str)> = (pending.hashes.iter())
                // A collection's writes come with its key's size in the state's hash:
                // that field names the key.
                .filter(|h| h.operator == op.as_str() && h.kind == KeyKind::State)
                .flat_map(|h| h.fields.keys().map(|f| (h.state.as_str(), f.as_str())))
                .collect();
            store.borrow_mut().roll_back(op.as_str(), &written)?;
        }
        self.renew_chain(plan)
    }

    /// Replaces the chain with a fresh one (no outputs, no side outputs, operators as
    /// built) that takes over the stores' contents: the state cache survives.
    ///
    /// # Errors
    /// As [`roll_back`](Self::roll_back).
    pub(super) fn renew_chain<F: Make<C, O>>(&mut self, plan: &F) -> Result<(), Error> {
        let old = std::mem::take(&mut self.stores);
        let _ = self.chain.close();
        self.out.borrow_mut().clear();
        let _ = self.sink.take_commit_writes();
        self.discard_two_phase();
        // The old chain's side outputs go with it: a rolled-back batch delivers nothing.
        self.install(plan(&self.out)?);
        let same = self.stores.len() == old.len()
            && (self.stores.iter().zip(&old)).all(|((op, new), (old_op, old))| {
                op == old_op && new.borrow_mut().adopt(old.borrow_mut().as_any())
            });
        if !same {
            return Err(Error::Engine {
                op: "roll back",
                reason: "the rebuilt chain's state stores differ from the old chain's".into(),
            });
        }
        Ok(())
    }
}

impl<C, S: Sink<O>, O> Part<C, S, O> {
    /// Whether a store wants keys fetched (a record missed them, or a rollback forgot
    /// them).
    pub(super) fn has_wanted(&self) -> bool {
        self.stores.iter().any(|(_, s)| s.borrow().has_wanted())
    }

    /// Evicts clean keys of stores over `state_cache_max_entries` (after a commit).
    pub(super) fn trim_cache(&mut self, max: u64) {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        for (_, store) in &self.stores {
            store.borrow_mut().trim(max);
        }
    }
}
