//! Stateless one-to-one and one-to-many operators.

use super::{effects, forward_lifecycle, guard, user_error, Operator, OperatorId};
use crate::{BoxError, Error};
use std::marker::PhantomData;

/// Applies `f` to every record.
pub struct Map<F, U, N> {
    id: OperatorId,
    f: F,
    next: N,
    _out: PhantomData<fn() -> U>,
}

impl<F, U, N> Map<F, U, N> {
    /// A map operator with id `id` feeding `next`.
    pub fn new(id: OperatorId, f: F, next: N) -> Self {
        Map {
            id,
            f,
            next,
            _out: PhantomData,
        }
    }
}

impl<T, U, F: FnMut(T) -> U, N: Operator<U>> Operator<T> for Map<F, U, N> {
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let out = guard(&self.id, || (self.f)(value))?;
        self.next.process(out, timestamp)
    }
    forward_lifecycle!();
}

/// Applies a fallible `f`; an `Err` fails the record, naming this operator.
pub struct TryMap<F, U, E, N> {
    id: OperatorId,
    f: F,
    next: N,
    _out: PhantomData<fn() -> (U, E)>,
}

impl<F, U, E, N> TryMap<F, U, E, N> {
    /// A fallible map operator with id `id` feeding `next`.
    pub fn new(id: OperatorId, f: F, next: N) -> Self {
        TryMap {
            id,
            f,
            next,
            _out: PhantomData,
        }
    }
}

impl<T, U, E, F, N> Operator<T> for TryMap<F, U, E, N>
where
    F: FnMut(T) -> Result<U, E>,
    E: Into<BoxError>,
    N: Operator<U>,
{
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        match guard(&self.id, || (self.f)(value))? {
            Ok(out) => self.next.process(out, timestamp),
            Err(e) => Err(user_error(&self.id, e.into())),
        }
    }
    forward_lifecycle!();
}

/// Keeps the records for which `f` returns `true`.
pub struct Filter<F, N> {
    id: OperatorId,
    f: F,
    next: N,
}

impl<F, N> Filter<F, N> {
    /// A filter operator with id `id` feeding `next`.
    pub fn new(id: OperatorId, f: F, next: N) -> Self {
        Filter { id, f, next }
    }
}

impl<T, F: FnMut(&T) -> bool, N: Operator<T>> Operator<T> for Filter<F, N> {
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        if guard(&self.id, || (self.f)(&value))? {
            self.next.process(value, timestamp)
        } else {
            Ok(())
        }
    }
    forward_lifecycle!();
}

/// Emits every item of the iterable `f` returns, each with the input's timestamp.
pub struct FlatMap<F, I, N> {
    id: OperatorId,
    f: F,
    next: N,
    _out: PhantomData<fn() -> I>,
}

impl<F, I, N> FlatMap<F, I, N> {
    /// A flat-map operator with id `id` feeding `next`.
    pub fn new(id: OperatorId, f: F, next: N) -> Self {
        FlatMap {
            id,
            f,
            next,
            _out: PhantomData,
        }
    }
}

impl<T, I, F, N> Operator<T> for FlatMap<F, I, N>
where
    F: FnMut(T) -> I,
    I: IntoIterator,
    N: Operator<I::Item>,
{
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let items = guard(&self.id, || (self.f)(value))?;
        let mut iter = items.into_iter();
        // The iterator is user code too. A failure after an item went downstream may leave
        // that item's effects behind (see `effects`).
        let mut pushed = false;
        loop {
            let item = match guard(&self.id, || iter.next()) {
                Ok(Some(item)) => item,
                Ok(None) => return Ok(()),
                Err(e) if pushed => return Err(effects::left_behind(e)),
                Err(e) => return Err(e),
            };
            match self.next.process(item, timestamp) {
                Ok(()) => pushed = true,
                Err(e) if pushed => return Err(effects::left_behind(e)),
                Err(e) => return Err(e),
            }
        }
    }
    forward_lifecycle!();
}
