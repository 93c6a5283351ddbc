//! A batch's state writes, collected from the chain's stores, per state hash.

use super::chain::Stores;
use super::keys::StateKeys;
use super::persist::CollectionWrite;
use crate::api::state::{CollectionKind, EncodedChanges};
use crate::Error;
use std::collections::HashMap;

/// What a written Redis key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyKind {
    /// A state hash (listed in the partition's state index): field = key as JSON.
    State,
    /// One key's collection: a hash (map), a set or a list.
    Collection(CollectionKind),
}

/// One Redis key's writes in a batch: field (key as JSON, map key or set member) → value
/// (`None` = delete; a set member's value is unused), list elements to append, and whether
/// the key is deleted first.
pub(super) struct PendingHash {
    pub(super) key: String,
    pub(super) operator: String,
    pub(super) state: String,
    pub(super) kind: KeyKind,
    pub(super) replace: bool,
    pub(super) fields: HashMap<String, Option<String>>,
    pub(super) appends: Vec<String>,
}

impl PendingHash {
    /// Whether the commit writes anything to the key.
    pub(super) fn writes(&self) -> bool {
        self.replace || !self.fields.is_empty() || !self.appends.is_empty()
    }

    /// Adds one drain's changes of a collection (later changes of an element replace
    /// earlier ones; a replacement drops what the batch wrote before it).
    fn merge(&mut self, kind: CollectionKind, changes: EncodedChanges) {
        if changes.replaced {
            self.replace = true;
            self.fields.clear();
            self.appends.clear();
        }
        match kind {
            CollectionKind::List => self.appends.extend(changes.added),
            CollectionKind::Map => {
                let mut it = changes.added.into_iter();
                while let (Some(f), Some(v)) = (it.next(), it.next()) {
                    self.fields.insert(f, Some(v));
                }
            }
            CollectionKind::Set => {
                (self.fields).extend(changes.added.into_iter().map(|m| (m, Some(String::new()))));
            }
        }
        self.fields
            .extend(changes.removed.into_iter().map(|f| (f, None)));
    }
}

/// A batch's state writes, per hash (later writes of a field replace earlier ones).
#[derive(Default)]
pub(super) struct Pending {
    pub(super) hashes: Vec<PendingHash>,
    index: HashMap<String, usize>,
}

impl Pending {
    /// The index of the key `key` of (operator, state), added when new.
    fn hash_index(&mut self, key: String, operator: &str, state: &str, kind: KeyKind) -> usize {
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        self.hashes.push(PendingHash {
            key: key.clone(),
            operator: operator.to_string(),
            state: state.to_string(),
            kind,
            replace: false,
            fields: HashMap::new(),
            appends: Vec::new(),
        });
        self.index.insert(key, self.hashes.len() - 1);
        self.hashes.len() - 1
    }

    /// Adds a key's collection changes: its size in the state's hash (deleted at 0) and
    /// its elements' writes; `touched` gets both.
    fn collection(
        &mut self,
        keys: &StateKeys,
        operator: &str,
        write: CollectionWrite<'_>,
        touched: &mut Vec<usize>,
    ) {
        let CollectionWrite {
            state,
            key,
            kind,
            changes,
        } = write;
        let hash = keys.hash(operator, state, &key);
        let i = self.hash_index(hash, operator, state, KeyKind::State);
        let size = (changes.size > 0).then(|| changes.size.to_string());
        let elements = keys.collection(operator, state, &key);
        self.hashes[i].fields.insert(key, size);
        let j = self.hash_index(elements, operator, state, KeyKind::Collection(kind));
        self.hashes[j].merge(kind, changes);
        touched.extend([i, j]);
    }
}

/// Moves every store's changes into `pending`; `touched` gets the keys written.
pub(super) fn drain_into(
    stores: &Stores,
    keys: &StateKeys,
    pending: &mut Pending,
    touched: &mut Vec<usize>,
) -> Result<(), Error> {
    for (op, store) in stores {
        store
            .borrow_mut()
            .drain_collections(op.as_str(), &mut |w| {
                pending.collection(keys, op.as_str(), w, touched);
            })?;
        // Unsharded, every field of one (operator, state) goes to the same hash: remember
        // the last one instead of formatting and looking up its key per field.
        let mut last: Option<(String, usize)> = None;
        store
            .borrow_mut()
            .drain(op.as_str(), &mut |(state, field, value)| {
                if let Some((s, i)) = &last {
                    if keys.single_hash() && s == state {
                        let i = *i;
                        pending.hashes[i].fields.insert(field, value);
                        touched.push(i);
                        return;
                    }
                }
                let key = keys.hash(op.as_str(), state, &field);
                let i = pending.hash_index(key, op.as_str(), state, KeyKind::State);
                pending.hashes[i].fields.insert(field, value);
                touched.push(i);
                last = Some((state.to_string(), i));
            })?;
    }
    Ok(())
}
