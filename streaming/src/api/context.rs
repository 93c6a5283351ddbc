//! Contexts handed to keyed process functions.

use super::state::{DeclaredState, KeyedStateBackend, OpenState, StateDescriptor};
use crate::Error;
use std::convert::Infallible;
use std::hash::Hash;

/// The time domain of a timer.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum TimeDomain {
    /// Fires when the watermark reaches the timer's time.
    EventTime,
    /// Fires when processing time reaches the timer's time. On the in-memory engine
    /// processing time is the highest record timestamp seen so far (on a stream without
    /// event time, the ingestion clock: record `i` of the source at `i` ms), so a bounded
    /// run is deterministic.
    ProcessingTime,
}

/// What a process function asked of its key's timers, applied in order after the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyedTimerRequest {
    /// Register (time in ms, domain).
    Register(i64, TimeDomain),
    /// Delete (time in ms, domain) if registered.
    Delete(i64, TimeDomain),
}

/// What a keyed process function sees for one element: its key, timestamp, the watermark,
/// processing time, timer registration and the key's state.
pub struct KeyedContext<'a, K> {
    parts: ContextParts<'a, K>,
}

/// What a keyed context is made of (see [`KeyedContext::new`]).
pub(crate) struct ContextParts<'a, K> {
    pub(crate) key: &'a K,
    pub(crate) timestamp: i64,
    pub(crate) watermark: i64,
    pub(crate) processing_time: i64,
    /// Whether the stream's records carry chosen event time.
    pub(crate) event_time: bool,
    pub(crate) timers: &'a mut Vec<KeyedTimerRequest>,
    pub(crate) state: &'a mut KeyedStateBackend<K>,
    /// The engine's part in opening a state for the first time.
    pub(crate) opener: &'a mut dyn OpenState<K>,
}

impl<'a, K> KeyedContext<'a, K> {
    /// The context of one call, with no state changed yet.
    #[inline]
    pub(crate) fn new(parts: ContextParts<'a, K>) -> Self {
        parts.state.begin_record();
        KeyedContext { parts }
    }

    /// The current key, for as long as the call lasts.
    #[inline(always)]
    pub(crate) fn key_ref(&self) -> &'a K {
        self.parts.key
    }

    /// The states this call changed so far (bit `i`: the operator's `i`-th state).
    #[inline(always)]
    pub(crate) fn changed(&self) -> u64 {
        self.parts.state.changed()
    }
}

impl<'a, K: Hash + Eq + Clone + 'static> KeyedContext<'a, K> {
    /// The key of the element being processed.
    pub fn current_key(&self) -> &K {
        self.parts.key
    }

    /// The element's event time (ms); `i64::MIN` on a stream whose event time was never
    /// chosen ([`NoEventTime`](crate::time::NoEventTime): the record has no timestamp).
    pub fn timestamp(&self) -> i64 {
        if self.parts.event_time {
            self.parts.timestamp
        } else {
            i64::MIN
        }
    }

    /// The watermark in force before this element (ms); `i64::MIN` before the first.
    pub fn current_watermark(&self) -> i64 {
        self.parts.watermark
    }

    /// Processing time (ms). On the in-memory engine: the highest record timestamp seen,
    /// or on a stream without chosen event time the engine's ingestion clock (record `i`
    /// of the source arrives at `i` ms).
    pub fn current_processing_time(&self) -> i64 {
        self.parts.processing_time
    }

    /// Calls `on_timer` for this key once the watermark reaches `time` (ms). Registering
    /// the same (key, time, domain) again has no effect.
    ///
    /// # Errors
    /// [`Error::NoEventTime`] when the stream's event time was never chosen (a memory
    /// source without timestamps and no timestamp assigner before `key_by`): no watermark
    /// would fire the timer. The timer is not registered; return the error (`?`).
    pub fn register_event_time_timer(&mut self, time: i64) -> Result<(), Error> {
        if !self.parts.event_time {
            return Err(Error::NoEventTime {
                operator: self.parts.state.operator_id(),
            });
        }
        self.parts
            .timers
            .push(KeyedTimerRequest::Register(time, TimeDomain::EventTime));
        Ok(())
    }

    /// Calls `on_timer` for this key once processing time reaches `time` (ms).
    pub fn register_processing_time_timer(&mut self, time: i64) {
        self.parts.timers.push(KeyedTimerRequest::Register(
            time,
            TimeDomain::ProcessingTime,
        ));
    }

    /// Deletes this key's event-time timer at `time` (ms), so `on_timer` is not called
    /// for it (Flink `deleteEventTimeTimer`). Deleting a timer that is not registered
    /// (never was, already fired, or of another key) does nothing. Registrations and
    /// deletions of one call take effect in the order they were made, when the call
    /// returns: registering then deleting the same time leaves no timer, deleting then
    /// registering leaves one. On the Redis engine the deletion commits with the record's
    /// batch, like a registration.
    pub fn delete_event_time_timer(&mut self, time: i64) {
        self.parts
            .timers
            .push(KeyedTimerRequest::Delete(time, TimeDomain::EventTime));
    }

    /// Deletes this key's processing-time timer at `time` (ms), as
    /// [`delete_event_time_timer`](Self::delete_event_time_timer) does for event time
    /// (Flink `deleteProcessingTimeTimer`).
    pub fn delete_processing_time_timer(&mut self, time: i64) {
        self.parts
            .timers
            .push(KeyedTimerRequest::Delete(time, TimeDomain::ProcessingTime));
    }

    /// The state `state` refers to, for the current key: a
    /// [`ValueState`](super::ValueState), [`ListState`](super::ListState),
    /// [`MapState`](super::MapState) or [`SetState`](super::SetState). `state` is a
    /// descriptor (`ctx.state(&COUNT)`), or in `pipeline!` a name declared with
    /// `.state(..)` (`ctx.state(count)`). Opening a state only reads it: the engine writes
    /// a state back for the key only when the handle changed it.
    ///
    /// # Errors
    /// [`Error::StateType`] when this operator used the same state name with another kind or
    /// type before; on the Redis engine [`Error::StateNotPersistent`] for a descriptor
    /// without a codec.
    #[inline(always)]
    pub fn state<S: StateRef<K>>(&mut self, state: S) -> Result<Handle<'_, K, S>, S::Error> {
        state.open(self)
    }

    /// State `descriptor` of `key`, another key than the current one (the broadcast
    /// state's key of a broadcast process function), for reading: the engine must have
    /// been told the call uses `key` too (see `ProcessState::touch`).
    ///
    /// # Errors
    /// As [`state`](Self::state).
    pub(crate) fn state_of<'s, D: StateDescriptor<K>>(
        &'s mut self,
        descriptor: &D,
        key: &'s K,
    ) -> Result<D::Handle<'s>, Error> {
        let slot = (self.parts.state).resolve(descriptor, self.parts.opener, key)?;
        self.parts.state.open_other_key::<D>(slot, key)
    }

    /// The backend and the current key.
    #[inline(always)]
    fn backend_and_key(&mut self) -> (&mut KeyedStateBackend<K>, &K) {
        (&mut *self.parts.state, self.parts.key)
    }
}

/// The handle `ctx.state(state)` opens.
pub(crate) type Handle<'s, K, S> =
    <<S as StateRef<K>>::Descriptor as StateDescriptor<K>>::Handle<'s>;

mod sealed {
    pub trait Sealed {}
    impl<D> Sealed for &D {}
    impl<D> Sealed for super::DeclaredState<D> {}
}

/// What `ctx.state(..)` accepts: a descriptor (`ctx.state(&COUNT)`), or in `pipeline!` a
/// name declared with `.state(..)` (`ctx.state(count)`). Name it in a helper that takes
/// either:
///
/// ```
/// use std::hash::Hash;
/// use streaming::api::{KeyedContext, StateRef, ValueStateDescriptor};
/// use streaming::{pipeline, MemoryEnv};
///
/// /// Adds one to the key's count and returns it.
/// fn bump<K, S>(ctx: &mut KeyedContext<'_, K>, count: S) -> Result<u64, S::Error>
/// where
///     K: Hash + Eq + Clone + 'static,
///     S: StateRef<K, Descriptor = ValueStateDescriptor<u64>>,
/// {
///     let mut n = ctx.state(count)?;
///     let next = n.value() + 1;
///     n.update(next);
///     Ok(next)
/// }
///
/// const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::new("count", 0);
/// let env = MemoryEnv::new();
/// let by_descriptor = env
///     .from_elements(["a", "b", "a"])
///     .key_by(|w| *w)
///     .process(|w, ctx, out| {
///         out.collect((w, bump(ctx, &COUNT)?));
///         Ok(())
///     })
///     .collect_vec()?;
/// let by_name = pipeline! {
///     env.from_elements(["a", "b", "a"])
///         .key_by(|w: &&str| *w)
///         .state(count: ValueState<u64> = 0)
///         .process(|w: &str, ctx, out| {
///             out.collect((w, bump(ctx, count)?));
///             Ok(())
///         })
///         .collect_vec()
/// }?;
/// assert_eq!(by_descriptor, [("a", 1), ("b", 1), ("a", 2)]);
/// assert_eq!(by_name, by_descriptor);
/// # Ok::<(), streaming::Error>(())
/// ```
pub trait StateRef<K>: sealed::Sealed {
    /// The state's descriptor type.
    type Descriptor: StateDescriptor<K>;
    /// What opening the state can fail with: [`Error`] for a descriptor, nothing for a
    /// declared state (its type was checked when the pipeline was built).
    type Error;

    #[doc(hidden)]
    fn open<'s>(self, ctx: &'s mut KeyedContext<'_, K>) -> Result<Handle<'s, K, Self>, Self::Error>
    where
        Self: Sized;
}

impl<K: Hash + Eq + Clone + 'static, D: StateDescriptor<K>> StateRef<K> for &D {
    type Descriptor = D;
    type Error = Error;

    #[inline(always)]
    fn open<'s>(self, ctx: &'s mut KeyedContext<'_, K>) -> Result<D::Handle<'s>, Error> {
        let slot = ctx
            .parts
            .state
            .resolve(self, ctx.parts.opener, ctx.parts.key)?;
        let (backend, key) = ctx.backend_and_key();
        backend.open::<D>(slot, key)
    }
}

impl<K: Hash + Eq + Clone + 'static, D: StateDescriptor<K>> StateRef<K> for DeclaredState<D> {
    type Descriptor = D;
    type Error = Infallible;

    #[inline(always)]
    fn open<'s>(self, ctx: &'s mut KeyedContext<'_, K>) -> Result<D::Handle<'s>, Infallible> {
        let (backend, key) = ctx.backend_and_key();
        Ok(backend.open_declared::<D>(self.slot(), key))
    }
}

/// What `on_timer` sees: the timer's key and domain, the watermark, timers and state.
pub struct TimerContext<'a, K> {
    pub(crate) inner: KeyedContext<'a, K>,
    pub(crate) domain: TimeDomain,
}

impl<'a, K: Hash + Eq + Clone + 'static> TimerContext<'a, K> {
    /// The key that registered the timer.
    pub fn current_key(&self) -> &K {
        self.inner.parts.key
    }

    /// Whether an event-time or a processing-time timer fired.
    pub fn time_domain(&self) -> TimeDomain {
        self.domain
    }

    /// The watermark in force (ms).
    pub fn current_watermark(&self) -> i64 {
        self.inner.parts.watermark
    }

    /// Processing time (ms), as in [`KeyedContext::current_processing_time`].
    pub fn current_processing_time(&self) -> i64 {
        self.inner.parts.processing_time
    }

    /// Registers another event-time timer for this key.
    ///
    /// # Errors
    /// As [`KeyedContext::register_event_time_timer`].
    pub fn register_event_time_timer(&mut self, time: i64) -> Result<(), Error> {
        self.inner.register_event_time_timer(time)
    }

    /// Registers another processing-time timer for this key.
    pub fn register_processing_time_timer(&mut self, time: i64) {
        self.inner.register_processing_time_timer(time);
    }

    /// Deletes an event-time timer of this key; see
    /// [`KeyedContext::delete_event_time_timer`].
    pub fn delete_event_time_timer(&mut self, time: i64) {
        self.inner.delete_event_time_timer(time);
    }

    /// Deletes a processing-time timer of this key; see
    /// [`KeyedContext::delete_processing_time_timer`].
    pub fn delete_processing_time_timer(&mut self, time: i64) {
        self.inner.delete_processing_time_timer(time);
    }

    /// The key's state; see [`KeyedContext::state`].
    ///
    /// # Errors
    /// As [`KeyedContext::state`].
    #[inline]
    pub fn state<S: StateRef<K>>(&mut self, state: S) -> Result<Handle<'_, K, S>, S::Error> {
        self.inner.state(state)
    }
}
