//! How the memory engine runs a plan: its roots, [`Execute`] for them, and the terminal
//! operations that exist on the memory engine only (`collect_vec`, iteration).

use super::failures::RecordFailures;
use super::runtime::Delivered;
use super::{MemoryEnv, MemoryRuntime};
use crate::api::Sink;
use crate::dataflow::{BuildPlan, DataStream, Execute, Plan};
use crate::ops::{Counters, Operator, OperatorId, SinkOp};
use crate::sealed::Sealed;
use crate::Error;

/// What a finished pipeline run reports besides its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobSummary {
    /// Elements that arrived after every window they belong to was past its allowed
    /// lateness; each went to the late side output (or only to this count when the
    /// pipeline set none).
    pub late_elements: u64,
    /// Window emissions (firings and final emissions at cleanup).
    pub window_firings: u64,
    /// Elements that fell between windows (sliding windows with `slide > size`) and were
    /// not late: they belong to no window and are dropped (late ones count as
    /// `late_elements`).
    pub window_gap_dropped: u64,
    /// Elements rejected because a window they belong to has bounds outside `i64`
    /// milliseconds; each went to the window's rejected-element output
    /// ([`WindowedStream::side_output_rejected`](crate::WindowedStream::side_output_rejected))
    /// or, without one, failed its source record (dead-lettered, also counted in
    /// [`dead_letters`](Self::dead_letters)) — or, with
    /// [`OnRecordError::StopRun`](super::OnRecordError::StopRun), went only to this count and
    /// a `tracing` warning. The pipeline goes on with the next element.
    pub window_bounds_rejected: u64,
    /// Source records that failed and were dead-lettered (see
    /// [`OnRecordError`](super::OnRecordError)); each went to the dead-letter output
    /// ([`DataStream::side_output_dead_letters`]) or, without one, only to this count and
    /// a `tracing` warning. The run went on with the next record.
    pub dead_letters: u64,
}

impl JobSummary {
    /// The summary of a run whose operators reported to `counters`.
    pub(crate) fn from_counters(counters: &Counters) -> Self {
        JobSummary {
            late_elements: counters.late_elements.get(),
            window_firings: counters.window_firings.get(),
            window_gap_dropped: counters.window_gap_dropped.get(),
            window_bounds_rejected: counters.window_bounds_rejected.get(),
            dead_letters: counters.dead_letters.get(),
        }
    }
}

/// A root of the memory engine: it drives a built chain to the end of its input.
#[diagnostic::on_unimplemented(
    message = "`collect_vec` and iteration run on the memory engine only, and this pipeline's source is `{Self}`",
    label = "not a memory-engine source",
    note = "on the Redis engine end the pipeline with a sink, e.g. `.sink(streaming::redis::CollectSink::new())`, then start it with `RedisEnv::start` (async) or `RedisEnv::blocking_start`"
)]
pub trait MemoryRoot: Sealed {
    /// The element type the root feeds into the chain.
    type Item;

    /// How the root runs a plan: [`SingleChain`] (one chain) or [`PerPartition`].
    #[doc(hidden)]
    type Runner;

    /// The runtime stages are built with (checkpoint coordinator, counters).
    #[doc(hidden)]
    fn runtime(&self) -> MemoryRuntime {
        self.env().runtime()
    }

    /// The environment the root's source belongs to.
    #[doc(hidden)]
    fn env(&self) -> &MemoryEnv;

    /// Opens the chain, pushes every record, the end-of-input watermark and `finish`
    /// through it, and closes it.
    ///
    /// # Errors
    /// The first error of the source or the chain.
    /// Each record goes through `failures`, which dead-letters a failed record or stops
    /// the run by the run's [`OnRecordError`](super::OnRecordError).
    #[doc(hidden)]
    fn drive<O: Operator<Self::Item>>(
        self,
        op: O,
        failures: &mut RecordFailures<'_, Self::Item>,
    ) -> Result<(), Error>;
}

impl<M, P, S> Execute<P, S> for M
where
    M: MemoryRoot,
    P: Plan<Root = M, Head = M::Item> + RunMemory<M::Runner>,
    S: Sink<P::Out>,
{
    type Output = Result<JobSummary, Error>;

    fn execute(plan: P, sink: S, sink_id: OperatorId) -> Result<JobSummary, Error> {
        plan.run_memory(SinkOp::new(sink_id, sink))
    }

    fn failed(error: Error) -> Result<JobSummary, Error> {
        Err(error)
    }
}

/// [`MemoryRoot::Runner`] of roots that drive one chain (every memory source but the
/// partitioned one).
#[doc(hidden)]
#[derive(Debug)]
pub enum SingleChain {}

/// [`MemoryRoot::Runner`] of
/// [`MemoryEnv::from_collection_partitioned`](crate::MemoryEnv::from_collection_partitioned):
/// one chain per partition, built from a clone of the plan.
#[doc(hidden)]
#[derive(Debug)]
pub enum PerPartition {}

/// How the memory engine runs a plan whose root has runner `R` (see
/// [`MemoryRoot::Runner`]).
#[diagnostic::on_unimplemented(
    message = "this pipeline cannot run on the memory engine with its source",
    label = "cannot run this pipeline",
    note = "a partitioned source (`from_collection_partitioned`) builds one copy of the pipeline per partition: every function, window function and late-data sink of the pipeline must be `Clone` (capture references or `Rc`s, not `&mut`)"
)]
#[doc(hidden)]
pub trait RunMemory<R>: Plan {
    /// Builds the chain(s) in front of `op` and runs them to the end of the input.
    ///
    /// # Errors
    /// The first error of the source or a chain.
    fn run_memory<O: Operator<Self::Out>>(self, op: O) -> Result<JobSummary, Error>;
}

impl<P> RunMemory<SingleChain> for P
where
    P: BuildPlan<MemoryRuntime>,
    P::Root: MemoryRoot<Item = P::Head>,
{
    fn run_memory<O: Operator<P::Out>>(self, op: O) -> Result<JobSummary, Error> {
        let rt = self.root().runtime();
        let mut failures = rt.failures();
        let (root, chain) = self.build(&rt, Delivered(op))?;
        root.drive(chain, &mut failures)?;
        Ok(JobSummary::from_counters(&rt.counters))
    }
}

/// Runs the pipeline, then yields its records followed by the error that stopped it, if
/// any. The output is buffered: for large outputs prefer
/// [`DataStream::sink`]. Memory engine only.
impl<P: Plan> IntoIterator for DataStream<P>
where
    P::Root: MemoryRoot<Item = P::Head>,
    P: RunMemory<<<P as Plan>::Root as MemoryRoot>::Runner>,
{
    type Item = Result<P::Out, Error>;
    type IntoIter = std::vec::IntoIter<Result<P::Out, Error>>;

    fn into_iter(self) -> Self::IntoIter {
        let mut out = Vec::new();
        if let Some(error) = self.failed {
            return vec![Err(error)].into_iter();
        }
        let id = self.next_id("sink");
        if let Err(e) = self.plan.run_memory(SinkOp::new(id, |v| out.push(Ok(v)))) {
            out.push(Err(e));
        }
        out.into_iter()
    }
}

impl<P: Plan> DataStream<P> {
    /// Runs the pipeline and returns its output in order (memory engine only).
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn collect_vec(self) -> Result<Vec<P::Out>, Error>
    where
        P::Root: MemoryRoot<Item = P::Head>,
        P: RunMemory<<<P as Plan>::Root as MemoryRoot>::Runner>,
    {
        if let Some(error) = self.failed {
            return Err(error);
        }
        let mut out = Vec::new();
        let id = self.next_id("sink");
        self.plan.run_memory(SinkOp::new(id, |v| out.push(v)))?;
        Ok(out)
    }
}
