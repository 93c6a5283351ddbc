//! What the one-input and the two-input test drivers share: the built chain (fed `H`:
//! the input's records, or the [`Fed`](crate::ops::Fed) events of two inputs), its
//! outputs, keyed-state stores and counters, processing time, and the closing rules.

use crate::dataflow::{BuildPlan, Plan};
use crate::memory::failures::RecordFailures;
use crate::memory::runtime::StoreRegistry;
use crate::memory::{DeadLetter, DrivenClock, JobSummary, MemoryRuntime, OnRecordError};
use crate::ops::{forward_lifecycle, ChainEnd, Counters, Operator};
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// A driver's chain and what it reads from it.
pub(super) struct Core<H, Out> {
    chain: Box<dyn Operator<H>>,
    /// What a failing record does.
    on_record_error: OnRecordError,
    output: Rc<RefCell<Vec<(Out, i64)>>>,
    pub(super) stores: StoreRegistry,
    counters: Rc<Counters>,
    pub(super) processing_time: i64,
    closed: bool,
}

/// The runtime a plan is built with, from the driver's memory runtime: the runtime
/// itself (a one-input fragment) or the runtime inside a two-input fragment.
pub(super) type RuntimeOf<R> = fn(&MemoryRuntime<DrivenClock>) -> &R;

/// Checks a source id the driver's operator ids start with.
///
/// # Errors
/// [`Error::InvalidConfig`] (field `source_id`) for an id that is empty or has characters
/// outside `[A-Za-z0-9_.-]`.
pub(super) fn check_source_id(source_id: &str) -> Result<(), Error> {
    let id_ok = !source_id.is_empty()
        && (source_id.bytes()).all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if id_ok {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        field: "source_id",
        reason: format!("`{source_id}` must be non-empty and use only [A-Za-z0-9_.-]"),
    })
}

impl<H: 'static, Out: 'static> Core<H, Out> {
    /// Builds `plan` with the runtime `runtime` picks from a driven memory runtime, in
    /// front of a sink collecting the outputs with their timestamps, and opens it.
    ///
    /// # Errors
    /// Building the operators failed, or one failed to open.
    pub(super) fn build<P, R>(
        plan: P,
        on_record_error: OnRecordError,
        runtime: RuntimeOf<R>,
    ) -> Result<Self, Error>
    where
        P: BuildPlan<R> + Plan<Head = H, Out = Out> + 'static,
        R: 'static,
    {
        let mut rt = MemoryRuntime::<DrivenClock>::driven(on_record_error);
        let stores = StoreRegistry::default();
        rt.stores = Some(Rc::clone(&stores));
        let output = Rc::new(RefCell::new(Vec::new()));
        let collected = Rc::clone(&output);
        let collect = ChainEnd::new(move |value: Out, timestamp| {
            collected.borrow_mut().push((value, timestamp));
            Ok(())
        });
        let (_root, chain) = plan.build(runtime(&rt), collect)?;
        let mut core = Core {
            chain: Box::new(chain),
            on_record_error,
            output,
            stores,
            counters: Rc::clone(&rt.counters),
            processing_time: i64::MIN,
            closed: false,
        };
        core.run(|chain| chain.open())?;
        Ok(core)
    }

    /// Pushes one record, as `wrap(value)`, through the chain. A record that fails is
    /// handled by the driver's [`OnRecordError`]: a dead letter goes to `dead_letters`.
    ///
    /// # Errors
    /// The driver is closed; the record's error under [`OnRecordError::StopRun`],
    /// [`Error::RecordNotUndone`]: the driver is closed afterwards.
    pub(super) fn feed<T: Clone>(
        &mut self,
        value: T,
        event_time: i64,
        wrap: fn(T) -> H,
        dead_letters: &mut Vec<DeadLetter<T>>,
    ) -> Result<(), Error> {
        if self.closed {
            return Err(closed_error());
        }
        let mut out = |letter| {
            dead_letters.push(letter);
            Ok(())
        };
        let failures = RecordFailures::new(self.on_record_error, Rc::clone(&self.counters));
        let mut failures = failures.keeping(<T as Clone>::clone, &mut out);
        let mut chain = Wrapped {
            chain: &mut *self.chain,
            wrap,
        };
        let result = failures.feed(&mut chain, value, event_time);
        if result.is_err() {
            let _ = self.close();
        }
        result
    }

    /// Runs `step` on the chain unless the driver is closed; closes it on an error.
    ///
    /// # Errors
    /// The driver is closed, or `step`'s error.
    pub(super) fn run(
        &mut self,
        step: impl FnOnce(&mut dyn Operator<H>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if self.closed {
            return Err(closed_error());
        }
        let result = step(&mut *self.chain);
        if result.is_err() {
            let _ = self.close();
        }
        result
    }

    /// Moves processing time to `now` with `step` (which tells the chain); a value at or
    /// below the current one does nothing.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub(super) fn advance_processing_time(
        &mut self,
        now: i64,
        step: impl FnOnce(&mut dyn Operator<H>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if now <= self.processing_time {
            return Ok(());
        }
        self.processing_time = now;
        self.run(step)
    }

    /// Closes the chain once.
    ///
    /// # Errors
    /// An operator that failed to close.
    pub(super) fn close(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        self.chain.close()
    }

    pub(super) fn output_with_timestamps(&mut self) -> Vec<(Out, i64)> {
        std::mem::take(&mut *self.output.borrow_mut())
    }

    pub(super) fn summary(&self) -> JobSummary {
        JobSummary::from_counters(&self.counters)
    }
}

impl<H, Out> Core<H, Out> {
    pub(super) fn is_closed(&self) -> bool {
        self.closed
    }
}

impl<H, Out> Drop for Core<H, Out> {
    fn drop(&mut self) {
        if !std::mem::replace(&mut self.closed, true) {
            let _ = self.chain.close();
        }
    }
}

/// The error of a call on a closed driver.
pub(super) fn closed_error() -> Error {
    Error::Engine {
        op: "test driver",
        reason: "the driver is closed (finished, or an earlier call failed)".into(),
    }
}

/// The driver's chain as an operator of one input's records, each wrapped by `wrap`, for
/// the failure handling's record loop.
struct Wrapped<'a, H, T> {
    chain: &'a mut dyn Operator<H>,
    wrap: fn(T) -> H,
}

impl<H, T> Operator<T> for Wrapped<'_, H, T> {
    forward_lifecycle!(chain; open, on_watermark, on_processing_time, finish, close);

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        self.chain.process((self.wrap)(value), timestamp)
    }
}

/// The outputs and counters both drivers read, over their field `core`.
macro_rules! driver_reads {
    () => {
        /// Takes the records the fragment emitted since the last call, in order.
        pub fn output(&mut self) -> Vec<Out> {
            self.output_with_timestamps()
                .into_iter()
                .map(|(v, _)| v)
                .collect()
        }

        /// Like [`output`](Self::output), each record with its timestamp (ms; a window's
        /// results carry the window's `max_timestamp`).
        pub fn output_with_timestamps(&mut self) -> Vec<(Out, i64)> {
            self.core.output_with_timestamps()
        }

        /// The processing time set last (ms; `i64::MIN` before any).
        pub fn processing_time(&self) -> i64 {
            self.core.processing_time
        }

        /// The counters so far: late elements, window firings, elements between windows,
        /// rejected elements, dead letters.
        pub fn summary(&self) -> $crate::memory::JobSummary {
            self.core.summary()
        }
    };
}
pub(super) use driver_reads;
