//! Change tracking of operator state: which keys changed since the engine last wrote them
//! back.
//!
//! Each stateful operator's state is generic over a [`KeyChanges`] type the engine picks:
//! an engine that keeps state in the process needs no write-back and picks the zero-sized
//! [`NoChanges`], whose `mark` compiles to nothing; an engine that writes changed keys back
//! after each batch picks a set of keys.

/// The keys of an operator's state that changed since the engine last wrote them back.
pub trait KeyChanges<K>: Default + Clone + 'static {
    /// Notes that `key`'s state changed.
    fn mark(&mut self, key: &K);
}

/// Tracks nothing: for state that only lives in the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoChanges;

impl<K> KeyChanges<K> for NoChanges {
    #[inline(always)]
    fn mark(&mut self, _key: &K) {}
}
