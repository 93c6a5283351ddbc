//! Fused push operators shared by both engines.
//!
//! A pipeline runs as one value of nested generic operator structs — `Map<F, U, Filter<G,
//! Sink<S>>>` — so every call on the per-record path is static and LLVM inlines the chain
//! into the source loop. Neither `dyn` nor `Box` nor a per-record allocation is on that path.
//!
//! Most users build pipelines with [`MemoryEnv`](crate::MemoryEnv)'s builder API or the
//! `pipeline!` macro; these types are what both expand to.

mod changes;
pub(crate) mod effects;
mod join_output;
mod keyed;
mod merge;
pub(crate) mod process;
mod process_fn;
mod side_output;
mod sink;
mod stateless;
mod sum;
mod timers;
mod two_inputs;
mod watermark;
pub(crate) mod window;

pub(crate) use changes::{KeyChanges, NoChanges, ProcessTracking};
pub use join_output::{JoinOutput, SplitLate};
pub use keyed::KeyedTable;
pub(crate) use keyed::{KeyedReduce, KeyedSum};
pub use merge::Convert;
pub(crate) use merge::{Merge, MergeInput};
pub(crate) use process::KeyedProcess;
pub use process::{NoTimers, OnTimer, ProcessFn, ProcessState};
#[cfg(feature = "redis")]
pub(crate) use side_output::PendingOutput;
pub use side_output::SideOutput;
pub(crate) use sink::{ChainEnd, SinkOp};
pub(crate) use stateless::{Filter, FlatMap, Map, TryMap};
pub(crate) use sum::{Itself, One};
pub use two_inputs::{Event, Fed, InBand};
pub(crate) use two_inputs::{FedInBand, Side, TwoInputChain};
pub(crate) use watermark::AssignWatermarks;
pub use watermark::{RecordTimestamp, WatermarkState};
pub(crate) use window::{
    AggregatingFunction, ApplyingFunction, ReducingFunction, SummingFunction, WindowOperator,
};
pub use window::{
    ApplyBody, NoRejectedOutput, RejectedOutput, RejectedTo, WindowFunction, WindowState,
};

use crate::Error;
pub(crate) use crate::OperatorId;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A push operator: receives records with their event timestamps (ms) and watermarks.
///
/// Call order: `open`, then any mix of `process` and `on_watermark` (watermarks never
/// decrease), then at end of input `on_watermark(i64::MAX)` and `finish`, and always
/// `close` last — also after an error.
pub trait Operator<T> {
    /// Prepares this operator and the ones after it.
    ///
    /// # Errors
    /// A sink that fails to open.
    fn open(&mut self) -> Result<(), Error>;

    /// Handles one record with event time `timestamp` (ms).
    ///
    /// # Errors
    /// A failing or panicking user function, named by its [`OperatorId`].
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error>;

    /// Handles a watermark: no record with a timestamp at or below `watermark` is expected.
    ///
    /// # Errors
    /// As [`process`](Self::process), for functions run by timers or windows firing.
    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error>;

    /// Processing time (wall clock, epoch ms) has reached `now`: fire due processing-time
    /// timers. Only the Redis engine calls it (between batches, from the partition's
    /// subtask); the memory engine derives processing time from record timestamps. The
    /// default does nothing: an operator with a downstream operator must forward
    /// it.
    ///
    /// # Errors
    /// As [`process`](Self::process), for functions run by timers.
    fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
        let _ = now;
        Ok(())
    }

    /// End of input: flush everything still buffered (timers, windows).
    ///
    /// # Errors
    /// As [`process`](Self::process).
    fn finish(&mut self) -> Result<(), Error>;

    /// Releases resources (closes sinks). Called exactly once, also after an error.
    ///
    /// # Errors
    /// A sink that fails to close.
    fn close(&mut self) -> Result<(), Error>;
}

/// Runs a user function, turning a panic into [`Error::Panic`] naming `operator`.
///
/// The unwind guard costs nothing when the function cannot panic and is cheap otherwise;
/// the benchmark in `benches/` measures the chain against a hand-written loop.
#[inline(always)]
pub(crate) fn guard<R>(operator: &OperatorId, f: impl FnOnce() -> R) -> Result<R, Error> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => Ok(r),
        Err(payload) => Err(panic_error(operator, payload)),
    }
}

#[cold]
fn panic_error(operator: &OperatorId, payload: Box<dyn std::any::Any + Send>) -> Error {
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    };
    Error::Panic {
        operator: operator.clone(),
        message,
    }
}

/// Wraps an error a user function returned. An [`Error`] of this crate that the function
/// passed on with `?` (e.g. [`Error::StateType`]) is returned as it is: it already names
/// the operator.
#[cold]
pub(crate) fn user_error(operator: &OperatorId, source: crate::BoxError) -> Error {
    match source.downcast::<Error>() {
        // A permanent error is the user's own: it names the operator like any other.
        Ok(own) if matches!(*own, Error::Permanent { .. }) => Error::UserFunction {
            operator: operator.clone(),
            source: own,
        },
        Ok(own) => *own,
        Err(source) => Error::UserFunction {
            operator: operator.clone(),
            source,
        },
    }
}

/// Forwards lifecycle methods of an operator to the operator in its field `next`: all of
/// them (`forward_lifecycle!()`: `open`, `on_watermark`, `on_processing_time`, `finish`,
/// `close`), or those listed after the field's name (`forward_lifecycle!(0; open, close)`
/// for the operator in field `0`), for an operator that does its own work in the others.
macro_rules! forward_lifecycle {
    () => {
        $crate::ops::forward_lifecycle!(next; open, on_watermark, on_processing_time, finish, close);
    };
    ($field:tt; $($method:ident),+ $(,)?) => {
        $($crate::ops::forward_lifecycle!(@ $field $method);)+
    };
    (@ $field:tt on_watermark) => {
        $crate::ops::forward_lifecycle!(@ $field on_watermark(watermark));
    };
    (@ $field:tt on_processing_time) => {
        $crate::ops::forward_lifecycle!(@ $field on_processing_time(now));
    };
    (@ $field:tt $method:ident) => {
        $crate::ops::forward_lifecycle!(@ $field $method());
    };
    // Every lifecycle method takes no argument or one time (ms).
    (@ $field:tt $method:ident($($time:ident)?)) => {
        #[inline]
        fn $method(&mut self $(, $time: i64)?) -> Result<(), $crate::Error> {
            self.$field.$method($($time)?)
        }
    };
}
pub(crate) use forward_lifecycle;

/// Operator state shared with the checkpoint coordinator (single thread).
pub(crate) type Shared<S> = std::rc::Rc<std::cell::RefCell<S>>;

/// Counters kept by the operators of one pipeline run; read back as
/// [`JobSummary`](crate::memory::JobSummary).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) late_elements: std::cell::Cell<u64>,
    pub(crate) window_firings: std::cell::Cell<u64>,
    pub(crate) window_gap_dropped: std::cell::Cell<u64>,
    pub(crate) window_bounds_rejected: std::cell::Cell<u64>,
    /// Source records the memory engine dead-lettered.
    pub(crate) dead_letters: std::cell::Cell<u64>,
    /// Without a rejected-element output, a record whose window bounds overflow fails
    /// with [`Error::WindowBounds`] (it is dead-lettered) instead of being counted and
    /// logged (the memory engine when it stops on the first failure).
    pub(crate) window_bounds_fail_record: bool,
    /// A failed record is dead-lettered and the run goes on (the memory engine, unless it
    /// stops on the first failure): an [`AssignWatermarks`] then undoes what the failed
    /// record did to its generator.
    pub(crate) undo_failed_records: bool,
    /// Set by a window operator that rejects the record it was handed (window bounds
    /// overflow); an [`AssignWatermarks`] upstream reads it after pushing the record and
    /// then leaves its generator and watermark as they were before that record.
    pub(crate) record_rejected: std::cell::Cell<bool>,
    /// Set when a window operator (which may reject records) is built: only then does an
    /// [`AssignWatermarks`] keep a copy of its generator to undo a rejected record.
    pub(crate) may_reject_records: std::cell::Cell<bool>,
}

impl Counters {
    pub(crate) fn add_late(&self) {
        self.late_elements.set(self.late_elements.get() + 1);
    }
    pub(crate) fn add_firing(&self) {
        self.window_firings.set(self.window_firings.get() + 1);
    }
    pub(crate) fn add_gap_dropped(&self) {
        self.window_gap_dropped
            .set(self.window_gap_dropped.get() + 1);
    }
    pub(crate) fn add_dead_letter(&self) {
        self.dead_letters.set(self.dead_letters.get() + 1);
    }
    pub(crate) fn add_window_bounds_rejected(&self) {
        self.window_bounds_rejected
            .set(self.window_bounds_rejected.get() + 1);
    }
}
