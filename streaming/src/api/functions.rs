//! User function traits: collectors, aggregate functions, keyed process functions and the
//! numeric element bound of `sum`.

use super::context::{KeyedContext, TimerContext};
use crate::BoxError;
use std::ops::Add;

/// Collects the output records of a process or window function.
///
/// The first record of a call is held in the collector itself; later ones are buffered in
/// a vector the operator reuses. All are pushed downstream in order when the function
/// returns: no allocation per record once the buffer has grown, and a function that
/// emits one record per call never touches the buffer.
#[derive(Debug)]
pub struct Collector<'a, T> {
    first: Option<T>,
    buffer: &'a mut Vec<T>,
}

impl<'a, T> Collector<'a, T> {
    /// A collector for one call, buffering after its first record in `buffer` (empty, or
    /// holding earlier calls' records, which stay before this call's).
    #[inline(always)]
    pub(crate) fn new(buffer: &'a mut Vec<T>) -> Self {
        Collector {
            first: None,
            buffer,
        }
    }

    /// The call's first record; the others are in the buffer, after what it held before.
    #[inline(always)]
    pub(crate) fn into_first(self) -> Option<T> {
        self.first
    }

    /// Appends every record of the call to the buffer, in order (`start` = the buffer's
    /// length before the call).
    #[inline]
    pub(crate) fn into_buffer(self, start: usize) {
        if let Some(first) = self.first {
            self.buffer.insert(start, first);
        }
    }
}

impl<T> Collector<'_, T> {
    /// Emits one record.
    #[inline]
    pub fn collect(&mut self, value: T) {
        if self.first.is_none() {
            self.first = Some(value);
        } else {
            self.buffer.push(value);
        }
    }
}

/// Incremental window aggregation (Flink `AggregateFunction`): an accumulator per window,
/// updated per element, merged when session windows merge.
///
/// On the Redis engine the accumulator is kept in Redis as JSON with its window: `Acc` must
/// be serde `Serialize + DeserializeOwned` there.
pub trait AggregateFunction<T> {
    /// The accumulator kept per (key, window).
    type Acc: Clone + 'static;
    /// The result emitted when the window fires.
    type Out;

    /// A fresh, empty accumulator.
    fn create_accumulator(&self) -> Self::Acc;

    /// Adds one element.
    fn add(&self, acc: &mut Self::Acc, value: T);

    /// The result for the accumulated elements.
    fn get_result(&self, acc: &Self::Acc) -> Self::Out;

    /// Combines two accumulators (session windows merging).
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

/// A keyed process function with timers (Flink `KeyedProcessFunction`).
///
/// For a function without timers a closure is enough: see `KeyedStream::process`.
pub trait KeyedProcessFunction<K, T> {
    /// The output record type.
    type Out;

    /// Handles one element of the key `ctx.current_key()`.
    ///
    /// # Errors
    /// An error (or a panic) fails the element's source record, naming the operator: the
    /// record is dead-lettered, or the run stops (see [`DataStream::try_map`](crate::DataStream::try_map)
    /// for the rule both engines follow).
    fn process_element(
        &mut self,
        value: T,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError>;

    /// Called when a timer registered through the context is due, with the key that
    /// registered it. The default does nothing.
    ///
    /// # Errors
    /// As for [`process_element`](Self::process_element).
    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        let _ = (timestamp, ctx, out);
        Ok(())
    }
}

/// Element types `sum` accepts: Rust's integer and float primitives.
///
/// Sums use `+` of the type: integer overflow panics in debug builds and wraps in release
/// builds, like the hand-written loop would.
#[diagnostic::on_unimplemented(
    message = "`sum` needs a numeric element type, but this stream carries `{Self}`",
    label = "not a number",
    note = "map the stream to the number to add up first (e.g. `.map(|x| x.amount)`), or use `reduce`/`aggregate`"
)]
pub trait Numeric: Copy + Default + Add<Output = Self> + 'static {}

macro_rules! numeric {
    ($($t:ty),*) => { $(impl Numeric for $t {})* };
}
numeric!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64);
