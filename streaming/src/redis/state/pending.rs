//! A batch's state writes, collected from the chain's stores, per state hash.

use crate::api::state::{CollectionKind, EncodedChanges};
use crate::redis::state::chain::Stores;
use crate::redis::state::keys::StateKeys;
use crate::redis::state::persist::CollectionWrite;
use crate::Error;
use std::collections::{HashMap, HashSet};

/// What a written Redis key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::redis) enum KeyKind {
    /// A state hash (listed in the partition's state index): field = key as JSON.
    State,
    /// One key's collection: a hash (map), a set or a list.
    Collection(CollectionKind),
}

/// A key's field writes in a batch, in order: field (key as JSON, map key or set member)
/// → value (`None` = delete; a set member's value is unused). A later write of a field
/// replaces an earlier one. Kept as a list (no hashing per write): one drain writes each
/// state field once, so duplicates are only possible once a second drain or a collection
/// merge wrote to the key; [`dedup`](Self::dedup) then keeps each field's last write.
#[derive(Default)]
pub(in crate::redis) struct FieldWrites {
    list: Vec<(String, Option<String>)>,
    /// The drain round that last wrote (0: none yet).
    round: u32,
    /// A field may occur more than once in `list`.
    dup: bool,
}

impl FieldWrites {
    /// Appends a write of drain round `round` (see [`Pending`]).
    fn push(&mut self, round: u32, field: String, value: Option<String>) {
        if self.round != round {
            self.dup |= self.round != 0;
            self.round = round;
        }
        self.list.push((field, value));
    }

    /// Appends writes that may repeat fields (a collection merge).
    fn extend(&mut self, writes: impl IntoIterator<Item = (String, Option<String>)>) {
        self.dup = true;
        self.list.extend(writes);
    }

    fn clear(&mut self) {
        self.list.clear();
        self.dup = false;
    }

    /// Keeps only each field's last write (in the order of those last writes).
    fn dedup(&mut self) {
        if !std::mem::take(&mut self.dup) {
            return;
        }
        let n = self.list.len();
        let mut seen = HashSet::with_capacity(n);
        // Last writes first: whether each is the last write of its field.
        let last: Vec<bool> = (self.list.iter().rev())
            .map(|(f, _)| seen.insert(f.as_str()))
            .collect();
        let mut i = n;
        self.list.retain(|_| {
            i -= 1;
            last[i]
        });
    }

    pub(in crate::redis) fn len(&self) -> usize {
        self.list.len()
    }

    pub(in crate::redis) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The writes (each field once after [`Pending::dedup`]).
    pub(in crate::redis) fn iter(&self) -> impl Iterator<Item = (&String, &Option<String>)> {
        self.list.iter().map(|(f, v)| (f, v))
    }

    pub(in crate::redis) fn keys(&self) -> impl Iterator<Item = &String> {
        self.list.iter().map(|(f, _)| f)
    }

    pub(in crate::redis) fn values(&self) -> impl Iterator<Item = &Option<String>> {
        self.list.iter().map(|(_, v)| v)
    }
}

/// One Redis key's writes in a batch: its field writes, list elements to append, and
/// whether the key is deleted first.
pub(in crate::redis) struct PendingHash {
    pub(in crate::redis) key: String,
    pub(in crate::redis) operator: String,
    pub(in crate::redis) state: String,
    pub(in crate::redis) kind: KeyKind,
    pub(in crate::redis) replace: bool,
    pub(in crate::redis) fields: FieldWrites,
    pub(in crate::redis) appends: Vec<String>,
}

impl PendingHash {
    /// Whether the commit writes anything to the key.
    pub(in crate::redis) fn writes(&self) -> bool {
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
                let pairs = std::iter::from_fn(|| Some((it.next()?, Some(it.next()?))));
                self.fields.extend(pairs);
            }
            CollectionKind::Set => {
                (self.fields).extend(changes.added.into_iter().map(|m| (m, Some(String::new()))));
            }
        }
        self.fields
            .extend(changes.removed.into_iter().map(|f| (f, None)));
    }
}

/// A batch's state writes, per hash (later writes of a field replace earlier ones; call
/// [`dedup`](Self::dedup) before reading them).
#[derive(Default)]
pub(in crate::redis) struct Pending {
    pub(in crate::redis) hashes: Vec<PendingHash>,
    index: HashMap<String, usize>,
    /// How many drains wrote into it (the current drain's round).
    round: u32,
}

impl Pending {
    /// Keeps each field's last write only.
    pub(in crate::redis) fn dedup(&mut self) {
        for h in &mut self.hashes {
            h.fields.dedup();
        }
    }

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
            fields: FieldWrites::default(),
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
        self.hashes[i].fields.push(self.round, key, size);
        let j = self.hash_index(elements, operator, state, KeyKind::Collection(kind));
        self.hashes[j].merge(kind, changes);
        touched.extend([i, j]);
    }
}

/// Moves every store's changes into `pending`; `touched` gets the keys written.
pub(in crate::redis) fn drain_into(
    stores: &Stores,
    keys: &StateKeys,
    pending: &mut Pending,
    touched: &mut Vec<usize>,
) -> Result<(), Error> {
    pending.round += 1;
    let round = pending.round;
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
                        pending.hashes[i].fields.push(round, field, value);
                        touched.push(i);
                        return;
                    }
                }
                let key = keys.hash(op.as_str(), state, &field);
                let i = pending.hash_index(key, op.as_str(), state, KeyKind::State);
                pending.hashes[i].fields.push(round, field, value);
                touched.push(i);
                last = Some((state.to_string(), i));
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::redis::state::pending::FieldWrites;

    fn writes(w: &FieldWrites) -> Vec<(&str, Option<&str>)> {
        w.iter().map(|(f, v)| (f.as_str(), v.as_deref())).collect()
    }

    fn s(v: &str) -> String {
        v.to_string()
    }

    #[test]
    fn one_drain_keeps_its_writes_as_they_came() {
        let mut w = FieldWrites::default();
        w.push(1, s("a"), Some(s("1")));
        w.push(1, s("b"), None);
        w.dedup();
        assert_eq!(writes(&w), [("a", Some("1")), ("b", None)]);
    }

    #[test]
    fn a_later_drain_replaces_a_fields_earlier_write() {
        let mut w = FieldWrites::default();
        w.push(1, s("a"), Some(s("1")));
        w.push(1, s("b"), Some(s("2")));
        w.push(2, s("a"), None);
        w.push(3, s("c"), Some(s("3")));
        w.push(3, s("b"), Some(s("4")));
        w.dedup();
        assert_eq!(
            writes(&w),
            [("a", None), ("c", Some("3")), ("b", Some("4"))]
        );
    }

    #[test]
    fn a_merge_that_repeats_a_field_keeps_its_last_write() {
        let mut w = FieldWrites::default();
        w.extend([(s("m"), Some(s("1"))), (s("n"), Some(s("2")))]);
        w.extend([(s("m"), None)]);
        w.dedup();
        assert_eq!(writes(&w), [("n", Some("2")), ("m", None)]);
    }
}
