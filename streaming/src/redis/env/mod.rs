//! [`RedisEnv`]: the Redis engine's environment, its source and pipeline registration
//! (the job's start is in `start`).

mod co_partition;
mod inputs;
mod permissions;
mod start;

use super::job::JobShared;
use super::subtask;
use super::{RedisRuntime, RedisRuntimeConfig};
use crate::api::Sink;
use crate::dataflow::{BuildPlan, DataStream, Execute, Plan, Runtime};
use crate::mq::{Message, SubscriptionOptions};
use crate::ops::{AssignWatermarks, Operator, OperatorId, RecordTimestamp};
use crate::redis::partition::context::{InputSpec, PipelineSpec};
use crate::sealed::Sealed;
use crate::time::BoundedOutOfOrderness;
use crate::Error;
use std::sync::{Arc, Mutex};

/// Something that runs on the Redis engine must be `Clone + Send + 'static`: the engine
/// clones the pipeline (its functions, state declarations and sink) once per partition and
/// builds each copy on its subtask's thread.
#[diagnostic::on_unimplemented(
    message = "`{Self}` must be `Clone + Send + 'static` to run on the Redis engine",
    label = "not `Clone + Send + 'static`",
    note = "user functions and sinks of a Redis pipeline must be `Clone + Send + 'static`: one copy runs per partition, on its subtask's thread (capture `Arc`s, not references or `Rc`s)"
)]
pub trait RedisPortable: Clone + Send + 'static {}

impl Sealed for MqTopicSource {}

/// Timed: a record's event time is its message's timestamp (the one the producer set, else
/// the send time).
impl Plan for MqTopicSource {
    type Out = Message;
    type Root = Self;
    type Head = Message;
    type Time = crate::time::EventTime;

    fn root(&self) -> &Self {
        self
    }
}

impl<T: Clone + Send + 'static> RedisPortable for T {}

/// A pipeline registered with a [`RedisEnv`], type-erased until it runs.
pub(crate) trait PipelineDef: Send {
    fn topic(&self) -> &str;
    fn group(&self) -> &str;
    fn options(&self) -> SubscriptionOptions;
    /// The pipeline's other inputs (after a `union` or `connect`), in order.
    fn inputs(&self) -> Vec<InputSpec>;
    /// The topic the job forwards the sink's outputs into, if any.
    fn forwarded_topic(&self) -> Option<Arc<str>>;
    fn start(self: Box<Self>, spec: PipelineSpec, job: Arc<JobShared>);
}

struct Def<P, S> {
    topic: String,
    group: String,
    plan: P,
    sink: S,
}

impl<P, S> PipelineDef for Def<P, S>
where
    P: BuildPlan<RedisRuntime> + Plan<Root = MqTopicSource, Head = Message> + RedisPortable,
    S: Sink<<P as Plan>::Out> + RedisPortable,
{
    fn topic(&self) -> &str {
        &self.topic
    }
    fn group(&self) -> &str {
        &self.group
    }
    fn options(&self) -> SubscriptionOptions {
        self.plan.root().options.clone()
    }
    fn inputs(&self) -> Vec<InputSpec> {
        self.plan
            .root()
            .inputs
            .iter()
            .map(MqTopicSource::input_spec)
            .collect()
    }
    fn forwarded_topic(&self) -> Option<Arc<str>> {
        self.sink.forwarded_topic()
    }
    fn start(self: Box<Self>, spec: PipelineSpec, job: Arc<JobShared>) {
        subtask::start(self.plan, self.sink, spec, job);
    }
}

pub(crate) struct EnvInner {
    pub(crate) endpoint: crate::mq::Endpoint,
    pub(crate) config: Arc<RedisRuntimeConfig>,
    state: Mutex<EnvState>,
}

#[derive(Default)]
struct EnvState {
    pipelines: Vec<Box<dyn PipelineDef>>,
    started: bool,
    /// The checkpoint `restore_from_checkpoint` asked for.
    restore: Option<u64>,
    /// Why the endpoint cannot take the configuration's TLS options
    /// ([`RedisEnv::with_endpoint`]): the start fails with it.
    tls_refused: Option<Error>,
}

/// The Redis engine's environment.
///
/// Build pipelines from [`from_mq_topic`](Self::from_mq_topic) with the same builder API as
/// the memory engine; the terminal operation ([`DataStream::sink`]) *registers* the
/// pipeline, and [`start`](Self::start) (`async`) or [`blocking_start`](Self::blocking_start)
/// starts every registered pipeline and returns a [`JobClient`](super::JobClient) — the convention of the
/// job client too: waiting is an `async fn`, its blocking twin is named `blocking_*`. Cheap
/// to clone (`Send + Sync`); clones share registrations.
///
/// Registration rules: registering after the start is an error; one
/// pipeline per (topic, consumer group) — a second one on the same pair is an error (a
/// consumer group splits messages between its consumers, so two chains would each see
/// part of the stream and share state names; give the second chain its own group);
/// starting without any pipeline is an error, and a job starts once.
///
/// ```no_run
/// use streaming::api::{ValueStateDescriptor};
/// use streaming::redis::{CollectSink, RedisEnv};
/// const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
///
/// let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
/// let out = CollectSink::new();
/// env.from_mq_topic("words", "counter")
///     .map(|m| m.text().unwrap_or_default().to_string())
///     .key_by(|w: &String| w.clone())
///     .process(|w: String, ctx, out| {
///         let mut n = ctx.state(&COUNT)?;
///         let c = n.value() + 1;
///         n.update(c);
///         out.collect((w, c));
///         Ok(())
///     })
///     .sink(out.clone())?;
/// let job = env.blocking_start()?;
/// // ...
/// // Stops the job and waits (at most 10 s) for its subtasks to hand their partitions over.
/// job.blocking_shutdown(std::time::Duration::from_secs(10));
/// # Ok::<(), streaming::Error>(())
/// ```
#[derive(Clone)]
pub struct RedisEnv {
    pub(crate) inner: Arc<EnvInner>,
}

impl std::fmt::Debug for RedisEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEnv")
            .field("job_name", &self.inner.config.job_name())
            .finish_non_exhaustive()
    }
}

impl RedisEnv {
    /// An environment on the Redis deployment `endpoint` names — a URL such as
    /// `redis://127.0.0.1:6379/` for one server or
    /// `redis+cluster://127.0.0.1:7000,127.0.0.1:7001` for a Redis Cluster (see
    /// [`Endpoint::parse`](crate::mq::Endpoint::parse)), a [`redis::ConnectionInfo`], a
    /// [`redis::Client`] or an [`Endpoint`](crate::mq::Endpoint) — with the default
    /// [`RedisRuntimeConfig`]. Connects lazily: nothing is contacted before
    /// [`blocking_start`](Self::blocking_start).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `url`) when the URL is invalid (one server or a
    /// malformed `redis+cluster://` URL).
    pub fn try_new(endpoint: impl crate::mq::IntoEndpoint) -> Result<Self, Error> {
        Self::try_with_config(endpoint, RedisRuntimeConfig::default())
    }

    /// Like [`try_new`](Self::try_new) with `config`.
    ///
    /// # Errors
    /// As [`try_new`](Self::try_new).
    pub fn try_with_config(
        endpoint: impl crate::mq::IntoEndpoint,
        config: RedisRuntimeConfig,
    ) -> Result<Self, Error> {
        let endpoint = endpoint
            .into_endpoint()?
            .with_tls(&config.mq_options().tls)?;
        Ok(Self::assemble(endpoint, config, None))
    }

    /// Like [`try_with_config`](Self::try_with_config) with a [`redis::Client`] (each
    /// subtask opens its own connections from it). TLS options of `config` apply as in
    /// [`with_endpoint`](Self::with_endpoint).
    ///
    /// [`redis::Client`]: https://docs.rs/redis/0.32/redis/struct.Client.html
    pub fn with_client(client: redis::Client, config: RedisRuntimeConfig) -> Self {
        Self::with_endpoint(crate::mq::Endpoint::single(client), config)
    }

    /// Like [`try_with_config`](Self::try_with_config) with an
    /// [`Endpoint`](crate::mq::Endpoint) (one server or a cluster; each subtask opens its
    /// own connections to it).
    ///
    /// The TLS options of `config` ([`MqOptions::tls`](crate::mq::MqOptions::tls)) are
    /// applied to the endpoint ([`Endpoint::with_tls`](crate::mq::Endpoint::with_tls));
    /// when they cannot be, the start fails with the reason.
    pub fn with_endpoint(endpoint: crate::mq::Endpoint, config: RedisRuntimeConfig) -> Self {
        match endpoint.clone().with_tls(&config.mq_options().tls) {
            Ok(secured) => Self::assemble(secured, config, None),
            Err(e) => Self::assemble(endpoint, config, Some(e)),
        }
    }

    fn assemble(
        endpoint: crate::mq::Endpoint,
        config: RedisRuntimeConfig,
        tls_refused: Option<Error>,
    ) -> Self {
        RedisEnv {
            inner: Arc::new(EnvInner {
                endpoint,
                config: Arc::new(config),
                state: Mutex::new(EnvState {
                    tls_refused,
                    ..EnvState::default()
                }),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RedisRuntimeConfig {
        &self.inner.config
    }

    /// A stream of the messages of `topic`, read as consumer group `group`, with the
    /// default [`SubscriptionOptions`] (batches of 100; a missing group starts after the
    /// commit frontier, else at the end of the stream). The source id is
    /// `{topic}.{group}` (characters outside `[A-Za-z0-9_.-]` become `_`); it prefixes
    /// the operator ids that key the pipeline's state, so keep topic and group stable, or
    /// use [`from_mq_topic_with_id`](Self::from_mq_topic_with_id).
    ///
    /// A new group therefore does **not** read messages sent before it was created: to
    /// process a topic from its beginning, pass
    /// `SubscriptionOptions::builder().start(StartPolicy::Earliest).build()?` to
    /// [`from_mq_topic_with_options`](Self::from_mq_topic_with_options).
    ///
    /// Each record's event time is its message's timestamp
    /// ([`Message::timestamp_ms`](crate::mq::Message::timestamp_ms): the one the producer
    /// set, else the time it was sent), and the engine's watermark follows it per
    /// partition (`watermark_out_of_orderness`), so event-time windows and timers run on
    /// the stream as it is ([`EventTime`](crate::time::EventTime)).
    pub fn from_mq_topic(&self, topic: &str, group: &str) -> DataStream<MqTopicSource> {
        self.from_mq_topic_with_options(topic, group, SubscriptionOptions::default())
    }

    /// Like [`from_mq_topic`](Self::from_mq_topic) with `options` (batch size, poll time,
    /// start policy; `consumer_name` and `assignment` are set by the engine and ignored).
    pub fn from_mq_topic_with_options(
        &self,
        topic: &str,
        group: &str,
        options: SubscriptionOptions,
    ) -> DataStream<MqTopicSource> {
        let id: String = format!("{topic}.{group}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.source(id, topic, group, options)
    }

    /// Like [`from_mq_topic`](Self::from_mq_topic) with an explicit source id, which must be
    /// non-empty and use only `[A-Za-z0-9_.-]` (checked when the pipeline registers). It
    /// prefixes the operator ids that key the pipeline's state: keep it stable across
    /// restarts.
    pub fn from_mq_topic_with_id(
        &self,
        source_id: &str,
        topic: &str,
        group: &str,
    ) -> DataStream<MqTopicSource> {
        self.source(
            source_id.to_string(),
            topic,
            group,
            SubscriptionOptions::default(),
        )
    }

    /// Like [`from_mq_topic_with_id`](Self::from_mq_topic_with_id) with `options`.
    pub fn from_mq_topic_with_id_and_options(
        &self,
        source_id: &str,
        topic: &str,
        group: &str,
        options: SubscriptionOptions,
    ) -> DataStream<MqTopicSource> {
        self.source(source_id.to_string(), topic, group, options)
    }

    fn source(
        &self,
        id: String,
        topic: &str,
        group: &str,
        options: SubscriptionOptions,
    ) -> DataStream<MqTopicSource> {
        DataStream::new(
            MqTopicSource {
                env: self.clone(),
                source_id: id.clone(),
                topic: topic.to_string(),
                group: group.to_string(),
                options,
                inputs: Vec::new(),
                broadcast: false,
            },
            id,
        )
    }

    fn register(&self, def: Box<dyn PipelineDef>, source_id: &str) -> Result<(), Error> {
        let err = |reason: String| Error::Engine {
            op: "register",
            reason,
        };
        // A topic combined with itself first: its inputs' default source ids clash too,
        // and a new source id would not help.
        let these = reads(def.as_ref());
        check_distinct(&these)?;
        let ids = std::iter::once(source_id.to_owned())
            .chain(def.inputs().into_iter().map(|i| i.source_id));
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            if id.is_empty()
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            {
                return Err(err(format!(
                    "source id `{id}` must be non-empty and use only [A-Za-z0-9_.-]"
                )));
            }
            if !seen.insert(id.clone()) {
                return Err(err(format!(
                    "source id `{id}` names two inputs of the pipeline: their operators' state would share names; give each input its own (`from_mq_topic_with_id`)"
                )));
            }
        }
        for (topic, group) in reads(def.as_ref()) {
            crate::mq::topic::validate_name("topic", &topic)?;
            crate::mq::topic::validate_name("group", &group)?;
        }
        def.options().validate().map_err(|e| match e {
            Error::InvalidConfig { field, reason } => Error::InvalidConfig {
                field: "subscription_options",
                reason: format!("{field}: {reason}"),
            },
            other => other,
        })?;
        let mut st = self
            .inner
            .state
            .lock()
            .map_err(|_| err("poisoned".into()))?;
        if st.started {
            return Err(err(
                "the job was already started: register every pipeline before starting it".into(),
            ));
        }
        let taken =
            (st.pipelines.iter().flat_map(|p| reads(p.as_ref()))).find(|read| these.contains(read));
        if let Some((topic, group)) = taken {
            return Err(err(format!(
                "a pipeline already reads topic `{topic}` as group `{group}`: a consumer group splits messages between its consumers, so a second chain would see only part of the stream and share its state names; give this chain its own group, e.g. `from_mq_topic(\"{topic}\", \"{group}-fork2\")`"
            )));
        }
        st.pipelines.push(def);
        Ok(())
    }
}

/// The root of a Redis pipeline: a topic read as a consumer group
/// ([`RedisEnv::from_mq_topic`]).
#[derive(Clone, Debug)]
pub struct MqTopicSource {
    env: RedisEnv,
    source_id: String,
    topic: String,
    group: String,
    pub(crate) options: SubscriptionOptions,
    /// The other inputs of a pipeline combined from several topics (`union`, `connect`),
    /// in order; empty for one topic.
    inputs: Vec<MqTopicSource>,
    /// This root is an input broadcast to every partition of the pipeline's first topic
    /// (`broadcast` + `connect`), not one of its partitions.
    broadcast: bool,
}

impl MqTopicSource {
    /// This root as another input of a pipeline.
    fn input_spec(&self) -> InputSpec {
        InputSpec {
            source_id: self.source_id.clone(),
            topic: self.topic.clone(),
            group: self.group.clone(),
            start: self.options.start,
            broadcast: self.broadcast,
        }
    }

    /// Whether every input comes from the environment of the first.
    fn one_environment(&self) -> bool {
        (self.inputs.iter()).all(|i| std::sync::Arc::ptr_eq(&i.env.inner, &self.env.inner))
    }
}

/// Every (topic, group) a registered pipeline reads, its first input first.
pub(super) fn reads(def: &dyn PipelineDef) -> Vec<(String, String)> {
    std::iter::once((def.topic().to_owned(), def.group().to_owned()))
        .chain(def.inputs().into_iter().map(|i| (i.topic, i.group)))
        .collect()
}

/// A pipeline reads each topic once: a topic combined with itself would read every entry
/// twice under one position.
///
/// # Errors
/// [`Error::InvalidConfig`] (field `inputs`) naming the topic read twice.
fn check_distinct(reads: &[(String, String)]) -> Result<(), Error> {
    for (i, (topic, _)) in reads.iter().enumerate() {
        if reads[..i].iter().any(|(t, _)| t == topic) {
            return Err(Error::InvalidConfig {
                field: "inputs",
                reason: format!(
                    "topic `{topic}` is an input of the pipeline twice: combine each topic once (`union` keeps every record of both inputs)"
                ),
            });
        }
    }
    Ok(())
}

/// The chain of a topic partition starts with the engine's own watermark operator (id
/// `{source_id}/0:watermark`): event time = the message timestamp, watermark =
/// `max(previous, t - watermark_out_of_orderness)` per partition.
impl<R: Runtime> BuildPlan<R> for MqTopicSource {
    fn build<O: Operator<Message>>(
        self,
        rt: &R,
        downstream: O,
    ) -> Result<(Self, impl Operator<Message> + use<R, O>), Error> {
        let id = OperatorId::new(&self.source_id, 0, "watermark");
        let generator = BoundedOutOfOrderness::new(self.env.config().watermark_out_of_orderness())?;
        let state = rt.watermark_state(&id);
        let head = AssignWatermarks::new(
            id,
            RecordTimestamp,
            generator,
            true,
            state,
            rt.counters(),
            downstream,
        );
        Ok((self, head))
    }
}

/// A Redis pipeline's terminal operation registers it with its [`RedisEnv`].
impl<P, S> Execute<P, S> for MqTopicSource
where
    P: BuildPlan<RedisRuntime> + Plan<Root = MqTopicSource, Head = Message> + RedisPortable,
    S: Sink<<P as Plan>::Out> + RedisPortable,
{
    type Output = Result<(), Error>;

    fn execute(plan: P, sink: S, _sink_id: OperatorId) -> Result<(), Error> {
        let root = plan.root();
        let env = root.env.clone();
        let source_id = root.source_id.clone();
        if !root.one_environment() {
            return Err(Error::Engine {
                op: "register",
                reason: format!(
                    "the inputs of the pipeline of source `{source_id}` come from different RedisEnv values: combine streams of one environment"
                ),
            });
        }
        let def = Def {
            topic: root.topic.clone(),
            group: root.group.clone(),
            plan,
            sink,
        };
        env.register(Box::new(def), &source_id)
    }

    fn failed(error: Error) -> Result<(), Error> {
        Err(error)
    }
}
