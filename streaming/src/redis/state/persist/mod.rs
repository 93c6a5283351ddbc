//! [`Persist`]: state the Redis engine keeps in Redis hashes, with a heap cache and
//! write-behind of the keys changed by each batch.

use crate::api::state::{short_type_name, CollectionKind, EncodedChanges};
use crate::mq::Connection;
use crate::ops::window::Bucket;
use crate::ops::{KeyChanges, KeyedTable, OperatorId, WatermarkState, WindowState};
use crate::redis::state::keys::StateKeys;
use crate::redis::state::schema::SchemaGate;
use crate::redis::RedisRuntimeConfig;
use crate::sealed::Sealed;
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::hash::Hash;
use std::rc::Rc;

mod known;
pub(crate) use known::ChangedKeys;
pub(crate) use known::{Lazy, Poison};

/// One change to write: state name, field (the key as JSON), new value as JSON (`None` =
/// delete the field).
pub(crate) type StateWrite<'a> = (&'a str, String, Option<String>);

/// One key's changes of a collection state (list, map or set), written to the key's own
/// Redis key; the state's hash keeps the key's size (field = the key as JSON).
#[derive(Debug, PartialEq, Eq)]
pub struct CollectionWrite<'a> {
    pub(crate) state: &'a str,
    /// The key as JSON.
    pub(crate) key: String,
    pub(crate) kind: CollectionKind,
    pub(crate) changes: EncodedChanges,
}

/// Stored entries of one state as loaded from its hash: (field = the key as JSON, value as
/// JSON).
pub(crate) type StoredEntries = Vec<(String, String)>;

/// Decodes the fields (keys as JSON) a rolled-back batch already wrote for `state`.
///
/// # Errors
/// [`Error::StateDecode`] when a field does not decode.
pub(crate) fn written_keys<K: DeserializeOwned>(
    operator: &str,
    state: &str,
    written: &[(&str, &str)],
) -> Result<Vec<K>, Error> {
    written
        .iter()
        .filter(|(s, _)| *s == state)
        .map(|(_, f)| serde_json::from_str(f).map_err(|e| decode_err(operator, state, e)))
        .collect()
}

/// The JSON field of every key of `keys`.
///
/// # Errors
/// [`Error::StateDecode`] when a key does not encode.
fn fields_of<'k, K: Serialize + 'k>(
    operator: &str,
    state: &str,
    keys: impl Iterator<Item = &'k K>,
    out: &mut dyn FnMut(&str, String),
) -> Result<(), Error> {
    for k in keys {
        out(
            state,
            serde_json::to_string(k).map_err(|e| decode_err(operator, state, e))?,
        );
    }
    Ok(())
}

/// A stateful operator's store as the runner sees it.
pub(crate) type DynStore = Rc<RefCell<dyn Persist>>;

/// Fetches the partition's stored state fingerprints and hands the schema check to every
/// store (a store checks the states whose types it knows at once); the states it admits
/// are noted in `catalog`. `None` when `state_schema_evolution_enabled` is off or there is
/// no store.
///
/// # Errors
/// [`Error::Redis`]; [`Error::StateSchema`] from a store's check.
pub(crate) async fn open_schema(
    config: &RedisRuntimeConfig,
    conn: &mut Connection,
    keys: &StateKeys,
    stores: &[(OperatorId, DynStore)],
    catalog: Option<std::sync::Arc<crate::redis::state::schema::StateCatalog>>,
) -> Result<Option<SchemaGate>, Error> {
    if stores.is_empty() {
        return Ok(None);
    }
    let Some(gate) = crate::redis::state::schema::fetch(config, conn, keys).await? else {
        return Ok(None);
    };
    let gate = match catalog {
        Some(catalog) => gate.with_catalog(catalog),
        None => gate,
    };
    for (op, store) in stores {
        store.borrow_mut().schema(op.as_str(), &gate)?;
    }
    Ok(Some(gate))
}

/// An operator's state that the Redis engine can keep: loaded from its hashes when a
/// partition is taken, changed in memory while batches run, and written back (only the
/// changed keys) in each batch's commit.
///
/// Implemented for the tables of rolling `reduce`/`sum` ([`KeyedTable`]) and for keyed
/// process state (value, list, map and set states declared `persistent`, e.g.
/// [`ValueStateDescriptor::persistent`](crate::api::ValueStateDescriptor::persistent)),
/// with serde bounds on keys and values, for window state ([`WindowState`]: keys,
/// accumulators and triggers serde) and for the watermark of each watermark operator
/// ([`WatermarkState`]).
pub trait Persist: 'static + Sealed {
    /// Adds the stored entries of state `state` (field = key as JSON, value = JSON). A
    /// keyed store poisons the key of a value that does not decode (its records fail with
    /// the decode error until a later batch fetches it again) and skips a field that is
    /// no key's.
    ///
    /// # Errors
    /// [`Error::StateDecode`] when an entry of unkeyed state (a watermark) does not decode.
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error>;

    /// Hands every change since the last drain to `out` and forgets them.
    ///
    /// # Errors
    /// [`Error::StateDecode`] when a value does not encode.
    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error>;

    /// Hands every collection state's changes since the last drain to `out` (before
    /// [`drain`](Self::drain)). The default has none.
    ///
    /// # Errors
    /// [`Error::StateDecode`] when an element does not encode.
    fn drain_collections(
        &mut self,
        operator: &str,
        out: &mut dyn FnMut(CollectionWrite<'_>),
    ) -> Result<(), Error> {
        let _ = (operator, out);
        Ok(())
    }

    /// Connects the store to its partition's state schema check (before any
    /// [`load`](Self::load)): the store calls `SchemaGate::admit` with each state's
    /// fingerprint before decoding its stored entries, at once for states whose types it
    /// knows, else when a state is first used. The default checks nothing.
    ///
    /// # Errors
    /// [`Error::StateSchema`] from `SchemaGate::admit`.
    fn schema(&mut self, operator: &str, gate: &SchemaGate) -> Result<(), Error> {
        let _ = (operator, gate);
        Ok(())
    }

    /// Applies the engine's limits (window fires per record, event-time timer bound).
    fn configure(&mut self, limits: &StateLimits) {
        let _ = limits;
    }

    /// For a watermark operator's state: its watermark (ms) and whether its generator
    /// marked the input idle. `None` for other state.
    fn watermark(&self) -> Option<(i64, bool)> {
        None
    }

    /// Whether state `state` is loaded per key when a batch needs it (else whole when the
    /// partition is taken, in chunks). The default loads every state whole.
    fn lazy(&self, state: &str) -> bool {
        let _ = state;
        false
    }

    /// Lazily loaded state `state` has stored entries: a key not in memory may be stored.
    fn stored(&mut self, state: &str) {
        let _ = state;
    }

    /// Whether a key was wanted since the last [`wanted`](Self::wanted): a record looked
    /// it up and it may be stored, or a rollback forgot it. A batch that saw one runs
    /// again once the keys are fetched.
    fn has_wanted(&self) -> bool {
        false
    }

    /// Hands out the (state, field) of every wanted key to fetch. The engine then passes
    /// their stored entries to [`load`](Self::load) and calls [`fetched`](Self::fetched).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when a key does not encode.
    fn wanted(&mut self, operator: &str, out: &mut dyn FnMut(&str, String)) -> Result<(), Error> {
        let _ = (operator, out);
        Ok(())
    }

    /// Hands out (state, key as JSON, kind) of every wanted key's collection to fetch
    /// from its own Redis key; the engine passes what it holds to
    /// [`load_collection`](Self::load_collection) (nothing when it is empty).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when a key does not encode.
    fn wanted_collections(
        &mut self,
        operator: &str,
        out: &mut dyn FnMut(&str, String, CollectionKind),
    ) -> Result<(), Error> {
        let _ = (operator, out);
        Ok(())
    }

    /// Adds `key`'s stored collection of state `state`: map fields and values
    /// alternating, set members or list elements, as JSON. An element that does not
    /// decode poisons the key (its records fail; the stored collection stays as it is).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when the key does not decode.
    fn load_collection(
        &mut self,
        operator: &str,
        state: &str,
        key: &str,
        stored: Vec<String>,
    ) -> Result<(), Error> {
        let _ = (operator, state, key, stored);
        Ok(())
    }

    /// The keys handed out by the last [`wanted`](Self::wanted) were fetched: they are
    /// in memory (or known to have no state).
    fn fetched(&mut self) {}

    /// Rolls the store back to the last commit: forgets (and wants again) every key
    /// changed since, those still marked and `written` ((state, field) of the changes
    /// already drained into the batch's writes).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when a written field does not decode.
    fn roll_back(&mut self, operator: &str, written: &[(&str, &str)]) -> Result<(), Error>;

    /// The writes drained since the last commit were committed.
    fn committed(&mut self) {}

    /// Evicts clean entries until at most `max` keys are in memory; keys with timers stay.
    fn trim(&mut self, max: usize) {
        let _ = max;
    }

    /// The keys in memory (with state, or known to have none).
    fn cached(&self) -> usize {
        0
    }

    /// Takes over the content of `old`, a store of the same operator and type (the one a
    /// rolled-back chain had); `false` when it is not of this type.
    fn adopt(&mut self, old: &mut dyn std::any::Any) -> bool;

    /// The store as `Any`, for [`adopt`](Self::adopt).
    fn as_any(&mut self) -> &mut dyn std::any::Any;

    /// Ends a watermark epoch after an idle flush (watermark state goes back to
    /// `i64::MIN`); other state ignores it.
    fn reset_epoch(&mut self) {}

    /// Whether the state holds work only a later watermark does: window panes not yet
    /// cleaned up, or event-time timers. The default holds none.
    fn has_event_time_work(&self) -> bool {
        false
    }

    /// The timers queued in memory (window panes' event-time timers, a process
    /// operator's event- and processing-time timers); `None` for state without timers.
    fn timers(&self) -> Option<usize> {
        None
    }
}

/// Limits the Redis engine applies to operator state (from
/// [`RedisRuntimeConfig`](crate::redis::RedisRuntimeConfig)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateLimits {
    /// `window_max_fires_per_record` (0 = unlimited).
    pub window_max_fires_per_record: usize,
    /// `event_time_timer_max_size` (0 = unbounded).
    pub event_time_timer_max_size: usize,
}

/// Writes every key of `dirty` (drained) as field = key JSON, value = `value(key)` as JSON
/// or `None` (delete the field) — the shape of every per-key state hash.
pub(crate) fn drain_json<'v, K, V>(
    operator: &str,
    state: &str,
    dirty: &mut ChangedKeys<K>,
    value: impl Fn(&K) -> Option<&'v V>,
    out: &mut dyn FnMut(StateWrite<'_>),
) -> Result<(), Error>
where
    K: Serialize,
    V: Serialize + 'v,
{
    for k in dirty.drain() {
        let field = serde_json::to_string(&k).map_err(|e| decode_err(operator, state, e))?;
        let value = value(&k)
            .map(|v| serde_json::to_string(v).map_err(|e| decode_err(operator, state, e)))
            .transpose()?;
        out((state, field, value));
    }
    Ok(())
}

/// [`Persist::adopt`] and [`Persist::as_any`] of a store type: `adopt` swaps contents with
/// a store of the same type.
macro_rules! adopt_same_type {
    () => {
        fn adopt(&mut self, old: &mut dyn std::any::Any) -> bool {
            match old.downcast_mut::<Self>() {
                Some(old) => {
                    std::mem::swap(self, old);
                    true
                }
                None => false,
            }
        }

        fn as_any(&mut self) -> &mut dyn std::any::Any {
            self
        }
    };
}
pub(crate) use adopt_same_type;

/// Keys below 7/8 of `max` after evicting: a store over its bound evicts a batch of keys,
/// not one per commit.
pub(crate) fn trim_target(max: usize) -> usize {
    max - max / 8
}

/// The state name of the table of a rolling reduce or sum.
pub(crate) const ROLLING_STATE: &str = "rolling";

/// The stored entries of `state` (field = key as JSON, value as JSON) as (key, field,
/// value): fields that are no key's are skipped (see [`Lazy::key_of`]), and so are the
/// entries of keys already poisoned.
pub(crate) fn keyed_entries<K>(
    lazy: &Lazy<K>,
    operator: &str,
    state: &str,
    entries: StoredEntries,
) -> Vec<(K, String, String)>
where
    K: Hash + Eq + Clone + Serialize + DeserializeOwned,
{
    let mut out = Vec::with_capacity(entries.len());
    for (field, json) in entries {
        if let Some(k) = lazy.key_of(operator, state, &field) {
            if !lazy.is_poisoned(&k) {
                out.push((k, field, json));
            }
        }
    }
    out
}

pub(crate) fn decode_err(operator: &str, state: &str, e: impl std::fmt::Display) -> Error {
    Error::StateDecode {
        operator: OperatorId::from_text(operator),
        state: state.to_string(),
        reason: e.to_string(),
    }
}

/// The state name of a keyed process operator's timers.
pub(crate) const TIMERS_STATE: &str = "__timers";
/// The state name of a window operator's panes.
pub(crate) const PANES_STATE: &str = "panes";
/// The state name of a watermark operator's watermark.
pub(crate) const WATERMARK_STATE: &str = "watermark";
pub(crate) const WATERMARK_FIELD: &str = "\"watermark\"";

mod panes;
mod stores;

#[cfg(test)]
mod collection_tests;
#[cfg(test)]
pub(crate) mod tests;
