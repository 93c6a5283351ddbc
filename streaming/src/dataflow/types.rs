//! The builder's stream types: what each stage of a pipeline is while it is written.

use super::plan::Then;
use super::stages::{KeyedProcessStage, WindowStage};
use crate::api::Sink;
use crate::ops::NoRejectedOutput;
use crate::BoxError;
use std::marker::PhantomData;

/// The stream a window function on a [`WindowedStream`] returns.
pub type WindowOutput<P, KF, K, A, Tr, WF, L, E> =
    DataStream<Then<P, WindowStage<KF, K, A, Tr, WF, L, E>>>;

/// The stream [`KeyedStream::process`] returns (`S`: the states declared for it).
pub type KeyedProcessOutput<P, KF, K, PF, S = ()> =
    DataStream<Then<P, KeyedProcessStage<KF, K, PF, S>>>;

/// A stream of `P::Out` records. Each method adds one operator; a
/// terminal operation runs the pipeline.
#[must_use = "a stream does nothing until a terminal operation (sink, print, collect_vec) runs it"]
pub struct DataStream<P> {
    pub(crate) plan: P,
    pub(super) source_id: std::rc::Rc<str>,
    pub(super) position: u32,
    /// An error found while the pipeline was written (a fragment whose configuration
    /// failed): the terminal operation returns it instead of running.
    pub(crate) failed: Option<crate::Error>,
}

/// A stream partitioned by key: stateful operators see one key at a time.
#[must_use = "a keyed stream does nothing until a terminal operation runs it"]
pub struct KeyedStream<P, KF, K> {
    pub(crate) stream: DataStream<P>,
    pub(crate) key_fn: KF,
    pub(crate) _key: PhantomData<fn() -> K>,
}

/// A keyed stream cut into windows, before its window function.
#[must_use = "a windowed stream does nothing until a window function and a terminal operation run it"]
pub struct WindowedStream<P, KF, K, A, Tr, L, E = NoRejectedOutput> {
    pub(crate) keyed: KeyedStream<P, KF, K>,
    pub(crate) assigner: A,
    pub(crate) trigger: Tr,
    pub(crate) lateness: i64,
    pub(crate) late: L,
    pub(crate) rejected: E,
}

/// The late output of a window without [`WindowedStream::side_output_late_data`]: late
/// elements are only counted in [`JobSummary::late_elements`](crate::JobSummary::late_elements).
#[derive(Clone, Copy, Debug, Default)]
pub struct CountLateOnly;

impl<T> Sink<T> for CountLateOnly {
    fn invoke(&mut self, _value: T) -> Result<(), BoxError> {
        Ok(())
    }
}
