//! What a subtask runs on: the pipeline it belongs to, and what its partitions share.

use crate::mq::{KeySpace, Mq, StartPolicy, SubscriptionOptions};
use crate::redis::job::JobShared;
use crate::redis::RedisRuntimeConfig;
use crate::Error;
use std::sync::Arc;

/// What a registered pipeline runs on.
#[derive(Clone)]
pub(crate) struct PipelineSpec {
    pub(crate) endpoint: crate::mq::Endpoint,
    pub(crate) config: Arc<RedisRuntimeConfig>,
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) options: SubscriptionOptions,
    /// The other inputs, read partition by partition with `topic` (empty for one topic).
    pub(crate) inputs: Vec<InputSpec>,
}

/// One more input of a registered pipeline: a topic read as a consumer group, partition
/// by partition with the pipeline's first topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InputSpec {
    pub(crate) source_id: String,
    pub(crate) topic: String,
    pub(crate) group: String,
    /// Where the input starts when the job has no position for it yet.
    pub(crate) start: StartPolicy,
    /// Broadcast to every partition: its one partition is read whole by each.
    pub(crate) broadcast: bool,
}

/// What every partition of a subtask shares.
pub(in crate::redis) struct Ctx<'a> {
    pub(in crate::redis) spec: &'a PipelineSpec,
    pub(in crate::redis) job: &'a JobShared,
    pub(in crate::redis) mq: Mq,
    pub(in crate::redis) keys: KeySpace,
    pub(in crate::redis) consumer: String,
    pub(in crate::redis) subtask: u32,
    /// The job name (a metrics label).
    pub(in crate::redis) job_name: String,
}

impl<'a> Ctx<'a> {
    pub(in crate::redis) fn new(
        spec: &'a PipelineSpec,
        job: &'a JobShared,
        mq: Mq,
        consumer: &str,
        subtask: u32,
    ) -> Self {
        Ctx {
            spec,
            job,
            keys: mq.keys().clone(),
            mq,
            consumer: consumer.to_string(),
            subtask,
            job_name: spec.config.job_name().to_owned(),
        }
    }

    /// `(topic, partition, group)`: where a fenced write of partition `p` goes.
    pub(in crate::redis) fn at(&self, p: u32) -> (&str, u32, &str) {
        (self.spec.topic.as_str(), p, self.spec.group.as_str())
    }
}

/// A sink's error as the engine's, naming what failed and the topic.
pub(in crate::redis) fn guarded<T>(
    ctx: &Ctx<'_>,
    what: &str,
    r: Result<T, crate::BoxError>,
) -> Result<T, Error> {
    r.map_err(|e| Error::Engine {
        op: "sink",
        reason: format!("{what} ({}): {e}", ctx.spec.topic),
    })
}
