//! Change tracking of operator state: which keys changed since the engine last wrote them
//! back.
//!
//! Each stateful operator's state is generic over a [`KeyChanges`] type the engine picks:
//! an engine that keeps state in the process needs no write-back and picks the zero-sized
//! [`NoChanges`], whose `mark` compiles to nothing; an engine that writes changed keys back
//! after each batch picks a set of keys.

use crate::api::state::{OpenState, OpenedState};
use crate::Error;

/// The keys of an operator's state that changed since the engine last wrote them back.
pub trait KeyChanges<K>: Default + Clone + 'static {
    /// What the engine keeps beside each key's window panes: `()` for an engine that
    /// keeps state only in the process; the Redis engine's record of the panes it wrote.
    type Written: Written;

    /// Notes that `key`'s state changed.
    fn mark(&mut self, key: &K);

    /// Notes that `key` has no state in memory. An engine that loads state lazily notes
    /// the key as missing when it does not know the key to be absent from its store: the
    /// record then runs again once the key is loaded.
    ///
    /// # Errors
    /// [`Error::StateDecode`] when the key's stored state does not decode: the record
    /// fails.
    #[inline(always)]
    fn missing(&mut self, key: &K) -> Result<(), Error> {
        let _ = key;
        Ok(())
    }
}

/// An engine's record, per key, of the window panes it wrote back.
pub trait Written: Default + Clone + 'static {
    /// Whether it records nothing (a key without panes and without a record goes).
    fn is_empty(&self) -> bool;
}

impl Written for () {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        true
    }
}

/// Tracks nothing: for state that only lives in the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoChanges;

impl<K> KeyChanges<K> for NoChanges {
    type Written = ();

    #[inline(always)]
    fn mark(&mut self, _key: &K) {}
}

/// The change tracking of a keyed process operator's state, and the engine's part in
/// opening one of its states for the first time.
pub trait ProcessTracking<K>: OpenState<K> + Default + Clone + 'static {
    /// Whether collection states log which elements each record changed (an engine that
    /// writes them back one by one); the memory engine's states log nothing.
    const TRACKS_ELEMENTS: bool = false;

    /// Notes that the states in `changed` changed for `key` (bit `i`: the operator's `i`-th
    /// state; the last bit: every state from the 64th on).
    fn mark_states(&mut self, changed: u64, key: &K);

    /// Notes that `key`'s timers changed.
    fn mark_timers(&mut self, key: &K);

    /// Notes that a record or timer of `key` runs: an engine that loads state lazily notes
    /// the key as missing when its state is not in memory (the record then runs again
    /// once it is loaded).
    ///
    /// # Errors
    /// [`Error::StateDecode`] when the key's stored state does not decode: the record or
    /// timer fails.
    #[inline(always)]
    fn touch(&mut self, key: &K) -> Result<(), Error> {
        let _ = key;
        Ok(())
    }
}

impl<K> OpenState<K> for NoChanges {
    #[inline]
    fn open(
        &mut self,
        _operator: &str,
        _state: &OpenedState<'_>,
        _load: &mut dyn FnMut(K, &str) -> Result<(), String>,
    ) -> Result<(), Error> {
        Ok(())
    }
}

impl<K: 'static> ProcessTracking<K> for NoChanges {
    #[inline(always)]
    fn mark_states(&mut self, _changed: u64, _key: &K) {}

    #[inline(always)]
    fn mark_timers(&mut self, _key: &K) {}
}
