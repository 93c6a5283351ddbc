//! The per-key values of one state: a hash table whose lookups reuse the key's hash, and
//! the place of one key in it.

use hashbrown::hash_table::{Entry, HashTable, OccupiedEntry};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// The current key and its hash, computed once per record for every state it opens.
pub struct KeyRef<'a, K> {
    pub(crate) key: &'a K,
    pub(crate) hash: u64,
}

impl<K> Clone for KeyRef<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for KeyRef<'_, K> {}

impl<K: fmt::Debug> fmt::Debug for KeyRef<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.key.fmt(f)
    }
}

/// Notes in the record's change mask that a state changed (bit `i` for the operator's
/// `i`-th state; states from the 64th on share the last bit).
#[derive(Debug)]
pub struct Changed<'a> {
    pub(crate) mask: &'a mut u64,
    pub(crate) bit: u64,
}

impl Changed<'_> {
    #[inline(always)]
    pub(crate) fn mark(&mut self) {
        *self.mask |= self.bit;
    }
}

/// The bit of the `slot`-th state in a change mask.
#[inline(always)]
pub(crate) fn change_bit(slot: usize) -> u64 {
    1 << slot.min(63)
}

/// One state's value per key. Lookups take the key's hash from the [`KeyRef`], so all
/// states a record opens share one hash of its key. The hasher is the standard library's
/// (SipHash with random keys), one per operator.
#[derive(Clone)]
pub struct KeyedValues<K, V> {
    table: HashTable<(K, V)>,
    hasher: RandomState,
}

impl<K, V> fmt::Debug for KeyedValues<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyedValues({} keys)", self.table.len())
    }
}

impl<K: Hash + Eq, V> KeyedValues<K, V> {
    /// An empty table hashing with `hasher` (the operator's).
    pub(crate) fn with_hasher(hasher: RandomState) -> Self {
        KeyedValues {
            table: HashTable::new(),
            hasher,
        }
    }

    /// Sets the value of an owned key (restoring stored state).
    pub(crate) fn insert_owned(&mut self, key: K, value: V) {
        let hash = self.hasher.hash_one(&key);
        let hasher = &self.hasher;
        match self
            .table
            .entry(hash, |(k, _)| *k == key, |(k, _)| hasher.hash_one(k))
        {
            Entry::Occupied(mut o) => o.get_mut().1 = value,
            Entry::Vacant(v) => {
                v.insert((key, value));
            }
        }
    }

    /// The value of `key`, hashing it (writing state back).
    pub(crate) fn get_owned(&self, key: &K) -> Option<&V> {
        let hash = self.hasher.hash_one(key);
        self.table.find(hash, |(k, _)| k == key).map(|(_, v)| v)
    }

    /// The hash of `key` (the same in every table of the operator: they share its hasher).
    #[inline]
    pub(crate) fn hash(&self, key: &K) -> u64 {
        self.hasher.hash_one(key)
    }
}

/// One key's place in a state's table, looked up once when a handle opens: the handle's
/// reads and writes reuse it (the handle borrows the table, so nothing else moves it).
pub(crate) struct KeyEntry<'s, K, V> {
    place: Option<Place<'s, K, V>>,
    hasher: &'s RandomState,
    key: KeyRef<'s, K>,
}

/// The key's entry, or the table to insert it into.
enum Place<'s, K, V> {
    Occupied(OccupiedEntry<'s, (K, V)>),
    Vacant(&'s mut HashTable<(K, V)>),
}

impl<K: fmt::Debug, V> fmt::Debug for KeyEntry<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyEntry")
            .field("key", &self.key)
            .field("present", &matches!(self.place, Some(Place::Occupied(_))))
            .finish()
    }
}

impl<'s, K: Hash + Eq + Clone, V> KeyEntry<'s, K, V> {
    /// Looks `key` up in `values`.
    #[inline]
    pub(crate) fn open(values: &'s mut KeyedValues<K, V>, key: KeyRef<'s, K>) -> Self {
        let place = match values.table.find_entry(key.hash, |(k, _)| k == key.key) {
            Ok(entry) => Place::Occupied(entry),
            Err(absent) => Place::Vacant(absent.into_table()),
        };
        KeyEntry {
            place: Some(place),
            hasher: &values.hasher,
            key,
        }
    }

    /// The key's value.
    #[inline]
    pub(crate) fn get(&self) -> Option<&V> {
        match &self.place {
            Some(Place::Occupied(entry)) => Some(&entry.get().1),
            _ => None,
        }
    }

    /// The key's value, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut V> {
        match &mut self.place {
            Some(Place::Occupied(entry)) => Some(&mut entry.get_mut().1),
            _ => None,
        }
    }

    /// The key's value, inserted with `default()` when absent.
    #[inline]
    pub(crate) fn get_or_insert_with(&mut self, default: impl FnOnce() -> V) -> &mut V {
        if let Some(Place::Vacant(_)) = self.place {
            self.insert_new(default());
        }
        match &mut self.place {
            Some(Place::Occupied(entry)) => &mut entry.get_mut().1,
            _ => unreachable!("inserted above"),
        }
    }

    /// Sets the key's value.
    #[inline]
    pub(crate) fn set(&mut self, value: V) {
        match &mut self.place {
            Some(Place::Occupied(entry)) => entry.get_mut().1 = value,
            _ => self.insert_new(value),
        }
    }

    /// Removes the key's value; returns it.
    #[inline]
    pub(crate) fn remove(&mut self) -> Option<V> {
        match self.place.take() {
            Some(Place::Occupied(entry)) => {
                let ((_, v), vacant) = entry.remove();
                self.place = Some(Place::Vacant(vacant.into_table()));
                Some(v)
            }
            place => {
                self.place = place;
                None
            }
        }
    }

    fn insert_new(&mut self, value: V) {
        let Some(Place::Vacant(table)) = self.place.take() else {
            unreachable!("inserting a present key");
        };
        let hasher = self.hasher;
        let entry = table.insert_unique(self.key.hash, (self.key.key.clone(), value), |(k, _)| {
            hasher.hash_one(k)
        });
        self.place = Some(Place::Occupied(entry));
    }
}
