//! [`Persist`]: state the Redis engine keeps in Redis hashes, with a heap cache and
//! write-behind of the keys changed by each batch.

use super::schema::SchemaGate;
use crate::api::state::{short_type_name, OpenState, OpenedState};
use crate::api::TimeDomain;
use crate::ops::window::Bucket;
use crate::ops::{
    KeyChanges, KeyedTable, ProcessState, ProcessTracking, WatermarkState, WindowState,
};
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// One change to write: state name, field (the key as JSON), new value as JSON (`None` =
/// delete the field).
pub type StateWrite<'a> = (&'a str, String, Option<String>);

/// The Redis engine's change tracking: the keys changed since the last batch commit (for a
/// watermark, the single key `()`).
#[derive(Clone, Debug)]
pub struct ChangedKeys<K>(HashSet<K>);

impl<K> Default for ChangedKeys<K> {
    fn default() -> Self {
        ChangedKeys(HashSet::new())
    }
}

impl<K: Hash + Eq + Clone + 'static> KeyChanges<K> for ChangedKeys<K> {
    #[inline]
    fn mark(&mut self, key: &K) {
        if !self.0.contains(key) {
            self.0.insert(key.clone());
        }
    }
}

impl<K> ChangedKeys<K> {
    /// Forgets every change.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// The Redis engine's tracking of a keyed process operator's state: the keys changed per
/// state and of the timers, the stored entries of states not opened yet (decoded when a
/// record first opens the state: its descriptor has the codec) and the partition's schema
/// check.
#[derive(Clone)]
pub struct ProcessChanges<K> {
    /// Changed keys per state (by slot; the last set stands for every slot from 63 on).
    states: Vec<ChangedKeys<K>>,
    timers: ChangedKeys<K>,
    pending: HashMap<String, Vec<(K, String)>>,
    schema: Option<SchemaGate>,
}

impl<K> Default for ProcessChanges<K> {
    fn default() -> Self {
        ProcessChanges {
            states: Vec::new(),
            timers: ChangedKeys::default(),
            pending: HashMap::new(),
            schema: None,
        }
    }
}

/// States from this slot on share one set of changed keys (a change mask has 64 bits).
const SHARED_SLOT: usize = 63;

impl<K: Hash + Eq + Clone + 'static> OpenState<K> for ProcessChanges<K> {
    fn open(&mut self, operator: &str, state: &OpenedState<'_>) -> Result<Vec<(K, String)>, Error> {
        if !state.persistent {
            return Err(Error::StateNotPersistent {
                operator: operator.to_string(),
                state: state.name,
                declared: state.declared.to_string(),
            });
        }
        let mut stored = self.pending.remove(state.name).unwrap_or_default();
        if let Some(gate) = &self.schema {
            if !gate.admit(operator, state.name, &state.fingerprint)? {
                stored.clear();
            }
        }
        Ok(stored)
    }
}

impl<K: Hash + Eq + Clone + 'static> ProcessTracking<K> for ProcessChanges<K> {
    #[inline]
    fn mark_states(&mut self, changed: u64, key: &K) {
        let mut bits = changed;
        while bits != 0 {
            let slot = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.states.len() <= slot {
                self.states.resize_with(slot + 1, ChangedKeys::default);
            }
            self.states[slot].mark(key);
        }
    }

    #[inline]
    fn mark_timers(&mut self, key: &K) {
        self.timers.mark(key);
    }
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
pub trait Persist: 'static {
    /// Adds the stored entries of state `state` (field = key as JSON, value = JSON).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when an entry does not decode.
    fn load(
        &mut self,
        operator: &str,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error>;

    /// Hands every change since the last drain to `out` and forgets them.
    ///
    /// # Errors
    /// [`Error::StateDecode`] when a value does not encode.
    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error>;

    /// Connects the store to its partition's state schema check (before any
    /// [`load`](Self::load)): the store calls [`SchemaGate::admit`] with each state's
    /// fingerprint before decoding its stored entries, at once for states whose types it
    /// knows, else when a state is first used. The default checks nothing.
    ///
    /// # Errors
    /// [`Error::StateSchema`] from [`SchemaGate::admit`].
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
fn drain_json<'v, K, V>(
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
    for k in dirty.0.drain() {
        let field = serde_json::to_string(&k).map_err(|e| decode_err(operator, state, e))?;
        let value = value(&k)
            .map(|v| serde_json::to_string(v).map_err(|e| decode_err(operator, state, e)))
            .transpose()?;
        out((state, field, value));
    }
    Ok(())
}

/// The state name of the table of a rolling reduce or sum.
pub const ROLLING_STATE: &str = "rolling";

fn decode_err(operator: &str, state: &str, e: impl std::fmt::Display) -> Error {
    Error::StateDecode {
        operator: operator.to_string(),
        state: state.to_string(),
        reason: e.to_string(),
    }
}

impl<K, V> Persist for KeyedTable<K, V, ChangedKeys<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    fn load(
        &mut self,
        operator: &str,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error> {
        for (field, value) in entries {
            let k: K = serde_json::from_str(&field).map_err(|e| decode_err(operator, state, e))?;
            let v: V = serde_json::from_str(&value).map_err(|e| decode_err(operator, state, e))?;
            self.map.insert(k, v);
        }
        Ok(())
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        let map = &self.map;
        drain_json(
            operator,
            ROLLING_STATE,
            &mut self.changes,
            |k| map.get(k),
            out,
        )
    }

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
pub const TIMERS_STATE: &str = "__timers";
/// The state name of a window operator's panes.
pub const PANES_STATE: &str = "panes";
/// The state name of a watermark operator's watermark.
pub const WATERMARK_STATE: &str = "watermark";
const WATERMARK_FIELD: &str = "\"watermark\"";

impl<K> Persist for ProcessState<K, ProcessChanges<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
{
    fn configure(&mut self, limits: &StateLimits) {
        self.max_event_timers = limits.event_time_timer_max_size;
    }

    fn has_event_time_work(&self) -> bool {
        self.registered
            .values()
            .flatten()
            .any(|(_, domain)| *domain == TimeDomain::EventTime)
    }

    /// Declared states are checked now; the others when a record first opens them.
    fn schema(&mut self, operator: &str, gate: &SchemaGate) -> Result<(), Error> {
        for (_, name, fingerprint) in self.backend.states() {
            gate.admit(operator, name, &fingerprint)?;
        }
        self.tracking.schema = Some(gate.clone());
        Ok(())
    }

    fn load(
        &mut self,
        operator: &str,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error> {
        if state == TIMERS_STATE {
            for (field, value) in entries {
                let k: K =
                    serde_json::from_str(&field).map_err(|e| decode_err(operator, state, e))?;
                let timers: Vec<(i64, TimeDomain)> =
                    serde_json::from_str(&value).map_err(|e| decode_err(operator, state, e))?;
                for (time, domain) in timers {
                    self.add_timer(&k, time, domain);
                }
            }
            self.tracking.timers.clear();
            return Ok(());
        }
        let mut stored = Vec::with_capacity(entries.len());
        for (field, value) in entries {
            let k: K = serde_json::from_str(&field).map_err(|e| decode_err(operator, state, e))?;
            stored.push((k, value));
        }
        match self.backend.slot_of(state) {
            Some(slot) => self.backend.load(slot, stored),
            None => {
                let pending = self.tracking.pending.entry(state.to_string()).or_default();
                pending.extend(stored);
                Ok(())
            }
        }
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        let slots = self.backend.len();
        for slot in 0..slots {
            let Some(changed) = self.tracking.states.get_mut(slot.min(SHARED_SLOT)) else {
                break;
            };
            let keys: Vec<K> = if slot < SHARED_SLOT {
                changed.0.drain().collect()
            } else {
                changed.0.iter().cloned().collect()
            };
            let state = self.backend.name(slot);
            for key in keys {
                let value = self.backend.dump(slot, &key)?;
                let field =
                    serde_json::to_string(&key).map_err(|e| decode_err(operator, state, e))?;
                out((state, field, value));
            }
        }
        if let Some(shared) = self.tracking.states.get_mut(SHARED_SLOT) {
            shared.clear();
        }
        let registered = &self.registered;
        drain_json(
            operator,
            TIMERS_STATE,
            &mut self.tracking.timers,
            |k| registered.get(k).filter(|l| !l.is_empty()),
            out,
        )
    }
}

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

    fn load(
        &mut self,
        operator: &str,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error> {
        for (field, value) in entries {
            let k: K = serde_json::from_str(&field).map_err(|e| decode_err(operator, state, e))?;
            let panes: Vec<Bucket<Acc, Tr>> =
                serde_json::from_str(&value).map_err(|e| decode_err(operator, state, e))?;
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
}

impl Persist for WatermarkState<ChangedKeys<()>> {
    fn load(
        &mut self,
        operator: &str,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error> {
        for (field, value) in entries {
            if field == WATERMARK_FIELD {
                self.watermark =
                    serde_json::from_str(&value).map_err(|e| decode_err(operator, state, e))?;
            }
        }
        Ok(())
    }

    fn drain(&mut self, _operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        if self.changes.0.drain().next().is_some() {
            let value = (self.watermark != i64::MIN).then(|| self.watermark.to_string());
            out((WATERMARK_STATE, WATERMARK_FIELD.to_string(), value));
        }
        Ok(())
    }

    fn watermark(&self) -> Option<(i64, bool)> {
        Some((self.watermark, self.idle))
    }

    fn reset_epoch(&mut self) {
        WatermarkState::reset_epoch(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::state::DeclaredState;
    use crate::api::{KeyedContext, ValueStateDescriptor};
    use crate::ops::process::ContextTimes;
    use crate::ops::OperatorId;

    const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
    const PLAIN: ValueStateDescriptor<u64> = ValueStateDescriptor::new("plain", 0);

    fn drained(p: &mut dyn Persist) -> Vec<(String, String, Option<String>)> {
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

    type Tracked = ProcessState<String, ProcessChanges<String>>;

    /// Runs `f` with the context of `key`.
    fn with<R>(
        st: &mut Tracked,
        key: &str,
        f: impl FnOnce(&mut KeyedContext<'_, String>) -> R,
    ) -> R {
        let times = ContextTimes {
            timestamp: 0,
            watermark: 0,
            processing_time: 0,
        };
        st.with_context(&key.to_string(), times, &mut Vec::new(), f)
    }

    #[test]
    fn process_state_loads_lazily_and_drains_changed_values() {
        let id = OperatorId::new("s", 2, "process");
        let mut st = Tracked::new(&id);
        st.load("op", "count", vec![("\"k\"".into(), "41".into())])
            .unwrap();
        with(&mut st, "k", |ctx| {
            let mut h = ctx.state(&COUNT).unwrap();
            assert_eq!(h.value(), 41);
            h.update(42);
        });
        // Opening a state only to read it is not a change.
        with(&mut st, "z", |ctx| ctx.state(&COUNT).unwrap().value());
        assert_eq!(
            drained(&mut st),
            [("count".into(), "\"k\"".into(), Some("42".into()))]
        );
        let e = with(&mut st, "k", |ctx| {
            ctx.state(&PLAIN).map(|_| ()).unwrap_err()
        });
        assert!(
            e.to_string().contains("ValueStateDescriptor::persistent"),
            "{e}"
        );
    }

    #[test]
    fn declared_states_load_at_once_and_drain_their_changes() {
        let id = OperatorId::new("s", 2, "process");
        let mut st = Tracked::new(&id);
        st.declare(&(COUNT, ())).unwrap();
        st.load("op", "count", vec![("\"k\"".into(), "41".into())])
            .unwrap();
        let count = DeclaredState::<ValueStateDescriptor<u64>>::at(0);
        with(&mut st, "k", |ctx| {
            let n = ctx.state(count).unwrap().value();
            ctx.state(count).unwrap().update(n + 1);
        });
        assert_eq!(
            drained(&mut st),
            [("count".into(), "\"k\"".into(), Some("42".into()))]
        );
        assert!(drained(&mut st).is_empty());
    }
}
