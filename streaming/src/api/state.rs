//! Keyed state: descriptors, per-key handles and the in-memory backend.
//!
//! State is scoped to (operator, state name, current key). Descriptors are `const`, so a
//! pipeline declares them once:
//!
//! ```
//! use streaming::api::ValueStateDescriptor;
//! const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 0);
//! ```

use crate::Error;
use std::any::{type_name, Any};
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::marker::PhantomData;

/// Describes one named keyed state and how to open it for a key. Implemented by
/// [`ValueStateDescriptor`], [`ListStateDescriptor`], [`MapStateDescriptor`] and
/// [`SetStateDescriptor`].
pub trait StateDescriptor<K> {
    /// The per-operator table holding this state for every key.
    #[doc(hidden)]
    type Table: Clone + 'static;
    /// The handle for one key.
    type Handle<'s>
    where
        Self: 's,
        K: 's;

    /// The state's name, unique within its operator.
    fn name(&self) -> &'static str;

    #[doc(hidden)]
    fn new_table(&self) -> Self::Table;

    #[doc(hidden)]
    fn open<'s>(&'s self, table: &'s mut Self::Table, key: &'s K) -> Self::Handle<'s>;
}

/// A single value per key with a default (seed `StateDescriptor` + `ValueState`).
#[derive(Debug)]
pub struct ValueStateDescriptor<T> {
    name: &'static str,
    default: T,
}

impl<T> ValueStateDescriptor<T> {
    /// A value state named `name` whose value is `default` until first updated.
    pub const fn new(name: &'static str, default: T) -> Self {
        ValueStateDescriptor { name, default }
    }
}

impl<K: Hash + Eq + Clone + 'static, T: Clone + 'static> StateDescriptor<K>
    for ValueStateDescriptor<T>
{
    type Table = HashMap<K, T>;
    type Handle<'s>
        = ValueState<'s, K, T>
    where
        T: 's,
        K: 's;

    fn name(&self) -> &'static str {
        self.name
    }
    fn new_table(&self) -> Self::Table {
        HashMap::new()
    }
    fn open<'s>(&'s self, table: &'s mut Self::Table, key: &'s K) -> ValueState<'s, K, T> {
        ValueState {
            table,
            key,
            default: &self.default,
        }
    }
}

/// The value of a [`ValueStateDescriptor`] for the current key.
#[derive(Debug)]
pub struct ValueState<'s, K, T> {
    table: &'s mut HashMap<K, T>,
    key: &'s K,
    default: &'s T,
}

impl<K: Hash + Eq + Clone, T: Clone> ValueState<'_, K, T> {
    /// The current value, or the descriptor's default when unset.
    pub fn value(&self) -> T {
        self.table.get(self.key).unwrap_or(self.default).clone()
    }

    /// The stored value, `None` when unset.
    pub fn get(&self) -> Option<&T> {
        self.table.get(self.key)
    }

    /// Replaces the value.
    pub fn update(&mut self, value: T) {
        match self.table.get_mut(self.key) {
            Some(slot) => *slot = value,
            None => {
                self.table.insert(self.key.clone(), value);
            }
        }
    }

    /// Removes the value; [`value`](Self::value) gives the default again.
    pub fn clear(&mut self) {
        self.table.remove(self.key);
    }
}

macro_rules! collection_descriptor {
    ($(#[$doc:meta])* $name:ident<$($p:ident),*>) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<$($p),*> {
            name: &'static str,
            _types: PhantomData<fn() -> ($($p,)*)>,
        }

        impl<$($p),*> $name<$($p),*> {
            /// A state named `name`, empty for every key until written.
            pub const fn new(name: &'static str) -> Self {
                $name { name, _types: PhantomData }
            }
        }
    };
}

collection_descriptor!(
    /// A list of values per key.
    ListStateDescriptor<T>
);
collection_descriptor!(
    /// A map per key.
    MapStateDescriptor<MK, MV>
);
collection_descriptor!(
    /// A set of values per key.
    SetStateDescriptor<T>
);

impl<K: Hash + Eq + Clone + 'static, T: Clone + 'static> StateDescriptor<K>
    for ListStateDescriptor<T>
{
    type Table = HashMap<K, Vec<T>>;
    type Handle<'s>
        = ListState<'s, K, T>
    where
        T: 's,
        K: 's;

    fn name(&self) -> &'static str {
        self.name
    }
    fn new_table(&self) -> Self::Table {
        HashMap::new()
    }
    fn open<'s>(&'s self, table: &'s mut Self::Table, key: &'s K) -> ListState<'s, K, T> {
        ListState { table, key }
    }
}

/// The list of a [`ListStateDescriptor`] for the current key.
#[derive(Debug)]
pub struct ListState<'s, K, T> {
    table: &'s mut HashMap<K, Vec<T>>,
    key: &'s K,
}

impl<K: Hash + Eq + Clone, T> ListState<'_, K, T> {
    /// The elements in insertion order (empty when unset).
    pub fn get(&self) -> &[T] {
        self.table.get(self.key).map_or(&[], Vec::as_slice)
    }

    /// Appends one element.
    pub fn add(&mut self, value: T) {
        match self.table.get_mut(self.key) {
            Some(list) => list.push(value),
            None => {
                self.table.insert(self.key.clone(), vec![value]);
            }
        }
    }

    /// Replaces the whole list.
    pub fn update(&mut self, values: Vec<T>) {
        if values.is_empty() {
            self.clear();
        } else {
            self.table.insert(self.key.clone(), values);
        }
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        self.table.remove(self.key);
    }
}

impl<K, MK, MV> StateDescriptor<K> for MapStateDescriptor<MK, MV>
where
    K: Hash + Eq + Clone + 'static,
    MK: Hash + Eq + Clone + 'static,
    MV: Clone + 'static,
{
    type Table = HashMap<K, HashMap<MK, MV>>;
    type Handle<'s>
        = MapState<'s, K, MK, MV>
    where
        MK: 's,
        MV: 's,
        K: 's;

    fn name(&self) -> &'static str {
        self.name
    }
    fn new_table(&self) -> Self::Table {
        HashMap::new()
    }
    fn open<'s>(&'s self, table: &'s mut Self::Table, key: &'s K) -> MapState<'s, K, MK, MV> {
        MapState { table, key }
    }
}

/// The map of a [`MapStateDescriptor`] for the current key.
#[derive(Debug)]
pub struct MapState<'s, K, MK, MV> {
    table: &'s mut HashMap<K, HashMap<MK, MV>>,
    key: &'s K,
}

impl<K: Hash + Eq + Clone, MK: Hash + Eq, MV> MapState<'_, K, MK, MV> {
    /// The value under `map_key`.
    pub fn get(&self, map_key: &MK) -> Option<&MV> {
        self.table.get(self.key).and_then(|m| m.get(map_key))
    }

    /// Whether `map_key` is present.
    pub fn contains(&self, map_key: &MK) -> bool {
        self.get(map_key).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn put(&mut self, map_key: MK, value: MV) -> Option<MV> {
        match self.table.get_mut(self.key) {
            Some(m) => m.insert(map_key, value),
            None => {
                self.table
                    .insert(self.key.clone(), HashMap::from([(map_key, value)]));
                None
            }
        }
    }

    /// Removes `map_key`; returns its value.
    pub fn remove(&mut self, map_key: &MK) -> Option<MV> {
        let m = self.table.get_mut(self.key)?;
        let v = m.remove(map_key);
        if m.is_empty() {
            self.table.remove(self.key);
        }
        v
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&MK, &MV)> {
        self.table.get(self.key).into_iter().flatten()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.table.get(self.key).map_or(0, HashMap::len)
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.table.remove(self.key);
    }
}

impl<K: Hash + Eq + Clone + 'static, T: Hash + Eq + Clone + 'static> StateDescriptor<K>
    for SetStateDescriptor<T>
{
    type Table = HashMap<K, HashSet<T>>;
    type Handle<'s>
        = SetState<'s, K, T>
    where
        T: 's,
        K: 's;

    fn name(&self) -> &'static str {
        self.name
    }
    fn new_table(&self) -> Self::Table {
        HashMap::new()
    }
    fn open<'s>(&'s self, table: &'s mut Self::Table, key: &'s K) -> SetState<'s, K, T> {
        SetState { table, key }
    }
}

/// The set of a [`SetStateDescriptor`] for the current key.
#[derive(Debug)]
pub struct SetState<'s, K, T> {
    table: &'s mut HashMap<K, HashSet<T>>,
    key: &'s K,
}

impl<K: Hash + Eq + Clone, T: Hash + Eq> SetState<'_, K, T> {
    /// Adds `value`; returns whether it was new.
    pub fn add(&mut self, value: T) -> bool {
        match self.table.get_mut(self.key) {
            Some(s) => s.insert(value),
            None => {
                self.table.insert(self.key.clone(), HashSet::from([value]));
                true
            }
        }
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: &T) -> bool {
        self.table.get(self.key).is_some_and(|s| s.contains(value))
    }

    /// Removes `value`; returns whether it was present.
    pub fn remove(&mut self, value: &T) -> bool {
        let Some(s) = self.table.get_mut(self.key) else {
            return false;
        };
        let removed = s.remove(value);
        if s.is_empty() {
            self.table.remove(self.key);
        }
        removed
    }

    /// The members, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.table.get(self.key).into_iter().flatten()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.table.get(self.key).map_or(0, HashSet::len)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every member.
    pub fn clear(&mut self) {
        self.table.remove(self.key);
    }
}

/// `ValueState<u64>` for `streaming::api::state::ValueStateDescriptor<u64>`: module paths
/// dropped, `Descriptor` suffixes removed.
fn short_type_name<D>() -> String {
    let full = type_name::<D>();
    let mut out = String::with_capacity(full.len());
    let mut segment = String::new();
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            segment.push(c);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            segment.clear();
        } else {
            out.push_str(&segment);
            segment.clear();
            out.push(c);
        }
    }
    out.push_str(&segment);
    out.replace("Descriptor", "")
}

trait ErasedTable: Any {
    fn clone_box(&self) -> Box<dyn ErasedTable>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Clone + 'static> ErasedTable for T {
    fn clone_box(&self) -> Box<dyn ErasedTable> {
        Box::new(self.clone())
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

struct Entry {
    declared: fn() -> String,
    table: Box<dyn ErasedTable>,
}

/// The keyed state of one operator on the in-memory engine: one typed table per state
/// name. Looking a state up costs a hash of its name and a type check.
pub(crate) struct KeyedStateBackend<K> {
    operator: String,
    tables: HashMap<&'static str, Entry>,
    _key: PhantomData<fn() -> K>,
}

impl<K> Clone for KeyedStateBackend<K> {
    fn clone(&self) -> Self {
        KeyedStateBackend {
            operator: self.operator.clone(),
            tables: self
                .tables
                .iter()
                .map(|(n, e)| {
                    (
                        *n,
                        Entry {
                            declared: e.declared,
                            table: e.table.clone_box(),
                        },
                    )
                })
                .collect(),
            _key: PhantomData,
        }
    }
}

impl<K: 'static> KeyedStateBackend<K> {
    pub(crate) fn new(operator: String) -> Self {
        KeyedStateBackend {
            operator,
            tables: HashMap::new(),
            _key: PhantomData,
        }
    }

    pub(crate) fn handle<'s, D: StateDescriptor<K>>(
        &'s mut self,
        descriptor: &'s D,
        key: &'s K,
    ) -> Result<D::Handle<'s>, Error> {
        let name = descriptor.name();
        let entry = self.tables.entry(name).or_insert_with(|| Entry {
            declared: short_type_name::<D>,
            table: Box::new(descriptor.new_table()),
        });
        let declared = entry.declared;
        match entry.table.as_any_mut().downcast_mut::<D::Table>() {
            Some(table) => Ok(descriptor.open(table, key)),
            None => Err(Error::StateType {
                operator: self.operator.clone(),
                state: name,
                declared: declared(),
                requested: short_type_name::<D>(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 7);
    const SEEN: SetStateDescriptor<&'static str> = SetStateDescriptor::new("seen");
    const LOG: ListStateDescriptor<i32> = ListStateDescriptor::new("log");
    const LAST: MapStateDescriptor<&'static str, i32> = MapStateDescriptor::new("last");
    const WRONG: ValueStateDescriptor<String> = ValueStateDescriptor::new("count", String::new());

    #[test]
    fn value_state_defaults_and_is_per_key() {
        let mut b = KeyedStateBackend::<&str>::new("op".into());
        assert_eq!(b.handle(&COUNT, &"a").unwrap().value(), 7);
        b.handle(&COUNT, &"a").unwrap().update(8);
        assert_eq!(b.handle(&COUNT, &"a").unwrap().value(), 8);
        assert_eq!(b.handle(&COUNT, &"b").unwrap().value(), 7);
        b.handle(&COUNT, &"a").unwrap().clear();
        assert_eq!(b.handle(&COUNT, &"a").unwrap().get(), None);
    }

    #[test]
    fn collection_states() {
        let mut b = KeyedStateBackend::<u8>::new("op".into());
        assert!(b.handle(&SEEN, &1).unwrap().add("x"));
        assert!(!b.handle(&SEEN, &1).unwrap().add("x"));
        assert!(b.handle(&SEEN, &1).unwrap().contains(&"x"));
        assert!(!b.handle(&SEEN, &2).unwrap().contains(&"x"));
        b.handle(&LOG, &1).unwrap().add(3);
        b.handle(&LOG, &1).unwrap().add(4);
        assert_eq!(b.handle(&LOG, &1).unwrap().get(), &[3, 4]);
        assert_eq!(b.handle(&LAST, &1).unwrap().put("k", 1), None);
        assert_eq!(b.handle(&LAST, &1).unwrap().put("k", 2), Some(1));
        assert_eq!(b.handle(&LAST, &1).unwrap().get(&"k"), Some(&2));
        assert_eq!(b.handle(&LAST, &1).unwrap().remove(&"k"), Some(2));
        assert!(b.handle(&LAST, &1).unwrap().is_empty());
    }

    #[test]
    fn same_name_with_other_type_is_an_error() {
        let mut b = KeyedStateBackend::<u8>::new("src/2:process".into());
        b.handle(&COUNT, &1).unwrap().update(1);
        let err = b.handle(&WRONG, &1).map(|_| ()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "operator `src/2:process`: state `count` was declared as ValueState<u64> \
             and is now requested as ValueState<String>"
        );
    }

    #[test]
    fn clone_is_a_deep_snapshot() {
        let mut b = KeyedStateBackend::<u8>::new("op".into());
        b.handle(&COUNT, &1).unwrap().update(1);
        let snap = b.clone();
        b.handle(&COUNT, &1).unwrap().update(2);
        let mut snap = snap;
        assert_eq!(snap.handle(&COUNT, &1).unwrap().value(), 1);
    }
}
