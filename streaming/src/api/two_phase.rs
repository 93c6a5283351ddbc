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
/// recovery looks for); [`transaction_id`](Self::transaction_id) names this one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxnScope {
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
    /// The partition lease's fencing token of the owner preparing (0 in recovery): it
    /// grows with every take of the partition, so ids of two owners never collide.
    pub fencing_token: u64,
    /// A number unique among this process's transactions (0 in recovery).
    pub sequence: u64,
    /// The offset the batch commit acknowledges: the batch's last entry id, or `t{ms}`
    /// for the output of timers and idle flushes (empty in recovery).
    pub offset: String,
}

impl TxnScope {
    /// The prefix of every transaction id of this sink on this partition:
    /// `{job}/{group}/{topic}/{partition}/{sink}/`.
    pub fn prefix(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}/",
            self.job, self.group, self.topic, self.partition, self.sink
        )
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
    /// recorded, if any) and aborts every other transaction of `scope`.
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
            job: "wc".into(),
            group: "g".into(),
            topic: "orders".into(),
            partition: 3,
            sink: "main".into(),
            fencing_token: 17,
            sequence: 5,
            offset: "12-0".into(),
        };
        assert_eq!(scope.prefix(), "wc/g/orders/3/main/");
        assert_eq!(scope.transaction_id(), "wc/g/orders/3/main/17.5");
        let side = TxnScope {
            sink: "side0".into(),
            ..scope.clone()
        };
        assert!(!side.transaction_id().starts_with(&scope.prefix()));
    }
}
