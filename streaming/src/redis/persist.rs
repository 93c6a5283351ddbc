//! [`Persist`]: state the Redis engine keeps in Redis hashes, with a heap cache and
//! write-behind of the keys changed by each batch.

use super::keys::StateKeys;
use super::schema::SchemaGate;
use super::RedisRuntimeConfig;
use crate::api::state::short_type_name;
use crate::mq::Connection;
use crate::ops::window::Bucket;
use crate::ops::{KeyChanges, KeyedTable, OperatorId, WatermarkState, WindowState};
use crate::sealed::Sealed;
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::Hash;
use std::rc::Rc;

/// One change to write: state name, field (the key as JSON), new value as JSON (`None` =
/// delete the field).
pub(crate) type StateWrite<'a> = (&'a str, String, Option<String>);

/// Stored entries of one state as loaded from its hash: (field = the key as JSON, value as
/// JSON).
pub(crate) type StoredEntries = Vec<(String, String)>;

/// The Redis engine's change tracking: the keys changed since the last batch commit (for a
/// watermark, the single key `()`), and for state loaded lazily which keys are known.
#[derive(Clone, Debug)]
pub struct ChangedKeys<K> {
    dirty: HashSet<K>,
    pub(crate) lazy: Lazy<K>,
}

impl<K> Default for ChangedKeys<K> {
    fn default() -> Self {
        ChangedKeys {
            dirty: HashSet::new(),
            lazy: Lazy::default(),
        }
    }
}

impl<K: Hash + Eq + Clone + 'static> KeyChanges<K> for ChangedKeys<K> {
    #[inline]
    fn mark(&mut self, key: &K) {
        if !self.dirty.contains(key) {
            self.dirty.insert(key.clone());
        }
    }

    #[inline]
    fn missing(&mut self, key: &K) {
        self.lazy.missing(key);
    }
}

impl<K> ChangedKeys<K> {
    /// Forgets every change.
    pub(crate) fn clear(&mut self) {
        self.dirty.clear();
    }

    /// Hands out every change and forgets it.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = K> + '_ {
        self.dirty.drain()
    }

    /// The changes, kept.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &K> {
        self.dirty.iter()
    }
}

impl<K: Hash + Eq> ChangedKeys<K> {
    /// Forgets the change of `key`.
    pub(crate) fn unmark(&mut self, key: &K) {
        self.dirty.remove(key);
    }
}

/// What a store loaded lazily knows of its keys: `known` are keys whose stored state is in
/// memory (or known to be absent), `wanted` the keys to fetch before the batch runs again
/// (looked up and not known, or forgotten by a rollback). `complete` while nothing stored
/// can be missing from memory (no stored state when the partition was taken, nothing
/// evicted since): then no key is ever missing.
#[derive(Clone, Debug)]
pub(crate) struct Lazy<K> {
    pub(crate) complete: bool,
    pub(crate) known: HashSet<K>,
    pub(crate) wanted: HashSet<K>,
}

impl<K> Default for Lazy<K> {
    fn default() -> Self {
        Lazy {
            complete: true,
            known: HashSet::new(),
            wanted: HashSet::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> Lazy<K> {
    /// `key` is not in memory: wanted unless nothing can be missing or it is known.
    #[inline]
    pub(crate) fn missing(&mut self, key: &K) {
        if !self.complete && !self.known.contains(key) && !self.wanted.contains(key) {
            self.wanted.insert(key.clone());
        }
    }

    /// Wants `key` again (a rollback forgot it).
    pub(crate) fn forget(&mut self, key: K) {
        self.known.remove(&key);
        self.wanted.insert(key);
    }
}

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
/// store (a store checks the states whose types it knows at once). `None` when
/// `state_schema_evolution_enabled` is off or there is no store.
///
/// # Errors
/// [`Error::Redis`]; [`Error::StateSchema`] from a store's check.
pub(crate) async fn open_schema(
    config: &RedisRuntimeConfig,
    conn: &mut Connection,
    keys: &StateKeys,
    stores: &[(OperatorId, DynStore)],
) -> Result<Option<SchemaGate>, Error> {
    if stores.is_empty() {
        return Ok(None);
    }
    let Some(gate) = super::schema::fetch(config, conn, keys).await? else {
        return Ok(None);
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
    /// Adds the stored entries of state `state` (field = key as JSON, value = JSON).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when an entry does not decode.
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error>;

    /// Hands every change since the last drain to `out` and forgets them.
    ///
    /// # Errors
    /// [`Error::StateDecode`] when a value does not encode.
    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error>;

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
    for k in dirty.dirty.drain() {
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

/// Stored entries of `state` (field = key as JSON, value as JSON), keys decoded; the
/// values as `value` makes them.
///
/// # Errors
/// [`Error::StateDecode`] when a key or value does not decode.
pub(crate) fn decode_keys<K: DeserializeOwned, V>(
    operator: &str,
    state: &str,
    entries: StoredEntries,
    mut value: impl FnMut(String) -> Result<V, serde_json::Error>,
) -> Result<Vec<(K, V)>, Error> {
    let decode = |e: serde_json::Error| decode_err(operator, state, e);
    let mut out = Vec::with_capacity(entries.len());
    for (field, json) in entries {
        out.push((
            serde_json::from_str(&field).map_err(decode)?,
            value(json).map_err(decode)?,
        ));
    }
    Ok(out)
}

/// Stored entries of `state`, keys and values decoded.
///
/// # Errors
/// [`Error::StateDecode`] when a key or value does not decode.
pub(crate) fn decode_entries<K: DeserializeOwned, V: DeserializeOwned>(
    operator: &str,
    state: &str,
    entries: StoredEntries,
) -> Result<Vec<(K, V)>, Error> {
    decode_keys(operator, state, entries, |json| serde_json::from_str(&json))
}

pub(crate) fn decode_err(operator: &str, state: &str, e: impl std::fmt::Display) -> Error {
    Error::StateDecode {
        operator: OperatorId::from_text(operator),
        state: state.to_string(),
        reason: e.to_string(),
    }
}

impl<K, V, C> Sealed for KeyedTable<K, V, C> {}

impl<K, V> Persist for KeyedTable<K, V, ChangedKeys<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error> {
        self.map
            .extend(decode_entries::<K, V>(operator, state, entries)?);
        Ok(())
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        let map = &self.map;
        let ChangedKeys { dirty, lazy } = &mut self.changes;
        if !lazy.known.is_empty() {
            // A key known to have no stored state that now has one is in the map.
            for k in dirty.iter().filter(|k| map.contains_key(*k)) {
                lazy.known.remove(k);
            }
        }
        drain_json(
            operator,
            ROLLING_STATE,
            &mut self.changes,
            |k| map.get(k),
            out,
        )
    }

    fn lazy(&self, _state: &str) -> bool {
        true
    }

    fn stored(&mut self, state: &str) {
        if state == ROLLING_STATE {
            self.changes.lazy.complete = false;
        }
    }

    fn has_wanted(&self) -> bool {
        !self.changes.lazy.wanted.is_empty()
    }

    fn wanted(&mut self, operator: &str, out: &mut dyn FnMut(&str, String)) -> Result<(), Error> {
        fields_of(
            operator,
            ROLLING_STATE,
            self.changes.lazy.wanted.iter(),
            out,
        )
    }

    fn fetched(&mut self) {
        let lazy = &mut self.changes.lazy;
        for k in lazy.wanted.drain() {
            if !self.map.contains_key(&k) {
                lazy.known.insert(k);
            }
        }
    }

    fn roll_back(&mut self, operator: &str, written: &[(&str, &str)]) -> Result<(), Error> {
        let mut keys: Vec<K> = self.changes.drain().collect();
        keys.extend(written_keys(operator, ROLLING_STATE, written)?);
        for k in keys {
            self.map.remove(&k);
            self.changes.lazy.forget(k);
        }
        Ok(())
    }

    fn trim(&mut self, max: usize) {
        if max == 0 || self.cached() <= max {
            return;
        }
        let mut excess = self.cached() - trim_target(max);
        let lazy = &mut self.changes.lazy;
        // Keys known to have no state go first: evicting them loses no loaded value.
        let absent: Vec<K> = lazy.known.iter().take(excess).cloned().collect();
        for k in &absent {
            lazy.known.remove(k);
        }
        excess -= absent.len();
        if excess > 0 {
            let evict: Vec<K> = self.map.keys().take(excess).cloned().collect();
            for k in &evict {
                self.map.remove(k);
            }
            lazy.complete = false;
        }
    }

    fn cached(&self) -> usize {
        self.map.len() + self.changes.lazy.known.len()
    }

    adopt_same_type!();

    fn schema(&mut self, operator: &str, gate: &SchemaGate) -> Result<(), Error> {
        let fingerprint = format!(
            "{ROLLING_STATE}<{}> by {}",
            short_type_name::<V>(),
            short_type_name::<K>()
        );
        gate.admit(operator, ROLLING_STATE, &fingerprint)?;
        Ok(())
    }
}

/// The state name of a keyed process operator's timers.
pub(crate) const TIMERS_STATE: &str = "__timers";
/// The state name of a window operator's panes.
pub(crate) const PANES_STATE: &str = "panes";
/// The state name of a watermark operator's watermark.
pub(crate) const WATERMARK_STATE: &str = "watermark";
const WATERMARK_FIELD: &str = "\"watermark\"";

impl<K, Acc, Tr, C> Sealed for WindowState<K, Acc, Tr, C> {}

impl<K, Acc, Tr> Persist for WindowState<K, Acc, Tr, ChangedKeys<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    Acc: Serialize + DeserializeOwned + 'static,
    Tr: Serialize + DeserializeOwned + 'static,
{
    fn configure(&mut self, limits: &StateLimits) {
        self.max_fires = limits.window_max_fires_per_record;
    }

    fn has_event_time_work(&self) -> bool {
        self.keys.values().any(|panes| !panes.is_empty())
    }

    fn schema(&mut self, operator: &str, gate: &SchemaGate) -> Result<(), Error> {
        let fingerprint = format!(
            "{PANES_STATE}<{}, {}> by {}",
            short_type_name::<Acc>(),
            short_type_name::<Tr>(),
            short_type_name::<K>()
        );
        gate.admit(operator, PANES_STATE, &fingerprint)?;
        Ok(())
    }

    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error> {
        for (k, panes) in decode_entries::<K, Vec<Bucket<Acc, Tr>>>(operator, state, entries)? {
            if self.keys.contains_key(&k) {
                continue; // `HSCAN` may return a field twice
            }
            // The timer queue is rebuilt from the panes' registered timers.
            for b in &panes {
                for &t in &b.timers {
                    self.timers.push(t, (k.clone(), b.window));
                }
            }
            self.keys.insert(k, panes);
        }
        Ok(())
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        let keys = &self.keys;
        drain_json(
            operator,
            PANES_STATE,
            &mut self.changes,
            |k| keys.get(k).filter(|p| !p.is_empty()),
            out,
        )
    }

    fn has_wanted(&self) -> bool {
        !self.changes.lazy.wanted.is_empty()
    }

    fn wanted(&mut self, operator: &str, out: &mut dyn FnMut(&str, String)) -> Result<(), Error> {
        fields_of(operator, PANES_STATE, self.changes.lazy.wanted.iter(), out)
    }

    fn fetched(&mut self) {
        self.changes.lazy.wanted.clear();
    }

    fn roll_back(&mut self, operator: &str, written: &[(&str, &str)]) -> Result<(), Error> {
        let mut keys: Vec<K> = self.changes.drain().collect();
        keys.extend(written_keys(operator, PANES_STATE, written)?);
        for k in keys {
            // The key's queued timers go with its panes; loading them again queues the
            // committed ones.
            for b in self.keys.remove(&k).unwrap_or_default() {
                for &t in &b.timers {
                    self.timers.remove(t, &(k.clone(), b.window));
                }
            }
            self.changes.lazy.wanted.insert(k);
        }
        Ok(())
    }

    fn cached(&self) -> usize {
        self.keys.len()
    }

    adopt_same_type!();
}

impl<C> Sealed for WatermarkState<C> {}

impl Persist for WatermarkState<ChangedKeys<()>> {
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error> {
        for (field, value) in entries {
            if field == WATERMARK_FIELD {
                self.watermark =
                    serde_json::from_str(&value).map_err(|e| decode_err(operator, state, e))?;
            }
        }
        Ok(())
    }

    fn drain(&mut self, _operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        if self.changes.dirty.drain().next().is_some() {
            let value = (self.watermark != i64::MIN).then(|| self.watermark.to_string());
            out((WATERMARK_STATE, WATERMARK_FIELD.to_string(), value));
        }
        Ok(())
    }

    fn has_wanted(&self) -> bool {
        !self.changes.lazy.wanted.is_empty()
    }

    fn wanted(&mut self, _operator: &str, out: &mut dyn FnMut(&str, String)) -> Result<(), Error> {
        if !self.changes.lazy.wanted.is_empty() {
            out(WATERMARK_STATE, WATERMARK_FIELD.to_string());
        }
        Ok(())
    }

    fn fetched(&mut self) {
        self.changes.lazy.wanted.clear();
    }

    fn roll_back(&mut self, _operator: &str, written: &[(&str, &str)]) -> Result<(), Error> {
        let changed = self.changes.drain().next().is_some();
        if changed || written.iter().any(|(s, _)| *s == WATERMARK_STATE) {
            *self = WatermarkState::default();
            self.changes.lazy.wanted.insert(());
        }
        Ok(())
    }

    fn watermark(&self) -> Option<(i64, bool)> {
        Some((self.watermark, self.idle))
    }

    adopt_same_type!();

    fn reset_epoch(&mut self) {
        WatermarkState::reset_epoch(self);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::redis::config::SchemaMismatchPolicy;
    use std::collections::HashMap;

    pub(crate) fn drained(p: &mut dyn Persist) -> Vec<(String, String, Option<String>)> {
        let mut out = Vec::new();
        p.drain("op", &mut |(s, f, v)| out.push((s.to_string(), f, v)))
            .unwrap();
        out.sort();
        out
    }

    #[test]
    fn keyed_table_loads_and_drains_only_changed_keys_as_json() {
        let mut t: KeyedTable<String, Option<i64>, ChangedKeys<String>> = KeyedTable::default();
        t.load(
            "op",
            ROLLING_STATE,
            vec![("\"a\"".into(), "1".into()), ("\"b\"".into(), "2".into())],
        )
        .unwrap();
        assert_eq!(t.map.get("a"), Some(&Some(1)));
        assert!(drained(&mut t).is_empty(), "loading is not a change");
        t.changes.mark(&"a".to_string());
        t.map.insert("a".into(), Some(5));
        t.changes.mark(&"c".to_string());
        assert_eq!(
            drained(&mut t),
            [
                ("rolling".into(), "\"a\"".into(), Some("5".into())),
                ("rolling".into(), "\"c\"".into(), None),
            ]
        );
        assert!(drained(&mut t).is_empty());
        let e = t
            .load("op", ROLLING_STATE, vec![("not json".into(), "1".into())])
            .unwrap_err();
        assert!(matches!(e, Error::StateDecode { .. }), "{e}");
    }

    fn wanted(p: &mut dyn Persist) -> Vec<(String, String)> {
        let mut out = Vec::new();
        p.wanted("op", &mut |s, f| out.push((s.to_string(), f)))
            .unwrap();
        out.sort();
        out
    }

    type Table = KeyedTable<String, i64, ChangedKeys<String>>;

    /// What the sum operator does for one element of `key`.
    fn add(t: &mut Table, key: &str, v: i64) {
        let key = key.to_string();
        t.changes.mark(&key);
        match t.map.get_mut(&key) {
            Some(acc) => *acc += v,
            None => {
                t.changes.missing(&key);
                t.map.insert(key, v);
            }
        }
    }

    #[test]
    fn a_table_without_stored_state_misses_nothing() {
        let mut t = Table::default();
        add(&mut t, "a", 1);
        assert!(!t.has_wanted(), "nothing stored: a new key is new");
        assert_eq!(t.cached(), 1);
    }

    #[test]
    fn a_stored_table_wants_unknown_keys_once_and_knows_fetched_absent_ones() {
        let mut t = Table::default();
        t.stored(ROLLING_STATE);
        add(&mut t, "a", 1);
        add(&mut t, "b", 1);
        assert!(t.has_wanted());
        assert_eq!(
            wanted(&mut t),
            [
                ("rolling".into(), "\"a\"".into()),
                ("rolling".into(), "\"b\"".into())
            ]
        );
        // The engine rolls back, fetches ("a" is stored, "b" is not) and runs again.
        t.roll_back("op", &[]).unwrap();
        assert!(t.map.is_empty());
        t.load("op", ROLLING_STATE, vec![("\"a\"".into(), "41".into())])
            .unwrap();
        t.fetched();
        assert!(!t.has_wanted());
        add(&mut t, "a", 1);
        add(&mut t, "b", 1);
        assert!(!t.has_wanted(), "both keys are known now");
        assert_eq!(t.map.get("a"), Some(&42));
        assert_eq!(t.map.get("b"), Some(&1));
        assert_eq!(
            drained(&mut t),
            [
                ("rolling".into(), "\"a\"".into(), Some("42".into())),
                ("rolling".into(), "\"b\"".into(), Some("1".into())),
            ]
        );
        assert_eq!(t.cached(), 2, "b is in the map, no more known as absent");
    }

    #[test]
    fn a_rollback_forgets_changed_and_already_written_keys_only() {
        let mut t = Table::default();
        t.load(
            "op",
            ROLLING_STATE,
            vec![
                ("\"a\"".into(), "1".into()),
                ("\"b\"".into(), "2".into()),
                ("\"c\"".into(), "3".into()),
            ],
        )
        .unwrap();
        add(&mut t, "a", 10);
        add(&mut t, "b", 10);
        t.roll_back("op", &[("rolling", "\"c\""), ("other", "\"b\"")])
            .unwrap();
        // a: still marked; c: already drained into the batch's writes; b's entry of another
        // state is not this state's.
        assert_eq!(t.map.len(), 0, "{:?}", t.map);
        assert_eq!(
            wanted(&mut t),
            [
                ("rolling".into(), "\"a\"".into()),
                ("rolling".into(), "\"b\"".into()),
                ("rolling".into(), "\"c\"".into())
            ]
        );
        let e = t.roll_back("op", &[("rolling", "not json")]).unwrap_err();
        assert!(matches!(e, Error::StateDecode { .. }), "{e}");
    }

    #[test]
    fn trimming_evicts_down_to_seven_eighths_and_later_lookups_fetch() {
        let mut t = Table::default();
        for i in 0..100 {
            add(&mut t, &format!("k{i}"), 1);
        }
        let _ = drained(&mut t);
        t.trim(0);
        assert_eq!(t.cached(), 100, "0 = unbounded");
        t.trim(100);
        assert_eq!(t.cached(), 100, "at the bound");
        t.trim(64);
        assert_eq!(t.cached(), 56);
        let evicted = (0..100)
            .map(|i| format!("k{i}"))
            .find(|k| !t.map.contains_key(k))
            .unwrap();
        add(&mut t, &evicted, 1);
        assert_eq!(
            wanted(&mut t),
            [("rolling".into(), format!("\"{evicted}\""))]
        );
    }

    #[test]
    fn adopting_swaps_contents_of_the_same_type_only() {
        let mut old = Table::default();
        add(&mut old, "a", 5);
        let mut new = Table::default();
        assert!(new.adopt(old.as_any()));
        assert_eq!(new.map.get("a"), Some(&5));
        let mut other: KeyedTable<String, u8, ChangedKeys<String>> = KeyedTable::default();
        assert!(!other.adopt(new.as_any()));
    }

    #[test]
    fn window_rollback_drops_the_keys_panes_and_queued_timers() {
        use crate::time::TimeWindow;
        type Panes = WindowState<String, i64, (), ChangedKeys<String>>;
        let mut w = Panes::default();
        let window = TimeWindow::new(0, 10);
        let pane = format!(
            "[{{\"window\":{},\"acc\":3,\"trigger\":null,\"has_content\":true,\"pending\":true,\"timers\":[9]}}]",
            serde_json::to_string(&window).unwrap()
        );
        w.load(
            "op",
            PANES_STATE,
            vec![
                ("\"a\"".into(), pane.clone()),
                ("\"b\"".into(), pane.clone()),
                ("\"a\"".into(), pane),
            ],
        )
        .unwrap();
        assert_eq!(w.timers.len(), 2, "a field HSCAN returned twice loads once");
        w.changes.mark(&"a".to_string());
        w.roll_back("op", &[]).unwrap();
        assert!(!w.keys.contains_key("a"));
        assert_eq!(w.timers.len(), 1);
        assert_eq!(wanted(&mut w), [("panes".into(), "\"a\"".into())]);
        w.fetched();
        assert!(!w.has_wanted());
    }

    #[test]
    fn rolling_tables_are_checked_when_the_gate_is_handed_over() {
        let g = SchemaGate::new(
            SchemaMismatchPolicy::Fail,
            "job".into(),
            HashMap::from([(
                "op/rolling".to_string(),
                "rolling<Option<u64>> by String".into(),
            )]),
        );
        let mut same: KeyedTable<String, Option<u64>, ChangedKeys<String>> = KeyedTable::default();
        same.schema("op", &g).unwrap();
        let mut other: KeyedTable<String, Option<i64>, ChangedKeys<String>> = KeyedTable::default();
        let e = other.schema("op", &g).unwrap_err();
        assert!(
            e.to_string().contains("`rolling<Option<i64>> by String`"),
            "{e}"
        );
    }
}
