//! A test driver for pipelines written as functions: push records, move the watermark and
//! processing time step by step, read the outputs, keyed state, pending timers and
//! counters. Deterministic, one thread, no Redis, no sleeping: what Kafka Streams'
//! `TopologyTestDriver` and Flink's operator test harnesses give. [`TestDriver`] runs a
//! fragment of one input, [`TwoInputTestDriver`] one of two (each input pushed,
//! watermarked and ended on its own).
//!
//! The driver runs a [fragment](crate::fragment) — the same function a service splices
//! into its Redis pipeline with [`DataStream::transform`](crate::DataStream::transform) —
//! on the memory engine's operators:
//!
//! ```
//! use std::time::Duration;
//! use streaming::fragment::{Fragment, Input};
//! use streaming::testing::TestDriver;
//! use streaming::time::{BoundedOutOfOrderness, TumblingEventTimeWindows};
//! use streaming::pipeline;
//!
//! /// Each customer's total per minute of event time (orders are `(customer, cents, ms)`).
//! fn totals(orders: Input<(String, i64, i64)>) -> impl Fragment<(String, i64, i64), Out = (String, i64, i64)> {
//!     pipeline! {
//!         orders
//!             .assign_timestamps_and_watermarks_with(
//!                 |o: &(String, i64, i64), _| o.2,
//!                 BoundedOutOfOrderness::new(Duration::ZERO),
//!             )
//!             .key_by(|o: &(String, i64, i64)| o.0.clone())
//!             .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
//!             .sum_by(|o: &(String, i64, i64)| o.1)
//!             .map(|(customer, window, total)| (customer, window.start(), total))
//!     }
//! }
//!
//! let mut driver = TestDriver::new(totals)?;
//! let order = |c: &str, cents, ms| ((c.to_string(), cents, ms), ms);
//! driver.push_all([order("ann", 300, 1_000), order("bob", 50, 2_000), order("ann", 200, 59_000)])?;
//! assert!(driver.output().is_empty()); // the minute is still open
//! driver.push_all([order("ann", 1, 60_000)])?; // the watermark passes 59 999
//! assert_eq!(driver.output(), [("ann".to_string(), 0, 500), ("bob".to_string(), 0, 50)]);
//! driver.finish()?;
//! assert_eq!(driver.output(), [("ann".to_string(), 60_000, 1)]);
//! # Ok::<(), streaming::Error>(())
//! ```
//!
//! What the driver does and does not do:
//! - Records go through the fragment's operators exactly as on the memory engine, one call
//!   per [`push`](TestDriver::push); outputs are collected in order with their timestamps.
//! - [`advance_watermark`](TestDriver::advance_watermark) is the watermark of the input: the
//!   fragment's operators see it up to its own `assign_timestamps_and_watermarks*`, whose
//!   generator then owns the watermark (as in Flink), so there the records' event times move
//!   it.
//! - Processing time moves only with
//!   [`advance_processing_time`](TestDriver::advance_processing_time), which fires the due
//!   processing-time timers; a record's processing time is the last one set (starting at
//!   `i64::MIN`).
//! - [`finish`](TestDriver::finish) ends the input like the memory engine does: the
//!   watermark becomes `i64::MAX` (every event-time timer fires, every window emits), then
//!   the operators finish and close.
//! - Side outputs (late data, rejected elements) go to the sinks the fragment was given:
//!   pass a [`CollectSink`](crate::api::CollectSink) in a test.
//! - A record that fails (an `Err` of `try_map` or a process function, a panic, window
//!   bounds) is handled as on the memory engine: by default it is dead-lettered — read it
//!   with [`dead_letters`](TestDriver::dead_letters): the record, error type, message,
//!   attempts, operator — and the driver goes on ([`TestDriver::builder`] picks another
//!   [`OnRecordError`]). Any other error (a failing timer
//!   or window function, a sink, a record whose effects cannot be undone) is returned by
//!   the call that hit it, and the driver is closed afterwards: later calls return
//!   [`Error::Engine`] (`op` = `test driver`).

mod core;
mod state;
mod two_inputs;

pub use state::PendingTimer;
pub use two_inputs::{
    TwoInputTestDriver, TwoInputTestDriverBuilder, DEFAULT_FIRST_SOURCE_ID,
    DEFAULT_SECOND_SOURCE_ID,
};

use self::core::{check_source_id, driver_reads, Core};
use self::state::state_reads;
use crate::dataflow::DataStream;
use crate::fragment::{Fragment, FragmentInput};
use crate::memory::{DeadLetter, DrivenClock, MemoryRuntime, OnRecordError};
use crate::time::StreamTime;
use crate::Error;

/// Drives one [fragment](crate::fragment) record by record; see the
/// [module docs](crate::testing).
///
/// `In` is the fragment's input element type, `Out` its output's.
pub struct TestDriver<In, Out> {
    core: Core<In, Out>,
    dead_letters: Vec<DeadLetter<In>>,
    watermark: i64,
}

impl<In, Out> std::fmt::Debug for TestDriver<In, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDriver")
            .field("watermark", &self.watermark)
            .field("processing_time", &self.core.processing_time)
            .field("closed", &self.core.is_closed())
            .finish_non_exhaustive()
    }
}

/// The source id of [`TestDriver::new`]'s input.
pub const DEFAULT_SOURCE_ID: &str = "input";

/// How a [`TestDriver`] is set up: the source id its operator ids start with and what a
/// failing record does. From [`TestDriver::builder`].
#[derive(Clone, Debug)]
pub struct TestDriverBuilder {
    source_id: String,
    on_record_error: OnRecordError,
}

impl TestDriverBuilder {
    /// The operator ids the fragment gets behind a source with id `source_id` at position
    /// 0 (e.g. `orders.checkout` for `from_mq_topic("orders", "checkout")` followed
    /// directly by the fragment); default [`DEFAULT_SOURCE_ID`].
    pub fn source_id(mut self, source_id: impl Into<String>) -> Self {
        self.source_id = source_id.into();
        self
    }

    /// What a record that fails does, as on the memory engine
    /// ([`MemoryEnv::on_record_error`](crate::MemoryEnv::on_record_error)); default
    /// [`OnRecordError::default`]: it is dead-lettered and the driver goes on.
    pub fn on_record_error(mut self, policy: OnRecordError) -> Self {
        self.on_record_error = policy;
        self
    }

    /// Builds `fragment` (a function from [`Input<In>`](crate::fragment::Input) to a
    /// [`Fragment`]) and opens its operators.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `source_id`) for an id that is empty or has
    /// characters outside `[A-Za-z0-9_.-]`; a configuration error of the fragment (e.g. a
    /// window size of 0); an operator that failed to open.
    pub fn build<In, Out, F, G, Tm>(self, fragment: G) -> Result<TestDriver<In, Out>, Error>
    where
        In: Clone + 'static,
        Out: 'static,
        G: FnOnce(crate::fragment::Input<In, Tm>) -> F,
        F: Fragment<In, Tm, Out = Out>,
        Tm: StreamTime,
    {
        check_source_id(&self.source_id)?;
        let input = DataStream::new(FragmentInput::new(), self.source_id);
        let stream = fragment(input).into_stream()?;
        let core = Core::build(stream.plan, self.on_record_error, itself)?;
        Ok(TestDriver {
            core,
            dead_letters: Vec::new(),
            watermark: i64::MIN,
        })
    }
}

/// The driven runtime, for a one-input fragment.
fn itself(rt: &MemoryRuntime<DrivenClock>) -> &MemoryRuntime<DrivenClock> {
    rt
}

impl TestDriver<(), ()> {
    /// A builder to choose the source id or the failing-record policy before building.
    pub fn builder() -> TestDriverBuilder {
        TestDriverBuilder {
            source_id: DEFAULT_SOURCE_ID.to_string(),
            on_record_error: OnRecordError::default(),
        }
    }
}

impl<In: Clone + 'static, Out: 'static> TestDriver<In, Out> {
    /// Builds `fragment` (a function from [`Input<In>`](crate::fragment::Input) to a
    /// [`Fragment`]) and opens its operators: operator ids start at
    /// [`DEFAULT_SOURCE_ID`] (`input/1:map`, `input/3:process`, …), a failing record is
    /// dead-lettered ([`OnRecordError::default`]). [`TestDriver::builder`] chooses
    /// otherwise.
    ///
    /// # Errors
    /// A configuration error of the fragment (e.g. a window size of 0), or an operator
    /// that failed to open.
    pub fn new<F, G, Tm>(fragment: G) -> Result<Self, Error>
    where
        G: FnOnce(crate::fragment::Input<In, Tm>) -> F,
        F: Fragment<In, Tm, Out = Out>,
        Tm: StreamTime,
    {
        TestDriver::builder().build(fragment)
    }

    /// Pushes one record with event time `event_time` (epoch ms) through the fragment.
    /// A record that fails is handled by the driver's [`OnRecordError`]: by default it is
    /// dead-lettered (read it with [`dead_letters`](Self::dead_letters)) and the call
    /// returns `Ok`; what it changed and emitted before failing is not kept (or, where that
    /// cannot be undone, the call fails with
    /// [`Error::RecordNotUndone`]), as on the memory engine.
    ///
    /// # Errors
    /// The record's error under [`OnRecordError::StopRun`], `RecordNotUndone`; the driver
    /// is closed afterwards. [`Error::Engine`] (`op` = `test driver`) when the driver is
    /// closed.
    pub fn push(&mut self, value: In, event_time: i64) -> Result<(), Error> {
        let same: fn(In) -> In = |value| value;
        (self.core).feed(value, event_time, same, &mut self.dead_letters)
    }

    /// Takes the dead letters of the records that failed since the last call, in order.
    pub fn dead_letters(&mut self) -> Vec<DeadLetter<In>> {
        std::mem::take(&mut self.dead_letters)
    }

    /// Pushes `(record, event time)` pairs in order.
    ///
    /// # Errors
    /// As [`push`](Self::push); the records after the failing one are not pushed.
    pub fn push_all(&mut self, records: impl IntoIterator<Item = (In, i64)>) -> Result<(), Error> {
        records
            .into_iter()
            .try_for_each(|(value, event_time)| self.push(value, event_time))
    }

    /// Moves the input's watermark to `watermark` (ms); a value at or below the current
    /// one does nothing (watermarks never decrease). Event-time timers and windows up to it
    /// fire, unless a watermark generator in the fragment owns the watermark (see the
    /// [module docs](crate::testing)).
    ///
    /// # Errors
    /// As [`push`](Self::push), for functions the watermark runs.
    pub fn advance_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        if watermark <= self.watermark {
            return Ok(());
        }
        self.watermark = watermark;
        self.core.run(|chain| chain.on_watermark(watermark))
    }

    /// Moves processing time to `now` (epoch ms) and fires the processing-time timers due
    /// by then; a value at or below the current one does nothing.
    ///
    /// # Errors
    /// As [`push`](Self::push), for the timer functions.
    pub fn advance_processing_time(&mut self, now: i64) -> Result<(), Error> {
        (self.core).advance_processing_time(now, |chain| chain.on_processing_time(now))
    }

    /// Ends the input: the watermark becomes `i64::MAX` (every event-time timer fires,
    /// every window emits what it never emitted), the operators finish and close. The
    /// outputs stay readable; nothing more can be pushed.
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub fn finish(&mut self) -> Result<(), Error> {
        self.watermark = crate::time::MAX_WATERMARK;
        let result = self.core.run(|chain| {
            chain.on_watermark(crate::time::MAX_WATERMARK)?;
            chain.finish()
        });
        self.core.close().and(result)
    }

    /// The input watermark set last (`i64::MIN` before any).
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    driver_reads!();
    state_reads!();
}

#[cfg(feature = "redis")]
impl<Out: 'static> TestDriver<crate::mq::Message, Out> {
    /// Pushes a message with its own timestamp as event time (what the Redis engine
    /// does): see [`Message::new`](crate::mq::Message::new) to build one.
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub fn push_message(&mut self, message: crate::mq::Message) -> Result<(), Error> {
        let event_time = message.timestamp_ms;
        self.push(message, event_time)
    }
}
