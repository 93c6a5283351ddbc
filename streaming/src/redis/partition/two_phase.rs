//! The batch commit's side of two-phase commit: pre-commit before the Redis commit,
//! commit or abort after it, recovery at a take.

use crate::api::{Sink, TwoPhaseHooks, TxnScope};
use crate::mq::Connection;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::Part;
use crate::Error;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the transactions this process prepares ([`TxnScope::sequence`]).
static SEQUENCE: AtomicU64 = AtomicU64::new(1);

/// The prepared transactions of one batch: (sink, handle).
pub(crate) type Prepared = Vec<(String, String)>;

/// The hash of the partition's recorded handles: `{state base}:2pc`, field = sink, and
/// field [`NAMESPACE`] = the partition's transaction namespace.
pub(crate) fn handles_key(state_base: &str) -> String {
    format!("{state_base}:2pc")
}

/// The field of the handles hash holding [`TxnScope::namespace`].
const NAMESPACE: &str = "_namespace";

fn two_phase_error(op: &'static str, sink: &str, e: crate::BoxError) -> Error {
    Error::Engine {
        op,
        reason: format!("two-phase sink `{sink}`: {e}"),
    }
}

impl<C, S: Sink<O>, O> Part<C, S, O> {
    fn txn_scope(&self, ctx: &Ctx<'_>, sink: String, token: u64, offset: &str) -> TxnScope {
        TxnScope {
            namespace: self.two_phase_namespace.clone(),
            job: ctx.job_name.clone(),
            group: ctx.spec.group.clone(),
            topic: ctx.spec.topic.clone(),
            partition: self.partition,
            sink,
            fencing_token: token,
            // Recovery (no offset) prepares nothing.
            sequence: if offset.is_empty() {
                0
            } else {
                SEQUENCE.fetch_add(1, Ordering::Relaxed)
            },
            offset: offset.to_owned(),
        }
    }

    /// Calls `f` with each two-phase sink of the pipeline and its name (`main`, `side{i}`).
    // One partition's thread runs this: nothing else borrows a side output while its hook
    // runs.
    #[allow(clippy::await_holding_refcell_ref)]
    async fn each_two_phase<F>(&mut self, mut f: F) -> Result<(), Error>
    where
        F: AsyncFnMut(String, &mut dyn TwoPhaseHooks) -> Result<(), Error>,
    {
        if let Some(h) = self.sink.two_phase() {
            f("main".to_owned(), h).await?;
        }
        for (i, side) in self.runner.side_outputs().iter().enumerate() {
            let mut b = side.borrow_mut();
            if let Some(h) = b.two_phase() {
                f(format!("side{i}"), h).await?;
            }
        }
        Ok(())
    }

    /// 1st phase: prepares what each two-phase sink buffered, before the Redis commit.
    /// On a failure, aborts what this batch prepared so far.
    pub(crate) async fn pre_commit_two_phase(
        &mut self,
        ctx: &Ctx<'_>,
        token: u64,
        offset: &str,
    ) -> Result<Prepared, Error> {
        let mut scopes = Vec::new();
        for name in self.two_phase_names() {
            scopes.push(self.txn_scope(ctx, name, token, offset));
        }
        let mut prepared = Prepared::new();
        let mut scopes = scopes.into_iter();
        let r = self
            .each_two_phase(async |name, h| {
                let scope = scopes.next().expect("one scope per two-phase sink");
                debug_assert_eq!(scope.sink, name);
                match h.pre_commit(&scope).await {
                    Ok(Some(handle)) => prepared.push((name, handle)),
                    Ok(None) => {}
                    Err(e) => return Err(two_phase_error("pre-commit", &name, e)),
                }
                Ok(())
            })
            .await;
        if let Err(e) = r {
            self.abort_two_phase(ctx, &prepared).await;
            return Err(e);
        }
        Ok(prepared)
    }

    /// The names of the pipeline's two-phase sinks, in [`each_two_phase`](Self::each_two_phase) order.
    fn two_phase_names(&mut self) -> Vec<String> {
        let mut names = Vec::new();
        if self.sink.two_phase().is_some() {
            names.push("main".to_owned());
        }
        for (i, side) in self.runner.side_outputs().iter().enumerate() {
            if side.borrow_mut().two_phase().is_some() {
                names.push(format!("side{i}"));
            }
        }
        names
    }

    /// 2nd phase: commits the prepared transactions after their Redis commit applied.
    ///
    /// # Errors
    /// The first failure: the caller takes the partition again, whose recovery commits
    /// them (Redis recorded their handles).
    pub(crate) async fn commit_two_phase(&mut self, prepared: &Prepared) -> Result<(), Error> {
        if prepared.is_empty() {
            return Ok(());
        }
        let by_sink: HashMap<&str, &str> = (prepared.iter())
            .map(|(s, h)| (s.as_str(), h.as_str()))
            .collect();
        self.each_two_phase(async |name, h| match by_sink.get(name.as_str()) {
            Some(handle) => {
                (h.commit(handle).await).map_err(|e| two_phase_error("commit", &name, e))
            }
            None => Ok(()),
        })
        .await
    }

    /// Aborts the prepared transactions of a batch whose Redis commit applied nothing.
    /// Failures are logged: the next take's recovery aborts what is left.
    pub(crate) async fn abort_two_phase(&mut self, ctx: &Ctx<'_>, prepared: &Prepared) {
        if prepared.is_empty() {
            return;
        }
        let by_sink: HashMap<&str, &str> = (prepared.iter())
            .map(|(s, h)| (s.as_str(), h.as_str()))
            .collect();
        let partition = self.partition;
        let _ = self
            .each_two_phase(async |name, h| {
                if let Some(handle) = by_sink.get(name.as_str()) {
                    if let Err(e) = h.abort(handle).await {
                        tracing::warn!(
                            topic = %ctx.spec.topic, partition, sink = %name, handle,
                            "aborting a prepared transaction failed (the next take of the partition aborts it): {e}"
                        );
                    }
                }
                Ok(())
            })
            .await;
    }

    /// At a take (under the new fencing token): commits the transactions the last Redis
    /// commit recorded and aborts the other transactions of earlier owners that the
    /// two-phase sinks' targets hold for this partition.
    pub(crate) async fn recover_two_phase(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let names = self.two_phase_names();
        if names.is_empty() {
            return Ok(());
        }
        let token = self.owner.fenced_unless_held(ctx)?.token;
        let key = handles_key(self.runner.keys().base());
        let fresh = format!("{:08x}", rand::random::<u32>());
        let (_, mut recorded): (bool, HashMap<String, String>) = redis::pipe()
            .cmd("HSETNX")
            .arg(&key)
            .arg(NAMESPACE)
            .arg(&fresh)
            .cmd("HGETALL")
            .arg(&key)
            .query_async(conn)
            .await?;
        self.two_phase_namespace = recorded.remove(NAMESPACE).unwrap_or(fresh);
        let scopes: HashMap<String, TxnScope> = (names.into_iter())
            .map(|n| (n.clone(), self.txn_scope(ctx, n, token, "")))
            .collect();
        self.each_two_phase(async |name, h| {
            let committed = recorded.get(&name).map(String::as_str);
            (h.recover(&scopes[&name], committed).await)
                .map_err(|e| two_phase_error("recovery", &name, e))
        })
        .await
    }

    /// The handles hash a commit writes `prepared` into (empty when there is nothing).
    pub(crate) fn handles_key_for(&self, prepared: &Prepared) -> String {
        if prepared.is_empty() {
            return String::new();
        }
        handles_key(self.runner.keys().base())
    }

    /// Drops what the two-phase sinks buffered (the batch rolled back).
    pub(crate) fn discard_two_phase(&mut self) {
        if let Some(h) = self.sink.two_phase() {
            h.discard();
        }
    }
}
