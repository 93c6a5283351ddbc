//! State schema versions (`state_schema_evolution_enabled` /
//! `state_schema_mismatch_policy`).
//!
//! Each keyed state of a partition has a fingerprint: its kind and value type and its key
//! type, as short Rust type names (module paths dropped), e.g. `ValueState<u64> by String`
//! for a process state or `rolling<Option<i64>> by String` for the table of a rolling
//! reduce/sum. The fingerprints live in the hash `{prefix}:{job}:{T:n}:{group}:schema`
//! (the partition's hash tag), field `{operator}/{state}`, value the fingerprint. A state
//! is checked before its stored entries are decoded: a rolling table, window panes and a
//! process state declared with `pipeline!`'s `.state(..)` when the partition is taken,
//! another process state when a record first opens it (its type is only known then). The
//! first run writes the fingerprint. On a mismatch, [`SchemaMismatchPolicy`]:
//! - `Fail`: [`Error::StateSchema`]; the partition stops (nothing of the batch commits),
//!   the job reports it in [`JobDiagnostics::errors`](crate::redis::JobDiagnostics::errors) and
//!   [`PartitionProgress::stopped`](crate::redis::PartitionProgress::stopped); other partitions
//!   and jobs go on;
//! - `Clear`: the state's stored hashes of the partition are deleted (before the next
//!   commit) and the new fingerprint written; the state starts empty;
//! - `Ignore`: a `tracing` warning; the stored entries are decoded as the new type (a
//!   record whose entries do not decode fails with [`Error::StateDecode`]) and the new
//!   fingerprint is written, so the warning appears once per change.

use crate::mq::lease::Fence;
use crate::mq::Connection;
use crate::redis::config::SchemaMismatchPolicy;
use crate::redis::state::keys::StateKeys;
use crate::redis::RedisRuntimeConfig;
use crate::{Error, OperatorId};
use redis::Script;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::{Arc, LazyLock, Mutex};

/// The keyed states a pipeline's partitions opened in this process, with their schema
/// fingerprints: what the job registry publishes for the pipeline. Shared by the
/// pipeline's partitions (each notes what its gate admits).
#[derive(Debug, Default)]
pub(crate) struct StateCatalog(Mutex<BTreeMap<(String, String), String>>);

impl StateCatalog {
    /// Notes state `state` of `operator` with its current fingerprint.
    fn note(&self, operator: &str, state: &str, fingerprint: &str) {
        let mut states = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (operator.to_string(), state.to_string());
        if states.get(&key).is_none_or(|f| f != fingerprint) {
            states.insert(key, fingerprint.to_string());
        }
    }

    /// (operator, state, fingerprint) of every state noted, sorted.
    pub(crate) fn entries(&self) -> Vec<(String, String, String)> {
        let states = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (states.iter())
            .map(|((op, state), f)| (op.clone(), state.clone(), f.clone()))
            .collect()
    }
}

/// The schema check of one partition's states, handed to each store by
/// [`Persist::schema`](crate::redis::state::persist::Persist::schema). Clones share it.
#[derive(Clone, Debug)]
pub struct SchemaGate(Rc<RefCell<Gate>>);

#[derive(Debug)]
struct Gate {
    policy: SchemaMismatchPolicy,
    job: String,
    /// Stored fingerprints by field `{operator}/{state}`.
    stored: HashMap<String, String>,
    /// Fingerprints to write, by field.
    writes: HashMap<String, String>,
    /// (operator, state) whose stored hashes to delete.
    clears: Vec<(String, String)>,
    /// Fields cleared (their stored entries are not loaded).
    cleared: HashSet<String>,
    /// Where the states admitted are noted for the job registry.
    catalog: Option<Arc<StateCatalog>>,
}

fn field(operator: &str, state: &str) -> String {
    format!("{operator}/{state}")
}

impl SchemaGate {
    pub(crate) fn new(
        policy: SchemaMismatchPolicy,
        job: String,
        stored: HashMap<String, String>,
    ) -> Self {
        SchemaGate(Rc::new(RefCell::new(Gate {
            policy,
            job,
            stored,
            writes: HashMap::new(),
            clears: Vec::new(),
            cleared: HashSet::new(),
            catalog: None,
        })))
    }

    /// The same gate, noting each state it admits in `catalog`.
    pub(crate) fn with_catalog(self, catalog: Arc<StateCatalog>) -> Self {
        self.0.borrow_mut().catalog = Some(catalog);
        self
    }

    /// Checks state `state` of `operator` against its stored fingerprint before its stored
    /// entries are decoded. `Ok(true)`: decode them; `Ok(false)`: drop them (the state was
    /// cleared, [`SchemaMismatchPolicy::Clear`]).
    ///
    /// # Errors
    /// [`Error::StateSchema`] on a mismatch under [`SchemaMismatchPolicy::Fail`].
    pub fn admit(&self, operator: &str, state: &str, fingerprint: &str) -> Result<bool, Error> {
        let decided = self.decide(operator, state, fingerprint);
        if decided.is_ok() {
            if let Some(catalog) = &self.0.borrow().catalog {
                catalog.note(operator, state, fingerprint);
            }
        }
        decided
    }

    /// [`admit`](Self::admit)'s decision.
    fn decide(&self, operator: &str, state: &str, fingerprint: &str) -> Result<bool, Error> {
        let mut g = self.0.borrow_mut();
        let f = field(operator, state);
        let stored = match g.stored.get(&f) {
            Some(s) if s == fingerprint => return Ok(true),
            Some(s) => s.clone(),
            None => {
                g.stored.insert(f.clone(), fingerprint.to_string());
                g.writes.insert(f, fingerprint.to_string());
                return Ok(true);
            }
        };
        match g.policy {
            SchemaMismatchPolicy::Fail => Err(Error::StateSchema {
                operator: OperatorId::from_text(operator),
                state: state.to_string(),
                stored,
                current: fingerprint.to_string(),
            }),
            SchemaMismatchPolicy::Clear => {
                tracing::warn!(job = %g.job, operator, state, %stored, current = fingerprint,
                               "state schema changed: clearing the stored state (SchemaMismatchPolicy::Clear)");
                g.stored.insert(f.clone(), fingerprint.to_string());
                g.writes.insert(f.clone(), fingerprint.to_string());
                g.clears.push((operator.to_string(), state.to_string()));
                g.cleared.insert(f);
                Ok(false)
            }
            SchemaMismatchPolicy::Ignore => {
                tracing::warn!(job = %g.job, operator, state, %stored, current = fingerprint,
                               "state schema changed: using the stored state as it is (SchemaMismatchPolicy::Ignore)");
                g.stored.insert(f.clone(), fingerprint.to_string());
                g.writes.insert(f, fingerprint.to_string());
                Ok(true)
            }
        }
    }

    /// The fingerprint of (operator, state): the one to write, else the stored one.
    pub(crate) fn fingerprint(&self, operator: &str, state: &str) -> Option<String> {
        let gate = self.0.borrow();
        let f = field(operator, state);
        (gate.writes.get(&f).or_else(|| gate.stored.get(&f))).cloned()
    }

    /// Whether the stored entries of (operator, state) were cleared.
    pub(crate) fn cleared(&self, operator: &str, state: &str) -> bool {
        self.0.borrow().cleared.contains(&field(operator, state))
    }
}

/// Fetches the partition's stored fingerprints: the schema check of its states. `None` when
/// `state_schema_evolution_enabled` is off.
///
/// # Errors
/// [`Error::Redis`].
pub(crate) async fn fetch(
    config: &RedisRuntimeConfig,
    conn: &mut Connection,
    keys: &StateKeys,
) -> Result<Option<SchemaGate>, Error> {
    if !config.state_schema_evolution_enabled() {
        return Ok(None);
    }
    let stored: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(keys.schema())
        .query_async(conn)
        .await?;
    Ok(Some(SchemaGate::new(
        config.state_schema_mismatch_policy(),
        config.job_name().to_owned(),
        stored,
    )))
}

/// Clears states and writes fingerprints (`lua/schema_flush.lua`, after the lease check
/// it calls).
static FLUSH: LazyLock<Script> = crate::mq::fenced_script!(include_str!("lua/schema_flush.lua"));

/// Writes what the gate decided since the last flush: deletes cleared states' hashes and
/// writes new fingerprints (one script that first checks the partition's lease in
/// `fence`; nothing when there is nothing to write).
///
/// # Errors
/// [`Error::Redis`]; [`Error::Fenced`] (nothing written) when another owner took the lease.
pub(crate) async fn flush(
    gate: Option<&SchemaGate>,
    conn: &mut Connection,
    keys: &StateKeys,
    fence: Fence<'_>,
) -> Result<(), Error> {
    let Some(gate) = gate else { return Ok(()) };
    let (clears, writes) = {
        let mut g = gate.0.borrow_mut();
        (std::mem::take(&mut g.clears), std::mem::take(&mut g.writes))
    };
    if clears.is_empty() && writes.is_empty() {
        return Ok(());
    }
    let mut inv = FLUSH.key(keys.index());
    inv.key(keys.schema());
    fence.push(&mut inv);
    inv.arg(clears.len());
    for (op, state) in &clears {
        inv.arg(keys.unsharded(op, state));
    }
    for (f, fp) in &writes {
        inv.arg(f).arg(fp);
    }
    let v: redis::Value = inv.invoke_async(conn).await?;
    fence.int_reply(&v)?;
    Ok(())
}

/// Whether `e` stops the partition instead of failing a record or being retried: a state
/// schema mismatch under `SchemaMismatchPolicy::Fail`, or sinks of the pipeline that
/// write one key as two Redis types (no retry can commit such a batch).
pub(crate) fn stops_partition(e: &Error) -> bool {
    matches!(
        e,
        Error::StateSchema { .. } | Error::InvalidConfig { field: "sink", .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinks_clashing_on_a_key_stop_the_partition_other_config_errors_do_not() {
        let config = |field| Error::InvalidConfig {
            field,
            reason: String::new(),
        };
        assert!(stops_partition(&config("sink")));
        assert!(!stops_partition(&config("state_ttl")));
    }

    fn gate(policy: SchemaMismatchPolicy) -> SchemaGate {
        let stored = HashMap::from([("op/count".to_string(), "ValueState<u64> by String".into())]);
        SchemaGate::new(policy, "job".into(), stored)
    }

    /// The catalog gets each state admitted with its current fingerprint, once, and not a
    /// state refused.
    #[test]
    fn the_catalog_notes_what_the_gate_admits() {
        let catalog = Arc::new(StateCatalog::default());
        let g = gate(SchemaMismatchPolicy::Fail).with_catalog(Arc::clone(&catalog));
        assert!(g.admit("op", "count", "ValueState<u64> by String").unwrap());
        assert!(g.admit("op", "count", "ValueState<u64> by String").unwrap());
        assert!(g.admit("op", "seen", "SetState<String> by String").unwrap());
        assert!(g.admit("op", "count", "ValueState<i8> by String").is_err());
        let entry = |state: &str, f: &str| ("op".to_string(), state.to_string(), f.to_string());
        assert_eq!(
            catalog.entries(),
            [
                entry("count", "ValueState<u64> by String"),
                entry("seen", "SetState<String> by String")
            ]
        );
    }

    type Pairs = Vec<(String, String)>;

    /// (clears, writes) decided so far.
    fn pending(g: &SchemaGate) -> (Pairs, Pairs) {
        let g = g.0.borrow();
        let mut writes: Vec<_> = g.writes.clone().into_iter().collect();
        writes.sort();
        (g.clears.clone(), writes)
    }

    #[test]
    fn admit_follows_the_policy_on_a_mismatch_only() {
        let v1 = "ValueState<u64> by String";
        let v2 = "ValueState<String> by String";
        for policy in [
            SchemaMismatchPolicy::Fail,
            SchemaMismatchPolicy::Clear,
            SchemaMismatchPolicy::Ignore,
        ] {
            let g = gate(policy);
            assert!(g.admit("op", "count", v1).unwrap(), "same fingerprint");
            assert!(g.admit("op", "new", v2).unwrap(), "first use");
            assert_eq!(pending(&g), (vec![], vec![("op/new".into(), v2.into())]));
        }
        let e = gate(SchemaMismatchPolicy::Fail)
            .admit("op", "count", v2)
            .unwrap_err();
        assert!(
            matches!(&e, Error::StateSchema { operator, state, stored, current }
                if operator == "op" && state == "count" && stored == v1 && current == v2),
            "{e}"
        );
        let g = gate(SchemaMismatchPolicy::Clear);
        assert!(!g.admit("op", "count", v2).unwrap());
        assert!(g.cleared("op", "count"));
        assert_eq!(
            pending(&g),
            (
                vec![("op".into(), "count".into())],
                vec![("op/count".into(), v2.into())]
            )
        );
        assert!(g.admit("op", "count", v2).unwrap(), "now stored as v2");
        let g = gate(SchemaMismatchPolicy::Ignore);
        assert!(g.admit("op", "count", v2).unwrap());
        assert!(!g.cleared("op", "count"));
        assert_eq!(pending(&g), (vec![], vec![("op/count".into(), v2.into())]));
    }
}
