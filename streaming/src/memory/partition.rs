//! [`PartitionedSource`]: a collection replayed as N partitions, one chain per partition
//! (the Redis engine's execution model on the memory engine).

use super::env::check_source_id;
use super::failures::RecordFailures;
use super::run::{JobSummary, MemoryRoot, PerPartition, RunMemory};
use super::runtime::{drive_records, Delivered};
use super::timestamps::{
    records, CollectionItem, GivenTimestamps, IngestionTime, IngestionTimeSource, NoTimestamps,
};
use super::MemoryEnv;
use super::MemoryRuntime;
use crate::dataflow::{BuildPlan, DataStream, Plan};
use crate::mq::partition_for_key;
use crate::ops::{guard, ChainEnd, Operator, OperatorId};
use crate::sealed::Sealed;
use crate::Error;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

impl MemoryEnv {
    /// A stream of the items of `items` replayed as `partitions` partitions, the way the
    /// Redis engine runs a topic with that many partitions: each partition gets its own
    /// copy of the pipeline (its own operator chain, keyed state and watermark), and the
    /// pipeline's output is the union of the partitions' outputs. The source id is
    /// `source-{n}` for the environment's n-th source.
    ///
    /// Partition of an item: `key(item)` = `Some(k)` → [`partition_for_key`]`(k, partitions)`
    /// (FNV-1a, what the Redis producer uses for a message with key `k`); `None` → round
    /// robin over the keyless items in input order (the i-th keyless item, from 0, goes to
    /// partition `i % partitions`, as from a fresh producer). Like
    /// [`from_collection`](Self::from_collection) the items have no timestamps (event-time
    /// windows do not compile on the stream); see
    /// [`from_timestamped_collection_partitioned`](Self::from_timestamped_collection_partitioned)
    /// and [`with_ingestion_time`](DataStream::with_ingestion_time) (the ingestion clock
    /// counts the whole input: item `i` arrives at `i` ms whatever its partition).
    /// Within a partition items keep their input order.
    ///
    /// Running: partitions run one after another (0, 1, …), each to the end of its input
    /// (watermark `i64::MAX`, `finish`), so a partition's watermark never depends on
    /// another partition's items. The sink opens once, receives partition 0's records, then
    /// partition 1's, …, and closes once. With `partitions = 1` the run equals
    /// [`from_collection`](Self::from_collection)'s. With more partitions the input is
    /// buffered (split into the partitions) before the first partition runs, and the
    /// pipeline must be `Clone` (its functions, window functions, late-data sinks), like a
    /// Redis pipeline: each partition runs its own clone, so a function's own mutable state
    /// is per partition. A run's [`JobSummary`](super::JobSummary) adds up all partitions.
    ///
    /// Results can depend on `partitions` whenever order matters across keys: which
    /// elements are late, when sessions merge. When every key lands in one partition (the
    /// pipeline keys by the partition key), per-key results of rolling operators do not.
    ///
    /// # Panics
    /// If `partitions` is 0.
    ///
    /// # Errors
    /// The terminal operation returns [`Error::InvalidConfig`] (field `partitions`) when
    /// checkpointing is enabled and `partitions > 1`: state is checkpointed by operator id,
    /// which all partitions share.
    ///
    /// ```
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// let words = ["a", "b", "a", "c", "b", "a"];
    /// let out = env
    ///     .from_collection_partitioned(words, 4, |w: &&str| Some(*w))
    ///     .map(|w| (w, 1u64))
    ///     .key_by(|p: &(&str, u64)| p.0)
    ///     .reduce(|a, b| (a.0, a.1 + b.1))
    ///     .collect_vec()?;
    /// // "a" → partition 0, "b" → 1, "c" → 2 (of 4): partition 0's records come first.
    /// let expected = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)];
    /// assert_eq!(out, expected);
    /// # Ok::<(), streaming::Error>(())
    /// ```
    ///
    /// [`partition_for_key`]: crate::mq::partition_for_key
    pub fn from_collection_partitioned<I, KF, K>(
        &self,
        items: I,
        partitions: u32,
        key: KF,
    ) -> DataStream<PartitionedSource<I, KF>>
    where
        I: IntoIterator,
        KF: FnMut(&I::Item) -> Option<K>,
        K: AsRef<str>,
    {
        let id = self.next_source_id();
        self.from_collection_partitioned_with_id(id, items, partitions, key)
    }

    /// Like [`from_collection_partitioned`](Self::from_collection_partitioned), for
    /// `(element, event time ms)` pairs as in
    /// [`from_timestamped_collection`](Self::from_timestamped_collection): `key` sees the
    /// element, and each element keeps its event time in its partition.
    ///
    /// # Panics
    /// If `partitions` is 0.
    ///
    /// # Errors
    /// As [`from_collection_partitioned`](Self::from_collection_partitioned).
    pub fn from_timestamped_collection_partitioned<I, T, KF, K>(
        &self,
        items: I,
        partitions: u32,
        key: KF,
    ) -> DataStream<PartitionedSource<I, KF, GivenTimestamps>>
    where
        I: IntoIterator<Item = (T, i64)>,
        KF: FnMut(&T) -> Option<K>,
        K: AsRef<str>,
    {
        let id = self.next_source_id();
        self.from_timestamped_collection_partitioned_with_id(id, items, partitions, key)
    }

    /// Like [`from_timestamped_collection_partitioned`](Self::from_timestamped_collection_partitioned)
    /// with an explicit source id.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]`, or
    /// `partitions` is 0.
    ///
    /// # Errors
    /// As [`from_collection_partitioned`](Self::from_collection_partitioned).
    pub fn from_timestamped_collection_partitioned_with_id<I, T, KF, K>(
        &self,
        source_id: impl Into<String>,
        items: I,
        partitions: u32,
        key: KF,
    ) -> DataStream<PartitionedSource<I, KF, GivenTimestamps>>
    where
        I: IntoIterator<Item = (T, i64)>,
        KF: FnMut(&T) -> Option<K>,
        K: AsRef<str>,
    {
        self.partitioned(source_id.into(), items, partitions, key)
    }

    fn partitioned<I, KF, Ts>(
        &self,
        id: String,
        items: I,
        partitions: u32,
        key: KF,
    ) -> DataStream<PartitionedSource<I, KF, Ts>>
    where
        I: IntoIterator,
        Ts: CollectionItem<I::Item>,
    {
        check_source_id(&id);
        DataStream::new(
            PartitionedSource::new(self.clone(), id.clone(), items, partitions, key),
            id,
        )
    }

    /// Like [`from_collection_partitioned`](Self::from_collection_partitioned) with an
    /// explicit source id, which prefixes the ids of its operators.
    ///
    /// # Panics
    /// If `source_id` is empty or has characters outside `[A-Za-z0-9_.-]`, or
    /// `partitions` is 0.
    ///
    /// # Errors
    /// As [`from_collection_partitioned`](Self::from_collection_partitioned).
    pub fn from_collection_partitioned_with_id<I, KF, K>(
        &self,
        source_id: impl Into<String>,
        items: I,
        partitions: u32,
        key: KF,
    ) -> DataStream<PartitionedSource<I, KF>>
    where
        I: IntoIterator,
        KF: FnMut(&I::Item) -> Option<K>,
        K: AsRef<str>,
    {
        self.partitioned(source_id.into(), items, partitions, key)
    }
}

/// The plan of [`MemoryEnv::from_collection_partitioned`] and
/// [`MemoryEnv::from_timestamped_collection_partitioned`]; `Ts` says how its records get
/// timestamps.
///
/// Cloning it is cheap: clones share the input, which the run takes once.
pub struct PartitionedSource<I, KF, Ts = NoTimestamps> {
    env: MemoryEnv,
    id: Rc<str>,
    partitions: u32,
    input: Rc<RefCell<Option<(I, KF)>>>,
    _ts: PhantomData<fn() -> Ts>,
}

impl<I, KF, Ts> Clone for PartitionedSource<I, KF, Ts> {
    fn clone(&self) -> Self {
        PartitionedSource {
            env: self.env.clone(),
            id: Rc::clone(&self.id),
            partitions: self.partitions,
            input: Rc::clone(&self.input),
            _ts: PhantomData,
        }
    }
}

impl<I, KF> IngestionTimeSource<PartitionedSource<I, KF, IngestionTime>>
    for PartitionedSource<I, KF, NoTimestamps>
{
    fn on_ingestion_time(self) -> PartitionedSource<I, KF, IngestionTime> {
        PartitionedSource {
            env: self.env,
            id: self.id,
            partitions: self.partitions,
            input: self.input,
            _ts: PhantomData,
        }
    }
}

impl<I, KF, Ts> PartitionedSource<I, KF, Ts> {
    pub(crate) fn new(env: MemoryEnv, id: String, items: I, partitions: u32, key: KF) -> Self {
        assert!(partitions > 0, "partitions must be ≥ 1");
        PartitionedSource {
            env,
            id: id.into(),
            partitions,
            input: Rc::new(RefCell::new(Some((items, key)))),
            _ts: PhantomData,
        }
    }

    fn take_input(&self) -> (I, KF) {
        self.input
            .borrow_mut()
            .take()
            .expect("a partitioned source runs once")
    }
}

impl<I, KF, Ts> Sealed for PartitionedSource<I, KF, Ts> {}

impl<I: IntoIterator, KF, Ts: CollectionItem<I::Item>> Plan for PartitionedSource<I, KF, Ts> {
    type Out = Ts::Out;
    type Root = Self;
    type Head = Ts::Out;
    type Time = Ts::Time;

    fn root(&self) -> &Self {
        self
    }
}

impl<I: IntoIterator, KF, Ts: CollectionItem<I::Item>> BuildPlan<MemoryRuntime>
    for PartitionedSource<I, KF, Ts>
{
    fn build<O: Operator<Ts::Out>>(
        self,
        _rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<(Self, impl Operator<Ts::Out> + use<I, KF, Ts, O>), Error> {
        Ok((self, downstream))
    }
}

impl<I: IntoIterator, KF, Ts: CollectionItem<I::Item>> MemoryRoot for PartitionedSource<I, KF, Ts> {
    type Item = Ts::Out;
    type Runner = PerPartition;

    fn env(&self) -> &MemoryEnv {
        &self.env
    }

    /// Drives the whole input through one chain, as one partition.
    fn drive<O: Operator<Ts::Out>>(
        self,
        mut op: O,
        failures: &mut RecordFailures<'_, Ts::Out>,
    ) -> Result<(), Error> {
        let (items, _key) = self.take_input();
        drive_records(&mut op, records::<I, Ts>(items), failures)
    }
}

/// One partition's elements with their record timestamps, in input order.
type Part<T> = Vec<(T, i64)>;

/// Splits `items` into `n` partitions of `(element, timestamp)`; `Ts` gives each element
/// and its timestamp from the item and its input index.
fn split<I, KF, K, Ts>(
    items: I,
    mut key: KF,
    n: u32,
    guard_id: &OperatorId,
) -> Result<Vec<Part<Ts::Out>>, Error>
where
    I: IntoIterator,
    Ts: CollectionItem<I::Item>,
    KF: FnMut(&Ts::Out) -> Option<K>,
    K: AsRef<str>,
{
    let mut parts: Vec<Part<Ts::Out>> = (0..n).map(|_| Vec::new()).collect();
    let mut keyless = 0u64;
    for (item, ts) in records::<I, Ts>(items) {
        let p = match guard(guard_id, || key(&item))? {
            Some(k) => partition_for_key(k.as_ref(), n),
            None => {
                // The remainder is < n ≤ u32::MAX.
                let p = (keyless % u64::from(n)) as u32;
                keyless += 1;
                p
            }
        };
        parts[p as usize].push((item, ts));
    }
    Ok(parts)
}

impl<P, I, KF, K, Ts> RunMemory<PerPartition> for P
where
    P: BuildPlan<MemoryRuntime> + Plan<Root = PartitionedSource<I, KF, Ts>, Head = Ts::Out> + Clone,
    I: IntoIterator,
    Ts: CollectionItem<I::Item>,
    KF: FnMut(&Ts::Out) -> Option<K>,
    K: AsRef<str>,
{
    fn run_memory<O: Operator<P::Out>>(self, op: O) -> Result<JobSummary, Error> {
        let root = self.root();
        let n = root.partitions;
        let rt = root.runtime();
        let mut failures = rt.failures();
        let mut op = Delivered(op);
        if n == 1 {
            let (root, chain) = self.build(&rt, op)?;
            root.drive(chain, &mut failures)?;
            return Ok(JobSummary::from_counters(&rt.counters));
        }
        if rt.coordinator.is_some() {
            return Err(Error::InvalidConfig {
                field: "partitions",
                reason: format!(
                    "source `{}` has {n} partitions, but checkpoints key state by operator id, which the partitions share: use 1 partition or a MemoryEnv without checkpointing",
                    root.id
                ),
            });
        }
        let guard_id = OperatorId::new(&root.id, 0, "partition");
        let (items, key) = root.take_input();
        let parts = split::<I, KF, K, Ts>(items, key, n, &guard_id)?;
        let result = op.open().and_then(|()| {
            let mut plan = Some(self);
            let last = parts.len() - 1;
            for (p, part) in parts.into_iter().enumerate() {
                let this = if p == last {
                    plan.take().expect("the last partition takes the plan")
                } else {
                    plan.clone()
                        .expect("the plan is there until the last partition")
                };
                // The partition's chain passes records on to the shared sink; the sink's
                // lifecycle belongs to the whole run (a partition's end-of-input watermark
                // is not the union's).
                let output = ChainEnd::new(|value, timestamp| op.process(value, timestamp));
                let (_root, mut chain) = this.build(&rt, output)?;
                drive_records(&mut chain, part, &mut failures)?;
            }
            op.on_watermark(crate::time::MAX_WATERMARK)?;
            op.finish()
        });
        let closed = op.close();
        result.and(closed)?;
        Ok(JobSummary::from_counters(&rt.counters))
    }
}
