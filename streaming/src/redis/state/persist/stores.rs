//! [`Persist`] for the operator states the Redis engine keeps: rolling tables, window
//! panes and watermarks (keyed process state: `process_state.rs`).

use super::*;

impl<K, V, C> Sealed for KeyedTable<K, V, C> {}

impl<K, V> Persist for KeyedTable<K, V, ChangedKeys<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    /// A value that does not decode poisons its key (see [`Lazy`]).
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error> {
        let lazy = &mut self.changes.lazy;
        for (k, field, json) in keyed_entries(lazy, operator, state, entries) {
            match serde_json::from_str::<V>(&json) {
                Ok(v) => {
                    self.map.insert(k, v);
                }
                Err(e) => lazy.poison(k, Poison::new(operator, state, &field, e)),
            }
        }
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
        let map = &self.map;
        self.changes.lazy.fetched(|k| !map.contains_key(k));
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

    fn committed(&mut self) {
        self.changes.lazy.committed();
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
        if self.changes.drain().next().is_some() {
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
