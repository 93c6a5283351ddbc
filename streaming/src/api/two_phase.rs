//! What the Redis engine's batch commit asks of a two-phase-commit sink (see
//! `streaming::redis::two_phase`): the transaction scope it hands the sink and the
//! object-safe hooks it calls.

use crate::BoxError;
use std::future::Future;
use std::pin::Pin;

/// A future the engine awaits on the partition's own thread.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Where a two-phase-commit sink's transaction belongs: one sink of one partition of one
/// job, in one ownership term of the partition.
///
/// [`prefix`](Self::prefix) names every transaction of the sink on this partition (what
/// recovery looks for); [`transaction_id`](Self::transaction_id) names this one;
/// [`token_of`](Self::token_of) reads the fencing token back from an id.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxnScope {
    /// A random id (8 hex digits) of the job's keyed state in Redis, made at the
    /// partition's first take and kept with it: two deployments that share a job name
    /// (and a database) but not their Redis state never share transaction ids.
    pub namespace: String,
    /// The job (`job_name`).
    pub job: String,
    /// The consumer group of the pipeline.
    pub group: String,
    /// The source topic.
    pub topic: String,
    /// The source partition.
    pub partition: u32,
    /// Which of the pipeline's sinks: `main`, or `side{i}` for the `i`-th side output
    /// (in the order the pipeline declares them).
    pub sink: String,
    /// The partition lease's fencing token of the owner (preparing, or recovering at its
    /// take): it grows with every take of the partition, so ids of two owners never
    /// collide, and a transaction with a lower token belongs to an earlier owner.
    pub fencing_token: u64,
    /// A number unique among this process's transactions (0 in recovery).
    pub sequence: u64,
    /// The offset the batch commit acknowledges: the batch's last entry id, or
    /// `t{token}.{n}` for the output of timers and idle flushes (no input of their own;
    /// empty in recovery).
    pub offset: String,
}

impl TxnScope {
    /// A scope of sink `sink` of partition `partition` of `topic`, read by `group` of job
    /// `job` in `namespace`, with fencing token and sequence 0 and no offset (set the
    /// public fields for others): for testing a `TwoPhaseCommitSink` of your own
    /// (`streaming::redis::two_phase`); the engine makes the scopes it passes.
    pub fn new(
        namespace: &str,
        job: &str,
        group: &str,
        topic: &str,
        partition: u32,
        sink: &str,
    ) -> Self {
        TxnScope {
            namespace: namespace.to_owned(),
            job: job.to_owned(),
            group: group.to_owned(),
            topic: topic.to_owned(),
            partition,
            sink: sink.to_owned(),
            fencing_token: 0,
            sequence: 0,
            offset: String::new(),
        }
    }

    /// The prefix of every transaction id of this sink on this partition:
    /// `{namespace}/{job}/{group}/{topic}/{partition}/{sink}/`.
    pub fn prefix(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/{}/",
            self.namespace, self.job, self.group, self.topic, self.partition, self.sink
        )
    }

    /// The fencing token in `id` when `id` is a transaction id of this scope (its
    /// [`prefix`](Self::prefix), then `{token}.{sequence}`); `None` otherwise.
    pub fn token_of(&self, id: &str) -> Option<u64> {
        let rest = id.strip_prefix(&self.prefix())?;
        let (token, sequence) = rest.split_once('.')?;
        sequence.parse::<u64>().ok()?;
        token.parse().ok()
    }

    /// This transaction's id: the [`prefix`](Self::prefix), then
    /// `{fencing_token}.{sequence}` — unique across owners and batches, stable for the
    /// transaction.
    pub fn transaction_id(&self) -> String {
        format!("{}{}.{}", self.prefix(), self.fencing_token, self.sequence)
    }
}

/// The calls a batch commit makes on a two-phase-commit sink (implemented by
/// `streaming::redis::two_phase::TwoPhaseSink`).
#[doc(hidden)]
pub trait TwoPhaseHooks {
    /// Prepares what the sink buffered since the last call; `None` when it buffered
    /// nothing (no transaction).
    fn pre_commit<'a>(
        &'a mut self,
        scope: &'a TxnScope,
    ) -> LocalFuture<'a, Result<Option<String>, BoxError>>;
    /// Commits a prepared transaction after the Redis commit that recorded it applied.
    fn commit<'a>(&'a mut self, handle: &'a str) -> LocalFuture<'a, Result<(), BoxError>>;
    /// Aborts a prepared transaction whose Redis commit applied nothing.
    fn abort<'a>(&'a mut self, handle: &'a str) -> LocalFuture<'a, Result<(), BoxError>>;
    /// At the partition's take: commits `committed` (the handle the last Redis commit
    /// recorded, if any) and aborts the other transactions of `scope` with a lower
    /// fencing token.
    fn recover<'a>(
        &'a mut self,
        scope: &'a TxnScope,
        committed: Option<&'a str>,
    ) -> LocalFuture<'a, Result<(), BoxError>>;
    /// Drops what the sink buffered (the batch rolled back).
    fn discard(&mut self);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_ids_start_with_the_scope_prefix() {
        let scope = TxnScope {
            namespace: "0a1b2c3d".into(),
            job: "wc".into(),
            group: "g".into(),
            topic: "orders".into(),
            partition: 3,
            sink: "main".into(),
            fencing_token: 17,
            sequence: 5,
            offset: "12-0".into(),
        };
        assert_eq!(scope.prefix(), "0a1b2c3d/wc/g/orders/3/main/");
        assert_eq!(scope.transaction_id(), "0a1b2c3d/wc/g/orders/3/main/17.5");
        assert_eq!(scope.token_of(&scope.transaction_id()), Some(17));
        assert_eq!(scope.token_of("0a1b2c3d/wc/g/orders/3/main/x.5"), None);
        assert_eq!(scope.token_of("ffffffff/wc/g/orders/3/main/17.5"), None);
        let side = TxnScope {
            sink: "side0".into(),
            ..scope.clone()
        };
        assert!(!side.transaction_id().starts_with(&scope.prefix()));
    }
}
