//! The four state descriptors and their JSON codecs.

use super::codec::JsonCodec;
use super::elements::{ElementChanges, ElementCodec, ListChanges};
use super::handles::{ListState, MapState, SetState, ValueState};
use super::values::{Changed, KeyEntry, KeyRef, KeyedValues};
use super::StateDescriptor;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::marker::PhantomData;

/// A map as a JSON array of `[key, value]` pairs (JSON object keys must be strings).
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

/// A single value per key with a default.
#[derive(Clone, Debug)]
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
    type Value = T;
    type Delta = ();
    type Handle<'s>
        = ValueState<'s, K, T>
    where
        T: 's,
        K: 's;

    fn name(&self) -> &'static str {
        self.name
    }

    #[inline]
    fn open<'s>(
        &'s self,
        values: &'s mut KeyedValues<K, T>,
        key: KeyRef<'s, K>,
        changed: Changed<'s>,
        _deltas: Option<&'s mut KeyedValues<K, ()>>,
    ) -> ValueState<'s, K, T> {
        ValueState {
            entry: KeyEntry::open(values, key),
            default: &self.default,
            changed,
        }
    }

    fn codec(&self) -> Option<JsonCodec<T>> {
        self.codec
    }
}

/// A collection per key: its descriptor, `new`/`persistent` constructors and its
/// [`StateDescriptor`] implementation.
macro_rules! collection_descriptor {
    ($(#[$doc:meta])* $name:ident<$($p:ident),*> opens $handle:ident, per key $coll:ty,
     changes $delta:ty, state where [$($state_bounds:tt)*],
     persistent where [$($bounds:tt)*], codec $codec:expr, elements $elements:expr) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<$($p),*> {
            name: &'static str,
            codec: Option<JsonCodec<$coll>>,
            elements: Option<ElementCodec<$coll, $delta>>,
            _types: PhantomData<fn() -> ($($p,)*)>,
        }

        impl<$($p),*> Clone for $name<$($p),*> {
            fn clone(&self) -> Self {
                $name {
                    name: self.name,
                    codec: self.codec,
                    elements: self.elements,
                    _types: PhantomData,
                }
            }
        }

        impl<$($p),*> $name<$($p),*> {
            /// A state named `name`, empty for every key until written. The memory engine
            /// keeps it; for the Redis engine use [`persistent`](Self::persistent).
            pub const fn new(name: &'static str) -> Self {
                $name { name, codec: None, elements: None, _types: PhantomData }
            }
        }

        impl<$($p),*> $name<$($p),*>
        where
            $($bounds)*
        {
            /// Like [`new`](Self::new), with a JSON codec so that engines keeping state
            /// outside the process (the Redis engine: one Redis key per key of the state,
            /// holding its elements as JSON, and a batch writes only the elements it
            /// changed) can store it; works the same on the memory engine.
            pub const fn persistent(name: &'static str) -> Self {
                $name {
                    name,
                    codec: Some($codec),
                    elements: Some($elements),
                    _types: PhantomData,
                }
            }
        }

        impl<K: Hash + Eq + Clone + 'static, $($p),*> StateDescriptor<K> for $name<$($p),*>
        where
            $($state_bounds)*
        {
            type Value = $coll;
            type Delta = $delta;
            type Handle<'s>
                = $handle<'s, K, $($p),*>
            where
                Self: 's,
                K: 's;

            fn name(&self) -> &'static str {
                self.name
            }

            #[inline]
            fn open<'s>(
                &'s self,
                values: &'s mut KeyedValues<K, $coll>,
                key: KeyRef<'s, K>,
                changed: Changed<'s>,
                deltas: Option<&'s mut KeyedValues<K, $delta>>,
            ) -> Self::Handle<'s> {
                $handle {
                    entry: KeyEntry::open(values, key),
                    changed,
                    delta: deltas.map(|d| KeyEntry::open(d, key)),
                }
            }

            fn codec(&self) -> Option<JsonCodec<$coll>> {
                self.codec
            }

            fn elements(&self) -> Option<ElementCodec<$coll, $delta>> {
                self.elements
            }
        }
    };
}

collection_descriptor!(
    /// A list of values per key.
    ListStateDescriptor<T> opens ListState, per key Vec<T>, changes ListChanges,
    state where [T: Clone + 'static],
    persistent where [T: Serialize + DeserializeOwned], codec JsonCodec::new(),
    elements ElementCodec::list()
);
collection_descriptor!(
    /// A map per key (stored in Redis as a hash per key: field = map key as JSON, value =
    /// value as JSON).
    MapStateDescriptor<MK, MV> opens MapState, per key HashMap<MK, MV>,
    changes ElementChanges<MK>,
    state where [MK: Hash + Eq + Clone + 'static, MV: Clone + 'static],
    persistent where [MK: Serialize + DeserializeOwned + Hash + Eq, MV: Serialize + DeserializeOwned],
    codec JsonCodec { ser: ser_pairs::<MK, MV>, de: de_pairs::<MK, MV> },
    elements ElementCodec::map()
);
collection_descriptor!(
    /// A set of values per key.
    SetStateDescriptor<T> opens SetState, per key HashSet<T>, changes ElementChanges<T>,
    state where [T: Hash + Eq + Clone + 'static],
    persistent where [T: Serialize + DeserializeOwned + Hash + Eq], codec JsonCodec::new(),
    elements ElementCodec::set()
);
