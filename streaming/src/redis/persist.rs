//! [`Persist`]: state the Redis engine keeps in Redis hashes, with a heap cache and
//! write-behind of the keys changed by each batch.

use crate::api::state::Tracking;
use crate::ops::{KeyedTable, ProcessState};
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// One change to write: state name, field (the key as JSON), new value as JSON (`None` =
/// delete the field).
pub type StateWrite<'a> = (&'a str, String, Option<String>);

/// An operator's state that the Redis engine can keep: loaded from its hashes when a
/// partition is taken, changed in memory while batches run, and written back (only the
/// changed keys) in each batch's commit.
///
/// Implemented for the tables of rolling `reduce`/`sum` ([`KeyedTable`]) and for keyed
/// process state (value states declared with
/// [`ValueStateDescriptor::persistent`](crate::api::ValueStateDescriptor::persistent)),
/// with serde bounds on keys and values. Window state is not (Redis windows: issue #6).
pub trait Persist: 'static {
    /// Turns on change tracking (off on the memory engine).
    fn track(&mut self);

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

impl<K, V> Persist for KeyedTable<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    V: Serialize + DeserializeOwned + 'static,
{
    fn track(&mut self) {
        self.dirty.get_or_insert_with(HashSet::new);
    }

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
        let Some(dirty) = &mut self.dirty else {
            return Ok(());
        };
        for k in dirty.drain() {
            let field =
                serde_json::to_string(&k).map_err(|e| decode_err(operator, ROLLING_STATE, e))?;
            let value = match self.map.get(&k) {
                Some(v) => Some(
                    serde_json::to_string(v).map_err(|e| decode_err(operator, ROLLING_STATE, e))?,
                ),
                None => None,
            };
            out((ROLLING_STATE, field, value));
        }
        Ok(())
    }
}

impl<K> Persist for ProcessState<K>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
{
    fn track(&mut self) {
        self.backend.tracking.get_or_insert_with(|| {
            Box::new(Tracking {
                pending: HashMap::new(),
                dirty: HashSet::new(),
            })
        });
    }

    fn load(
        &mut self,
        operator: &str,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error> {
        let Some(tracking) = &mut self.backend.tracking else {
            return Ok(());
        };
        let pending = tracking.pending.entry(state.to_string()).or_default();
        for (field, value) in entries {
            let k: K = serde_json::from_str(&field).map_err(|e| decode_err(operator, state, e))?;
            pending.push((k, value));
        }
        Ok(())
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        self.backend.drain_changes(|(state, key, value)| {
            let field = serde_json::to_string(key).map_err(|e| decode_err(operator, state, e))?;
            out((state, field, value));
            Ok(())
        })
    }
}
