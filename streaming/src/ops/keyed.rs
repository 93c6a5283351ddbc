//! Keyed operators without windows: rolling reduce and sum.

use super::changes::KeyChanges;
use super::sum::Summand;
use super::{effects, forward_lifecycle, guard, Operator, OperatorId, Shared};
use crate::api::Numeric;
use crate::Error;
use std::collections::HashMap;
use std::hash::Hash;

/// The per-key table of a rolling reduce or sum: the values, and the keys changed since the
/// engine last wrote them back (`C`, the engine's `KeyChanges`: nothing on the memory
/// engine).
#[derive(Clone, Debug)]
pub struct KeyedTable<K, V, C> {
    pub(crate) map: HashMap<K, V>,
    pub(crate) changes: C,
}

impl<K, V, C: Default> Default for KeyedTable<K, V, C> {
    fn default() -> Self {
        KeyedTable {
            map: HashMap::new(),
            changes: C::default(),
        }
    }
}

/// Rolling reduce per key (Flink `KeyedStream.reduce`): emits the updated value for every
/// element.
pub struct KeyedReduce<KF, K, T, F, C, N> {
    id: OperatorId,
    key_fn: KF,
    f: F,
    state: Shared<KeyedTable<K, Option<T>, C>>,
    next: N,
}

impl<KF, K, T, F, C, N> KeyedReduce<KF, K, T, F, C, N> {
    pub(crate) fn new(
        id: OperatorId,
        key_fn: KF,
        f: F,
        state: Shared<KeyedTable<K, Option<T>, C>>,
        next: N,
    ) -> Self {
        KeyedReduce {
            id,
            key_fn,
            f,
            state,
            next,
        }
    }
}

impl<KF, K, T, F, C, N> Operator<T> for KeyedReduce<KF, K, T, F, C, N>
where
    KF: FnMut(&T) -> K,
    K: Hash + Eq + Clone,
    T: Clone,
    F: FnMut(T, T) -> T,
    C: KeyChanges<K>,
    N: Operator<T>,
{
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let key = guard(&self.id, || (self.key_fn)(&value))?;
        let out = {
            let mut table = self.state.borrow_mut();
            table.changes.mark(&key);
            match table.map.get_mut(&key) {
                Some(slot) => {
                    // One hash lookup: the slot is taken for the call and refilled. After a
                    // panic the pipeline fails, so an emptied slot is never read again.
                    let acc = slot.take().expect("reduce slot refilled after every call");
                    // A panic consumed the key's value: the slot stays empty.
                    let reduced =
                        guard(&self.id, || (self.f)(acc, value)).map_err(effects::left_behind)?;
                    slot.insert(reduced).clone()
                }
                None => {
                    table.changes.missing(&key)?;
                    table.map.insert(key, Some(value.clone()));
                    value
                }
            }
        };
        // The key's value changed: a failure further down leaves it changed.
        self.next
            .process(out, timestamp)
            .map_err(effects::left_behind)
    }
    forward_lifecycle!();
}

/// Rolling sum per key of what `X` adds per element (`sum`: the element, `sum_by(f)`:
/// `f(element)`): emits `(key, sum so far)` for every element.
pub struct KeyedSum<KF, K, X, V, C, N> {
    id: OperatorId,
    key_fn: KF,
    summand: X,
    state: Shared<KeyedTable<K, V, C>>,
    next: N,
}

impl<KF, K, X, V, C, N> KeyedSum<KF, K, X, V, C, N> {
    pub(crate) fn new(
        id: OperatorId,
        key_fn: KF,
        summand: X,
        state: Shared<KeyedTable<K, V, C>>,
        next: N,
    ) -> Self {
        KeyedSum {
            id,
            key_fn,
            summand,
            state,
            next,
        }
    }
}

impl<T, KF, K, X, V, C, N> Operator<T> for KeyedSum<KF, K, X, V, C, N>
where
    KF: FnMut(&T) -> K,
    K: Hash + Eq + Clone,
    X: Summand<T, Value = V>,
    V: Numeric,
    C: KeyChanges<K>,
    N: Operator<(K, V)>,
{
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let key = guard(&self.id, || (self.key_fn)(&value))?;
        let v = guard(&self.id, || self.summand.value(value))?;
        let sum = {
            let mut table = self.state.borrow_mut();
            table.changes.mark(&key);
            match table.map.get_mut(&key) {
                Some(acc) => {
                    *acc = guard(&self.id, || *acc + v)?;
                    *acc
                }
                None => {
                    table.changes.missing(&key)?;
                    table.map.insert(key.clone(), v);
                    v
                }
            }
        };
        // The key's sum changed: a failure further down leaves it changed.
        self.next
            .process((key, sum), timestamp)
            .map_err(effects::left_behind)
    }
    forward_lifecycle!();
}
