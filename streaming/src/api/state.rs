//! Keyed state: descriptors, per-key handles and the in-memory backend.
//!
//! State is scoped to (operator, state name, current key). Descriptors are `const`, so a
//! pipeline declares them once:
//!
//! ```
//! use streaming::api::ValueStateDescriptor;
//! const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 0);
//! ```

use crate::{Error, OperatorId};
use serde::de::DeserializeOwned;
use serde::Serialize;
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

    /// How to read and write this state's table as JSON, when the descriptor has a codec
    /// (engines that keep state outside the process need it).
    #[doc(hidden)]
    fn table_ops(&self) -> Option<TableOps<K>> {
        None
    }
}

/// Serializes values of type `T` as JSON (the Redis engine's state format). Built by
/// [`ValueStateDescriptor::persistent`].
pub struct JsonCodec<T> {
    ser: fn(&T) -> Result<String, String>,
    de: fn(&str) -> Result<T, String>,
}

impl<T> Clone for JsonCodec<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for JsonCodec<T> {}

impl<T> std::fmt::Debug for JsonCodec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonCodec")
    }
}

fn to_json<T: Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

fn from_json<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_str(s).map_err(|e| e.to_string())
}

impl<T> JsonCodec<T> {
    /// A codec from two functions.
    const fn with(
        ser: fn(&T) -> Result<String, String>,
        de: fn(&str) -> Result<T, String>,
    ) -> Self {
        JsonCodec { ser, de }
    }
}

impl<T: Serialize + DeserializeOwned> JsonCodec<T> {
    /// The codec of `T` (serde_json).
    pub const fn new() -> Self {
        JsonCodec {
            ser: to_json::<T>,
            de: from_json::<T>,
        }
    }
}

impl<T: Serialize + DeserializeOwned> Default for JsonCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Type-erased JSON access to one state table of keys `K` (see
/// [`StateDescriptor::table_ops`]).
#[doc(hidden)]
pub struct TableOps<K> {
    /// Inserts `key` with the value decoded from JSON.
    #[allow(clippy::type_complexity)]
    load: Box<dyn Fn(&mut dyn Any, K, &str) -> Result<(), String>>,
    /// The key's current value as JSON, `None` when unset.
    #[allow(clippy::type_complexity)]
    dump: Box<dyn Fn(&dyn Any, &K) -> Result<Option<String>, String>>,
}

/// A single value per key with a default.
#[derive(Debug)]
pub struct ValueStateDescriptor<T> {
    name: &'static str,
    default: T,
    codec: Option<JsonCodec<T>>,
}

impl<T> ValueStateDescriptor<T> {
    /// A value state named `name` whose value is `default` until first updated. The memory
    /// engine keeps it; for the Redis engine use [`persistent`](Self::persistent).
    pub const fn new(name: &'static str, default: T) -> Self {
        ValueStateDescriptor {
            name,
            default,
            codec: None,
        }
    }
}

impl<T: Serialize + DeserializeOwned> ValueStateDescriptor<T> {
    /// Like [`new`](Self::new), with a JSON codec so that engines keeping state outside the
    /// process (the Redis engine) can store it; works the same on the memory engine.
    ///
    /// ```
    /// use streaming::api::ValueStateDescriptor;
    /// const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
    /// ```
    pub const fn persistent(name: &'static str, default: T) -> Self {
        ValueStateDescriptor {
            name,
            default,
            codec: Some(JsonCodec::new()),
        }
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

    fn table_ops(&self) -> Option<TableOps<K>> {
        self.codec.map(keyed_ops::<K, T>)
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
    ($(#[$doc:meta])* $name:ident<$($p:ident),*>, per key $coll:ty,
     persistent where [$($bounds:tt)*], codec $codec:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<$($p),*> {
            name: &'static str,
            codec: Option<JsonCodec<$coll>>,
            _types: PhantomData<fn() -> ($($p,)*)>,
        }

        impl<$($p),*> $name<$($p),*> {
            /// A state named `name`, empty for every key until written. The memory engine
            /// keeps it; for the Redis engine use [`persistent`](Self::persistent).
            pub const fn new(name: &'static str) -> Self {
                $name { name, codec: None, _types: PhantomData }
            }
        }

        impl<$($p),*> $name<$($p),*>
        where
            $($bounds)*
        {
            /// Like [`new`](Self::new), with a JSON codec so that engines keeping state
            /// outside the process (the Redis engine: one hash field per key, the whole
            /// collection as its JSON value) can store it; works the same on the memory
            /// engine.
            pub const fn persistent(name: &'static str) -> Self {
                $name { name, codec: Some($codec), _types: PhantomData }
            }
        }
    };
}

fn ser_pairs<MK: Serialize, MV: Serialize>(m: &HashMap<MK, MV>) -> Result<String, String> {
    serde_json::to_string(&m.iter().collect::<Vec<_>>()).map_err(|e| e.to_string())
}

fn de_pairs<MK: DeserializeOwned + Hash + Eq, MV: DeserializeOwned>(
    s: &str,
) -> Result<HashMap<MK, MV>, String> {
    serde_json::from_str::<Vec<(MK, MV)>>(s)
        .map(|v| v.into_iter().collect())
        .map_err(|e| e.to_string())
}

/// JSON access to a table `HashMap<K, C>` whose per-key values `codec` encodes.
fn keyed_ops<K: Hash + Eq + 'static, C: 'static>(codec: JsonCodec<C>) -> TableOps<K> {
    TableOps {
        load: Box::new(move |table, key, json| {
            let table = table
                .downcast_mut::<HashMap<K, C>>()
                .ok_or("state table of another type")?;
            table.insert(key, (codec.de)(json)?);
            Ok(())
        }),
        dump: Box::new(move |table, key| {
            let table = table
                .downcast_ref::<HashMap<K, C>>()
                .ok_or("state table of another type")?;
            table.get(key).map(codec.ser).transpose()
        }),
    }
}

collection_descriptor!(
    /// A list of values per key.
    ListStateDescriptor<T>, per key Vec<T>,
    persistent where [T: Serialize + DeserializeOwned], codec JsonCodec::new()
);
collection_descriptor!(
    /// A map per key (stored in Redis as a JSON array of `[key, value]` pairs).
    MapStateDescriptor<MK, MV>, per key HashMap<MK, MV>,
    persistent where [MK: Serialize + DeserializeOwned + Hash + Eq, MV: Serialize + DeserializeOwned],
    codec JsonCodec::with(ser_pairs::<MK, MV>, de_pairs::<MK, MV>)
);
collection_descriptor!(
    /// A set of values per key.
    SetStateDescriptor<T>, per key HashSet<T>,
    persistent where [T: Serialize + DeserializeOwned + Hash + Eq], codec JsonCodec::new()
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

    fn table_ops(&self) -> Option<TableOps<K>> {
        self.codec.map(keyed_ops::<K, Vec<T>>)
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

    fn table_ops(&self) -> Option<TableOps<K>> {
        self.codec.map(keyed_ops::<K, HashMap<MK, MV>>)
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

    fn table_ops(&self) -> Option<TableOps<K>> {
        self.codec.map(keyed_ops::<K, HashSet<T>>)
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
pub(crate) fn short_type_name<D: ?Sized>() -> String {
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
    fn as_any(&self) -> &dyn Any;
}

impl<T: Clone + 'static> ErasedTable for T {
    fn clone_box(&self) -> Box<dyn ErasedTable> {
        Box::new(self.clone())
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct Entry<K> {
    declared: fn() -> String,
    table: Box<dyn ErasedTable>,
    ops: Option<std::rc::Rc<TableOps<K>>>,
}

/// What a backend whose state is written back (Redis engine) keeps besides its tables:
/// the loaded entries of states not opened yet, and the (state, key) pairs touched since
/// the last drain.
pub(crate) struct Tracking<K> {
    /// Loaded entries per state name: (key, value JSON), decoded when the state is first
    /// opened (its descriptor holds the codec).
    pub(crate) pending: HashMap<String, Vec<(K, String)>>,
    pub(crate) dirty: HashSet<(&'static str, K)>,
    /// The partition's schema check, consulted when a state is first opened.
    pub(crate) schema: Option<crate::redis::SchemaGate>,
}

/// One change of a state table to write back: state name, key, new value as JSON (`None`
/// = delete).
pub(crate) type Change<'a, K> = (&'static str, &'a K, Option<String>);

/// The keyed state of one operator: one typed table per state name. Looking a state up
/// costs a hash of its name and a type check. With tracking on (Redis engine) every opened
/// (state, key) is remembered so its value can be written back.
pub(crate) struct KeyedStateBackend<K> {
    operator: String,
    tables: HashMap<&'static str, Entry<K>>,
    pub(crate) tracking: Option<Box<Tracking<K>>>,
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
                            ops: e.ops.clone(),
                        },
                    )
                })
                .collect(),
            tracking: None,
        }
    }
}

impl<K: 'static> KeyedStateBackend<K> {
    pub(crate) fn new(operator: String) -> Self {
        KeyedStateBackend {
            operator,
            tables: HashMap::new(),
            tracking: None,
        }
    }
}

impl<K: Hash + Eq + Clone + 'static> KeyedStateBackend<K> {
    #[cold]
    fn new_entry<D: StateDescriptor<K>>(&mut self, descriptor: &D) -> Result<Entry<K>, Error> {
        let name = descriptor.name();
        let mut table: Box<dyn ErasedTable> = Box::new(descriptor.new_table());
        let mut ops = None;
        if let Some(tracking) = &mut self.tracking {
            let Some(table_ops) = descriptor.table_ops() else {
                return Err(Error::StateNotPersistent {
                    operator: OperatorId::from_text(self.operator.as_str()),
                    state: name,
                    declared: short_type_name::<D>(),
                });
            };
            let mut stored = tracking.pending.remove(name).unwrap_or_default();
            if let Some(gate) = &tracking.schema {
                let fingerprint =
                    format!("{} by {}", short_type_name::<D>(), short_type_name::<K>());
                if !gate.admit(&self.operator, name, &fingerprint)? {
                    stored.clear();
                }
            }
            for (key, json) in stored {
                (table_ops.load)(table.as_any_mut(), key, &json).map_err(|reason| {
                    Error::StateDecode {
                        operator: OperatorId::from_text(self.operator.as_str()),
                        state: name.to_string(),
                        reason,
                    }
                })?;
            }
            ops = Some(std::rc::Rc::new(table_ops));
        }
        Ok(Entry {
            declared: short_type_name::<D>,
            table,
            ops,
        })
    }

    /// The tracked changes: every (state, key) opened since the last drain with its current
    /// value. Nothing when tracking is off.
    pub(crate) fn drain_changes(
        &mut self,
        mut out: impl FnMut(Change<'_, K>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let Some(tracking) = &mut self.tracking else {
            return Ok(());
        };
        for (name, key) in tracking.dirty.drain() {
            let Some(entry) = self.tables.get(name) else {
                continue;
            };
            let Some(ops) = &entry.ops else { continue };
            let value =
                (ops.dump)(entry.table.as_any(), &key).map_err(|reason| Error::StateDecode {
                    operator: OperatorId::from_text(self.operator.as_str()),
                    state: name.to_string(),
                    reason,
                })?;
            out((name, &key, value))?;
        }
        Ok(())
    }

    pub(crate) fn handle<'s, D: StateDescriptor<K>>(
        &'s mut self,
        descriptor: &'s D,
        key: &'s K,
    ) -> Result<D::Handle<'s>, Error> {
        let name = descriptor.name();
        if !self.tables.contains_key(name) {
            let entry = self.new_entry(descriptor)?;
            self.tables.insert(name, entry);
        }
        if let Some(tracking) = &mut self.tracking {
            tracking.dirty.insert((name, key.clone()));
        }
        let entry = self.tables.get_mut(name).expect("inserted above");
        let declared = entry.declared;
        match entry.table.as_any_mut().downcast_mut::<D::Table>() {
            Some(table) => Ok(descriptor.open(table, key)),
            None => Err(Error::StateType {
                operator: OperatorId::from_text(self.operator.as_str()),
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
