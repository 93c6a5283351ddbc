//! A keyed process function from closures: `on_element` and an optional `on_timer`
//! (what `process(..)` and `process(..).on_timer(..)` build).

use crate::api::{Collector, KeyedContext, KeyedProcessFunction, TimerContext};
use crate::BoxError;
use std::marker::PhantomData;

/// Closures as a [`KeyedProcessFunction`]: `on_element`, and the timer callback `on_timer`
/// (`NoTimers` for a closure without one).
pub struct ProcessFn<F, O, G = NoTimers> {
    on_element: F,
    on_timer: G,
    _out: PhantomData<fn() -> O>,
}

impl<F: Clone, O, G: Clone> Clone for ProcessFn<F, O, G> {
    fn clone(&self) -> Self {
        ProcessFn::with_timers(self.on_element.clone(), self.on_timer.clone())
    }
}

impl<F, O> ProcessFn<F, O> {
    /// Wraps `f(value, ctx, out)`; timers it registers fire and do nothing.
    pub fn new(f: F) -> Self {
        ProcessFn::with_timers(f, NoTimers)
    }
}

impl<F, O, G> ProcessFn<F, O, G> {
    /// Wraps `on_element(value, ctx, out)` and `on_timer(timestamp, ctx, out)`.
    pub fn with_timers(on_element: F, on_timer: G) -> Self {
        ProcessFn {
            on_element,
            on_timer,
            _out: PhantomData,
        }
    }
}

/// The timer callback of a [`ProcessFn`]: a closure
/// `|timestamp, ctx: &mut TimerContext<'_, K>, out| -> Result<(), BoxError>`, or
/// [`NoTimers`].
pub trait OnTimer<K, O> {
    /// Called when a timer of `ctx.current_key()` is due. The default does nothing.
    ///
    /// # Errors
    /// The callback failed.
    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), BoxError> {
        let _ = (timestamp, ctx, out);
        Ok(())
    }
}

impl<K, O, G> OnTimer<K, O> for G
where
    G: FnMut(i64, &mut TimerContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
{
    #[inline]
    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), BoxError> {
        self(timestamp, ctx, out)
    }
}

/// No timer callback: timers fire and do nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTimers;

impl<K, O> OnTimer<K, O> for NoTimers {}

impl<K, T, O, F, G> KeyedProcessFunction<K, T> for ProcessFn<F, O, G>
where
    F: FnMut(T, &mut KeyedContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
    G: OnTimer<K, O>,
{
    type Out = O;

    #[inline]
    fn process_element(
        &mut self,
        value: T,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), BoxError> {
        (self.on_element)(value, ctx, out)
    }

    #[inline]
    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        out: &mut Collector<'_, O>,
    ) -> Result<(), BoxError> {
        self.on_timer.on_timer(timestamp, ctx, out)
    }
}
