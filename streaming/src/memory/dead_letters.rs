//! [`DataStream::side_output_dead_letters`]: a memory pipeline's dead letters, to a sink.

use super::failures::{DeadLetter, RecordFailures};
use super::run::{MemoryRoot, SingleChain};
use super::{MemoryEnv, MemoryRuntime};
use crate::api::Sink;
use crate::dataflow::{BuildPlan, DataStream, Plan};
use crate::ops::{guard, user_error, Operator, OperatorId};
use crate::sealed::Sealed;
use crate::Error;

impl<R> DataStream<R>
where
    R: MemoryRoot<Runner = SingleChain> + Plan<Root = R, Head = R::Item, Out = R::Item>,
{
    /// Sends the pipeline's dead letters to `sink`: every source record that fails and is
    /// dead-lettered (see [`OnRecordError`](crate::memory::OnRecordError)) reaches it as a
    /// [`DeadLetter`] with the record, the failure's type and message, the attempts and the
    /// operator, in input order. Without it, dead letters are only counted
    /// ([`JobSummary::dead_letters`](crate::JobSummary::dead_letters)) and logged.
    ///
    /// Memory engine, right after the source (the dead letter holds the source's record),
    /// and not on [`from_collection_partitioned`](crate::MemoryEnv::from_collection_partitioned)'s
    /// source. To keep the record, the engine copies every source record before it runs
    /// the pipeline on it, so the record type must be `Clone` and each record costs a
    /// clone. The sink opens before the first record and flushes and closes after the
    /// last; its error stops the run.
    ///
    /// ```
    /// use streaming::memory::DeadLetter;
    /// use streaming::MemoryEnv;
    /// let mut dead: Vec<DeadLetter<&str>> = Vec::new();
    /// let out = MemoryEnv::new()
    ///     .from_elements(["1", "x", "3"])
    ///     .side_output_dead_letters(|d| dead.push(d))
    ///     .try_map(|s: &str| s.parse::<u32>())
    ///     .collect_vec()?;
    /// assert_eq!(out, [1, 3]);
    /// assert_eq!(dead[0].record, "x");
    /// assert_eq!(dead[0].error_type, "user_function");
    /// assert_eq!(dead[0].dead_letter_type, "retries_exhausted:user_function");
    /// assert_eq!(dead[0].attempts, 4);
    /// assert_eq!(dead[0].operator.as_ref().unwrap(), "source-0/1:try_map");
    /// # Ok::<(), streaming::Error>(())
    /// ```
    pub fn side_output_dead_letters<L>(self, sink: L) -> DataStream<WithDeadLetters<R, L>>
    where
        R::Item: Clone,
        L: Sink<DeadLetter<R::Item>>,
    {
        let id = self.source_part_id("dead_letters");
        self.wrap_root(|root| WithDeadLetters { root, sink, id })
    }
}

/// The root of a pipeline whose dead letters go to a sink
/// ([`DataStream::side_output_dead_letters`]).
pub struct WithDeadLetters<R, L> {
    root: R,
    sink: L,
    id: OperatorId,
}

impl<R, L> Sealed for WithDeadLetters<R, L> {}

impl<R: Plan<Root = R>, L> Plan for WithDeadLetters<R, L> {
    type Out = R::Out;
    type Root = Self;
    type Head = R::Head;
    type Time = R::Time;

    fn root(&self) -> &Self {
        self
    }
}

impl<R, L> BuildPlan<MemoryRuntime> for WithDeadLetters<R, L>
where
    R: BuildPlan<MemoryRuntime> + Plan<Root = R>,
{
    fn build<O: Operator<R::Out>>(
        self,
        rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<(Self, impl Operator<R::Head> + use<R, L, O>), Error> {
        let (root, chain) = self.root.build(rt, downstream)?;
        Ok((
            WithDeadLetters {
                root,
                sink: self.sink,
                id: self.id,
            },
            chain,
        ))
    }
}

impl<R, L> MemoryRoot for WithDeadLetters<R, L>
where
    R: MemoryRoot<Runner = SingleChain>,
    R::Item: Clone,
    L: Sink<DeadLetter<R::Item>>,
{
    type Item = R::Item;
    type Runner = SingleChain;

    fn env(&self) -> &MemoryEnv {
        self.root.env()
    }

    fn drive<O: Operator<R::Item>>(
        self,
        op: O,
        failures: &mut RecordFailures<'_, R::Item>,
    ) -> Result<(), Error> {
        let WithDeadLetters { root, mut sink, id } = self;
        guard(&id, || sink.open())?.map_err(|e| user_error(&id, e))?;
        let mut send = |letter: DeadLetter<R::Item>| {
            guard(&id, || sink.invoke(letter))?.map_err(|e| user_error(&id, e))
        };
        let result = root.drive(op, &mut failures.keeping(R::Item::clone, &mut send));
        let flushed =
            result.and_then(|()| guard(&id, || sink.flush())?.map_err(|e| user_error(&id, e)));
        let closed = guard(&id, || sink.close())?.map_err(|e| user_error(&id, e));
        flushed.and(closed)
    }
}
