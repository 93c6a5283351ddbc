//! The handles a process function gets from `ctx.state(..)`: one state of the current key.
//!
//! Opening a handle looks the key up once; its reads and writes reuse that place. Reading
//! never marks a state changed; every call that changes it does, so an engine that writes
//! state back writes exactly the (state, key) pairs a record changed. A collection handle
//! opened by such an engine also logs which elements changed (`delta`), so that only
//! those are written; opened by the memory engine it logs nothing.

use super::elements::{Cleared, ElementChanges, ListChanges};
use super::values::{Changed, KeyEntry};
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// The value of a [`ValueStateDescriptor`](super::ValueStateDescriptor) for the current key.
#[derive(Debug)]
pub struct ValueState<'s, K, T> {
    pub(crate) entry: KeyEntry<'s, K, T>,
    pub(crate) default: &'s T,
    pub(crate) changed: Changed<'s>,
}

impl<K: Hash + Eq + Clone, T: Clone> ValueState<'_, K, T> {
    /// The current value, or the descriptor's default when unset.
    #[inline]
    pub fn value(&self) -> T {
        self.entry.get().unwrap_or(self.default).clone()
    }

    /// The stored value, `None` when unset.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        self.entry.get()
    }

    /// Replaces the value.
    #[inline]
    pub fn update(&mut self, value: T) {
        self.entry.set(value);
        self.changed.mark();
    }

    /// The stored value, to change in place (`None` when unset); a value found counts as
    /// changed.
    #[inline]
    pub(crate) fn get_mut(&mut self) -> Option<&mut T> {
        let value = self.entry.get_mut()?;
        self.changed.mark();
        Some(value)
    }

    /// The stored value, to change in place, set to the default first when unset; it
    /// counts as changed.
    #[inline]
    pub(crate) fn get_mut_or_default(&mut self) -> &mut T {
        self.changed.mark();
        let default = self.default;
        self.entry.get_or_insert_with(|| default.clone())
    }

    /// Removes the value; [`value`](Self::value) gives the default again.
    pub fn clear(&mut self) {
        if self.entry.remove().is_some() {
            self.changed.mark();
        }
    }
}

/// A per-key collection handle: the key's collection and the record's change mask.
macro_rules! collection_handle {
    ($(#[$doc:meta])* $name:ident<$($p:ident),*> of $coll:ty, changes $delta:ty) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<'s, K, $($p),*> {
            pub(crate) entry: KeyEntry<'s, K, $coll>,
            pub(crate) changed: Changed<'s>,
            /// The key's changed elements, when the engine writes changes back.
            pub(crate) delta: Option<KeyEntry<'s, K, $delta>>,
        }

        impl<K: Hash + Eq + Clone, $($p),*> $name<'_, K, $($p),*> {
            /// Removes every element.
            pub fn clear(&mut self) {
                if self.entry.remove().is_some() {
                    self.changed.mark();
                    if let Some(d) = &mut self.delta {
                        d.get_or_insert_with(Default::default).clear();
                    }
                }
            }
        }
    };
}

collection_handle!(
    /// The list of a [`ListStateDescriptor`](super::ListStateDescriptor) for the current key.
    ListState<T> of Vec<T>, changes ListChanges
);
collection_handle!(
    /// The map of a [`MapStateDescriptor`](super::MapStateDescriptor) for the current key.
    MapState<MK, MV> of HashMap<MK, MV>, changes ElementChanges<MK>
);
collection_handle!(
    /// The set of a [`SetStateDescriptor`](super::SetStateDescriptor) for the current key.
    SetState<T> of HashSet<T>, changes ElementChanges<T>
);

impl<K: Hash + Eq + Clone, T> ListState<'_, K, T> {
    /// The elements in insertion order (empty when unset).
    pub fn get(&self) -> &[T] {
        self.entry.get().map_or(&[], Vec::as_slice)
    }

    /// Appends one element.
    pub fn add(&mut self, value: T) {
        let list = self.entry.get_or_insert_with(Vec::new);
        if let Some(d) = &mut self.delta {
            let len = list.len();
            d.get_or_insert_with(|| ListChanges {
                replaced: false,
                from: len,
            });
        }
        list.push(value);
        self.changed.mark();
    }

    /// Keeps only the elements for which `keep` returns `true`, in their order. Removing
    /// nothing changes nothing; removing some writes the whole list back (as
    /// [`update`](Self::update)); removing all clears it.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let Some(list) = self.entry.get_mut() else {
            return;
        };
        let before = list.len();
        list.retain(|v| keep(v));
        if list.len() == before {
            return;
        }
        if list.is_empty() {
            self.clear();
            return;
        }
        self.changed.mark();
        if let Some(d) = &mut self.delta {
            d.get_or_insert_with(Default::default).replaced = true;
        }
    }

    /// Replaces the whole list.
    pub fn update(&mut self, values: Vec<T>) {
        if values.is_empty() {
            self.clear();
        } else {
            self.entry.set(values);
            self.changed.mark();
            if let Some(d) = &mut self.delta {
                d.get_or_insert_with(Default::default).replaced = true;
            }
        }
    }
}

impl<K: Hash + Eq + Clone, MK: Hash + Eq + Clone, MV> MapState<'_, K, MK, MV> {
    /// The value under `map_key`.
    pub fn get(&self, map_key: &MK) -> Option<&MV> {
        self.entry.get().and_then(|m| m.get(map_key))
    }

    /// Whether `map_key` is present.
    pub fn contains(&self, map_key: &MK) -> bool {
        self.get(map_key).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn put(&mut self, map_key: MK, value: MV) -> Option<MV> {
        self.changed.mark();
        if let Some(d) = &mut self.delta {
            d.get_or_insert_with(Default::default).touch(&map_key);
        }
        self.entry
            .get_or_insert_with(HashMap::new)
            .insert(map_key, value)
    }

    /// Removes `map_key`; returns its value.
    pub fn remove(&mut self, map_key: &MK) -> Option<MV> {
        let m = self.entry.get_mut()?;
        let v = m.remove(map_key)?;
        if m.is_empty() {
            self.entry.remove();
        }
        self.changed.mark();
        if let Some(d) = &mut self.delta {
            d.get_or_insert_with(Default::default).touch(map_key);
        }
        Some(v)
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&MK, &MV)> {
        self.entry.get().into_iter().flatten()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entry.get().map_or(0, HashMap::len)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Hash + Eq + Clone, T: Hash + Eq + Clone> SetState<'_, K, T> {
    /// Adds `value`; returns whether it was new.
    pub fn add(&mut self, value: T) -> bool {
        let set = self.entry.get_or_insert_with(HashSet::new);
        let added = match &mut self.delta {
            None => set.insert(value),
            Some(d) => {
                let added = !set.contains(&value);
                if added {
                    d.get_or_insert_with(Default::default).touch(&value);
                    set.insert(value);
                }
                added
            }
        };
        if added {
            self.changed.mark();
        }
        added
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: &T) -> bool {
        self.entry.get().is_some_and(|s| s.contains(value))
    }

    /// Removes `value`; returns whether it was present.
    pub fn remove(&mut self, value: &T) -> bool {
        let Some(s) = self.entry.get_mut() else {
            return false;
        };
        if !s.remove(value) {
            return false;
        }
        if s.is_empty() {
            self.entry.remove();
        }
        self.changed.mark();
        if let Some(d) = &mut self.delta {
            d.get_or_insert_with(Default::default).touch(value);
        }
        true
    }

    /// The members, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.entry.get().into_iter().flatten()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.entry.get().map_or(0, HashSet::len)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
