//! A partition's batch runner: its operator chain, the chain's state stores (the state
//! cache), its outputs and side outputs, and how records run through them and are rolled
//! back. It does no I/O: what a run needs from Redis (keys it missed) and what it leaves
//! to commit (state writes, outputs) are in its [`Outcome`] and its stores, for the
//! partition to fetch and commit.

use crate::mq::Message;
use crate::ops::{Counters, Operator};
use crate::redis::state::chain::{effective_watermark, Built, Stores};
use crate::redis::state::keys::{mdc_sampled, StateKeys};
use crate::redis::state::pending::{drain_into, KeyKind, Pending};
use crate::redis::state::runtime::DynSideOutput;
use crate::Error;
use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

/// Builds a fresh chain (as the pipeline was written) around an output buffer.
pub(in crate::redis) type MakeChain<C, O> =
    Rc<dyn Fn(&Rc<RefCell<Vec<O>>>) -> Result<Built<C>, Error>>;

/// What a run of a batch's records left.
#[derive(Default)]
pub(in crate::redis) struct Outcome {
    /// The state writes drained during the run (per record while a check is armed,
    /// otherwise none: the commit drains the rest).
    pub(in crate::redis) pending: Pending,
    /// The first record that failed (its index in the batch) and its error; the records
    /// after it did not run.
    pub(in crate::redis) failed: Option<(usize, Error)>,
    /// A record found a key's state not in memory: the run went on a guess. Roll back,
    /// fetch the keys the stores want, and run again.
    pub(in crate::redis) missed: bool,
}

/// Which records get a `message` tracing span (`mdc_enabled`, `mdc_sample_rate`), and its
/// fields that every record of the partition shares.
pub(in crate::redis) struct RecordSpans {
    pub(in crate::redis) enabled: bool,
    pub(in crate::redis) rate: f64,
    pub(in crate::redis) job: Rc<str>,
    pub(in crate::redis) topic: Rc<str>,
    pub(in crate::redis) group: Rc<str>,
    pub(in crate::redis) consumer: Rc<str>,
    pub(in crate::redis) partition: u32,
}

impl RecordSpans {
    /// No spans.
    pub(in crate::redis) fn off() -> Self {
        RecordSpans {
            enabled: false,
            rate: 0.0,
            job: Rc::from(""),
            topic: Rc::from(""),
            group: Rc::from(""),
            consumer: Rc::from(""),
            partition: 0,
        }
    }

    /// The span of `m`, when it is sampled.
    fn of(&self, m: &Message) -> Option<tracing::Span> {
        (self.enabled && mdc_sampled(&m.id, self.rate)).then(|| {
            tracing::info_span!(
                "message",
                job = %self.job,
                topic = %self.topic,
                group = %self.group,
                consumer = %self.consumer,
                id = %m.id,
                key = m.key.as_deref().unwrap_or(""),
                partition = self.partition,
            )
        })
    }
}

/// A check of each record's state writes (e.g. writes to a hot hash fail the record);
/// while armed, every record's writes are drained after it runs.
pub(in crate::redis) trait WriteCheck {
    /// Whether records are checked at all now.
    fn armed(&self) -> bool;
    /// Whether the writes `touched` (indices into `pending.hashes`) may stand.
    ///
    /// # Errors
    /// The record's error when they may not.
    fn check(&self, pending: &Pending, touched: &[usize]) -> Result<(), Error>;
}

/// A partition's chain, its stores and outputs (see the module docs).
pub(in crate::redis) struct Runner<C, O> {
    make: MakeChain<C, O>,
    chain: C,
    stores: Stores,
    counters: Rc<Counters>,
    /// The chain's side outputs (late data), delivered when a batch commits.
    side_outputs: Vec<DynSideOutput>,
    out: Rc<RefCell<Vec<O>>>,
    keys: StateKeys,
}

impl<C: Operator<Message>, O> Runner<C, O> {
    /// A runner with a chain from `make`, whose state writes go to the keys of `keys`.
    ///
    /// # Errors
    /// The chain's build or open error.
    pub(in crate::redis) fn new(make: MakeChain<C, O>, keys: StateKeys) -> Result<Self, Error> {
        let out = Rc::new(RefCell::new(Vec::new()));
        let (chain, stores, counters, side_outputs) = make(&out)?;
        Ok(Runner {
            make,
            chain,
            stores,
            counters,
            side_outputs,
            out,
            keys,
        })
    }

    /// Runs the records of `msgs`, but those in `skip`, through the chain, each at its
    /// message timestamp; stops at the first that fails.
    pub(in crate::redis) fn run(
        &mut self,
        msgs: &[Message],
        skip: &HashSet<usize>,
        spans: &RecordSpans,
        check: &impl WriteCheck,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        let checked = check.armed();
        for (i, m) in msgs.iter().enumerate() {
            if skip.contains(&i) {
                continue;
            }
            let mut r = match spans.of(m) {
                Some(span) => span.in_scope(|| self.chain.process(m.clone(), m.timestamp_ms)),
                None => self.chain.process(m.clone(), m.timestamp_ms),
            };
            if r.is_ok() && checked {
                let mut touched = Vec::new();
                r = drain_into(&self.stores, &self.keys, &mut outcome.pending, &mut touched)
                    .and_then(|()| check.check(&outcome.pending, &touched));
            }
            if let Err(e) = r {
                outcome.failed = Some((i, e));
                break;
            }
        }
        outcome.missed = self.has_wanted();
        outcome
    }

    /// Runs `work` on the chain (timers, a flush: work without records).
    pub(in crate::redis) fn run_work(
        &mut self,
        work: impl FnOnce(&mut C) -> Result<(), Error>,
    ) -> Result<(), Error> {
        work(&mut self.chain)
    }

    /// Rolls a run back: every store forgets the keys the run changed (those already
    /// drained into `pending` too) and wants them fetched again, and a fresh chain (no
    /// outputs, no side outputs, operators as built) takes over the stores' contents.
    ///
    /// # Errors
    /// [`Error::StateDecode`] for a written field that does not decode; [`Error::Engine`]
    /// when the fresh chain's stores are not those of the old one.
    pub(in crate::redis) fn roll_back(&mut self, pending: &Pending) -> Result<(), Error> {
        for (op, store) in &self.stores {
            let written: Vec<(&str, &str)> = (pending.hashes.iter())
                // A collection's writes come with its key's size in the state's hash:
                // that field names the key.
                .filter(|h| h.operator == op.as_str() && h.kind == KeyKind::State)
                .flat_map(|h| h.fields.keys().map(|f| (h.state.as_str(), f.as_str())))
                .collect();
            store.borrow_mut().roll_back(op.as_str(), &written)?;
        }
        self.renew()
    }

    /// Replaces the chain with a fresh one that takes over the stores' contents: the state
    /// cache survives; outputs and side outputs of the old chain are dropped.
    ///
    /// # Errors
    /// As [`roll_back`](Self::roll_back).
    pub(in crate::redis) fn renew(&mut self) -> Result<(), Error> {
        let old = std::mem::take(&mut self.stores);
        self.reset()?;
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

    /// Replaces the chain and its stores with fresh ones: nothing of the state cache,
    /// outputs or side outputs is kept.
    ///
    /// # Errors
    /// The chain's build or open error (the old chain is gone then too).
    pub(in crate::redis) fn reset(&mut self) -> Result<(), Error> {
        let _ = self.chain.close();
        self.out.borrow_mut().clear();
        let (chain, stores, counters, side_outputs) = (self.make)(&self.out)?;
        self.chain = chain;
        self.stores = stores;
        self.counters = counters;
        self.side_outputs = side_outputs;
        Ok(())
    }

    /// Closes the chain (the partition is let go).
    ///
    /// # Errors
    /// An operator's close error.
    pub(in crate::redis) fn close(&mut self) -> Result<(), Error> {
        self.chain.close()
    }
}

impl<C, O> Runner<C, O> {
    /// Adds every store's changes since the last drain to `pending`.
    ///
    /// # Errors
    /// A value that does not encode.
    pub(in crate::redis) fn drain(&self, pending: &mut Pending) -> Result<(), Error> {
        drain_into(&self.stores, &self.keys, pending, &mut Vec::new())
    }

    /// Takes the outputs of the runs since the last call.
    pub(in crate::redis) fn take_outputs(&self) -> Vec<O> {
        std::mem::take(&mut *self.out.borrow_mut())
    }

    /// Whether the runs since the last [`take_outputs`](Self::take_outputs) emitted nothing.
    pub(in crate::redis) fn no_outputs(&self) -> bool {
        self.out.borrow().is_empty()
    }

    /// Whether a store wants keys fetched (a record missed them, or a rollback forgot
    /// them).
    pub(in crate::redis) fn has_wanted(&self) -> bool {
        self.stores.iter().any(|(_, s)| s.borrow().has_wanted())
    }

    /// Evicts clean keys of stores over `max` entries (after a commit).
    pub(in crate::redis) fn trim(&mut self, max: u64) {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        for (_, store) in &self.stores {
            store.borrow_mut().trim(max);
        }
    }

    /// The partition's watermark and idle flag: that of its last watermark operator.
    pub(in crate::redis) fn watermark(&self) -> Option<(i64, bool)> {
        effective_watermark(&self.stores)
    }

    /// The chain's stores, by operator (its last operator first).
    pub(in crate::redis) fn stores(&self) -> &Stores {
        &self.stores
    }

    /// The chain's side outputs.
    pub(in crate::redis) fn side_outputs(&self) -> &[DynSideOutput] {
        &self.side_outputs
    }

    /// The window operators' counters.
    pub(in crate::redis) fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The keys its state writes go to.
    pub(in crate::redis) fn keys(&self) -> &StateKeys {
        &self.keys
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
