//! What a partition's runner wants fetched from Redis (keys a run missed, or a rollback
//! forgot) and how the fetched values go into its stores — without the I/O, which is the
//! partition's (see [`cache`](crate::redis::partition::cache)).

use crate::api::state::CollectionKind;
use crate::mq::Message;
use crate::ops::Operator;
use crate::redis::partition::runner::Runner;
use crate::Error;
use std::collections::HashMap;

/// The fields of one state hash to read (`HMGET`): the store (by index), its state, the
/// hash and the fields.
pub(in crate::redis) struct Fetch {
    pub(in crate::redis) store: usize,
    pub(in crate::redis) state: String,
    pub(in crate::redis) hash: String,
    pub(in crate::redis) fields: Vec<String>,
}

/// One key's collection to read: the store (by index), the state, the key as JSON, the
/// collection's kind and its Redis key.
pub(in crate::redis) struct CollectionFetch {
    pub(in crate::redis) store: usize,
    pub(in crate::redis) state: String,
    pub(in crate::redis) key: String,
    pub(in crate::redis) kind: CollectionKind,
    pub(in crate::redis) redis_key: String,
}

/// Everything the stores want fetched.
#[derive(Default)]
pub(in crate::redis) struct Wanted {
    pub(in crate::redis) fetches: Vec<Fetch>,
    pub(in crate::redis) collections: Vec<CollectionFetch>,
    /// The stores that want keys (each is told when the fetch is loaded).
    stores: Vec<usize>,
}

impl Wanted {
    /// Whether nothing needs a read (the stores may still want to hear it was done).
    pub(in crate::redis) fn no_reads(&self) -> bool {
        self.fetches.is_empty() && self.collections.is_empty()
    }
}

/// What a fetch found: per [`Fetch`] the (field, value) pairs stored (fields with no
/// value left out), per [`CollectionFetch`] the collection's flat contents (field, value,
/// … for a map; members for a set; elements for a list).
#[derive(Default)]
pub(in crate::redis) struct Fetched {
    pub(in crate::redis) entries: Vec<Vec<(String, String)>>,
    pub(in crate::redis) collections: Vec<Vec<String>>,
}

impl<C: Operator<Message>, O> Runner<C, O> {
    /// Tells every store which of its states Redis holds, given the partition's state
    /// hashes `hashes` (its state index); states `cleared(operator, state)` are skipped.
    /// Returns the hashes of the states loaded whole when taken (store index, state,
    /// hash).
    pub(in crate::redis) fn stored(
        &self,
        hashes: &[String],
        cleared: impl Fn(&str, &str) -> bool,
    ) -> Vec<(usize, String, String)> {
        let mut eager = Vec::new();
        for hash in hashes {
            for (i, (op, store)) in self.stores().iter().enumerate() {
                let Some(state) = self.keys().state_of(hash, op.as_str()) else {
                    continue;
                };
                if cleared(op.as_str(), state) {
                    continue;
                }
                let mut store = store.borrow_mut();
                store.stored(state);
                if !store.lazy(state) {
                    eager.push((i, state.to_string(), hash.clone()));
                }
            }
        }
        eager
    }

    /// Loads stored `entries` (field, value) of `state` into store `store`.
    ///
    /// # Errors
    /// [`Error::StateDecode`] for a value that does not decode.
    pub(in crate::redis) fn load(
        &self,
        store: usize,
        state: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), Error> {
        let (op, s) = &self.stores()[store];
        s.borrow_mut().load(op.as_str(), state, entries)
    }

    /// What the stores want fetched.
    ///
    /// # Errors
    /// A store's error listing its keys.
    pub(in crate::redis) fn wanted(&self) -> Result<Wanted, Error> {
        let mut wanted = Wanted::default();
        let keys = self.keys();
        for (i, (op, store)) in self.stores().iter().enumerate() {
            let mut store = store.borrow_mut();
            if !store.has_wanted() {
                continue;
            }
            wanted.stores.push(i);
            let fetches = &mut wanted.fetches;
            let mut open: HashMap<String, usize> = HashMap::new();
            store.wanted(op.as_str(), &mut |state, field| {
                let hash = keys.hash(op.as_str(), state, &field);
                let at = *open.entry(hash.clone()).or_insert_with(|| {
                    fetches.push(Fetch {
                        store: i,
                        state: state.to_string(),
                        hash,
                        fields: Vec::new(),
                    });
                    fetches.len() - 1
                });
                fetches[at].fields.push(field);
            })?;
            store.wanted_collections(op.as_str(), &mut |state, key, kind| {
                wanted.collections.push(CollectionFetch {
                    store: i,
                    redis_key: keys.collection(op.as_str(), state, &key),
                    state: state.to_string(),
                    key,
                    kind,
                });
            })?;
        }
        Ok(wanted)
    }

    /// Loads what the fetch of `wanted` found; every store that wanted keys then knows
    /// them (a key with nothing stored is known to be new).
    ///
    /// # Errors
    /// [`Error::StateDecode`] for a value that does not decode.
    pub(in crate::redis) fn load_fetched(
        &mut self,
        wanted: Wanted,
        fetched: Fetched,
    ) -> Result<(), Error> {
        let stores = self.stores();
        for (f, entries) in wanted.fetches.iter().zip(fetched.entries) {
            if !entries.is_empty() {
                let (op, store) = &stores[f.store];
                store.borrow_mut().load(op.as_str(), &f.state, entries)?;
            }
        }
        for (c, stored) in wanted.collections.iter().zip(fetched.collections) {
            let (op, store) = &stores[c.store];
            (store.borrow_mut()).load_collection(op.as_str(), &c.state, &c.key, stored)?;
        }
        for i in wanted.stores {
            stores[i].1.borrow_mut().fetched();
        }
        Ok(())
    }
}
