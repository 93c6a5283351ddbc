//! [`Runtime`]: what an engine gives the operators of a pipeline it builds.
//!
//! Engine differences are types: an operator's state is generic over the engine's change
//! tracking ([`Runtime::Changes`]) and a keyed process operator over its clock
//! ([`Runtime::Clock`]), so the memory engine's operators carry no flag and no tracking
//! code at all, and the Redis engine's remember exactly the keys to write back.

use crate::ops::{Counters, KeyChanges, OperatorId, ProcessTracking, SideOutput, WatermarkState};
use crate::sealed::Sealed;
use crate::time::Clock;
use crate::Error;
use std::cell::RefCell;
use std::hash::Hash;
use std::rc::Rc;

/// What an engine gives the operators it builds: change tracking and clock as types, the
/// watermark store and the counters. State stores come from [`StoreFactory`], implemented
/// for the state types the engine can keep; side outputs from [`SideOutputFactory`].
pub trait Runtime: Sealed {
    /// The keys of an operator's state changed since the engine last wrote them back:
    /// `NoChanges` (zero-sized, tracks nothing) on an engine that
    /// keeps state in the process, a set of keys on one that writes state back.
    type Changes<K: Hash + Eq + Clone + 'static>: KeyChanges<K>;

    /// The same for a keyed process operator's states (per state) and timers, with the
    /// engine's part in opening a state for the first time: nothing on the memory engine;
    /// on the Redis engine the check that the state can be kept, its schema check and the
    /// stored entries to decode.
    type ProcessChanges<K: Hash + Eq + Clone + 'static>: ProcessTracking<K>;

    /// The processing time of keyed process functions: the highest record timestamp
    /// ([`RecordClock`](crate::time::RecordClock)) or the wall clock
    /// ([`WallClock`](crate::time::WallClock)).
    type Clock: Clock;

    /// The state of the watermark-assigning operator `operator`: a plain cell, or one the
    /// engine keeps with the partition's other state.
    fn watermark_state(
        &self,
        operator: &OperatorId,
    ) -> Rc<RefCell<WatermarkState<Self::Changes<()>>>>;

    /// The counters the chain's operators report to (window firings, late elements, a
    /// record rejected by a window).
    #[doc(hidden)]
    fn counters(&self) -> Rc<Counters>;
}

/// Creates the state store of a stateful operator. Each engine's runtime implements it for
/// the state types it can keep: the memory engine's for every `Clone + 'static` state, the
/// Redis engine's only for state it can persist (serde `Serialize + DeserializeOwned`).
#[diagnostic::on_unimplemented(
    message = "this operator's state cannot be kept by `{Self}`",
    label = "state type `{S}` is not supported here",
    note = "on the Redis engine keyed state lives in Redis as JSON: keys and values must be serde `Serialize + DeserializeOwned`",
    note = "for windows on the Redis engine that includes the key, the accumulator (e.g. `reduce`'s element type, an `AggregateFunction`'s `Acc`) and a custom trigger"
)]
pub trait StoreFactory<S>: Runtime {
    /// A new store for `operator`'s state, starting from `init` (or from what the engine
    /// restores for it).
    ///
    /// # Errors
    /// Restoring the state failed.
    fn store(&self, operator: &OperatorId, init: S) -> Result<Rc<RefCell<S>>, Error>;
}

/// Wraps a side-output sink (a window's late data) for the engine: the memory runtime
/// delivers each record at once; the Redis runtime buffers them and delivers them with the
/// batch that produced them, so a rolled-back batch delivers nothing.
pub trait SideOutputFactory<T, L>: Sealed {
    /// The side output writing to `sink`.
    fn side_output(&self, sink: L) -> SideOutput<T, L>;
}
