//! Keyed state: descriptors, per-key handles and the operator's state backend.
//!
//! State is scoped to (operator, state name, current key). Descriptors are `const`, so a
//! pipeline declares them once:
//!
//! ```
//! use streaming::api::ValueStateDescriptor;
//! const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 0);
//! ```

mod backend;
mod codec;
mod declared;
mod descriptors;
mod elements;
mod handles;
mod values;

pub(crate) use backend::{KeyedStateBackend, OpenState, OpenedState};
pub use codec::JsonCodec;
pub(crate) use declared::DeclareStates;
pub use declared::DeclaredState;
pub use descriptors::{
    ListStateDescriptor, MapStateDescriptor, SetStateDescriptor, ValueStateDescriptor,
};
#[cfg(feature = "redis")]
pub(crate) use elements::{CollectionKind, EncodedChanges};
pub use handles::{ListState, MapState, SetState, ValueState};
pub(crate) use values::{Changed, KeyRef, KeyedValues};

use elements::ElementCodec;
use std::any::type_name;

/// Describes one named keyed state and how to open it for a key. Implemented by
/// [`ValueStateDescriptor`], [`ListStateDescriptor`], [`MapStateDescriptor`] and
/// [`SetStateDescriptor`]; name it to write code over any of them:
///
/// ```
/// use streaming::api::{SetStateDescriptor, StateDescriptor, ValueStateDescriptor};
///
/// fn describe<K, D: StateDescriptor<K>>(state: &D) -> String {
///     format!("state `{}`", state.name())
/// }
///
/// const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 0);
/// const SEEN: SetStateDescriptor<u32> = SetStateDescriptor::new("seen");
/// assert_eq!(describe::<String, _>(&COUNT), "state `count`");
/// assert_eq!(describe::<String, _>(&SEEN), "state `seen`");
/// ```
pub trait StateDescriptor<K>: Clone + 'static {
    /// What the state keeps per key (the value, or the key's whole collection).
    #[doc(hidden)]
    type Value: Clone + 'static;
    /// What an engine that writes changes back tracks of one key's changes (a
    /// collection's changed elements; nothing for a value).
    #[doc(hidden)]
    type Delta: Default + Clone + 'static;
    /// The handle for one key.
    type Handle<'s>
    where
        Self: 's,
        K: 's;

    /// The state's name, unique within its operator.
    fn name(&self) -> &'static str;

    #[doc(hidden)]
    fn open<'s>(
        &'s self,
        values: &'s mut KeyedValues<K, Self::Value>,
        key: KeyRef<'s, K>,
        changed: Changed<'s>,
        deltas: Option<&'s mut KeyedValues<K, Self::Delta>>,
    ) -> Self::Handle<'s>;

    /// How to read and write the per-key value as JSON, when the descriptor has a codec
    /// (engines that keep state outside the process need it).
    #[doc(hidden)]
    fn codec(&self) -> Option<JsonCodec<Self::Value>>;

    /// How a collection state's elements are encoded one by one, when the descriptor has
    /// a codec (`None` for a value state).
    #[doc(hidden)]
    fn elements(&self) -> Option<ElementCodec<Self::Value, Self::Delta>> {
        None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::context::{ContextParts, KeyedContext};
    use crate::ops::NoChanges;
    use crate::Error;
    use std::hash::Hash;

    const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 7);
    const SEEN: SetStateDescriptor<&'static str> = SetStateDescriptor::new("seen");
    const LOG: ListStateDescriptor<i32> = ListStateDescriptor::new("log");
    const LAST: MapStateDescriptor<&'static str, i32> = MapStateDescriptor::new("last");
    const WRONG: ValueStateDescriptor<String> = ValueStateDescriptor::new("count", String::new());

    /// Runs `f` with the context of `key`; returns its result and the states it changed.
    fn with<K: Hash + Eq + Clone + 'static, R>(
        b: &mut KeyedStateBackend<K>,
        key: K,
        f: impl FnOnce(&mut KeyedContext<'_, K>) -> R,
    ) -> (R, u64) {
        // The memory engine's part in opening a state: nothing.
        let (mut timers, mut opener) = (Vec::new(), NoChanges);
        let mut ctx = KeyedContext::new(ContextParts {
            key: &key,
            timestamp: 0,
            watermark: 0,
            processing_time: 0,
            event_time: true,
            timers: &mut timers,
            state: b,
            opener: &mut opener,
        });
        let r = f(&mut ctx);
        let changed = ctx.changed();
        (r, changed)
    }

    #[test]
    fn value_state_defaults_and_is_per_key() {
        fn value(b: &mut KeyedStateBackend<&'static str>, k: &'static str) -> u64 {
            with(b, k, |c| c.state(&COUNT).unwrap().value()).0
        }
        let mut b = KeyedStateBackend::<&str>::new("op".into());
        assert_eq!(value(&mut b, "a"), 7);
        with(&mut b, "a", |c| c.state(&COUNT).unwrap().update(8));
        assert_eq!(value(&mut b, "a"), 8);
        assert_eq!(value(&mut b, "b"), 7);
        with(&mut b, "a", |c| c.state(&COUNT).unwrap().clear());
        assert_eq!(
            with(&mut b, "a", |c| c.state(&COUNT).unwrap().get().copied()).0,
            None
        );
    }

    #[test]
    fn collection_states() {
        let mut b = KeyedStateBackend::<u8>::new("op".into());
        with(&mut b, 1, |c| {
            assert!(c.state(&SEEN).unwrap().add("x"));
            assert!(!c.state(&SEEN).unwrap().add("x"));
            assert!(c.state(&SEEN).unwrap().contains(&"x"));
            c.state(&LOG).unwrap().add(3);
            c.state(&LOG).unwrap().add(4);
            assert_eq!(c.state(&LOG).unwrap().get(), &[3, 4]);
            assert_eq!(c.state(&LAST).unwrap().put("k", 1), None);
            assert_eq!(c.state(&LAST).unwrap().put("k", 2), Some(1));
            assert_eq!(c.state(&LAST).unwrap().get(&"k"), Some(&2));
            assert_eq!(c.state(&LAST).unwrap().remove(&"k"), Some(2));
            assert!(c.state(&LAST).unwrap().is_empty());
        });
        with(&mut b, 2, |c| {
            assert!(!c.state(&SEEN).unwrap().contains(&"x"))
        });
    }

    #[test]
    fn same_name_with_other_type_is_an_error() {
        let mut b = KeyedStateBackend::<u8>::new("src/2:process".into());
        with(&mut b, 1, |c| c.state(&COUNT).unwrap().update(1));
        let (err, _) = with(&mut b, 1, |c| c.state(&WRONG).map(|_| ()).unwrap_err());
        assert_eq!(
            err.to_string(),
            "operator `src/2:process`: state `count` was declared as ValueState<u64> \
             and is now requested as ValueState<String>"
        );
    }

    #[test]
    fn clone_is_a_deep_snapshot() {
        let mut b = KeyedStateBackend::<u8>::new("op".into());
        with(&mut b, 1, |c| c.state(&COUNT).unwrap().update(1));
        let mut snap = b.clone();
        with(&mut b, 1, |c| c.state(&COUNT).unwrap().update(2));
        assert_eq!(
            with(&mut snap, 1, |c| c.state(&COUNT).unwrap().value()).0,
            1
        );
    }

    #[test]
    fn only_changes_mark_a_state_changed() {
        let mut b = KeyedStateBackend::<u8>::new("op".into());
        let (_, changed) = with(&mut b, 1, |c| {
            c.state(&COUNT).unwrap().value();
            assert!(c.state(&LOG).unwrap().get().is_empty());
            c.state(&SEEN).unwrap().remove(&"absent");
        });
        assert_eq!(changed, 0, "reading is not a change");
        let (_, changed) = with(&mut b, 1, |c| c.state(&LOG).unwrap().add(1));
        assert_eq!(changed, 0b10, "the second state opened");
    }

    #[test]
    fn declared_states_resolve_by_index_and_check_their_type() {
        let mut b = KeyedStateBackend::<u8>::new("op".into());
        b.declare(&LOG).unwrap();
        (COUNT, ()).declare(&mut b).unwrap();
        let count = DeclaredState::<ValueStateDescriptor<u64>>::at(1);
        with(&mut b, 1, |c| c.state(count).unwrap().update(3));
        assert_eq!(with(&mut b, 1, |c| c.state(&COUNT).unwrap().value()).0, 3);
        // Declared states were checked when declared: another type there means the state
        // was replaced, and the record fails with a panic naming it.
        let wrong = DeclaredState::<ValueStateDescriptor<String>>::at(1);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with(&mut b, 1, |c| c.state(wrong).map(|_| ()))
        }));
        let message = *panicked.unwrap_err().downcast::<String>().unwrap();
        assert!(
            message.contains("state `count` was declared as ValueState<u64>"),
            "{message}"
        );
        let e = (WRONG, ()).declare(&mut b).unwrap_err();
        assert!(matches!(e, Error::StateType { .. }), "{e}");
    }
}
