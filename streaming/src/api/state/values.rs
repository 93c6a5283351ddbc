//! The per-key values of one state: a hash table whose lookups reuse the key's hash, and
//! the place of one key in it.

use hashbrown::hash_table::{Entry, HashTable};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::ptr::NonNull;

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

    /// Removes the value of an owned key (evicting it from memory).
    pub(crate) fn remove_owned(&mut self, key: &K) {
        let hash = self.hasher.hash_one(key);
        if let Ok(o) = self.table.find_entry(hash, |(k, _)| k == key) {
            o.remove();
        }
    }

    /// Removes the value of an owned key and returns it.
    pub(crate) fn take_owned(&mut self, key: &K) -> Option<V> {
        let hash = self.hasher.hash_one(key);
        let o = self.table.find_entry(hash, |(k, _)| k == key).ok()?;
        Some(o.remove().0 .1)
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
/// reads and writes reuse it.
///
/// It holds the table as a pointer with the exclusive borrow's lifetime (so nothing else
/// reads or moves the table while the handle lives) and the key's element as a pointer
/// into it, derived from that pointer; every change of the table goes through the handle
/// and sets the element pointer anew.
pub(crate) struct KeyEntry<'s, K, V> {
    values: NonNull<KeyedValues<K, V>>,
    /// The key's element in the table, `None` when the key is absent.
    found: Option<NonNull<(K, V)>>,
    key: KeyRef<'s, K>,
    _borrow: PhantomData<&'s mut KeyedValues<K, V>>,
}

// SAFETY: a `KeyEntry` is an exclusive borrow of the table (and a shared one of the key),
// so it may cross threads when `&'s mut KeyedValues<K, V>` and `&K` may.
unsafe impl<K: Send + Sync, V: Send> Send for KeyEntry<'_, K, V> {}
// SAFETY: as for `Send`: shared access to a `KeyEntry` only reads through it.
unsafe impl<K: Sync, V: Sync> Sync for KeyEntry<'_, K, V> {}

impl<K: fmt::Debug, V> fmt::Debug for KeyEntry<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyEntry")
            .field("key", &self.key)
            .field("present", &self.found.is_some())
            .finish()
    }
}

impl<'s, K: Hash + Eq + Clone, V> KeyEntry<'s, K, V> {
    /// Looks `key` up in `values`.
    #[inline]
    pub(crate) fn open(values: &'s mut KeyedValues<K, V>, key: KeyRef<'s, K>) -> Self {
        let mut values = NonNull::from(values);
        // SAFETY: `values` comes from an exclusive borrow for `'s`, which the entry keeps.
        let table = unsafe { &mut values.as_mut().table };
        let found = table
            .find_mut(key.hash, |(k, _)| k == key.key)
            .map(NonNull::from);
        KeyEntry {
            values,
            found,
            key,
            _borrow: PhantomData,
        }
    }

    /// The key's value.
    #[inline]
    pub(crate) fn get(&self) -> Option<&V> {
        // SAFETY: `found` points to an element of the table the entry borrows exclusively
        // for `'s`, derived from the entry's pointer to it; the table has not changed
        // since `found` was set (every change goes through `self` and sets it anew), and
        // `&self` keeps it from changing while the returned reference lives.
        self.found.map(|e| unsafe { &e.as_ref().1 })
    }

    /// The key's value, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut V> {
        // SAFETY: as in `get`; `&mut self` makes the reference exclusive.
        self.found.map(|mut e| unsafe { &mut e.as_mut().1 })
    }

    /// The key's value, inserted with `default()` when absent.
    #[inline]
    pub(crate) fn get_or_insert_with(&mut self, default: impl FnOnce() -> V) -> &mut V {
        if self.found.is_none() {
            self.insert_new(default());
        }
        self.get_mut().expect("inserted above")
    }

    /// Sets the key's value.
    #[inline]
    pub(crate) fn set(&mut self, value: V) {
        match self.get_mut() {
            Some(v) => *v = value,
            None => self.insert_new(value),
        }
    }

    /// Removes the key's value; returns it.
    #[inline]
    pub(crate) fn remove(&mut self) -> Option<V> {
        self.found?;
        self.found = None;
        let key = self.key.key;
        // SAFETY: the entry borrows the table exclusively for `'s`; `found` (the only
        // other pointer into it) is cleared above.
        let values = unsafe { self.values.as_mut() };
        match values.table.find_entry(self.key.hash, |(k, _)| k == key) {
            Ok(entry) => Some(entry.remove().0 .1),
            Err(_) => unreachable!("the key was found when the handle opened"),
        }
    }

    /// Inserts the absent key with `value` (out of line, and not through `&mut self`,
    /// so that the entry itself can stay in registers).
    #[inline]
    fn insert_new(&mut self, value: V) {
        self.found = Some(Self::insert_absent(self.values, self.key, value));
    }

    #[cold]
    #[inline(never)]
    fn insert_absent(
        mut values: NonNull<KeyedValues<K, V>>,
        key: KeyRef<'s, K>,
        value: V,
    ) -> NonNull<(K, V)> {
        // SAFETY: as in `remove`: the entry's exclusive borrow of the table, and the caller
        // sets `found` anew from the result.
        let values = unsafe { values.as_mut() };
        let hasher = &values.hasher;
        let entry = values
            .table
            .insert_unique(key.hash, (key.key.clone(), value), |(k, _)| {
                hasher.hash_one(k)
            });
        NonNull::from(entry.into_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::{KeyEntry, KeyRef, KeyedValues};
    use std::collections::hash_map::RandomState;

    fn entry<'s>(
        values: &'s mut KeyedValues<String, u64>,
        key: &'s String,
    ) -> KeyEntry<'s, String, u64> {
        let hash = values.hash(key);
        KeyEntry::open(values, KeyRef { key, hash })
    }

    /// Every operation of an entry, with enough keys inserted that the table grows (moves
    /// its elements) between entries; `cargo +nightly miri test` checks the pointers.
    #[test]
    fn an_entry_reads_writes_inserts_and_removes_its_key() {
        let mut values = KeyedValues::with_hasher(RandomState::new());
        let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        for (i, key) in keys.iter().enumerate() {
            let mut e = entry(&mut values, key);
            assert_eq!(e.get(), None);
            e.set(i as u64);
            assert_eq!(e.get(), Some(&(i as u64)));
            *e.get_mut().unwrap() += 1;
            assert_eq!(*e.get_or_insert_with(|| 0), i as u64 + 1);
        }
        for (i, key) in keys.iter().enumerate() {
            let mut e = entry(&mut values, key);
            assert_eq!(e.get(), Some(&(i as u64 + 1)));
            if i % 2 == 0 {
                assert_eq!(e.remove(), Some(i as u64 + 1));
                assert_eq!(e.get(), None);
                assert_eq!(e.remove(), None);
                assert_eq!(*e.get_or_insert_with(|| 7), 7);
                assert_eq!(e.remove(), Some(7));
            }
        }
        for (i, key) in keys.iter().enumerate() {
            let expected = (i % 2 == 1).then_some(i as u64 + 1);
            assert_eq!(values.get_owned(key).copied(), expected, "{key}");
        }
    }
}
