//! The test driver of two-input fragments ([`TwoInputTestDriver`]): each input pushed,
//! watermarked and ended on its own.

use super::core::{check_source_id, driver_reads, Core};
use super::state::state_reads;
use crate::dataflow::{DataStream, FragmentInput, InFragment, Plan};
use crate::fragment::{Input, TwoInputFragment};
use crate::memory::{DeadLetter, DrivenClock, MemoryRuntime, OnRecordError};
use crate::ops::{Event, Fed};
use crate::time::{StreamTime, MAX_WATERMARK};
use crate::Error;

/// The source id of [`TwoInputTestDriver::new`]'s first input.
pub const DEFAULT_FIRST_SOURCE_ID: &str = "first";

/// The source id of [`TwoInputTestDriver::new`]'s second input.
pub const DEFAULT_SECOND_SOURCE_ID: &str = "second";

/// Drives one [two-input fragment](crate::fragment::TwoInputFragment) record by record,
/// Flink's `KeyedTwoInputStreamOperatorTestHarness` for a fragment: push to either input,
/// move each input's watermark and the processing time, end each input, read outputs,
/// keyed state and timers. Deterministic, one thread, no Redis.
///
/// `A` is the first input's element type, `B` the second's, `Out` the output's.
///
/// - Each input has its own watermark
///   ([`advance_watermark_first`](Self::advance_watermark_first),
///   [`advance_watermark_second`](Self::advance_watermark_second), or both with
///   [`advance_watermark`](Self::advance_watermark)). The fragment's operators of one
///   input see that input's watermark; those after the inputs are combined see the lowest
///   of both ([`watermark`](Self::watermark)), as on both engines. An input that ended
///   ([`finish_first`](Self::finish_first), [`finish_second`](Self::finish_second)) has
///   watermark `i64::MAX` and no longer holds the other back.
/// - Records never move a watermark or processing time; pushing to an input that ended is
///   an error ([`Error::Engine`], `op` = `test driver`) and the driver goes on.
/// - Failing records are dead-lettered as with [`TestDriver`](super::TestDriver), each
///   input's to its own list ([`dead_letters_first`](Self::dead_letters_first),
///   [`dead_letters_second`](Self::dead_letters_second)); any other error closes the
///   driver, and later calls return [`Error::Engine`] (`op` = `test driver`).
///
/// ```
/// use streaming::fragment::{Input, TwoInputFragment};
/// use streaming::testing::TwoInputTestDriver;
///
/// /// Each order (id, customer) joined with the payments (customer, cents) of its
/// /// customer made within 10 minutes after it.
/// fn paid(
///     orders: Input<(u32, String)>,
///     payments: Input<(String, u64)>,
/// ) -> impl TwoInputFragment<(u32, String), (String, u64), Out = (u32, u64)> {
///     orders
///         .key_by(|o: &(u32, String)| o.1.clone())
///         .interval_join(payments.key_by(|p: &(String, u64)| p.0.clone()))
///         .between(0, 10 * 60_000)
///         .map(|join| join.process(|order, payment| (order.0, payment.1)))
/// }
///
/// let mut driver = TwoInputTestDriver::new(paid)?;
/// driver.push_first((7, "ada".to_string()), 0)?;
/// driver.push_second(("ada".to_string(), 30), 60_000)?;
/// assert_eq!(driver.output(), [(7, 30)]);
///
/// driver.advance_watermark_first(700_000)?;
/// assert_eq!(driver.watermark(), i64::MIN); // the payments' watermark holds it back
/// driver.advance_watermark_second(700_000)?;
/// assert_eq!(driver.watermark(), 700_000);
/// driver.push_second(("ada".to_string(), 5), 800_000)?; // order 7 expired at 600 000
/// driver.finish()?;
/// assert!(driver.output().is_empty());
/// # Ok::<(), streaming::Error>(())
/// ```
pub struct TwoInputTestDriver<A, B, Out> {
    core: Core<Fed<A, B>, Out>,
    /// Each input's watermark (ms).
    watermarks: [i64; 2],
    /// Which inputs ended.
    ended: [bool; 2],
    dead_letters_first: Vec<DeadLetter<A>>,
    dead_letters_second: Vec<DeadLetter<B>>,
}

impl<A, B, Out> std::fmt::Debug for TwoInputTestDriver<A, B, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwoInputTestDriver")
            .field("watermarks", &self.watermarks)
            .field("ended", &self.ended)
            .field("processing_time", &self.core.processing_time)
            .field("closed", &self.core.is_closed())
            .finish_non_exhaustive()
    }
}

/// How a [`TwoInputTestDriver`] is set up: the source ids its inputs' operator ids start
/// with and what a failing record does. From [`TwoInputTestDriver::builder`].
#[derive(Clone, Debug)]
pub struct TwoInputTestDriverBuilder {
    source_ids: [String; 2],
    on_record_error: OnRecordError,
}

impl TwoInputTestDriverBuilder {
    /// The operator ids the fragment gets behind a first source with id `first` and a
    /// second with id `second`, both at position 0 (e.g. `orders.enrich` and
    /// `customers.enrich` for `from_mq_topic("orders", "enrich")` and
    /// `from_mq_topic("customers", "enrich")` followed directly by the fragment). The
    /// operators after the inputs are combined continue the first input's ids. Default
    /// [`DEFAULT_FIRST_SOURCE_ID`] and [`DEFAULT_SECOND_SOURCE_ID`].
    pub fn source_ids(mut self, first: impl Into<String>, second: impl Into<String>) -> Self {
        self.source_ids = [first.into(), second.into()];
        self
    }

    /// What a record that fails does, as on the memory engine
    /// ([`MemoryEnv::on_record_error`](crate::MemoryEnv::on_record_error)); default
    /// [`OnRecordError::default`]: it is dead-lettered and the driver goes on.
    pub fn on_record_error(mut self, policy: OnRecordError) -> Self {
        self.on_record_error = policy;
        self
    }

    /// Builds `fragment` (a function from an [`Input<A>`] and an [`Input<B>`] to a
    /// [`TwoInputFragment`]) and opens its operators.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `source_id`) for an id that is empty, has
    /// characters outside `[A-Za-z0-9_.-]`, or is the other input's too (their operators'
    /// state would share names); [`Error::InvalidConfig`] (field `fragment`) for a
    /// fragment that combines its second input with its first; a configuration error of
    /// the fragment (e.g. interval bounds with `lower > upper`); an operator that failed
    /// to open.
    pub fn build<A, B, Out, F, G, Tm>(
        self,
        fragment: G,
    ) -> Result<TwoInputTestDriver<A, B, Out>, Error>
    where
        A: Clone + 'static,
        B: Clone + 'static,
        Out: 'static,
        G: FnOnce(Input<A, Tm>, Input<B, Tm>) -> F,
        F: TwoInputFragment<A, B, Tm, Out = Out>,
        Tm: StreamTime,
    {
        let [first_id, second_id] = self.source_ids;
        check_source_id(&first_id)?;
        check_source_id(&second_id)?;
        if first_id == second_id {
            return Err(Error::InvalidConfig {
                field: "source_id",
                reason: format!("`{first_id}` names both inputs: give each input its own source id, or their operators' state shares names"),
            });
        }
        let first = DataStream::new(FragmentInput::new(), first_id);
        let second = DataStream::new(FragmentInput::new_second(), second_id);
        let stream = fragment(first, second).into_stream()?;
        stream.plan.root().check_order()?;
        let core = Core::build(stream.plan, self.on_record_error, in_fragment)?;
        Ok(TwoInputTestDriver {
            core,
            watermarks: [i64::MIN; 2],
            ended: [false; 2],
            dead_letters_first: Vec::new(),
            dead_letters_second: Vec::new(),
        })
    }
}

/// The driven runtime, inside a two-input fragment.
fn in_fragment(rt: &MemoryRuntime<DrivenClock>) -> &InFragment<MemoryRuntime<DrivenClock>> {
    InFragment::of(rt)
}

impl TwoInputTestDriver<(), (), ()> {
    /// A builder to choose the source ids or the failing-record policy before building.
    pub fn builder() -> TwoInputTestDriverBuilder {
        TwoInputTestDriverBuilder {
            source_ids: [
                DEFAULT_FIRST_SOURCE_ID.to_string(),
                DEFAULT_SECOND_SOURCE_ID.to_string(),
            ],
            on_record_error: OnRecordError::default(),
        }
    }
}

/// The error of a record pushed to an input that ended.
fn ended_error(input: &str) -> Error {
    Error::Engine {
        op: "test driver",
        reason: format!(
            "the {input} input has ended (`finish_{input}`): nothing more can be pushed to it"
        ),
    }
}

impl<A: Clone + 'static, B: Clone + 'static, Out: 'static> TwoInputTestDriver<A, B, Out> {
    /// Builds `fragment` (a function from an [`Input<A>`] and an [`Input<B>`] to a
    /// [`TwoInputFragment`]) and opens its operators: the first input's operator ids start
    /// at [`DEFAULT_FIRST_SOURCE_ID`] (`first/1:map`, and `first/2:process` after
    /// `first.connect(second)`), the second's at [`DEFAULT_SECOND_SOURCE_ID`]; a failing
    /// record is dead-lettered ([`OnRecordError::default`]).
    /// [`TwoInputTestDriver::builder`] chooses otherwise.
    ///
    /// # Errors
    /// As [`TwoInputTestDriverBuilder::build`].
    pub fn new<F, G, Tm>(fragment: G) -> Result<Self, Error>
    where
        G: FnOnce(Input<A, Tm>, Input<B, Tm>) -> F,
        F: TwoInputFragment<A, B, Tm, Out = Out>,
        Tm: StreamTime,
    {
        TwoInputTestDriver::builder().build(fragment)
    }

    /// Pushes one record of the first input with event time `event_time` (epoch ms). A
    /// record that fails is dead-lettered by the driver's [`OnRecordError`] (read it with
    /// [`dead_letters_first`](Self::dead_letters_first)) as
    /// [`TestDriver::push`](super::TestDriver::push) does.
    ///
    /// # Errors
    /// [`Error::Engine`] (`op` = `test driver`) when the first input has ended (the driver
    /// goes on) or the driver is closed; the record's error under
    /// [`OnRecordError::StopRun`], [`Error::RecordNotUndone`]: the driver is closed
    /// afterwards.
    pub fn push_first(&mut self, value: A, event_time: i64) -> Result<(), Error> {
        if self.ended[0] && !self.core.is_closed() {
            return Err(ended_error("first"));
        }
        let wrap: fn(A) -> Fed<A, B> = |a| Fed::First(Event::Record(a));
        (self.core).feed(value, event_time, wrap, &mut self.dead_letters_first)
    }

    /// Like [`push_first`](Self::push_first), for the second input (dead letters:
    /// [`dead_letters_second`](Self::dead_letters_second)).
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first), for the second input.
    pub fn push_second(&mut self, value: B, event_time: i64) -> Result<(), Error> {
        if self.ended[1] && !self.core.is_closed() {
            return Err(ended_error("second"));
        }
        let wrap: fn(B) -> Fed<A, B> = |b| Fed::Second(Event::Record(b));
        (self.core).feed(value, event_time, wrap, &mut self.dead_letters_second)
    }

    /// Pushes `(record, event time)` pairs to the first input, in order.
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first); the records after the failing one are not
    /// pushed.
    pub fn push_all_first(
        &mut self,
        records: impl IntoIterator<Item = (A, i64)>,
    ) -> Result<(), Error> {
        (records.into_iter()).try_for_each(|(value, time)| self.push_first(value, time))
    }

    /// Pushes `(record, event time)` pairs to the second input, in order.
    ///
    /// # Errors
    /// As [`push_second`](Self::push_second); the records after the failing one are not
    /// pushed.
    pub fn push_all_second(
        &mut self,
        records: impl IntoIterator<Item = (B, i64)>,
    ) -> Result<(), Error> {
        (records.into_iter()).try_for_each(|(value, time)| self.push_second(value, time))
    }

    /// Takes the dead letters of the first input's records that failed since the last
    /// call, in order.
    pub fn dead_letters_first(&mut self) -> Vec<DeadLetter<A>> {
        std::mem::take(&mut self.dead_letters_first)
    }

    /// Takes the dead letters of the second input's records that failed since the last
    /// call, in order.
    pub fn dead_letters_second(&mut self) -> Vec<DeadLetter<B>> {
        std::mem::take(&mut self.dead_letters_second)
    }

    /// Moves the first input's watermark to `watermark` (ms); a value at or below the
    /// current one does nothing. The first input's own operators see it; the operators
    /// after the inputs are combined see the lowest of both inputs' watermarks, so
    /// event-time timers and windows there fire up to that one.
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first), for functions the watermark runs.
    pub fn advance_watermark_first(&mut self, watermark: i64) -> Result<(), Error> {
        self.advance_input_watermark(0, watermark)
    }

    /// Like [`advance_watermark_first`](Self::advance_watermark_first), for the second
    /// input.
    ///
    /// # Errors
    /// As [`push_second`](Self::push_second), for functions the watermark runs.
    pub fn advance_watermark_second(&mut self, watermark: i64) -> Result<(), Error> {
        self.advance_input_watermark(1, watermark)
    }

    /// Moves both inputs' watermarks to `watermark` (ms): the first's, then the second's.
    ///
    /// # Errors
    /// As [`advance_watermark_first`](Self::advance_watermark_first).
    pub fn advance_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        self.advance_input_watermark(0, watermark)?;
        self.advance_input_watermark(1, watermark)
    }

    fn advance_input_watermark(&mut self, input: usize, watermark: i64) -> Result<(), Error> {
        if watermark <= self.watermarks[input] {
            return Ok(());
        }
        self.watermarks[input] = watermark;
        self.core
            .run(|chain| chain.process(event(input, Call::Watermark(watermark)), watermark))
    }

    /// Moves processing time to `now` (epoch ms) for both inputs' operators and fires the
    /// processing-time timers due by then; a value at or below the current one does
    /// nothing.
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first), for the timer functions.
    pub fn advance_processing_time(&mut self, now: i64) -> Result<(), Error> {
        let active = self.ended.map(|ended| !ended);
        self.core.advance_processing_time(now, |chain| {
            for input in (0..2).filter(|i| active[*i]) {
                chain.process(event(input, Call::ProcessingTime(now)), now)?;
            }
            Ok(())
        })
    }

    /// Ends the first input, as its source would: its watermark becomes `i64::MAX` and its
    /// operators finish (the operators after the inputs are combined finish when both
    /// inputs have). Nothing more can be pushed to it. Ending an input twice does nothing.
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first), for the functions it runs.
    pub fn finish_first(&mut self) -> Result<(), Error> {
        self.finish_input(0)
    }

    /// Like [`finish_first`](Self::finish_first), for the second input.
    ///
    /// # Errors
    /// As [`push_second`](Self::push_second), for the functions it runs.
    pub fn finish_second(&mut self) -> Result<(), Error> {
        self.finish_input(1)
    }

    fn finish_input(&mut self, input: usize) -> Result<(), Error> {
        if std::mem::replace(&mut self.ended[input], true) {
            return Ok(());
        }
        self.watermarks[input] = MAX_WATERMARK;
        self.core.run(|chain| {
            chain.process(event(input, Call::Watermark(MAX_WATERMARK)), MAX_WATERMARK)?;
            chain.process(event(input, Call::Finish), MAX_WATERMARK)
        })
    }

    /// Ends both inputs that have not ended (the first, then the second; see
    /// [`finish_first`](Self::finish_first)): every event-time timer fires, every window
    /// emits what it never emitted, the operators finish and close. The outputs stay
    /// readable; nothing more can be pushed.
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first).
    pub fn finish(&mut self) -> Result<(), Error> {
        let result = self.finish_input(0).and_then(|()| self.finish_input(1));
        self.core.close().and(result)
    }

    /// The watermark the operators after the inputs are combined see: the lowest of both
    /// inputs' (`i64::MIN` before either has one).
    pub fn watermark(&self) -> i64 {
        self.watermarks[0].min(self.watermarks[1])
    }

    /// The first input's watermark set last (`i64::MIN` before any; `i64::MAX` once it
    /// ended).
    pub fn watermark_first(&self) -> i64 {
        self.watermarks[0]
    }

    /// The second input's watermark set last (`i64::MIN` before any; `i64::MAX` once it
    /// ended).
    pub fn watermark_second(&self) -> i64 {
        self.watermarks[1]
    }

    driver_reads!();
    state_reads!();
}

/// A call on one input's operators that carries no record.
#[derive(Clone, Copy)]
enum Call {
    Watermark(i64),
    ProcessingTime(i64),
    Finish,
}

impl Call {
    fn event<T>(self) -> Event<T> {
        match self {
            Call::Watermark(t) => Event::Watermark(t),
            Call::ProcessingTime(t) => Event::ProcessingTime(t),
            Call::Finish => Event::Finish,
        }
    }
}

/// `call` on the operators of input `input` (0: the first).
fn event<A, B>(input: usize, call: Call) -> Fed<A, B> {
    if input == 0 {
        Fed::First(call.event())
    } else {
        Fed::Second(call.event())
    }
}

#[cfg(feature = "redis")]
impl<B: Clone + 'static, Out: 'static> TwoInputTestDriver<crate::mq::Message, B, Out> {
    /// Pushes a message to the first input with its own timestamp as event time (what
    /// the Redis engine does): see [`Message::new`](crate::mq::Message::new).
    ///
    /// # Errors
    /// As [`push_first`](Self::push_first).
    pub fn push_message_first(&mut self, message: crate::mq::Message) -> Result<(), Error> {
        let event_time = message.timestamp_ms;
        self.push_first(message, event_time)
    }
}

#[cfg(feature = "redis")]
impl<A: Clone + 'static, Out: 'static> TwoInputTestDriver<A, crate::mq::Message, Out> {
    /// Pushes a message to the second input with its own timestamp as event time (what
    /// the Redis engine does): see [`Message::new`](crate::mq::Message::new).
    ///
    /// # Errors
    /// As [`push_second`](Self::push_second).
    pub fn push_message_second(&mut self, message: crate::mq::Message) -> Result<(), Error> {
        let event_time = message.timestamp_ms;
        self.push_second(message, event_time)
    }
}
