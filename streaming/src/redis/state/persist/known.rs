//! What a store of the Redis engine knows of its keys: which ones the current batch
//! changed ([`ChangedKeys`]), and for state loaded lazily which keys are in memory, which
//! must be fetched before the batch runs again, and which hold a stored value that does
//! not decode ([`Lazy`], [`Poison`]).

use crate::ops::window::PaneDigests;
use crate::ops::{KeyChanges, OperatorId};
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// The Redis engine's change tracking: the keys changed since the last batch commit (for a
/// watermark, the single key `()`), and for state loaded lazily which keys are known.
#[derive(Clone, Debug)]
pub struct ChangedKeys<K> {
    pub(super) dirty: HashSet<K>,
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
    type Written = PaneDigests;

    #[inline]
    fn mark(&mut self, key: &K) {
        if !self.dirty.contains(key) {
            self.dirty.insert(key.clone());
        }
    }

    #[inline]
    fn missing(&mut self, key: &K) -> Result<(), Error> {
        self.lazy.check(key)?;
        self.lazy.missing(key);
        Ok(())
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
/// evicted since): then no key is ever missing. `poisoned` are keys whose stored state
/// was fetched and does not decode: neither known nor in memory, their records fail with
/// the decode error until the batch commits; the next batch that touches one fetches it
/// again (the user may have fixed or deleted the stored value since).
#[derive(Clone, Debug)]
pub(crate) struct Lazy<K> {
    pub(crate) complete: bool,
    pub(crate) known: HashSet<K>,
    pub(crate) wanted: HashSet<K>,
    pub(crate) poisoned: HashMap<K, Poison>,
}

impl<K> Default for Lazy<K> {
    fn default() -> Self {
        Lazy {
            complete: true,
            known: HashSet::new(),
            wanted: HashSet::new(),
            poisoned: HashMap::new(),
        }
    }
}

/// Why a key's stored state does not decode: the [`Error::StateDecode`] its records fail
/// with.
#[derive(Clone, Debug)]
pub(crate) struct Poison {
    operator: String,
    state: String,
    reason: String,
    /// Found since the last commit: the key's records fail (else the key is fetched
    /// again when a record touches it).
    fresh: bool,
}

impl Poison {
    /// The stored value of `key` (as JSON, the field of `state`'s hash) does not decode.
    pub(crate) fn new(operator: &str, state: &str, key: &str, e: impl std::fmt::Display) -> Self {
        Poison {
            operator: operator.to_string(),
            state: state.to_string(),
            reason: format!(
                "the stored value of key {key} does not decode ({e}); it is left in Redis as it is: fix or delete it, and the key's next records use it"
            ),
            fresh: true,
        }
    }

    fn error(&self) -> Error {
        Error::StateDecode {
            operator: OperatorId::from_text(self.operator.as_str()),
            state: self.state.clone(),
            reason: self.reason.clone(),
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

    /// Whether a record of `key` may run: [`Error::StateDecode`] when its stored state was
    /// found not to decode since the last commit. A key found so before is wanted again
    /// (the record runs on a guess, then again once the key is fetched).
    #[inline]
    pub(crate) fn check(&mut self, key: &K) -> Result<(), Error> {
        if self.poisoned.is_empty() {
            return Ok(());
        }
        self.check_poisoned(key)
    }

    #[cold]
    fn check_poisoned(&mut self, key: &K) -> Result<(), Error> {
        match self.poisoned.get(key) {
            None => Ok(()),
            Some(p) if p.fresh => Err(p.error()),
            Some(_) => {
                self.poisoned.remove(key);
                self.wanted.insert(key.clone());
                Ok(())
            }
        }
    }

    /// [`Error::StateDecode`] when `key` is poisoned (right after a state was opened).
    pub(crate) fn check_opened(&self, key: &K) -> Result<(), Error> {
        self.poisoned.get(key).map_or(Ok(()), |p| Err(p.error()))
    }

    /// Whether `key`'s stored state does not decode.
    pub(crate) fn is_poisoned(&self, key: &K) -> bool {
        !self.poisoned.is_empty() && self.poisoned.contains_key(key)
    }

    /// `key`'s stored state does not decode (`why`): the key is not known, and its records
    /// fail until the batch commits.
    pub(crate) fn poison(&mut self, key: K, why: Poison) {
        self.known.remove(&key);
        self.poisoned.insert(key, why);
    }

    /// The batch committed: a poisoned key is fetched again when a record next touches it.
    pub(crate) fn committed(&mut self) {
        for p in self.poisoned.values_mut() {
            p.fresh = false;
        }
    }

    /// The wanted keys were fetched: those that decoded and `known_if` accepts are known.
    pub(crate) fn fetched(&mut self, mut known_if: impl FnMut(&K) -> bool) {
        for k in self.wanted.drain() {
            if !self.poisoned.contains_key(&k) && known_if(&k) {
                self.known.insert(k);
            }
        }
    }

    /// Wants `key` again (a rollback forgot it), unless it is poisoned: its stored state
    /// was just found not to decode.
    pub(crate) fn forget(&mut self, key: K) {
        self.known.remove(&key);
        if !self.poisoned.contains_key(&key) {
            self.wanted.insert(key);
        }
    }
}

impl<K: Hash + Eq + Clone + Serialize + DeserializeOwned> Lazy<K> {
    /// The key of stored field `field` of `state`: decoded, else the wanted key whose JSON
    /// it is. `None` (with a warning) when it is no key's: no record can use it, so it is
    /// skipped and left in Redis.
    pub(crate) fn key_of(&self, operator: &str, state: &str, field: &str) -> Option<K> {
        match serde_json::from_str(field) {
            Ok(k) => Some(k),
            Err(e) => {
                let wanted = (self.wanted.iter())
                    .find(|k| serde_json::to_string(k).is_ok_and(|f| f == field))
                    .cloned();
                if wanted.is_none() {
                    tracing::warn!(
                        operator,
                        state,
                        field,
                        "stored field is no key's (skipped, left in Redis): {e}"
                    );
                }
                wanted
            }
        }
    }
}
