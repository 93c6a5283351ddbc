//! The keyed state of one process operator: one slot per state, found once.
//!
//! A state declared with `pipeline!`'s `.state(..)` gets its slot when the pipeline is
//! built ([`DeclareStates`](super::DeclareStates)); the expansion hands the process function a
//! [`DeclaredState`](super::DeclaredState) holding its index, so a record's access is an index, a type-id
//! comparison and one lookup of the key. A descriptor passed to `ctx.state(&DESCRIPTOR)`
//! directly gets its slot the first time it is used and is found by name afterwards (a scan
//! of the operator's few names). Every state of a record shares one hash of its key.

use super::elements::{CollectionKind, ElementCodec, EncodedChanges};
use super::values::{change_bit, Changed, KeyRef, KeyedValues};
use super::{short_type_name, JsonCodec, StateDescriptor};
use crate::{Error, OperatorId};
use std::any::{Any, TypeId};
use std::collections::hash_map::RandomState;
use std::hash::Hash;

/// What an engine does when a process operator opens one of its states for the first time.
/// An engine that keeps state in the process does nothing; one that stores it elsewhere
/// checks that it can (the descriptor has a codec) and hands over the stored entries to
/// decode (after its schema check).
#[doc(hidden)]
pub trait OpenState<K> {
    /// Called before the state's first use: hands its stored entries (key, value JSON) to
    /// `load`, which decodes them into the state (`Err`: why an entry does not decode; the
    /// engine decides what becomes of its key).
    ///
    /// # Errors
    /// The engine cannot keep the state, or its schema check failed.
    fn open(
        &mut self,
        operator: &str,
        state: &OpenedState<'_>,
        load: &mut dyn FnMut(K, &str) -> Result<(), String>,
    ) -> Result<(), Error>;

    /// Whether the record of `key` that opened a state may go on, after
    /// [`open`](Self::open) (an entry of `key` may not have decoded).
    ///
    /// # Errors
    /// The engine's error for `key`'s records.
    fn check(&self, key: &K) -> Result<(), Error> {
        let _ = key;
        Ok(())
    }
}

/// A state being opened (see [`OpenState`]).
#[doc(hidden)]
#[derive(Debug)]
pub struct OpenedState<'a> {
    /// The state's name.
    pub name: &'static str,
    /// Its kind and type, e.g. `ValueState<u64>`.
    pub declared: &'a str,
    /// Its fingerprint for schema checks: kind, value type and key type, e.g.
    /// `ValueState<u64> by String`.
    pub fingerprint: String,
    /// Whether the descriptor has a codec (values can be kept as JSON).
    pub persistent: bool,
    /// For a persistent collection state, its kind (its elements are stored one by one).
    pub collection: Option<CollectionKind>,
}

#[cold]
#[inline(never)]
fn declared_state_replaced(e: Error) -> ! {
    panic!("{e} (the operator's state was restored from a checkpoint of another pipeline)")
}

/// One state's descriptor and values, and the changes of each key not written back yet
/// (only while the backend tracks elements).
struct SlotData<K, D: StateDescriptor<K>> {
    descriptor: D,
    values: KeyedValues<K, D::Value>,
    deltas: KeyedValues<K, D::Delta>,
}

/// One state of the operator, its type erased; `type_id` says what `data` holds.
struct Slot<K> {
    name: &'static str,
    /// The descriptor's kind and type, e.g. `ValueState<u64>`.
    declared: String,
    persistent: bool,
    /// A persistent collection's kind.
    collection: Option<CollectionKind>,
    type_id: TypeId,
    data: Box<dyn Any>,
    clone: fn(&dyn Any) -> Box<dyn Any>,
    load: fn(&mut dyn Any, K, &str) -> Result<(), String>,
    dump: fn(&dyn Any, &K) -> Result<Option<String>, String>,
    evict: fn(&mut dyn Any, &K),
    load_elements: fn(&mut dyn Any, K, Vec<String>) -> Result<(), String>,
    take_changes: fn(&mut dyn Any, &K) -> Result<Option<EncodedChanges>, String>,
}

/// What a [`Slot`] does with its type-erased data: each function takes the slot's data,
/// a `SlotData<K, D>`.
impl<K: Hash + Eq + Clone + 'static, D: StateDescriptor<K>> SlotData<K, D> {
    /// The data of a slot whose descriptor type is `D`.
    fn of(data: &dyn Any) -> &Self {
        data.downcast_ref::<Self>().expect("slot type")
    }

    /// As [`of`](Self::of), to change it.
    fn of_mut(data: &mut dyn Any) -> &mut Self {
        data.downcast_mut::<Self>().expect("slot type")
    }

    /// The descriptor's JSON codec of a key's value.
    fn codec(&self) -> Result<JsonCodec<D::Value>, String> {
        self.descriptor
            .codec()
            .ok_or_else(|| "state without a codec".to_string())
    }

    /// The descriptor's codec of a collection's elements.
    fn elements(&self) -> Result<ElementCodec<D::Value, D::Delta>, String> {
        self.descriptor
            .elements()
            .ok_or_else(|| "state without an element codec".to_string())
    }

    fn clone_data(data: &dyn Any) -> Box<dyn Any> {
        let data = Self::of(data);
        Box::new(SlotData {
            descriptor: data.descriptor.clone(),
            values: data.values.clone(),
            deltas: data.deltas.clone(),
        })
    }

    fn load_entry(data: &mut dyn Any, key: K, json: &str) -> Result<(), String> {
        let data = Self::of_mut(data);
        let value = (data.codec()?.de)(json)?;
        data.values.insert_owned(key, value);
        Ok(())
    }

    fn dump_entry(data: &dyn Any, key: &K) -> Result<Option<String>, String> {
        let data = Self::of(data);
        let codec = data.codec()?;
        data.values.get_owned(key).map(codec.ser).transpose()
    }

    fn evict_entry(data: &mut dyn Any, key: &K) {
        let data = Self::of_mut(data);
        data.values.remove_owned(key);
        data.deltas.remove_owned(key);
    }

    fn load_elements(data: &mut dyn Any, key: K, stored: Vec<String>) -> Result<(), String> {
        let data = Self::of_mut(data);
        let collection = (data.elements()?.decode)(stored)?;
        data.values.insert_owned(key, collection);
        Ok(())
    }

    /// Takes `key`'s element changes (`None` when it has none) and encodes them.
    fn take_changes(data: &mut dyn Any, key: &K) -> Result<Option<EncodedChanges>, String> {
        let data = Self::of_mut(data);
        let codec = data.elements()?;
        let Some(delta) = data.deltas.take_owned(key) else {
            return Ok(None);
        };
        (codec.encode)(data.values.get_owned(key), &delta).map(Some)
    }
}

impl<K: Hash + Eq + Clone + 'static> Slot<K> {
    fn new<D: StateDescriptor<K>>(descriptor: &D, hasher: RandomState) -> Self {
        Slot {
            name: descriptor.name(),
            declared: short_type_name::<D>(),
            persistent: descriptor.codec().is_some(),
            collection: (descriptor.codec().and(descriptor.elements())).map(|c| c.kind),
            type_id: TypeId::of::<SlotData<K, D>>(),
            data: Box::new(SlotData {
                descriptor: descriptor.clone(),
                values: KeyedValues::<K, D::Value>::with_hasher(hasher.clone()),
                deltas: KeyedValues::<K, D::Delta>::with_hasher(hasher),
            }),
            clone: SlotData::<K, D>::clone_data,
            load: SlotData::<K, D>::load_entry,
            dump: SlotData::<K, D>::dump_entry,
            evict: SlotData::<K, D>::evict_entry,
            load_elements: SlotData::<K, D>::load_elements,
            take_changes: SlotData::<K, D>::take_changes,
        }
    }

    /// Whether the slot holds a `SlotData<K, D>`.
    #[inline(always)]
    fn holds<D: StateDescriptor<K>>(&self) -> bool {
        self.type_id == TypeId::of::<SlotData<K, D>>()
    }

    /// The slot's data as the `SlotData<K, D>` it holds.
    ///
    /// # Safety
    /// [`holds::<D>`](Self::holds) is true.
    #[inline(always)]
    unsafe fn data_unchecked<D: StateDescriptor<K>>(&mut self) -> &mut SlotData<K, D> {
        let data: *mut dyn Any = &mut *self.data;
        // SAFETY: `data` was created as a `SlotData<K, D>` with this `type_id` (the caller
        // checked it), so the pointer without its vtable points to one: what
        // `downcast_mut` does, without the virtual `type_id` call.
        unsafe { &mut *data.cast::<SlotData<K, D>>() }
    }
}

impl<K> Clone for Slot<K> {
    fn clone(&self) -> Self {
        Slot {
            name: self.name,
            declared: self.declared.clone(),
            persistent: self.persistent,
            collection: self.collection,
            type_id: self.type_id,
            data: (self.clone)(&*self.data),
            clone: self.clone,
            load: self.load,
            dump: self.dump,
            evict: self.evict,
            load_elements: self.load_elements,
            take_changes: self.take_changes,
        }
    }
}

/// The keyed state of one process operator: a slot per state (the states declared when
/// the pipeline was built first, in declaration order) and the hasher all its states share.
#[derive(Clone)]
pub(crate) struct KeyedStateBackend<K> {
    operator: String,
    hasher: RandomState,
    slots: Vec<Slot<K>>,
    /// How many states are declared (they hold slots `0..declared`).
    declared: usize,
    /// The current record's key hash, computed when its first state is opened (0 until
    /// then; a key whose hash is 0 is hashed again at every open, which is only slower).
    key_hash: u64,
    /// The states the current record changed (bit `i`: slot `i`).
    changed: u64,
    /// Whether collection handles log their changed elements (an engine that writes
    /// changes back element by element; the memory engine does not).
    track_elements: bool,
}

impl<K> KeyedStateBackend<K> {
    /// Starts a record (or timer) of another key: no hash computed, no state changed yet.
    #[inline(always)]
    pub(crate) fn begin_record(&mut self) {
        self.key_hash = 0;
        self.changed = 0;
    }

    /// The states changed since [`begin_record`](Self::begin_record).
    #[inline(always)]
    pub(crate) fn changed(&self) -> u64 {
        self.changed
    }
}

impl<K: Hash + Eq + Clone + 'static> KeyedStateBackend<K> {
    /// The id of the operator owning the state.
    pub(crate) fn operator_id(&self) -> OperatorId {
        OperatorId::from_text(self.operator.as_str())
    }

    pub(crate) fn new(operator: String) -> Self {
        KeyedStateBackend {
            operator,
            hasher: RandomState::new(),
            slots: Vec::new(),
            declared: 0,
            key_hash: 0,
            changed: 0,
            track_elements: false,
        }
    }

    /// Makes collection handles log their changed elements from now on.
    pub(crate) fn track_elements(&mut self) {
        self.track_elements = true;
    }

    fn find(&self, name: &str) -> Option<usize> {
        // A descriptor's name is a literal: the same one mostly at the same address.
        let same = |s: &Slot<K>| std::ptr::eq(s.name, name) || s.name == name;
        self.slots.iter().position(same)
    }

    /// Gives declared state `descriptor` the next declared slot (moving the existing state of
    /// its name there, else a new empty one).
    pub(super) fn declare<D: StateDescriptor<K>>(&mut self, descriptor: &D) -> Result<(), Error> {
        let index = self.declared;
        let slot = match self.find(descriptor.name()) {
            Some(i) if !self.slots[i].holds::<D>() || i < index => {
                return Err(self.type_error::<D>(i));
            }
            Some(i) => i,
            None => {
                self.slots.push(Slot::new(descriptor, self.hasher.clone()));
                self.slots.len() - 1
            }
        };
        // Before any record: no change mask names a slot yet.
        self.slots.swap(index, slot);
        self.declared += 1;
        Ok(())
    }

    /// Forgets the declared states (before declaring them again on restored state).
    pub(crate) fn clear_declared(&mut self) {
        self.declared = 0;
    }

    #[cold]
    #[inline(never)]
    fn undeclared(&self, index: usize) -> Error {
        Error::StateType {
            operator: OperatorId::from_text(self.operator.as_str()),
            state: "?",
            declared: format!("{} declared states", self.declared),
            requested: format!("declared state {index}"),
        }
    }

    /// The slot of `descriptor`'s state, opened now if this is its first use.
    ///
    /// # Errors
    /// From `opener` (the engine cannot keep the state, its schema check failed) or
    /// [`Error::StateDecode`] for a stored entry.
    #[inline]
    pub(crate) fn resolve<D: StateDescriptor<K>>(
        &mut self,
        descriptor: &D,
        opener: &mut dyn OpenState<K>,
        key: &K,
    ) -> Result<usize, Error> {
        match self.find(descriptor.name()) {
            Some(i) => Ok(i),
            None => self.open_slot(descriptor, opener, key),
        }
    }

    /// Opens `descriptor`'s state for the record of `key`: the slot is kept even when the
    /// record may not go on ([`OpenState::check`]), so the other keys' entries stay loaded.
    #[cold]
    #[inline(never)]
    fn open_slot<D: StateDescriptor<K>>(
        &mut self,
        descriptor: &D,
        opener: &mut dyn OpenState<K>,
        key: &K,
    ) -> Result<usize, Error> {
        let mut slot = Slot::new(descriptor, self.hasher.clone());
        let opened = OpenedState {
            name: slot.name,
            declared: &slot.declared,
            fingerprint: self.fingerprint(&slot),
            persistent: slot.persistent,
            collection: slot.collection,
        };
        let (load, data) = (slot.load, &mut slot.data);
        opener.open(&self.operator, &opened, &mut |k, json| {
            load(&mut **data, k, json)
        })?;
        self.slots.push(slot);
        opener.check(key)?;
        Ok(self.slots.len() - 1)
    }

    /// Opens state `slot` for `key`: its handle, which marks the record's change mask when
    /// it changes the state. The key's hash is computed at the record's first open and
    /// reused by its other states (all tables of the operator hash alike).
    ///
    /// # Errors
    /// [`Error::StateType`] when the state was declared with another descriptor type.
    #[inline(always)]
    pub(crate) fn open<'s, D: StateDescriptor<K>>(
        &'s mut self,
        slot: usize,
        key: &'s K,
    ) -> Result<D::Handle<'s>, Error> {
        if !self.slots.get(slot).is_some_and(Slot::holds::<D>) {
            return Err(self.type_error::<D>(slot));
        }
        // SAFETY: `slot` is in bounds and holds a `SlotData<K, D>` (checked above).
        let data = unsafe { self.slots.get_unchecked_mut(slot).data_unchecked::<D>() };
        if self.key_hash == 0 {
            self.key_hash = data.values.hash(key);
        }
        let changed = Changed {
            mask: &mut self.changed,
            bit: change_bit(slot),
        };
        let key = KeyRef {
            key,
            hash: self.key_hash,
        };
        let deltas = if self.track_elements {
            Some(&mut data.deltas)
        } else {
            None
        };
        Ok(data.descriptor.open(&mut data.values, key, changed, deltas))
    }

    /// Opens state `slot` for `key`, which is not the key of the record being processed
    /// (its hash is computed here, not kept for the record's other states).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub(crate) fn open_other_key<'s, D: StateDescriptor<K>>(
        &'s mut self,
        slot: usize,
        key: &'s K,
    ) -> Result<D::Handle<'s>, Error> {
        if !self.slots.get(slot).is_some_and(Slot::holds::<D>) {
            return Err(self.type_error::<D>(slot));
        }
        // SAFETY: `slot` is in bounds and holds a `SlotData<K, D>` (checked above).
        let data = unsafe { self.slots.get_unchecked_mut(slot).data_unchecked::<D>() };
        let key = KeyRef {
            key,
            hash: data.values.hash(key),
        };
        let changed = Changed {
            mask: &mut self.changed,
            bit: change_bit(slot),
        };
        let deltas = if self.track_elements {
            Some(&mut data.deltas)
        } else {
            None
        };
        Ok(data.descriptor.open(&mut data.values, key, changed, deltas))
    }

    /// Opens declared state `slot` for `key` (see [`open`](Self::open)). The pipeline's
    /// build put a state of type `D` there.
    ///
    /// # Panics
    /// The operator's state was replaced (restored from a checkpoint of another pipeline)
    /// and holds another type there: the record fails with that panic, naming the state.
    #[inline(always)]
    pub(crate) fn open_declared<'s, D: StateDescriptor<K>>(
        &'s mut self,
        slot: usize,
        key: &'s K,
    ) -> D::Handle<'s> {
        match self.open::<D>(slot, key) {
            Ok(handle) => handle,
            Err(e) => declared_state_replaced(e),
        }
    }

    #[cold]
    #[inline(never)]
    fn type_error<D>(&self, slot: usize) -> Error {
        let Some(s) = self.slots.get(slot) else {
            return self.undeclared(slot);
        };
        Error::StateType {
            operator: OperatorId::from_text(self.operator.as_str()),
            state: s.name,
            declared: s.declared.clone(),
            requested: short_type_name::<D>(),
        }
    }

    #[cold]
    #[cfg(feature = "redis")]
    fn decode_error(&self, state: &str, reason: String) -> Error {
        Error::StateDecode {
            operator: OperatorId::from_text(self.operator.as_str()),
            state: state.to_string(),
            reason,
        }
    }

    /// `MapState<u32, u64> by String`; a collection stored element by element has `/2`
    /// after its kind (`MapState/2<u32, u64> by String`): stored state of the layout
    /// before it (one JSON value per key) is another schema.
    fn fingerprint(&self, slot: &Slot<K>) -> String {
        let declared = match (slot.collection, slot.declared.split_once('<')) {
            (Some(_), Some((kind, types))) => format!("{kind}/2<{types}"),
            _ => slot.declared.clone(),
        };
        format!("{declared} by {}", short_type_name::<K>())
    }
}

/// What the Redis engine's state store reads and writes: slots by name, entries as JSON.
#[cfg(feature = "redis")]
impl<K: Hash + Eq + Clone + 'static> KeyedStateBackend<K> {
    /// The states opened so far: (slot, name, fingerprint).
    pub(crate) fn states(&self) -> impl Iterator<Item = (usize, &'static str, String)> + '_ {
        (self.slots.iter().enumerate()).map(|(i, s)| (i, s.name, self.fingerprint(s)))
    }

    /// The slot of state `name`, if it was opened or declared.
    pub(crate) fn slot_of(&self, name: &str) -> Option<usize> {
        self.find(name)
    }

    /// Decodes `key`'s stored value `json` into state `slot`.
    ///
    /// # Errors
    /// Why the value does not decode.
    pub(crate) fn load(&mut self, slot: usize, key: K, json: &str) -> Result<(), String> {
        let s = &mut self.slots[slot];
        (s.load)(&mut *s.data, key, json)
    }

    /// State `slot`'s name and the value of `key` as JSON (`None` when unset).
    ///
    /// # Errors
    /// [`Error::StateNotPersistent`] when the state has no codec, [`Error::StateDecode`]
    /// when the value does not encode.
    pub(crate) fn dump(&self, slot: usize, key: &K) -> Result<Option<String>, Error> {
        let s = &self.slots[slot];
        if !s.persistent {
            return Err(Error::StateNotPersistent {
                operator: OperatorId::from_text(self.operator.as_str()),
                state: s.name,
                declared: s.declared.clone(),
            });
        }
        (s.dump)(&*s.data, key).map_err(|r| self.decode_error(s.name, r))
    }

    /// The collection kind of state `slot` (`None`: a value state).
    pub(crate) fn collection(&self, slot: usize) -> Option<CollectionKind> {
        self.slots[slot].collection
    }

    /// Decodes `key`'s stored collection (see [`ElementCodec`](super::ElementCodec)'s
    /// `decode`) into state `slot`.
    ///
    /// # Errors
    /// Why an element does not decode (the caller names operator, state and key).
    pub(crate) fn load_elements(
        &mut self,
        slot: usize,
        key: K,
        stored: Vec<String>,
    ) -> Result<(), String> {
        let s = &mut self.slots[slot];
        (s.load_elements)(&mut *s.data, key, stored)
    }

    /// Takes the element changes of `key` in collection state `slot`, encoded (`None`
    /// when it has none).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when an element does not encode.
    pub(crate) fn take_changes(
        &mut self,
        slot: usize,
        key: &K,
    ) -> Result<Option<EncodedChanges>, Error> {
        let s = &mut self.slots[slot];
        let taken = (s.take_changes)(&mut *s.data, key);
        taken.map_err(|r| self.decode_error(self.slots[slot].name, r))
    }

    /// Forgets `key`'s value in every state (the engine loads it again when needed).
    pub(crate) fn evict(&mut self, key: &K) {
        for s in &mut self.slots {
            (s.evict)(&mut *s.data, key);
        }
    }

    /// The number of states opened or declared.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The name of state `slot`.
    pub(crate) fn name(&self, slot: usize) -> &'static str {
        self.slots[slot].name
    }
}
