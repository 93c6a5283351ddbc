//! Broadcast state (Flink's broadcast state pattern): a low-volume stream — rules,
//! configuration — delivered to every partition of a keyed stream, kept in a map that
//! every partition holds the same, written by the broadcast side and read-only on the
//! keyed side.

use super::context::KeyedContext;
use super::context::{Handle, StateRef};
use super::state::{MapState, MapStateDescriptor};
use super::Collector;
use crate::{BoxError, Error};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::hash::Hash;

/// The map a broadcast stream's elements write (Flink's `MapStateDescriptor` passed to
/// `broadcast`): a name, map keys `BK` and values `BV`. Every partition of the keyed
/// stream connected to the broadcast stream holds its own copy, the same on every
/// partition since each reads every broadcast element.
///
/// ```
/// use streaming::api::BroadcastStateDescriptor;
/// const RULES: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::persistent("rules");
/// ```
#[derive(Debug)]
pub struct BroadcastStateDescriptor<BK, BV> {
    pub(crate) map: MapStateDescriptor<BK, BV>,
}

impl<BK, BV> Clone for BroadcastStateDescriptor<BK, BV> {
    fn clone(&self) -> Self {
        BroadcastStateDescriptor {
            map: self.map.clone(),
        }
    }
}

impl<BK, BV> BroadcastStateDescriptor<BK, BV> {
    /// A broadcast map named `name`, empty until written. The memory engine keeps it; for
    /// the Redis engine use [`persistent`](Self::persistent).
    pub const fn new(name: &'static str) -> Self {
        BroadcastStateDescriptor {
            map: MapStateDescriptor::new(name),
        }
    }
}

impl<BK, BV> BroadcastStateDescriptor<BK, BV>
where
    BK: Serialize + DeserializeOwned + Hash + Eq,
    BV: Serialize + DeserializeOwned,
{
    /// Like [`new`](Self::new), kept as JSON by engines that keep state outside the
    /// process (the Redis engine: one hash per partition); works the same on the memory
    /// engine.
    pub const fn persistent(name: &'static str) -> Self {
        BroadcastStateDescriptor {
            map: MapStateDescriptor::persistent(name),
        }
    }
}

/// The key of a broadcast process function's state: a key of the keyed stream, or the
/// one key under which the broadcast map is kept. As JSON, a stream key is the key's own
/// JSON (keyed state reads as for any keyed process function) and the broadcast key the
/// string `"\u0000broadcast"`.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BroadcastKey<K> {
    /// A key of the keyed stream.
    Of(K),
    /// The broadcast map's key.
    Broadcast,
}

/// The JSON string the broadcast key is stored as.
const BROADCAST_KEY: &str = "\u{0}broadcast";

impl<K: Serialize> Serialize for BroadcastKey<K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BroadcastKey::Of(key) => key.serialize(serializer),
            BroadcastKey::Broadcast => serializer.serialize_str(BROADCAST_KEY),
        }
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for BroadcastKey<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        if value.as_str() == Some(BROADCAST_KEY) {
            return Ok(BroadcastKey::Broadcast);
        }
        K::deserialize(value)
            .map(BroadcastKey::Of)
            .map_err(serde::de::Error::custom)
    }
}

/// A keyed stream connected to a broadcast stream, one method per input (Flink's
/// `KeyedBroadcastProcessFunction`): elements of the keyed stream (`A`, key `K`) read the
/// broadcast map (`BK` → `BV`) and their key's state and timers; elements of the broadcast
/// stream (`B`) write the map.
///
/// The broadcast map is the same on every partition only if `process_broadcast_element`
/// gives the same result everywhere: make it depend on the element and the map alone
/// (no clock, no randomness).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a keyed broadcast process function of key `{K}`, keyed input `{A}`, broadcast input `{B}` and broadcast map `{BK}` -> `{BV}`",
    label = "expected an `impl KeyedBroadcastProcessFunction<{K}, {A}, {B}, {BK}, {BV}>`",
    note = "`process` on a keyed stream connected to a broadcast stream takes a function of the keyed stream's key and element types, the broadcast stream's element type, and the map types of the descriptor given to `broadcast`, in that order"
)]
pub trait KeyedBroadcastProcessFunction<K, A, B, BK, BV> {
    /// The output record type.
    type Out;

    /// Called for each element of the keyed stream, with its key's context and the
    /// broadcast map, read-only.
    ///
    /// # Errors
    /// A failed element goes to the engine's retry / dead-letter handling like the
    /// element of any keyed process function.
    fn process_element(
        &mut self,
        value: A,
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, K, BK, BV>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError>;

    /// Called for each element of the broadcast stream, on every partition, with the
    /// broadcast map to write.
    ///
    /// # Errors
    /// As [`process_element`](Self::process_element).
    fn process_broadcast_element(
        &mut self,
        value: B,
        ctx: &mut BroadcastContext<'_, '_, K, BK, BV>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError>;

    /// Called when a timer registered by `process_element` fires (nothing by default).
    ///
    /// # Errors
    /// As [`process_element`](Self::process_element).
    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, K, BK, BV>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        let _ = (timestamp, ctx, out);
        Ok(())
    }
}

/// What [`KeyedBroadcastProcessFunction::process_element`] (and `on_timer`) sees: the
/// element's key, its keyed state and timers, and the broadcast map, read-only.
pub struct ReadOnlyBroadcastContext<'c, 'a, K, BK, BV> {
    pub(crate) inner: &'c mut KeyedContext<'a, BroadcastKey<K>>,
    pub(crate) key: &'a K,
    pub(crate) broadcast_key: &'c BroadcastKey<K>,
    pub(crate) state: &'c BroadcastStateDescriptor<BK, BV>,
}

impl<K, BK, BV> ReadOnlyBroadcastContext<'_, '_, K, BK, BV>
where
    K: Hash + Eq + Clone + 'static,
    BK: Hash + Eq + Clone + 'static,
    BV: Clone + 'static,
{
    /// The element's key.
    pub fn current_key(&self) -> &K {
        self.key
    }

    /// The element's event time (ms), as for a keyed process function.
    pub fn timestamp(&self) -> i64 {
        self.inner.timestamp()
    }

    /// The current watermark (ms).
    pub fn current_watermark(&self) -> i64 {
        self.inner.current_watermark()
    }

    /// The current processing time (ms since the Unix epoch).
    pub fn current_processing_time(&self) -> i64 {
        self.inner.current_processing_time()
    }

    /// A state of the element's key (keyed state, as in a keyed process function).
    ///
    /// # Errors
    /// As [`KeyedContext::state`].
    #[allow(clippy::type_complexity)]
    pub fn state<S: StateRef<BroadcastKey<K>>>(
        &mut self,
        state: S,
    ) -> Result<Handle<'_, BroadcastKey<K>, S>, S::Error> {
        self.inner.state(state)
    }

    /// The broadcast map, read-only.
    ///
    /// # Errors
    /// [`Error::StateType`] when another state of the operator has the map's name.
    pub fn broadcast_state(&mut self) -> Result<ReadOnlyBroadcastState<'_, K, BK, BV>, Error> {
        let map = self.inner.state_of(&self.state.map, self.broadcast_key)?;
        Ok(ReadOnlyBroadcastState { map })
    }

    /// Registers an event-time timer of the element's key at `time` (ms).
    ///
    /// # Errors
    /// As [`KeyedContext::register_event_time_timer`].
    pub fn register_event_time_timer(&mut self, time: i64) -> Result<(), Error> {
        self.inner.register_event_time_timer(time)
    }

    /// Registers a processing-time timer of the element's key at `time` (ms).
    pub fn register_processing_time_timer(&mut self, time: i64) {
        self.inner.register_processing_time_timer(time);
    }

    /// Deletes the key's event-time timer at `time`, if any.
    pub fn delete_event_time_timer(&mut self, time: i64) {
        self.inner.delete_event_time_timer(time);
    }

    /// Deletes the key's processing-time timer at `time`, if any.
    pub fn delete_processing_time_timer(&mut self, time: i64) {
        self.inner.delete_processing_time_timer(time);
    }
}

/// The broadcast map as the keyed side reads it.
pub struct ReadOnlyBroadcastState<'s, K, BK, BV> {
    map: MapState<'s, BroadcastKey<K>, BK, BV>,
}

impl<K: Hash + Eq + Clone, BK: Hash + Eq + Clone, BV> ReadOnlyBroadcastState<'_, K, BK, BV> {
    /// The value under `key`.
    pub fn get(&self, key: &BK) -> Option<&BV> {
        self.map.get(key)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &BK) -> bool {
        self.map.contains(key)
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&BK, &BV)> {
        self.map.iter()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What [`KeyedBroadcastProcessFunction::process_broadcast_element`] sees: the element's
/// time and the broadcast map to write. No keyed state and no timers: the element belongs
/// to no key.
pub struct BroadcastContext<'c, 'a, K, BK, BV> {
    pub(crate) inner: &'c mut KeyedContext<'a, BroadcastKey<K>>,
    pub(crate) state: &'c BroadcastStateDescriptor<BK, BV>,
}

impl<K, BK, BV> BroadcastContext<'_, '_, K, BK, BV>
where
    K: Hash + Eq + Clone + 'static,
    BK: Hash + Eq + Clone + 'static,
    BV: Clone + 'static,
{
    /// The element's event time (ms).
    pub fn timestamp(&self) -> i64 {
        self.inner.timestamp()
    }

    /// The current watermark (ms).
    pub fn current_watermark(&self) -> i64 {
        self.inner.current_watermark()
    }

    /// The current processing time (ms since the Unix epoch).
    pub fn current_processing_time(&self) -> i64 {
        self.inner.current_processing_time()
    }

    /// The broadcast map, to read and write.
    ///
    /// # Errors
    /// [`Error::StateType`] when another state of the operator has the map's name.
    pub fn broadcast_state(&mut self) -> Result<MapState<'_, BroadcastKey<K>, BK, BV>, Error> {
        self.inner.state(&self.state.map)
    }
}
