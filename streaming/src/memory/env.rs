//! [`MemoryEnv`]: the entry point of the in-memory engine, and its sources.

use super::failures::{OnRecordError, RecordFailures};
use super::run::{MemoryRoot, SingleChain};
use super::CheckpointCoordinator;
use super::{drive, MemoryRuntime};
use crate::api::{Source, SourceContext};
use crate::dataflow::{BuildPlan, DataStream, Plan};
use crate::ops::{Operator, OperatorId};
use crate::sealed::Sealed;
use crate::Error;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

#[derive(Default)]
struct EnvInner {
    coordinator: RefCell<Option<CheckpointCoordinator>>,
    sources: Cell<u32>,
    on_record_error: Cell<OnRecordError>,
}

/// The in-memory execution environment.
///
/// Cheap to clone: clones share checkpointing. Not `Send`: the engine is single-threaded.
///
/// ```
/// use streaming::MemoryEnv;
/// let env = MemoryEnv::new();
/// let out = env
///     .from_elements(["a b", "c", "d e"])
///     .flat_map(|line| line.split(' ').map(str::to_string).collect::<Vec<_>>())
///     .filter(|w| w != "c")
///     .map(|w| w.to_uppercase())
///     .collect_vec()?;
/// assert_eq!(out, ["A", "B", "D", "E"]);
/// # Ok::<(), streaming::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct MemoryEnv {
    inner: Rc<EnvInner>,
}

impl std::fmt::Debug for MemoryEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryEnv")
            .field("checkpointing", &self.inner.coordinator.borrow().is_some())
            .field("on_record_error", &self.inner.on_record_error.get())
            .finish()
    }
}

impl MemoryEnv {
    /// A new environment with checkpointing off.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns on in-memory checkpoints of keyed state; see [`CheckpointCoordinator`].
    /// Pipelines started afterwards register their state with it. Calling it again keeps
    /// the existing coordinator.
    pub fn enable_checkpointing(&self) -> &Self {
        self.inner
            .coordinator
            .borrow_mut()
            .get_or_insert_with(CheckpointCoordinator::default);
        self
    }

    /// The checkpoint coordinator; `None` while checkpointing is off.
    pub fn checkpoint_coordinator(&self) -> Option<CheckpointCoordinator> {
        self.inner.coordinator.borrow().clone()
    }

    /// Sets what a pipeline started afterwards does with a source record that fails (see
    /// [`OnRecordError`]; default [`OnRecordError::Retry`] with 3 retries, like the Redis
    /// engine): dead-letter it and go on, or stop the run
    /// ([`OnRecordError::StopRun`]). Clones of the environment share the setting.
    ///
    /// ```
    /// use streaming::memory::OnRecordError;
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// let parse = |s: &str| s.parse::<u32>();
    /// // Default: the bad record is dead-lettered, the run goes on.
    /// let out = env.from_elements(["1", "x", "3"]).try_map(parse).collect_vec()?;
    /// assert_eq!(out, [1, 3]);
    /// // Stop the run at the first failure.
    /// env.on_record_error(OnRecordError::StopRun);
    /// let stopped = env.from_elements(["1", "x", "3"]).try_map(parse).collect_vec();
    /// assert!(stopped.is_err());
    /// # Ok::<(), streaming::Error>(())
    /// ```
    pub fn on_record_error(&self, policy: OnRecordError) -> &Self {
        self.inner.on_record_error.set(policy);
        self
    }

    /// What a failing source record does (see [`on_record_error`](Self::on_record_error)).
    pub fn record_error_policy(&self) -> OnRecordError {
        self.inner.on_record_error.get()
    }

    pub(crate) fn runtime(&self) -> MemoryRuntime {
        MemoryRuntime::new(self.checkpoint_coordinator(), self.record_error_policy())
    }

    pub(crate) fn next_source_id(&self) -> String {
        let n = self.inner.sources.get();
        self.inner.sources.set(n + 1);
        format!("source-{n}")
    }

    /// A stream of the items of `items`, consumed lazily, with timestamps `0, 1, …, N-1`
    /// (ms). The source id is `source-{n}` for the environment's n-th source.
    pub fn from_collection<I: IntoIterator>(&self, items: I) -> DataStream<CollectionSource<I>> {
        let id = self.next_source_id();
        DataStream::new(
            CollectionSource {
                env: self.clone(),
                items,
            },
            id,
        )
    }

    /// Like [`from_collection`](Self::from_collection) with an explicit source id, which
    /// prefixes the ids of its operators and so keys their checkpointed state: running the
    /// same pipeline again with the same id continues from the newest checkpoint.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]`.
    pub fn from_collection_with_id<I: IntoIterator>(
        &self,
        source_id: impl Into<String>,
        items: I,
    ) -> DataStream<CollectionSource<I>> {
        let id = source_id.into();
        check_source_id(&id);
        DataStream::new(
            CollectionSource {
                env: self.clone(),
                items,
            },
            id,
        )
    }

    /// Like [`from_collection`](Self::from_collection), for a fixed list of elements.
    pub fn from_elements<T, const N: usize>(
        &self,
        elements: [T; N],
    ) -> DataStream<CollectionSource<[T; N]>> {
        self.from_collection(elements)
    }

    /// A stream fed by a user [`Source`]; its id is `source-{n}`.
    pub fn add_source<T, S: Source<T>>(&self, source: S) -> DataStream<UserSource<S, T>> {
        let id = self.next_source_id();
        self.add_source_with_id(id, source)
    }

    /// A stream fed by a user [`Source`] with an explicit source id, which prefixes the ids
    /// of its operators and so keys their checkpointed state.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]` (the rule
    /// for every source id).
    pub fn add_source_with_id<T, S: Source<T>>(
        &self,
        source_id: impl Into<String>,
        source: S,
    ) -> DataStream<UserSource<S, T>> {
        let id = source_id.into();
        check_source_id(&id);
        DataStream::new(
            UserSource {
                env: self.clone(),
                source,
                id: id.clone(),
                _t: std::marker::PhantomData,
            },
            id,
        )
    }
}

pub(crate) fn check_source_id(id: &str) {
    assert!(
        !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
        "source id `{id}` must be non-empty and use only [A-Za-z0-9_.-]"
    );
}

/// The plan of [`MemoryEnv::from_collection`].
#[derive(Clone)]
pub struct CollectionSource<I> {
    env: MemoryEnv,
    items: I,
}

impl<I> Sealed for CollectionSource<I> {}

impl<I: IntoIterator> Plan for CollectionSource<I> {
    type Out = I::Item;
    type Root = Self;
    type Head = I::Item;

    fn root(&self) -> &Self {
        self
    }
}

impl<I: IntoIterator> BuildPlan<MemoryRuntime> for CollectionSource<I> {
    fn build<O: Operator<I::Item>>(
        self,
        _rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<(Self, impl Operator<I::Item> + use<I, O>), Error> {
        Ok((self, downstream))
    }
}

impl<I: IntoIterator> MemoryRoot for CollectionSource<I> {
    type Item = I::Item;
    type Runner = SingleChain;

    fn runtime(&self) -> MemoryRuntime {
        self.env.runtime()
    }

    fn drive<O: Operator<I::Item>>(
        self,
        mut op: O,
        failures: &mut RecordFailures<'_, I::Item>,
    ) -> Result<(), Error> {
        drive(&mut op, |op| {
            for (ts, item) in (0i64..).zip(self.items) {
                failures.feed(op, item, ts)?;
            }
            Ok(())
        })
    }
}

/// The plan of [`MemoryEnv::add_source`].
pub struct UserSource<S, T> {
    env: MemoryEnv,
    source: S,
    id: String,
    _t: std::marker::PhantomData<fn() -> T>,
}

struct Ctx<'a, 'f, O, T> {
    op: &'a mut O,
    emitted: i64,
    failures: &'a mut RecordFailures<'f, T>,
}

impl<T, O: Operator<T>> SourceContext<T> for Ctx<'_, '_, O, T> {
    #[inline]
    fn collect(&mut self, value: T) -> Result<(), Error> {
        let ts = self.emitted;
        self.collect_with_timestamp(value, ts)
    }

    #[inline]
    fn collect_with_timestamp(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        self.emitted += 1;
        self.failures.feed(self.op, value, timestamp)
    }
}

impl<S, T> Sealed for UserSource<S, T> {}

impl<T, S: Source<T>> Plan for UserSource<S, T> {
    type Out = T;
    type Root = Self;
    type Head = T;

    fn root(&self) -> &Self {
        self
    }
}

impl<T, S: Source<T>> BuildPlan<MemoryRuntime> for UserSource<S, T> {
    fn build<O: Operator<T>>(
        self,
        _rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<(Self, impl Operator<T> + use<S, T, O>), Error> {
        Ok((self, downstream))
    }
}

impl<T, S: Source<T>> MemoryRoot for UserSource<S, T> {
    type Item = T;
    type Runner = SingleChain;

    fn runtime(&self) -> MemoryRuntime {
        self.env.runtime()
    }

    fn drive<O: Operator<T>>(
        mut self,
        mut op: O,
        failures: &mut RecordFailures<'_, T>,
    ) -> Result<(), Error> {
        let source_error = |id: &str, source| Error::Source {
            source_id: id.to_string(),
            source,
        };
        self.source.open().map_err(|e| source_error(&self.id, e))?;
        let guard_id = OperatorId::new(&self.id, 0, "source");
        let source = &mut self.source;
        let result = drive(&mut op, |op| {
            crate::ops::guard(&guard_id, || {
                source.run(&mut Ctx {
                    op,
                    emitted: 0,
                    failures,
                })
            })?
        });
        let closed = self.source.close().map_err(|e| source_error(&self.id, e));
        result.and(closed)
    }
}
