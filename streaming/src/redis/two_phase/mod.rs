//! Two-phase commit: sinks whose target (a database) joins the Redis engine's batch commit,
//! so each input's output lands there exactly once, also across crashes and takeovers.
//!
//! # Protocol
//! A [`TwoPhaseSink`] buffers a batch's output. When the batch commits, the engine
//! 1. calls [`TwoPhaseCommitSink::pre_commit`] with the records: the target writes them in a
//!    new transaction and *prepares* it (durable, not yet visible), returning a handle
//!    (e.g. PostgreSQL's `PREPARE TRANSACTION` id);
//! 2. runs the batch's Redis commit (state, offset, Redis sinks), which also records the
//!    handle in the partition's hash `{state key prefix}:{job}:{T:n}:{group}:2pc` (field:
//!    the sink, `main` or `side{i}`), fenced like every commit;
//! 3. calls [`TwoPhaseCommitSink::commit`] with the handle.
//!
//! If the Redis commit refused the batch (another owner took the partition), the engine
//! calls [`TwoPhaseCommitSink::abort`]. If `commit` or `abort` fails, or the process dies in
//! between, the partition is taken again (by this process or another), and the take
//! recovers before it reads anything: [`TwoPhaseCommitSink::recover_and_commit`] with the
//! handle Redis recorded last, then [`TwoPhaseCommitSink::recover_and_abort`] for the
//! other transactions of earlier owners (a lower fencing token) the target holds for this
//! sink and partition. So a transaction is committed exactly when the Redis commit that
//! recorded its handle applied.
//!
//! # Contract for implementations
//! - Transactions are named by [`TxnScope::transaction_id`] (or something as unique) and
//!   findable by [`TxnScope::prefix`]; `pre_commit` must leave nothing prepared when it
//!   fails.
//! - `recover_and_abort` aborts only transactions with a fencing token below the scope's
//!   ([`TxnScope::token_of`]): a recovery that stalls past its lease must not abort what
//!   the next owner prepared.
//! - Committing a handle whose transaction someone else rolled back must fail loudly (its
//!   rows are lost), not succeed.
//! - `commit`, `abort`, `recover_and_commit` and `recover_and_abort` are idempotent: a
//!   handle may be committed again after a crash (the engine does not know whether the
//!   first call reached the target), so committing a transaction that is no longer
//!   prepared succeeds without doing anything, and so does aborting one.
//! - The records a sink sees in `pre_commit` are one batch's output in order; a batch that
//!   rolled back is processed again, and its output reaches `pre_commit` again, in a new
//!   transaction (the old one is aborted).
//!
//! # Operating it
//! - Exactly-once needs the Redis commit to be durable: on a Redis that can lose an
//!   acknowledged write (asynchronous replication with failover, no AOF), set
//!   `commit_replica_wait`, or a lost commit's rows, already committed in the target, are
//!   written again.
//! - A checkpoint restore rewinds Redis, not the target: what a two-phase sink committed
//!   after the checkpoint stays in the target, and the replay writes it again.
//! - Side outputs are named by position (`side0`, `side1`, … in declaration order): a new
//!   version of the pipeline that reorders or removes them, or a job retired for good,
//!   leaves the transactions Redis recorded last uncommitted — stop such a job only
//!   after a clean shutdown (which commits everything), and keep side outputs in order.
//! - Only the pipeline's own sink object has the two-phase hooks: a sink of yours that
//!   wraps a `TwoPhaseSink` is an ordinary (at-least-once) sink to the engine, and the
//!   wrapped one never commits.

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres-tls")]
mod postgres_tls;

pub use crate::api::TxnScope;
use crate::api::{LocalFuture, Sink, TwoPhaseHooks};
use crate::BoxError;
use std::future::Future;

#[cfg(feature = "postgres")]
pub use postgres::{PostgresParams, PostgresSink};

/// A target that commits in two phases with the Redis engine's batch commit (see the
/// [module docs](self) for the protocol and the contract). Wrap it in a [`TwoPhaseSink`]
/// to use it as a pipeline's sink.
///
/// Every method runs on the partition's own thread, one call at a time per partition
/// (each partition has its own clone of the sink), and should bound its own waits.
pub trait TwoPhaseCommitSink<T>: Clone + Send + 'static {
    /// Writes `records` (one batch's output, in order, never empty) in a new transaction
    /// of the target named after `scope` and prepares it; returns its handle (at most 1 KiB
    /// of text), which the batch commit records in Redis.
    ///
    /// # Errors
    /// Any error fails the batch (nothing of it is committed; it is processed again after
    /// the partition is taken again); the transaction must then not stay prepared.
    fn pre_commit(
        &mut self,
        scope: &TxnScope,
        records: Vec<T>,
    ) -> impl Future<Output = Result<String, BoxError>>;

    /// Commits the prepared transaction `handle` (its Redis commit applied).
    ///
    /// # Errors
    /// The partition is taken again, and its recovery commits the handle.
    fn commit(&mut self, handle: &str) -> impl Future<Output = Result<(), BoxError>>;

    /// Aborts the prepared transaction `handle` (its Redis commit applied nothing).
    ///
    /// # Errors
    /// Logged; the next take's recovery aborts it.
    fn abort(&mut self, handle: &str) -> impl Future<Output = Result<(), BoxError>>;

    /// At a take of the partition: commits `handle`, the transaction the partition's last
    /// Redis commit recorded, if it is still prepared; succeeds if it is not.
    ///
    /// # Errors
    /// The take fails and is tried again after a backoff.
    fn recover_and_commit(&mut self, handle: &str) -> impl Future<Output = Result<(), BoxError>>;

    /// At a take of the partition, after `recover_and_commit`: aborts every transaction
    /// of this sink and partition (ids starting with [`TxnScope::prefix`]) still prepared
    /// whose fencing token ([`TxnScope::token_of`]) is below `scope.fencing_token`; leaves
    /// the others alone (a later owner's, when this recovery stalled).
    ///
    /// # Errors
    /// The take fails and is tried again after a backoff.
    fn recover_and_abort(&mut self, scope: &TxnScope)
        -> impl Future<Output = Result<(), BoxError>>;
}

/// The pipeline sink of a [`TwoPhaseCommitSink`]: buffers each batch's output and hands it
/// to the target in the batch commit (see the [module docs](self)).
///
/// Redis engine only: on the memory engine nothing commits, and `close` fails (the
/// terminal operation returns the error) rather than dropping the records.
#[derive(Debug)]
pub struct TwoPhaseSink<S, T> {
    target: S,
    pending: Vec<T>,
}

impl<S: Clone, T> Clone for TwoPhaseSink<S, T> {
    fn clone(&self) -> Self {
        TwoPhaseSink {
            target: self.target.clone(),
            pending: Vec::new(),
        }
    }
}

impl<S, T> TwoPhaseSink<S, T> {
    /// A sink committing into `target`.
    pub fn new(target: S) -> Self {
        TwoPhaseSink {
            target,
            pending: Vec::new(),
        }
    }

    /// The target.
    pub fn target(&self) -> &S {
        &self.target
    }
}

impl<T, S: TwoPhaseCommitSink<T>> Sink<T> for TwoPhaseSink<S, T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self.pending.push(value);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        Err(format!(
            "TwoPhaseSink holds {} records no engine committed: it only commits on the Redis engine",
            self.pending.len()
        )
        .into())
    }

    fn two_phase(&mut self) -> Option<&mut dyn TwoPhaseHooks> {
        Some(self)
    }
}

impl<T, S: TwoPhaseCommitSink<T>> TwoPhaseHooks for TwoPhaseSink<S, T> {
    fn pre_commit<'a>(
        &'a mut self,
        scope: &'a TxnScope,
    ) -> LocalFuture<'a, Result<Option<String>, BoxError>> {
        Box::pin(async move {
            if self.pending.is_empty() {
                return Ok(None);
            }
            let records = std::mem::take(&mut self.pending);
            let handle = self.target.pre_commit(scope, records).await?;
            if handle.len() > 1024 {
                return Err(format!(
                    "a two-phase sink's handle is {} bytes, at most 1024 are allowed",
                    handle.len()
                )
                .into());
            }
            Ok(Some(handle))
        })
    }

    fn commit<'a>(&'a mut self, handle: &'a str) -> LocalFuture<'a, Result<(), BoxError>> {
        Box::pin(self.target.commit(handle))
    }

    fn abort<'a>(&'a mut self, handle: &'a str) -> LocalFuture<'a, Result<(), BoxError>> {
        Box::pin(self.target.abort(handle))
    }

    fn recover<'a>(
        &'a mut self,
        scope: &'a TxnScope,
        committed: Option<&'a str>,
    ) -> LocalFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            if let Some(h) = committed {
                self.target.recover_and_commit(h).await?;
            }
            self.target.recover_and_abort(scope).await
        })
    }

    fn discard(&mut self) {
        self.pending.clear();
    }
}
