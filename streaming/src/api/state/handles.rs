//! The handles a process function gets from `ctx.state(..)`: one state of the current key.
//!
//! Reading never marks a state changed; every call that changes it does, so an engine that
//! writes state back writes exactly the (state, key) pairs a record changed.

use super::values::{Changed, KeyRef, KeyedValues};
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// The value of a [`ValueStateDescriptor`](super::ValueStateDescriptor) for the current key.
#[derive(Debug)]
pub struct ValueState<'s, K, T> {
    pub(crate) values: &'s mut KeyedValues<K, T>,
    pub(crate) key: KeyRef<'s, K>,
    pub(crate) default: &'s T,
    pub(crate) changed: Changed<'s>,
}

impl<K: Hash + Eq + Clone, T: Clone> ValueState<'_, K, T> {
    /// The current value, or the descriptor's default when unset.
    #[inline]
    pub fn value(&self) -> T {
        self.values.get(self.key).unwrap_or(self.default).clone()
    }

    /// The stored value, `None` when unset.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        self.values.get(self.key)
    }

    /// Replaces the value.
    #[inline]
    pub fn update(&mut self, value: T) {
        self.values.insert(self.key, value);
        self.changed.mark();
    }

    /// Removes the value; [`value`](Self::value) gives the default again.
    pub fn clear(&mut self) {
        if self.values.remove(self.key).is_some() {
            self.changed.mark();
        }
    }
}

/// A per-key collection handle: the key's collection and the record's change mask.
macro_rules! collection_handle {
    ($(#[$doc:meta])* $name:ident<$($p:ident),*> of $coll:ty) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<'s, K, $($p),*> {
            pub(crate) values: &'s mut KeyedValues<K, $coll>,
            pub(crate) key: KeyRef<'s, K>,
            pub(crate) changed: Changed<'s>,
        }

        impl<K: Hash + Eq + Clone, $($p),*> $name<'_, K, $($p),*> {
            /// Removes every element.
            pub fn clear(&mut self) {
                if self.values.remove(self.key).is_some() {
                    self.changed.mark();
                }
            }

            /// The key's collection; `None` when empty.
            fn current(&self) -> Option<&$coll> {
                self.values.get(self.key)
            }
        }
    };
}

collection_handle!(
    /// The list of a [`ListStateDescriptor`](super::ListStateDescriptor) for the current key.
    ListState<T> of Vec<T>
);
collection_handle!(
    /// The map of a [`MapStateDescriptor`](super::MapStateDescriptor) for the current key.
    MapState<MK, MV> of HashMap<MK, MV>
);
collection_handle!(
    /// The set of a [`SetStateDescriptor`](super::SetStateDescriptor) for the current key.
    SetState<T> of HashSet<T>
);

impl<K: Hash + Eq + Clone, T> ListState<'_, K, T> {
    /// The elements in insertion order (empty when unset).
    pub fn get(&self) -> &[T] {
        self.current().map_or(&[], Vec::as_slice)
    }

    /// Appends one element.
    pub fn add(&mut self, value: T) {
        self.values
            .get_or_insert_with(self.key, Vec::new)
            .push(value);
        self.changed.mark();
    }

    /// Replaces the whole list.
    pub fn update(&mut self, values: Vec<T>) {
        if values.is_empty() {
            self.clear();
        } else {
            self.values.insert(self.key, values);
            self.changed.mark();
        }
    }
}

impl<K: Hash + Eq + Clone, MK: Hash + Eq, MV> MapState<'_, K, MK, MV> {
    /// The value under `map_key`.
    pub fn get(&self, map_key: &MK) -> Option<&MV> {
        self.current().and_then(|m| m.get(map_key))
    }

    /// Whether `map_key` is present.
    pub fn contains(&self, map_key: &MK) -> bool {
        self.get(map_key).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn put(&mut self, map_key: MK, value: MV) -> Option<MV> {
        self.changed.mark();
        self.values
            .get_or_insert_with(self.key, HashMap::new)
            .insert(map_key, value)
    }

    /// Removes `map_key`; returns its value.
    pub fn remove(&mut self, map_key: &MK) -> Option<MV> {
        let m = self.values.get_mut(self.key)?;
        let v = m.remove(map_key)?;
        if m.is_empty() {
            self.values.remove(self.key);
        }
        self.changed.mark();
        Some(v)
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&MK, &MV)> {
        self.current().into_iter().flatten()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.current().map_or(0, HashMap::len)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Hash + Eq + Clone, T: Hash + Eq> SetState<'_, K, T> {
    /// Adds `value`; returns whether it was new.
    pub fn add(&mut self, value: T) -> bool {
        let added = self
            .values
            .get_or_insert_with(self.key, HashSet::new)
            .insert(value);
        if added {
            self.changed.mark();
        }
        added
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: &T) -> bool {
        self.current().is_some_and(|s| s.contains(value))
    }

    /// Removes `value`; returns whether it was present.
    pub fn remove(&mut self, value: &T) -> bool {
        let Some(s) = self.values.get_mut(self.key) else {
            return false;
        };
        if !s.remove(value) {
            return false;
        }
        if s.is_empty() {
            self.values.remove(self.key);
        }
        self.changed.mark();
        true
    }

    /// The members, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.current().into_iter().flatten()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.current().map_or(0, HashSet::len)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
