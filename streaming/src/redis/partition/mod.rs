//! A partition a subtask holds: its chain and state cache, its ownership, and the
//! bookkeeping of the subtask loop.

/// A `tracing` span of one piece of a partition's work (`batch`, `commit`, `take`,
/// `checkpoint`) with the job, topic, group and partition, and the extra fields given.
/// Without a subscriber that wants INFO spans, the span is not created and its fields are
/// not evaluated (one cached check per call).
macro_rules! part_span {
    ($name:literal, $ctx:expr, $partition:expr $(, $($field:tt)+)?) => {
        tracing::info_span!(
            $name,
            job = %$ctx.job_name,
            topic = %$ctx.spec.topic,
            group = %$ctx.spec.group,
            // Numbers as i64: exporters such as OpenTelemetry's keep i64 as numbers.
            partition = i64::from($partition)
            $(, $($field)+)?
        )
    };
}

pub(crate) mod ack;
pub(crate) mod align;
pub(crate) mod batch;
pub(crate) mod cache;
pub(crate) mod checkpoint_part;
pub(crate) mod commit;
pub(crate) mod context;
pub(crate) mod counts;
pub(crate) mod dedup;
pub(crate) mod failure;
pub(crate) mod flush;
pub(crate) mod hot_keys;
pub(crate) mod inputs;
pub(crate) mod ownership;
pub(crate) mod read;
pub(crate) mod report;
pub(crate) mod runner;
pub(crate) mod takeover;
pub(crate) mod timers;
pub(crate) mod turn;
pub(crate) mod two_phase;
pub(crate) mod wanted;

use crate::api::Sink;
use crate::mq::Message;
use crate::ops::Operator;
use crate::redis::job::{PartitionAddr, PartitionHandle};
use crate::redis::metrics::PartMetrics;
use crate::redis::partition::context::{guarded, Ctx};
use crate::redis::partition::counts::Unconfirmed;
use crate::redis::partition::flush::FlushState;
use crate::redis::partition::hot_keys::HotKeys;
use crate::redis::partition::inputs::OtherInputs;
use crate::redis::partition::ownership::Ownership;
use crate::redis::partition::runner::{MakeChain, RecordSpans, Runner};
use crate::redis::state::keys::StateKeys;
use crate::redis::state::schema::SchemaGate;
use crate::Error;
use std::rc::Rc;
use tokio::time::Instant;

pub(in crate::redis) struct Part<C, S, O> {
    pub(in crate::redis) partition: u32,
    /// Its progress in the job (registered once, when the partition is set up).
    pub(in crate::redis) progress: PartitionHandle,
    /// Its chain, state cache and outputs.
    pub(in crate::redis) runner: Runner<C, O>,
    /// The `message` spans of its records.
    pub(in crate::redis) spans: RecordSpans,
    /// When it last read, whether its next idle flush has work, Redis's flush mark.
    pub(in crate::redis) flush: FlushState,
    /// A batch whose commit got no reply (e.g. the connection reset): Redis may have
    /// applied it, or may still (a command the network held). Counted when the next take,
    /// which moves the lease to a new token, finds the commit frontier at its last id.
    pub(in crate::redis) unconfirmed: Option<Unconfirmed>,
    /// Earliest next processing-time timer check (pushed back after a failing timer).
    pub(in crate::redis) next_timers: Instant,
    pub(in crate::redis) sink: S,
    /// Its reader and lease, and when it is renewed or taken (again).
    pub(in crate::redis) owner: Ownership,
    /// State size samples and hashes found hot.
    pub(in crate::redis) hot: HotKeys,
    /// Its metric handles (registered once, when the partition is set up).
    pub(in crate::redis) metrics: PartMetrics,
    /// When the consumer lag is sampled next.
    pub(in crate::redis) next_lag_sample: Instant,
    /// The state schema check of the current chain (see `schema`).
    pub(in crate::redis) schema: Option<SchemaGate>,
    /// Stopped for good (e.g. a state schema mismatch under `SchemaMismatchPolicy::Fail`): not read any more.
    pub(in crate::redis) stopped: bool,
    /// Open checkpoints whose part this partition wrote (or found written).
    pub(in crate::redis) checkpoints_written: Vec<u64>,
    /// The partition's two-phase transaction namespace (read at each take).
    pub(crate) two_phase_namespace: String,
    /// Commits of timers and idle flushes (no input) so far: with the lease's fencing
    /// token, what names their outputs (the offset of outbox record ids).
    pub(in crate::redis) no_input_commits: u64,
}

impl<C: Operator<Message>, S: Sink<O>, O> Part<C, S, O> {
    /// Partition `p` of the subtask, not taken yet, with a chain from `make` and its
    /// sink opened.
    pub(in crate::redis) fn new(
        ctx: &Ctx<'_>,
        p: u32,
        make: MakeChain<C, O>,
        sink: S,
    ) -> Result<Self, Error> {
        let (spec, config) = (ctx.spec, &ctx.spec.config);
        let tag = ctx.keys.hash_tag(&spec.topic, p);
        let keys = StateKeys::new(
            config.state_key_prefix(),
            config.job_name(),
            &tag,
            &spec.group,
            config.keyed_state_shard_count(),
        );
        let addr = PartitionAddr::new(&spec.topic, &spec.group, p);
        let progress = ctx.job.register_partition(&addr);
        ctx.job.update(&progress, |pr| pr.subtask = ctx.subtask);
        let mut part = Part {
            partition: p,
            progress,
            runner: Runner::new(make, keys)?,
            spans: record_spans(ctx, p),
            flush: FlushState::new(),
            unconfirmed: None,
            next_timers: Instant::now(),
            sink,
            owner: Ownership::new(p, OtherInputs::new(ctx, p)),
            hot: HotKeys::default(),
            metrics: PartMetrics::new(&ctx.job_name, &spec.topic, &spec.group, p),
            next_lag_sample: Instant::now(),
            schema: None,
            stopped: false,
            checkpoints_written: Vec::new(),
            two_phase_namespace: String::new(),
            no_input_commits: 0,
        };
        guarded(ctx, "open sink", part.sink.open())?;
        Ok(part)
    }

    /// The keys of the partition's state.
    pub(in crate::redis) fn state_keys(&self) -> &StateKeys {
        self.runner.keys()
    }

    /// Drops what the chain buffered for the sinks of a batch that does not commit: the
    /// outputs, the Redis sinks' writes and the two-phase sinks' transactions.
    pub(in crate::redis) fn discard_outputs(&mut self) {
        drop(self.runner.take_outputs());
        let _ = self.sink.take_commit_writes();
        self.discard_two_phase();
    }
}

/// The `message` spans of partition `p`'s records (`mdc_enabled`, `mdc_sample_rate`).
fn record_spans(ctx: &Ctx<'_>, p: u32) -> RecordSpans {
    let config = &ctx.spec.config;
    if !config.mdc_enabled() {
        return RecordSpans::off();
    }
    RecordSpans {
        enabled: true,
        rate: config.mdc_sample_rate(),
        job: Rc::from(ctx.job_name.as_str()),
        topic: Rc::from(ctx.spec.topic.as_str()),
        group: Rc::from(ctx.spec.group.as_str()),
        consumer: Rc::from(ctx.consumer.as_str()),
        partition: p,
    }
}
