//! The per-key values of one state: a hash map whose lookups reuse the key's hash.

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
    map: hashbrown::HashMap<K, V, RandomState>,
}

impl<K, V> fmt::Debug for KeyedValues<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyedValues({} keys)", self.map.len())
    }
}

impl<K: Hash + Eq, V> KeyedValues<K, V> {
    /// An empty table hashing with `hasher` (the operator's).
    pub(crate) fn with_hasher(hasher: RandomState) -> Self {
        KeyedValues {
            map: hashbrown::HashMap::with_hasher(hasher),
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: KeyRef<'_, K>) -> Option<&V> {
        self.map
            .raw_entry()
            .from_key_hashed_nocheck(key.hash, key.key)
            .map(|(_, v)| v)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: KeyRef<'_, K>) -> Option<&mut V> {
        match self
            .map
            .raw_entry_mut()
            .from_key_hashed_nocheck(key.hash, key.key)
        {
            hashbrown::hash_map::RawEntryMut::Occupied(o) => Some(o.into_mut()),
            hashbrown::hash_map::RawEntryMut::Vacant(_) => None,
        }
    }

    /// The value of `key`, inserted with `default()` when absent.
    #[inline]
    pub(crate) fn get_or_insert_with(
        &mut self,
        key: KeyRef<'_, K>,
        default: impl FnOnce() -> V,
    ) -> &mut V
    where
        K: Clone,
    {
        self.map
            .raw_entry_mut()
            .from_key_hashed_nocheck(key.hash, key.key)
            .or_insert_with(|| (key.key.clone(), default()))
            .1
    }

    /// Sets `key`'s value.
    #[inline]
    pub(crate) fn insert(&mut self, key: KeyRef<'_, K>, value: V)
    where
        K: Clone,
    {
        match self
            .map
            .raw_entry_mut()
            .from_key_hashed_nocheck(key.hash, key.key)
        {
            hashbrown::hash_map::RawEntryMut::Occupied(mut o) => *o.get_mut() = value,
            hashbrown::hash_map::RawEntryMut::Vacant(v) => {
                v.insert_hashed_nocheck(key.hash, key.key.clone(), value);
            }
        }
    }

    /// Removes `key`'s value; returns it.
    #[inline]
    pub(crate) fn remove(&mut self, key: KeyRef<'_, K>) -> Option<V> {
        match self
            .map
            .raw_entry_mut()
            .from_key_hashed_nocheck(key.hash, key.key)
        {
            hashbrown::hash_map::RawEntryMut::Occupied(o) => Some(o.remove()),
            hashbrown::hash_map::RawEntryMut::Vacant(_) => None,
        }
    }

    /// Sets the value of an owned key (restoring stored state).
    pub(crate) fn insert_owned(&mut self, key: K, value: V) {
        self.map.insert(key, value);
    }

    /// The value of `key`, hashing it (writing state back).
    pub(crate) fn get_owned(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// The hash of `key` as this table computes it.
    #[inline]
    pub(crate) fn hash_of(hasher: &RandomState, key: &K) -> u64 {
        hasher.hash_one(key)
    }
}
