//! A test driver for pipelines written as functions: push records, move the watermark and
//! processing time step by step, read the outputs, keyed state, pending timers and
//! counters. Deterministic, one thread, no Redis, no sleeping: what Kafka Streams'
//! `TopologyTestDriver` and Flink's operator test harnesses give.
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

mod state;

pub use state::PendingTimer;

use crate::dataflow::DataStream;
use crate::fragment::{Fragment, FragmentInput};
use crate::memory::failures::RecordFailures;
use crate::memory::runtime::StoreRegistry;
use crate::memory::{DeadLetter, DrivenClock, JobSummary, MemoryRuntime, OnRecordError};
use crate::ops::{forward_lifecycle, ChainEnd, Counters, Operator};
use crate::time::StreamTime;
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// Drives one [fragment](crate::fragment) record by record; see the
/// [module docs](crate::testing).
///
/// `In` is the fragment's input element type, `Out` its output's.
pub struct TestDriver<In, Out> {
    chain: Box<dyn Operator<In>>,
    /// What a failing record does.
    on_record_error: OnRecordError,
    dead_letters: Vec<DeadLetter<In>>,
    output: Rc<RefCell<Vec<(Out, i64)>>>,
    stores: StoreRegistry,
    counters: Rc<Counters>,
    watermark: i64,
    processing_time: i64,
    closed: bool,
}

impl<In, Out> std::fmt::Debug for TestDriver<In, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDriver")
            .field("watermark", &self.watermark)
            .field("processing_time", &self.processing_time)
            .field("pending_output", &self.output.borrow().len())
            .field("closed", &self.closed)
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
        let id_ok = !self.source_id.is_empty()
            && (self.source_id.bytes()).all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !id_ok {
            return Err(Error::InvalidConfig {
                field: "source_id",
                reason: format!(
                    "`{}` must be non-empty and use only [A-Za-z0-9_.-]",
                    self.source_id
                ),
            });
        }
        let input = DataStream::new(FragmentInput::new(), self.source_id);
        let stream = fragment(input).into_stream()?;
        let mut rt = MemoryRuntime::<DrivenClock>::driven(self.on_record_error);
        let stores = StoreRegistry::default();
        rt.stores = Some(Rc::clone(&stores));
        let output = Rc::new(RefCell::new(Vec::new()));
        // The driver's sink: collects records with their timestamps.
        let collected = Rc::clone(&output);
        let collect = ChainEnd::new(move |value: Out, timestamp| {
            collected.borrow_mut().push((value, timestamp));
            Ok(())
        });
        let (_input, chain) = crate::dataflow::BuildPlan::build(stream.plan, &rt, collect)?;
        let mut driver = TestDriver {
            chain: Box::new(chain),
            on_record_error: self.on_record_error,
            dead_letters: Vec::new(),
            output,
            stores,
            counters: Rc::clone(&rt.counters),
            watermark: i64::MIN,
            processing_time: i64::MIN,
            closed: false,
        };
        driver.run(|chain| chain.open())?;
        Ok(driver)
    }
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
    /// is closed afterwards.
    pub fn push(&mut self, value: In, event_time: i64) -> Result<(), Error> {
        if self.closed {
            return Err(closed_error());
        }
        let dead = &mut self.dead_letters;
        let mut out = |letter| {
            dead.push(letter);
            Ok(())
        };
        let failures = RecordFailures::new(self.on_record_error, Rc::clone(&self.counters));
        let mut failures = failures.keeping(<In as Clone>::clone, &mut out);
        let result = failures.feed(&mut ChainRef(&mut *self.chain), value, event_time);
        if result.is_err() {
            let _ = self.close();
        }
        result
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
        self.run(|chain| chain.on_watermark(watermark))
    }

    /// Moves processing time to `now` (epoch ms) and fires the processing-time timers due
    /// by then; a value at or below the current one does nothing.
    ///
    /// # Errors
    /// As [`push`](Self::push), for the timer functions.
    pub fn advance_processing_time(&mut self, now: i64) -> Result<(), Error> {
        if now <= self.processing_time {
            return Ok(());
        }
        self.processing_time = now;
        self.run(|chain| chain.on_processing_time(now))
    }

    /// Ends the input: the watermark becomes `i64::MAX` (every event-time timer fires,
    /// every window emits what it never emitted), the operators finish and close. The
    /// outputs stay readable; nothing more can be pushed.
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub fn finish(&mut self) -> Result<(), Error> {
        self.watermark = crate::time::MAX_WATERMARK;
        let result = self.run(|chain| {
            chain.on_watermark(crate::time::MAX_WATERMARK)?;
            chain.finish()
        });
        self.close().and(result)
    }

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
        std::mem::take(&mut *self.output.borrow_mut())
    }

    /// The input watermark set last (`i64::MIN` before any).
    pub fn watermark(&self) -> i64 {
        self.watermark
    }

    /// The processing time set last (`i64::MIN` before any).
    pub fn processing_time(&self) -> i64 {
        self.processing_time
    }

    /// The counters so far: late elements, window firings, elements between windows,
    /// rejected elements.
    pub fn summary(&self) -> JobSummary {
        JobSummary::from_counters(&self.counters)
    }

    /// Runs `step` on the chain unless the driver is closed; closes it on an error.
    fn run(
        &mut self,
        step: impl FnOnce(&mut dyn Operator<In>) -> Result<(), Error>,
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

    fn close(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        self.chain.close()
    }
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

/// The error of a call on a closed driver.
fn closed_error() -> Error {
    Error::Engine {
        op: "test driver",
        reason: "the driver is closed (finished, or an earlier call failed)".into(),
    }
}

/// The driver's chain as a sized operator, for the failure handling's record loop.
struct ChainRef<'a, In>(&'a mut dyn Operator<In>);

impl<In> Operator<In> for ChainRef<'_, In> {
    forward_lifecycle!(0; open, on_watermark, on_processing_time, finish, close);

    #[inline]
    fn process(&mut self, value: In, timestamp: i64) -> Result<(), Error> {
        self.0.process(value, timestamp)
    }
}

impl<In, Out> Drop for TestDriver<In, Out> {
    fn drop(&mut self) {
        if !std::mem::replace(&mut self.closed, true) {
            let _ = self.chain.close();
        }
    }
}
