//! An interval join's buffers per key, kept as the engine of its source chooses
//! ([`IntervalJoinState`](super::IntervalJoinState)).
//!
//! - **In memory**: one value per key holding both inputs' elements and the key's cleanup
//!   time, so an element costs one state lookup (a list per input and a value for the
//!   cleanup time would cost three).
//! - **Persistent** (an engine that keeps state outside the process): a list per input
//!   and the cleanup time as a value, so a batch writes only the elements it appended, not
//!   a key's whole buffers.
//!
//! Both keep each input's elements in arrival order, so the pairs an element meets are
//! emitted in the same order whichever the layout. In memory, a side whose elements
//! arrived in time order (as they mostly do) is probed by binary search, else scanned.

use crate::api::{
    Collector, KeyedContext, ListStateDescriptor, TimerContext, ValueStateDescriptor,
};
use crate::BoxError;
use std::hash::Hash;

/// The states of an interval join's buffers, per key: each input's elements with their
/// event times (ms) and the key's pending cleanup time.
#[doc(hidden)]
pub struct JoinBuffers<A, B> {
    layout: Layout<A, B>,
}

enum Layout<A, B> {
    /// `interval_join.buffers`: one [`KeyBuffers`] per key.
    InMemory(ValueStateDescriptor<KeyBuffers<A, B>>),
    /// `interval_join.first`, `interval_join.second` (lists of `(element, time)`) and
    /// [`CLEANUP`].
    Persistent {
        first: ListStateDescriptor<(A, i64)>,
        second: ListStateDescriptor<(B, i64)>,
    },
}

impl<A: Clone, B: Clone> Clone for JoinBuffers<A, B> {
    fn clone(&self) -> Self {
        let layout = match &self.layout {
            Layout::InMemory(d) => Layout::InMemory(d.clone()),
            Layout::Persistent { first, second } => Layout::Persistent {
                first: first.clone(),
                second: second.clone(),
            },
        };
        JoinBuffers { layout }
    }
}

impl<A, B> JoinBuffers<A, B> {
    /// Buffers the engine keeps in memory.
    pub(crate) const fn in_memory() -> Self {
        let empty = KeyBuffers {
            first: Side::new(),
            second: Side::new(),
            cleanup: None,
        };
        JoinBuffers {
            layout: Layout::InMemory(ValueStateDescriptor::new("interval_join.buffers", empty)),
        }
    }
}

impl<A, B> JoinBuffers<A, B>
where
    A: serde::Serialize + serde::de::DeserializeOwned,
    B: serde::Serialize + serde::de::DeserializeOwned,
{
    /// Buffers an engine keeps outside the process (as JSON).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) const fn persistent() -> Self {
        JoinBuffers {
            layout: Layout::Persistent {
                first: ListStateDescriptor::persistent("interval_join.first"),
                second: ListStateDescriptor::persistent("interval_join.second"),
            },
        }
    }
}

/// The lists of the persistent layout: one input's, then the other's.
type Lists<'d, T, U> = (
    &'d ListStateDescriptor<(T, i64)>,
    &'d ListStateDescriptor<(U, i64)>,
);

/// The time of the key's one pending cleanup timer (ms), when it has one (persistent
/// layout).
const CLEANUP: ValueStateDescriptor<i64> =
    ValueStateDescriptor::persistent("interval_join.cleanup", i64::MAX);

/// One key's buffers in memory.
#[derive(Clone)]
struct KeyBuffers<A, B> {
    first: Side<A>,
    second: Side<B>,
    /// The time of the key's one pending cleanup timer.
    cleanup: Option<i64>,
}

impl<A, B> KeyBuffers<A, B> {
    /// A first-input element arrives: its side, the other, the cleanup time.
    fn firsts(&mut self) -> (&mut Side<A>, &Side<B>, &mut Option<i64>) {
        (&mut self.first, &self.second, &mut self.cleanup)
    }

    /// A second-input element arrives.
    fn seconds(&mut self) -> (&mut Side<B>, &Side<A>, &mut Option<i64>) {
        (&mut self.second, &self.first, &mut self.cleanup)
    }
}

/// One input's buffered elements of a key, in arrival order, with their event times kept
/// apart: a probe reads the times alone.
#[derive(Clone)]
struct Side<T> {
    times: Vec<i64>,
    elements: Vec<T>,
    /// The times never decrease (the elements arrived in time order, as they mostly do):
    /// a probe then finds its range by binary search.
    in_order: bool,
}

impl<T> Side<T> {
    const fn new() -> Self {
        Side {
            times: Vec::new(),
            elements: Vec::new(),
            in_order: true,
        }
    }

    /// Calls `meet` with each element whose time is within `[low, high]` (`low <= high`),
    /// in arrival order.
    #[inline]
    fn probe(&self, low: i64, high: i64, mut meet: impl FnMut(&T)) {
        if self.in_order {
            // Arrival order is time order: the elements met are one run.
            let from = self.times.partition_point(|t| *t < low);
            let run = self.times[from..].iter().take_while(|t| **t <= high);
            run.zip(&self.elements[from..]).for_each(|(_, e)| meet(e));
            return;
        }
        // `low <= t <= high` as one comparison: `t - low` wraps below 0 to above `span`.
        let span = high.wrapping_sub(low) as u64;
        for (t, element) in self.times.iter().zip(&self.elements) {
            if (t.wrapping_sub(low) as u64) <= span {
                meet(element);
            }
        }
    }

    fn push(&mut self, element: T, time: i64) {
        if self.times.last().is_some_and(|last| *last > time) {
            self.in_order = false;
        }
        self.times.push(time);
        self.elements.push(element);
    }

    /// Drops the elements whose expiry (`expires(time)`) is at or before `upto`; returns
    /// the earliest expiry left.
    fn expire(&mut self, upto: i64, expires: impl Fn(i64) -> i64) -> Option<i64> {
        let left = self.times.iter().filter(|t| expires(**t) > upto).count();
        if left == 0 {
            // At the end of input, everything: no element is looked at again.
            *self = Side::new();
            return None;
        }
        if left < self.times.len() {
            let mut times = self.times.iter();
            (self.elements).retain(|_| times.next().is_some_and(|t| expires(*t) > upto));
            self.times.retain(|t| expires(*t) > upto);
            // The late arrivals that broke the order may be gone.
            self.in_order = self.in_order || self.times.is_sorted();
        }
        self.times.iter().map(|t| expires(*t)).min()
    }
}

/// Where an arriving element at its time reaches: the other input's times it meets
/// (`low..=high`) and when it can meet nothing more (`expires`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Reach {
    pub(super) low: i64,
    pub(super) high: i64,
    pub(super) expires: i64,
}

impl<A: Clone + 'static, B: Clone + 'static> JoinBuffers<A, B> {
    /// A first-input element `value` arrives (not late): `pair(value, b)` is emitted for
    /// each buffered second-input element `b` it meets, in order; then `value` is buffered
    /// and the key's cleanup scheduled by its expiry.
    pub(super) fn arrive_first<K: Hash + Eq + Clone + 'static, Out>(
        &self,
        ctx: &mut KeyedContext<'_, K>,
        (value, reach): (A, Reach),
        out: &mut Collector<'_, Out>,
        pair: impl FnMut(&A, &B) -> Out,
    ) -> Result<(), BoxError> {
        match &self.layout {
            Layout::InMemory(d) => {
                arrive_in_memory(d, KeyBuffers::firsts, ctx, (value, reach), out, pair)
            }
            Layout::Persistent { first, second } => {
                arrive_persistent((first, second), ctx, (value, reach), out, pair)
            }
        }
    }

    /// As [`arrive_first`](Self::arrive_first) for a second-input element: `pair(value, a)`
    /// for each buffered first-input element `a` it meets.
    pub(super) fn arrive_second<K: Hash + Eq + Clone + 'static, Out>(
        &self,
        ctx: &mut KeyedContext<'_, K>,
        (value, reach): (B, Reach),
        out: &mut Collector<'_, Out>,
        pair: impl FnMut(&B, &A) -> Out,
    ) -> Result<(), BoxError> {
        match &self.layout {
            Layout::InMemory(d) => {
                arrive_in_memory(d, KeyBuffers::seconds, ctx, (value, reach), out, pair)
            }
            Layout::Persistent { first, second } => {
                arrive_persistent((second, first), ctx, (value, reach), out, pair)
            }
        }
    }

    /// The key's cleanup timer: drops every element the watermark (or `timestamp`)
    /// passed — by `first_expires` / `second_expires` of its time — and moves the timer to
    /// the earliest expiry left.
    pub(super) fn expire<K: Hash + Eq + Clone + 'static>(
        &self,
        ctx: &mut TimerContext<'_, K>,
        timestamp: i64,
        first_expires: impl Fn(i64) -> i64,
        second_expires: impl Fn(i64) -> i64,
    ) -> Result<(), BoxError> {
        // Everything the watermark passed goes at once (at the end of input: all of it).
        let upto = timestamp.max(ctx.current_watermark());
        match &self.layout {
            Layout::InMemory(d) => expire_in_memory(d, ctx, upto, (first_expires, second_expires)),
            Layout::Persistent { first, second } => {
                expire_persistent((first, second), ctx, upto, (first_expires, second_expires))
            }
        }
    }
}

/// An element `value` arrives at a key's buffers in memory; `sides` picks its input's side,
/// the other's and the cleanup time out of them.
fn arrive_in_memory<K, A, B, T, U, Out>(
    descriptor: &ValueStateDescriptor<KeyBuffers<A, B>>,
    sides: impl FnOnce(&mut KeyBuffers<A, B>) -> (&mut Side<T>, &Side<U>, &mut Option<i64>),
    ctx: &mut KeyedContext<'_, K>,
    (value, reach): (T, Reach),
    out: &mut Collector<'_, Out>,
    mut pair: impl FnMut(&T, &U) -> Out,
) -> Result<(), BoxError>
where
    K: Hash + Eq + Clone + 'static,
    A: Clone + 'static,
    B: Clone + 'static,
{
    let t = ctx.timestamp();
    let moved = {
        let mut state = ctx.state(descriptor)?;
        let (own, other, cleanup) = sides(state.get_mut_or_default());
        other.probe(reach.low, reach.high, |u| out.collect(pair(&value, u)));
        own.push(value, t);
        // One cleanup timer per key, at its earliest expiry (elements mostly arrive in
        // time order, so most find the timer already early enough).
        let pending = *cleanup;
        if pending.is_some_and(|pending| pending <= reach.expires) {
            return Ok(());
        }
        *cleanup = Some(reach.expires);
        pending
    };
    if let Some(pending) = moved {
        ctx.delete_event_time_timer(pending);
    }
    ctx.register_event_time_timer(reach.expires)?;
    Ok(())
}

/// The cleanup timer of a key's buffers in memory (see [`JoinBuffers::expire`]).
fn expire_in_memory<K, A, B>(
    descriptor: &ValueStateDescriptor<KeyBuffers<A, B>>,
    ctx: &mut TimerContext<'_, K>,
    upto: i64,
    (first_expires, second_expires): (impl Fn(i64) -> i64, impl Fn(i64) -> i64),
) -> Result<(), BoxError>
where
    K: Hash + Eq + Clone + 'static,
    A: Clone + 'static,
    B: Clone + 'static,
{
    let next = {
        let mut state = ctx.state(descriptor)?;
        let Some(buffers) = state.get_mut() else {
            return Ok(());
        };
        let first = buffers.first.expire(upto, first_expires);
        let second = buffers.second.expire(upto, second_expires);
        let next = first.into_iter().chain(second).min();
        buffers.cleanup = next;
        if next.is_none() {
            // Both sides are empty.
            state.clear();
        }
        next
    };
    if let Some(time) = next {
        ctx.register_event_time_timer(time)?;
    }
    Ok(())
}

/// An element `value` arrives at a key's persistent buffers: its input's list `own` and
/// the other's `other`.
fn arrive_persistent<K, T, U, Out>(
    (own, other): Lists<'_, T, U>,
    ctx: &mut KeyedContext<'_, K>,
    (value, reach): (T, Reach),
    out: &mut Collector<'_, Out>,
    mut pair: impl FnMut(&T, &U) -> Out,
) -> Result<(), BoxError>
where
    K: Hash + Eq + Clone + 'static,
    T: Clone + 'static,
    U: Clone + 'static,
{
    let t = ctx.timestamp();
    for (element, time) in ctx.state(other)?.get() {
        if reach.low <= *time && *time <= reach.high {
            out.collect(pair(&value, element));
        }
    }
    ctx.state(own)?.add((value, t));
    schedule_cleanup(ctx, reach.expires)
}

/// Makes sure the key's persistent buffers are cleaned up by `expires`: the key keeps one
/// cleanup timer, at the earliest time one of its elements expires.
fn schedule_cleanup<K: Hash + Eq + Clone + 'static>(
    ctx: &mut KeyedContext<'_, K>,
    expires: i64,
) -> Result<(), BoxError> {
    let pending = ctx.state(&CLEANUP)?.get().copied();
    if pending.is_some_and(|pending| pending <= expires) {
        return Ok(());
    }
    if let Some(pending) = pending {
        ctx.delete_event_time_timer(pending);
    }
    ctx.register_event_time_timer(expires)?;
    ctx.state(&CLEANUP)?.update(expires);
    Ok(())
}

/// The cleanup timer of a key's persistent buffers (see [`JoinBuffers::expire`]).
fn expire_persistent<K, A, B>(
    (first, second): Lists<'_, A, B>,
    ctx: &mut TimerContext<'_, K>,
    upto: i64,
    (first_expires, second_expires): (impl Fn(i64) -> i64, impl Fn(i64) -> i64),
) -> Result<(), BoxError>
where
    K: Hash + Eq + Clone + 'static,
    A: Clone + 'static,
    B: Clone + 'static,
{
    let mut firsts = ctx.state(first)?;
    firsts.retain(|(_, t)| first_expires(*t) > upto);
    let first_next = firsts.get().iter().map(|(_, t)| first_expires(*t)).min();
    let mut seconds = ctx.state(second)?;
    seconds.retain(|(_, t)| second_expires(*t) > upto);
    let second_next = seconds.get().iter().map(|(_, t)| second_expires(*t)).min();
    match first_next.into_iter().chain(second_next).min() {
        Some(time) => {
            ctx.register_event_time_timer(time)?;
            ctx.state(&CLEANUP)?.update(time);
        }
        None => ctx.state(&CLEANUP)?.clear(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Side;

    /// What a probe must find: the ids of the elements within `[low, high]`, in arrival
    /// order.
    fn met(side: &Side<usize>, low: i64, high: i64) -> Vec<usize> {
        let mut ids = Vec::new();
        side.probe(low, high, |id| ids.push(*id));
        ids
    }

    fn side(times: &[i64]) -> Side<usize> {
        let mut side = Side::new();
        for (id, t) in times.iter().enumerate() {
            side.push(id, *t);
        }
        side
    }

    #[test]
    fn a_probe_meets_the_times_within_its_bounds_in_arrival_order() {
        let extremes = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
        // Out of order (scanned) and in time order (found by binary search).
        let mut times: Vec<i64> = (0..40).map(|i| (i * 37) % 23 - 11).collect();
        times.extend(extremes);
        let sorted = {
            let mut s = times.clone();
            s.sort_unstable();
            s
        };
        for times in [&times, &sorted] {
            let side = side(times);
            assert_eq!(side.in_order, times.is_sorted());
            for (low, high) in [
                (-3, 4),
                (0, 0),
                (i64::MIN, i64::MAX),
                (i64::MIN, -1),
                (5, i64::MAX),
                (30, 40),
            ] {
                let expected: Vec<usize> = (0..times.len())
                    .filter(|i| low <= times[*i] && times[*i] <= high)
                    .collect();
                assert_eq!(
                    met(&side, low, high),
                    expected,
                    "[{low}, {high}] of {times:?}"
                );
            }
        }
    }

    #[test]
    fn expiry_keeps_the_rest_in_order_and_finds_the_order_again() {
        let mut side = side(&[5, 1, 7, 9]);
        assert!(!side.in_order);
        assert_eq!(
            side.expire(1, |t| t),
            Some(5),
            "only the element at 1 expired"
        );
        assert_eq!(met(&side, i64::MIN, i64::MAX), [0, 2, 3]);
        assert!(side.in_order, "5, 7, 9 are in order again");
        assert_eq!(side.expire(i64::MAX, |t| t), None);
        assert!(side.times.is_empty() && side.elements.is_empty() && side.in_order);
    }
}
