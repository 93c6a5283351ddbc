//! What a test driver reads from the operators' keyed state: process functions' states
//! by key, and their pending timers.

use super::core::Core;
use crate::api::{KeyedContext, TimeDomain};
use crate::ops::{NoChanges, OperatorId, ProcessState};
use crate::Error;
use std::any::Any;
use std::cell::RefCell;
use std::hash::Hash;
use std::rc::Rc;

/// A timer a keyed process function registered that has not fired yet.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PendingTimer<K> {
    /// When it fires (ms): a watermark or a processing time at or above it.
    pub time: i64,
    /// Event time (the watermark) or processing time.
    pub domain: TimeDomain,
    /// The key it fires for.
    pub key: K,
}

fn driver_error(reason: String) -> Error {
    Error::Engine {
        op: "test driver",
        reason,
    }
}

impl<H, Out> Core<H, Out> {
    /// The ids of the operators that keep keyed state, in the order they were built.
    pub(super) fn stateful_operators(&self) -> Vec<String> {
        self.stores
            .borrow()
            .iter()
            .map(|(id, _)| id.to_string())
            .collect()
    }

    /// The store of `operator`: its full id (`input/3:process`) or, when one operator has
    /// it, the kind after the colon (`process`).
    fn store(&self, operator: &str) -> Result<Rc<dyn Any>, Error> {
        let stores = self.stores.borrow();
        let matches = |id: &OperatorId| {
            let id = id.as_str();
            id == operator
                || id
                    .rsplit_once(':')
                    .is_some_and(|(_, kind)| kind == operator)
        };
        let found: Vec<_> = stores.iter().filter(|(id, _)| matches(id)).collect();
        match found[..] {
            [(_, store)] => Ok(Rc::clone(store)),
            [] => Err(driver_error(format!(
                "no operator `{operator}` keeps keyed state here; the stateful operators are {:?}",
                self.stateful_operators()
            ))),
            _ => Err(driver_error(format!(
                "`{operator}` names several operators: use a full id of {:?}",
                self.stateful_operators()
            ))),
        }
    }

    /// The state of the keyed process operator `operator`, keyed by `K`.
    fn process_state<K: Hash + Eq + Clone + 'static>(
        &self,
        operator: &str,
    ) -> Result<Rc<RefCell<ProcessState<K, NoChanges>>>, Error> {
        self.store(operator)?
            .downcast::<RefCell<ProcessState<K, NoChanges>>>()
            .map_err(|_| {
                driver_error(format!(
                    "`{operator}` is not a keyed process operator with keys of type `{}`",
                    std::any::type_name::<K>()
                ))
            })
    }

    /// Runs `read` with the keyed context of `key` in the process operator `operator`,
    /// at `watermark`.
    ///
    /// # Errors
    /// No such operator, or it is not a keyed process operator with keys of type `K`.
    pub(super) fn with_keyed_state<K, R>(
        &self,
        operator: &str,
        key: &K,
        watermark: i64,
        read: impl FnOnce(&mut KeyedContext<'_, K>) -> R,
    ) -> Result<R, Error>
    where
        K: Hash + Eq + Clone + 'static,
    {
        let state = self.process_state::<K>(operator)?;
        let mut state = state
            .try_borrow_mut()
            .map_err(|_| driver_error("the state is in use".into()))?;
        let times = crate::ops::process::ContextTimes {
            timestamp: watermark,
            watermark,
            processing_time: self.processing_time,
            event_time: true,
        };
        let mut ignored_timers = Vec::new();
        state.with_context(key, times, &mut ignored_timers, read, |_| false)
    }

    /// The pending timers of the process operator `operator`, ordered by time, domain
    /// and key.
    ///
    /// # Errors
    /// As [`with_keyed_state`](Self::with_keyed_state).
    pub(super) fn pending_timers<K>(&self, operator: &str) -> Result<Vec<PendingTimer<K>>, Error>
    where
        K: Hash + Eq + Clone + Ord + 'static,
    {
        let state = self.process_state::<K>(operator)?;
        let state = state.borrow();
        let mut timers: Vec<PendingTimer<K>> = state
            .registered
            .iter()
            .flat_map(|(key, list)| {
                list.iter().map(|&(time, domain)| PendingTimer {
                    time,
                    domain,
                    key: key.clone(),
                })
            })
            .collect();
        timers.sort();
        Ok(timers)
    }
}

/// The keyed-state reads both drivers have, over their field `core` and their
/// `watermark()`.
macro_rules! state_reads {
    () => {
        /// The ids of the operators that keep keyed state (process functions, rolling
        /// aggregations, windows, joins), in the order they were built.
        pub fn stateful_operators(&self) -> Vec<String> {
            self.core.stateful_operators()
        }

        /// Runs `read` with the keyed context of `key` in the process operator `operator`
        /// (its full id, e.g. `input/3:process`, or `process` when there is one), as the
        /// process function would see it (its watermark is [`watermark`](Self::watermark)):
        /// open a state with `ctx.state(&descriptor)` (a descriptor with the declared name
        /// and type, e.g. `ValueStateDescriptor::<u64>::new("count", 0)`) and read it.
        /// Changes made through `ctx` are kept; timers registered through it are ignored.
        ///
        /// # Errors
        /// [`Error::Engine`](crate::Error::Engine) (`op` = `test driver`): no such
        /// operator, a name that fits several, or not a keyed process operator with keys
        /// of type `K`.
        pub fn with_keyed_state<K, R>(
            &self,
            operator: &str,
            key: &K,
            read: impl FnOnce(&mut $crate::api::KeyedContext<'_, K>) -> R,
        ) -> Result<R, $crate::Error>
        where
            K: std::hash::Hash + Eq + Clone + 'static,
        {
            self.core
                .with_keyed_state(operator, key, self.watermark(), read)
        }

        /// The pending timers of the process operator `operator` (see
        /// [`with_keyed_state`](Self::with_keyed_state) for how it is named), ordered by
        /// time, domain and key.
        ///
        /// # Errors
        /// As [`with_keyed_state`](Self::with_keyed_state).
        pub fn pending_timers<K>(
            &self,
            operator: &str,
        ) -> Result<Vec<$crate::testing::PendingTimer<K>>, $crate::Error>
        where
            K: std::hash::Hash + Eq + Clone + Ord + 'static,
        {
            self.core.pending_timers(operator)
        }
    };
}
pub(super) use state_reads;
