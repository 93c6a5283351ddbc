//! The Redis engine's side of keyed process state: what it tracks of an operator's states
//! and timers ([`ProcessChanges`]), and how that state is loaded and written back.

use crate::api::state::{CollectionKind, OpenState, OpenedState};
use crate::api::TimeDomain;
use crate::ops::{KeyChanges, ProcessState, ProcessTracking};
use crate::redis::state::persist::{
    adopt_same_type, decode_err, drain_json, keyed_entries, trim_target, ChangedKeys,
    CollectionWrite, Lazy, Persist, Poison, StateLimits, StateWrite, StoredEntries, TIMERS_STATE,
};
use crate::redis::state::schema::SchemaGate;
use crate::{Error, OperatorId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::hash::Hash;

/// The Redis engine's tracking of a keyed process operator's state: the keys changed per
/// state and of the timers, the stored entries of states not opened yet (decoded when a
/// record first opens the state: its descriptor has the codec), the partition's schema
/// check, and which keys are in memory (`lazy.known`: every key whose stored states were
/// loaded, or that was first seen while nothing stored could be missing) and which stored
/// states a key not in memory is fetched from.
#[derive(Clone)]
pub struct ProcessChanges<K> {
    /// Changed keys per state (by slot; the last set stands for every slot from 63 on).
    states: Vec<ChangedKeys<K>>,
    timers: ChangedKeys<K>,
    /// Stored entries of states not opened yet, by state: (key, field, value JSON).
    pending: HashMap<String, Vec<(K, String, String)>>,
    schema: Option<SchemaGate>,
    lazy: Lazy<K>,
    /// The states (and `__timers`) with stored entries in the partition.
    stored: Vec<String>,
}

impl<K> Default for ProcessChanges<K> {
    fn default() -> Self {
        ProcessChanges {
            states: Vec::new(),
            timers: ChangedKeys::default(),
            pending: HashMap::new(),
            schema: None,
            lazy: Lazy::default(),
            stored: Vec::new(),
        }
    }
}

/// States from this slot on share one set of changed keys (a change mask has 64 bits).
const SHARED_SLOT: usize = 63;

impl<K: Hash + Eq + Clone + 'static> OpenState<K> for ProcessChanges<K> {
    /// An entry that does not decode poisons its key (see [`Lazy`]); its other states stay
    /// in memory until the next rollback evicts it, but no record of it runs.
    fn open(
        &mut self,
        operator: &str,
        state: &OpenedState<'_>,
        load: &mut dyn FnMut(K, &str) -> Result<(), String>,
    ) -> Result<(), Error> {
        if !state.persistent {
            return Err(Error::StateNotPersistent {
                operator: OperatorId::from_text(operator),
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
        if state.collection.is_some() {
            // What was fetched before the state's kind was known are the keys' sizes from
            // the state's hash: their elements are fetched now (the batch runs again).
            for (k, _, _) in stored {
                self.lazy.forget(k);
            }
            return Ok(());
        }
        for (key, field, json) in stored {
            if let Err(e) = load(key.clone(), &json) {
                let why = Poison::new(operator, state.name, &field, e);
                self.lazy.poison(key, why);
            }
        }
        Ok(())
    }

    fn check(&self, key: &K) -> Result<(), Error> {
        self.lazy.check_opened(key)
    }
}

impl<K: Hash + Eq + Clone + 'static> ProcessTracking<K> for ProcessChanges<K> {
    const TRACKS_ELEMENTS: bool = true;

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

    #[inline]
    fn touch(&mut self, key: &K) -> Result<(), Error> {
        let lazy = &mut self.lazy;
        if !lazy.known.contains(key) {
            lazy.check(key)?;
            if lazy.complete {
                lazy.known.insert(key.clone());
            } else if !lazy.wanted.contains(key) {
                lazy.wanted.insert(key.clone());
            }
        }
        Ok(())
    }
}

impl<K> ProcessChanges<K> {
    /// State `state` has (or will have, once this batch commits) stored entries: a key
    /// forgotten by a rollback is fetched from it.
    fn remember_stored(&mut self, state: &str) {
        if !self.stored.iter().any(|s| s == state) {
            self.stored.push(state.to_string());
        }
    }
}

impl<K: Hash + Eq + Clone> ProcessChanges<K> {
    /// The keys state `slot` changed since its last drain: taken, except for slots from
    /// [`SHARED_SLOT`] on, whose shared set is cleared after the last of them drained.
    fn changed_in(&mut self, slot: usize) -> Option<Vec<K>> {
        let changed = self.states.get_mut(slot.min(SHARED_SLOT))?;
        Some(if slot < SHARED_SLOT {
            changed.drain().collect()
        } else {
            changed.iter().cloned().collect()
        })
    }

    /// [`changed_in`](Self::changed_in) for state `state` about to be written: a state
    /// with changed keys is remembered as stored.
    fn changed_to_write(&mut self, slot: usize, state: &str) -> Option<Vec<K>> {
        let keys = self.changed_in(slot)?;
        if !keys.is_empty() {
            self.remember_stored(state);
        }
        Some(keys)
    }

    /// Every key changed since the last drain (of any state or of the timers), forgotten.
    fn take_changed(&mut self) -> Vec<K> {
        let mut keys: std::collections::HashSet<K> = self.timers.drain().collect();
        for set in &mut self.states {
            keys.extend(set.drain());
        }
        keys.into_iter().collect()
    }
}

impl<K, C> crate::sealed::Sealed for ProcessState<K, C> {}

impl<K: Hash + Eq + Clone + 'static> ProcessState<K, ProcessChanges<K>> {
    /// The stored states a wanted key is fetched from, with the kind of those opened as
    /// collections (fetched from the key's own Redis key). A state the schema check
    /// cleared is deleted at the next commit: nothing of it is fetched.
    fn fetched_states<'a>(
        &'a self,
        operator: &'a str,
    ) -> impl Iterator<Item = (&'a String, Option<CollectionKind>)> + 'a {
        let t = &self.tracking;
        (t.stored.iter())
            .filter(move |s| !(t.schema.as_ref()).is_some_and(|g| g.cleared(operator, s)))
            .map(|s| {
                let slot = self.backend.slot_of(s);
                (s, slot.and_then(|slot| self.backend.collection(slot)))
            })
    }

    /// Forgets `key`'s states and timers (its queued timers leave the queues).
    fn evict(&mut self, key: &K) {
        self.backend.evict(key);
        for (time, domain) in self.registered.remove(key).unwrap_or_default() {
            match domain {
                TimeDomain::EventTime => self.event_timers.remove(time, key),
                TimeDomain::ProcessingTime => self.processing_timers.remove(time, key),
            };
        }
        for entries in self.tracking.pending.values_mut() {
            entries.retain(|(k, _, _)| k != key);
        }
    }

    /// `key`'s stored state does not decode: what of it is in memory goes, and its
    /// records fail until a rollback wants it again.
    fn poison(&mut self, key: K, why: Poison) {
        self.evict(&key);
        self.tracking.lazy.poison(key, why);
    }
}

impl<K> Persist for ProcessState<K, ProcessChanges<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
{
    fn configure(&mut self, limits: &StateLimits) {
        self.max_event_timers = limits.event_time_timer_max_size;
    }

    fn timers(&self) -> Option<usize> {
        Some(self.event_timers.len() + self.processing_timers.len())
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

    /// An entry that does not decode poisons its key (see [`Lazy`]): what of the key is in
    /// memory goes, and its entries of other states are skipped.
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error> {
        let entries = keyed_entries(&self.tracking.lazy, operator, state, entries);
        if state == TIMERS_STATE {
            type Timers = Vec<(i64, TimeDomain)>;
            for (k, field, json) in entries {
                let timers = match serde_json::from_str::<Timers>(&json) {
                    Ok(timers) => timers,
                    Err(e) => {
                        self.poison(k, Poison::new(operator, state, &field, e));
                        continue;
                    }
                };
                for (time, domain) in timers {
                    self.add_timer(&k, time, domain);
                }
                self.tracking.timers.unmark(&k);
                // A key with timers is kept in memory: its states are fetched with it.
                self.tracking.lazy.missing(&k);
            }
            return Ok(());
        }
        // The values stay JSON until the state's descriptor (its codec) is known.
        match self.backend.slot_of(state) {
            Some(slot) if self.backend.collection(slot).is_some() => {
                // Sizes from the state's hash: the elements are fetched instead.
                for (k, _, _) in entries {
                    self.tracking.lazy.forget(k);
                }
            }
            Some(slot) => {
                for (k, field, json) in entries {
                    if let Err(e) = self.backend.load(slot, k.clone(), &json) {
                        self.poison(k, Poison::new(operator, state, &field, e));
                    }
                }
            }
            None => {
                let pending = self.tracking.pending.entry(state.to_string()).or_default();
                pending.extend(entries);
            }
        }
        Ok(())
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        let slots = self.backend.len();
        for slot in 0..slots {
            if self.backend.collection(slot).is_some() {
                continue; // drained by `drain_collections`
            }
            let state = self.backend.name(slot);
            let Some(keys) = self.tracking.changed_to_write(slot, state) else {
                break;
            };
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
        if self.tracking.timers.iter().next().is_some() {
            self.tracking.remember_stored(TIMERS_STATE);
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

    fn drain_collections(
        &mut self,
        operator: &str,
        out: &mut dyn FnMut(CollectionWrite<'_>),
    ) -> Result<(), Error> {
        for slot in 0..self.backend.len() {
            let Some(kind) = self.backend.collection(slot) else {
                continue;
            };
            let state = self.backend.name(slot);
            let Some(keys) = self.tracking.changed_to_write(slot, state) else {
                break;
            };
            for key in keys {
                // A key of the shared set may not have changed this state.
                let Some(changes) = self.backend.take_changes(slot, &key)? else {
                    continue;
                };
                let key =
                    serde_json::to_string(&key).map_err(|e| decode_err(operator, state, e))?;
                out(CollectionWrite {
                    state,
                    key,
                    kind,
                    changes,
                });
            }
        }
        Ok(())
    }

    fn lazy(&self, state: &str) -> bool {
        state != TIMERS_STATE
    }

    fn stored(&mut self, state: &str) {
        if self.lazy(state) {
            self.tracking.lazy.complete = false;
        }
        self.tracking.remember_stored(state);
    }

    fn has_wanted(&self) -> bool {
        !self.tracking.lazy.wanted.is_empty()
    }

    fn wanted(&mut self, operator: &str, out: &mut dyn FnMut(&str, String)) -> Result<(), Error> {
        let t = &self.tracking;
        let states: Vec<&String> = (self.fetched_states(operator))
            .filter(|(_, kind)| kind.is_none())
            .map(|(s, _)| s)
            .collect();
        for k in &t.lazy.wanted {
            let field = serde_json::to_string(k).map_err(|e| decode_err(operator, "key", e))?;
            for state in &states {
                out(state, field.clone());
            }
        }
        Ok(())
    }

    fn wanted_collections(
        &mut self,
        operator: &str,
        out: &mut dyn FnMut(&str, String, CollectionKind),
    ) -> Result<(), Error> {
        let states: Vec<(&String, CollectionKind)> = (self.fetched_states(operator))
            .filter_map(|(s, kind)| Some((s, kind?)))
            .collect();
        if states.is_empty() {
            return Ok(());
        }
        for k in &self.tracking.lazy.wanted {
            let key = serde_json::to_string(k).map_err(|e| decode_err(operator, "key", e))?;
            for (state, kind) in &states {
                out(state, key.clone(), *kind);
            }
        }
        Ok(())
    }

    fn load_collection(
        &mut self,
        operator: &str,
        state: &str,
        key: &str,
        stored: Vec<String>,
    ) -> Result<(), Error> {
        let Some(slot) = self.backend.slot_of(state) else {
            return Ok(());
        };
        let k: K = serde_json::from_str(key).map_err(|e| decode_err(operator, state, e))?;
        if stored.is_empty() {
            return Ok(());
        }
        // An element that does not decode poisons the key, as a value state's entry does.
        if let Err(e) = self.backend.load_elements(slot, k.clone(), stored) {
            self.poison(k, Poison::new(operator, state, key, e));
        }
        Ok(())
    }

    fn fetched(&mut self) {
        self.tracking.lazy.fetched(|_| true);
    }

    fn roll_back(&mut self, operator: &str, written: &[(&str, &str)]) -> Result<(), Error> {
        let mut keys = self.tracking.take_changed();
        // A key poisoned when a state was opened may have other states in memory.
        keys.extend(self.tracking.lazy.poisoned.keys().cloned());
        for (state, field) in written {
            keys.push(serde_json::from_str(field).map_err(|e| decode_err(operator, state, e))?);
        }
        for k in keys {
            self.evict(&k);
            self.tracking.lazy.forget(k);
        }
        Ok(())
    }

    fn trim(&mut self, max: usize) {
        let known = self.tracking.lazy.known.len();
        if max == 0 || known <= max {
            return;
        }
        let excess = known - trim_target(max);
        let registered = &self.registered;
        let evict: Vec<K> = (self.tracking.lazy.known.iter())
            .filter(|k| !registered.contains_key(*k))
            .take(excess)
            .cloned()
            .collect();
        if evict.is_empty() {
            return;
        }
        for k in &evict {
            self.backend.evict(k);
            self.tracking.lazy.known.remove(k);
        }
        if !self.tracking.pending.is_empty() {
            let gone: std::collections::HashSet<&K> = evict.iter().collect();
            for entries in self.tracking.pending.values_mut() {
                entries.retain(|(k, _, _)| !gone.contains(k));
            }
        }
        self.tracking.lazy.complete = false;
    }

    fn committed(&mut self) {
        self.tracking.lazy.committed();
    }

    fn cached(&self) -> usize {
        self.tracking.lazy.known.len()
    }

    adopt_same_type!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::state::DeclaredState;
    use crate::api::{KeyedContext, ValueStateDescriptor};
    use crate::ops::process::ContextTimes;
    use crate::ops::OperatorId;
    use crate::redis::state::persist::tests::drained;

    const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
    const PLAIN: ValueStateDescriptor<u64> = ValueStateDescriptor::new("plain", 0);

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
            event_time: true,
        };
        (st.with_context(&key.to_string(), times, &mut Vec::new(), f, |_| false)).unwrap()
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
