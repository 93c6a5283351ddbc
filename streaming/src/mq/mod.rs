//! A message queue on Redis Streams: partitioned topics, consumer groups with partition
//! leases and rebalancing, atomic retry with backoff, dead letters, and a commit frontier.
//!
//! This is the Redis engine's source and the substrate of its delivery guarantees:
//! `Message`, `MqOptions`, `SubscriptionOptions`, pausable consumers, commit frontier,
//! retry and dead-letter queue.
//!
//! Everything here but [`partition_for_key`] needs feature `redis` (on by default); the
//! memory engine uses that function to split a collection into partitions the way the
//! producer splits a topic.
//!
//! The API is async and needs a [tokio](https://docs.rs/tokio) runtime (multi-threaded:
//! `subscribe` spawns tasks), e.g. `#[tokio::main]`; add `tokio` to your dependencies.
//!
//! ```no_run
//! # async fn demo() -> Result<(), streaming::Error> {
//! use streaming::mq::{HandleResult, Mq, MqOptions, StartPolicy, SubscriptionOptions};
//!
//! let mq = Mq::connect("redis://127.0.0.1:6379/", MqOptions::default()).await?;
//! mq.create_topic("orders", 4).await?;
//! let producer = mq.producer();
//! producer.send("orders", Some("customer-7"), "hello").await?;
//! let sub = mq
//!     .subscribe(
//!         "orders",
//!         "billing",
//!         |m: streaming::mq::Message| async move {
//!             tracing::info!(id = %m.id, "got {:?}", m.text());
//!             HandleResult::Success
//!         },
//!         // A new group starts after the commit frontier or, without one, at the end of
//!         // the stream (the default); `Earliest` also reads what was sent before.
//!         SubscriptionOptions::builder().start(StartPolicy::Earliest).build()?,
//!     )
//!     .await?;
//! sub.stop().await?;
//! # Ok(()) }
//! ```
//!
//! Guarantees: at-least-once (an entry is acknowledged only after its handler returned);
//! per-partition order for first deliveries (retries re-enter at the tail of their
//! partition, addressed to the group that failed: other groups skip them, see
//! [`RetryPolicy`]);
//! every acknowledgement, retry and dead letter is one atomic Lua script in the
//! partition's hash slot (see [`KeySpace`] for the keys, [`Message`] for the entry encoding,
//! [`RetryPolicy`], [`DeadLetter`], and [`StartPolicy`] for the commit frontier).
//!
//! Choices and limits worth knowing:
//! - dead letters are kept per partition (`P:{T:n}:dlq`) so that "acknowledge + dead
//!   letter" is one script in one slot; the topic's dead-letter queue is their union, and
//!   the admin calls ([`Mq::dead_letters`], [`Mq::replay_dead_letter`],
//!   [`Mq::purge_dead_letters`]) work per topic, and [`Mq::dead_letters_in`],
//!   [`Mq::dead_letter`] and [`Mq::delete_dead_letter`] on one partition;
//! - [`HandleResult::Fail`] dead-letters like `DeadLetter`, with error type `fail:<type>`;
//! - without an [`Assignment`] each member targets `ceil(partitions / live members)`, so
//!   with more members than that split allows some members hold no partition;
//! - the acknowledging scripts of subscriptions do not check the lease: a consumer that
//!   lost its lease may still acknowledge the batch it is handling (harmless under
//!   at-least-once); leases carry fencing tokens ([`ExclusiveReader::fencing_token`]) for
//!   owners whose writes must be fenced: an [`ExclusiveReader`] positions the group, reads,
//!   promotes retries, schedules retries and dead-letters only while its lease holds
//!   (each in one script that checks the lease first), else fails with
//!   [`Error::Fenced`] having written nothing;
//! - keys are Redis Cluster slot-safe, and the client connects to one server or to a
//!   cluster ([`Endpoint`]: a `redis+cluster://` URL or [`Endpoint::cluster`]).

mod partition;

pub use partition::partition_for_key;

// The queue's Lua scripts and the macros that make them (used by the modules below).
#[cfg(feature = "redis")]
#[macro_use]
pub(crate) mod lua;
#[cfg(feature = "redis")]
pub(crate) use lua::fenced_script;

// The queue itself: only with feature `redis`.
cfg_redis! {
    mod connection;
    mod consumer;
    pub(crate) mod dlq;
    mod dlq_admin;
    mod endpoint;
    mod exclusive;
    pub(crate) mod frontier;
    pub(crate) mod group;
    mod handler;
    pub(crate) mod lease;
    pub(crate) mod message;
    mod message_builder;
    mod options;
    mod options_file;
    mod packed;
    mod peek;
    mod producer;
    pub(crate) mod reader;
    pub(crate) mod retry;
    pub(crate) mod slot;
    mod tls;
    pub(crate) mod topic;
    mod worker;

    use std::sync::Arc;
    use std::time::Duration;

    use tracing::info;

    pub use connection::MIN_REDIS_VERSION;
    pub(crate) use connection::{
        blocking_connection, connect, connect_error, debug_check_slots, for_each_info, prove,
        prove_blocking, Backoff, Connection,
    };
    /// The shared string type of [`Message`]'s id, topic, key and retry group (the
    /// [`arcstr`](https://docs.rs/arcstr) crate's, re-exported).
    pub use arcstr::ArcStr;
    pub use consumer::Subscription;
    pub use dlq::DeadLetter;
    pub use endpoint::{redact_url, Endpoint, IntoEndpoint, CLUSTER_SCHEME, CLUSTER_TLS_SCHEME};
    pub use peek::MalformedEntry;
    pub use tls::{TlsOptions, TlsOptionsBuilder};
    pub use exclusive::{ExclusiveBatch, ExclusiveReader};
    pub use handler::{Failure, HandleResult, MessageHandler};
    pub use message::{
        Message, OutgoingMessage, HEADER_ERROR_MESSAGE, HEADER_ERROR_TYPE, HEADER_IDEMPOTENCY_KEY,
        HEADER_ORIGINAL_ID,
    };
    pub use options::{
        Assignment, MqOptions, MqOptionsBuilder, RetryPolicy, RetryPolicyBuilder, StartPolicy,
        SubscriptionOptions, SubscriptionOptionsBuilder, MAX_BATCH_COUNT,
    };
    pub use producer::Producer;
    pub use retry::{retry_token, RetryOutcome};
    pub use topic::{GroupInfo, KeySpace, PartitionInfo, TopicInfo};

    use crate::Error;
    use topic::validate_name;
}

/// A handle on the queue: one Redis endpoint (a server or a cluster), options, and a
/// shared multiplexed connection for admin and producing. Cheap to clone.
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[derive(Clone)]
pub struct Mq {
    endpoint: Endpoint,
    conn: Connection,
    opts: Arc<MqOptions>,
    keys: KeySpace,
}

#[cfg(feature = "redis")]
impl std::fmt::Debug for Mq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mq")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "redis")]
impl Mq {
    /// Connects to Redis at `url` (e.g. `redis://127.0.0.1:6379/`, or a Redis Cluster by
    /// its seed nodes, `redis+cluster://127.0.0.1:7000,127.0.0.1:7001`; see
    /// [`Endpoint::parse`]) and proves the server: `PING` (after the client's
    /// `AUTH`/`HELLO`) must answer `PONG`, and the server (every master of a cluster) must
    /// be Redis ≥ [`MIN_REDIS_VERSION`] (`XAUTOCLAIM` with deleted-entry reporting,
    /// `XINFO GROUPS` lag, exclusive `XRANGE`).
    ///
    /// Every call made through the handle fails after [`MqOptions::response_timeout`]
    /// without a reply; a lost connection is opened again by the next call (one attempt
    /// each, no hidden retry schedule).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] from [`MqOptions::validate`], or (field `url`) for an
    /// invalid URL (one server or a malformed `redis+cluster://` URL);
    /// [`Error::Connect`], naming the address, when the connection is refused, nothing
    /// answers within the response timeout, the password is wrong or missing, the server
    /// is not a Redis server, its version is older than required, or a `redis://` URL
    /// names a cluster node (or a `redis+cluster://` URL a server that is not one).
    pub async fn connect(url: &str, opts: MqOptions) -> Result<Self, Error> {
        opts.validate()?;
        Self::connect_to(Endpoint::parse(url)?, opts).await
    }

    /// Like [`Mq::connect`] with an [`Endpoint`] (a [`redis::Client`], or a cluster made
    /// by [`Endpoint::cluster`]).
    ///
    /// # Errors
    /// As [`Mq::connect`].
    pub async fn connect_to(endpoint: Endpoint, opts: MqOptions) -> Result<Self, Error> {
        opts.validate()?;
        let endpoint = endpoint.with_tls(&opts.tls)?;
        let mut conn = connect(&endpoint, opts.response_timeout, Duration::ZERO).await?;
        prove(&endpoint, &mut conn, opts.response_timeout).await?;
        Ok(Self {
            keys: KeySpace::new(opts.key_prefix.clone()),
            endpoint,
            conn,
            opts: Arc::new(opts),
        })
    }

    /// A handle on `endpoint` with its own connection (the Redis engine's subtasks).
    pub(crate) async fn from_endpoint(endpoint: Endpoint, opts: MqOptions) -> Result<Self, Error> {
        opts.validate()?;
        let conn = connect(&endpoint, opts.response_timeout, Duration::ZERO).await?;
        Ok(Self {
            keys: KeySpace::new(opts.key_prefix.clone()),
            endpoint,
            conn,
            opts: Arc::new(opts),
        })
    }

    /// Where the handle connects.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The shared connection.
    pub(crate) fn connection(&self) -> Connection {
        self.conn.clone()
    }

    /// The options.
    pub fn options(&self) -> &MqOptions {
        &self.opts
    }

    /// The key layout (for keys that must share a partition's hash tag).
    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    /// Creates `topic` with `partitions` partitions (1..=4096). Returns `false` if it
    /// already existed with the same count.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`topic` name, `partitions`); [`Error::Mq`] if it exists
    /// with another partition count; [`Error::Redis`].
    pub async fn create_topic(&self, topic: &str, partitions: u32) -> Result<bool, Error> {
        let mut conn = self.conn.clone();
        let created = topic::create_topic(&mut conn, &self.keys, topic, partitions).await?;
        if created {
            info!(topic, partitions, "topic created");
        }
        Ok(created)
    }

    /// Partition count of `topic`.
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::Redis`].
    pub async fn partitions(&self, topic: &str) -> Result<u32, Error> {
        validate_name("topic", topic)?;
        let mut conn = self.conn.clone();
        topic::topic_partitions(&mut conn, &self.keys, topic).await
    }

    /// Length, groups (pending, lag, frontier), scheduled retries and dead letters per
    /// partition.
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::Redis`].
    pub async fn describe_topic(&self, topic: &str) -> Result<TopicInfo, Error> {
        let mut conn = self.conn.clone();
        topic::describe_topic(&mut conn, &self.keys, topic).await
    }

    /// Topic names, sorted.
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub async fn list_topics(&self) -> Result<Vec<String>, Error> {
        let mut conn = self.conn.clone();
        topic::list_topics(&mut conn, &self.keys).await
    }

    /// Deletes a topic and every key of it (streams, retries, dead letters, leases,
    /// frontiers). Running subscriptions should be stopped first. Returns `false` if it
    /// did not exist.
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub async fn delete_topic(&self, topic: &str) -> Result<bool, Error> {
        let mut conn = self.conn.clone();
        topic::delete_topic(&mut conn, &self.keys, topic).await
    }

    /// A producer sharing this handle's connection.
    pub fn producer(&self) -> Producer {
        Producer::new(self.conn.clone(), self.keys.clone(), self.opts.max_len)
    }

    /// Subscribes `handler` to `topic` in consumer group `group`. Creates the group on
    /// every partition where it is missing, from `sub.start`; then a coordinator takes
    /// partitions (see [`Subscription`]) and a worker per partition reads and handles.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (names, options); [`Error::Mq`] if the topic does not
    /// exist; [`Error::Redis`].
    pub async fn subscribe<H: MessageHandler>(
        &self,
        topic: &str,
        group: &str,
        handler: H,
        sub: SubscriptionOptions,
    ) -> Result<Subscription, Error> {
        validate_name("topic", topic)?;
        validate_name("group", group)?;
        sub.validate()?;
        let mut conn = self.conn.clone();
        let partitions = topic::topic_partitions(&mut conn, &self.keys, topic).await?;
        for p in 0..partitions {
            group::ensure_group(&mut conn, &self.keys, topic, p, group, sub.start, false).await?;
        }
        let consumer = sub
            .consumer_name
            .clone()
            .unwrap_or_else(generated_consumer_name);
        let ctl = consumer::new_control(consumer, sub.assignment);
        let shared = Arc::new(worker::Shared {
            ctl,
            endpoint: self.endpoint.clone(),
            keys: self.keys.clone(),
            opts: (*self.opts).clone(),
            sub,
            topic: topic.to_owned(),
            group: group.to_owned(),
            partitions,
            handler,
        });
        Ok(consumer::start(shared, conn))
    }

    /// Opens a `NOACK` reader on one partition for an exclusive owner (see
    /// [`ExclusiveReader`]): takes the lease, then points the group at `committed`
    /// (`XGROUP SETID`) or, with `None`, creates a missing group from `start`, and deletes
    /// the group's other consumers of the partition that have nothing pending (earlier
    /// owners), so the consumer list does not grow with every restart.
    ///
    /// # Errors
    /// [`Error::Mq`] if another consumer holds the lease or the topic does not exist;
    /// [`Error::InvalidConfig`] for names or a partition out of range; [`Error::Redis`].
    pub async fn exclusive_reader(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        consumer: &str,
        committed: Option<&str>,
        start: StartPolicy,
    ) -> Result<ExclusiveReader, Error> {
        validate_name("topic", topic)?;
        validate_name("group", group)?;
        validate_name("consumer", consumer)?;
        let partitions = self.partitions(topic).await?;
        if partition >= partitions {
            return Err(Error::InvalidConfig {
                field: "partition",
                reason: format!("{partition} out of range 0..{partitions}"),
            });
        }
        let at = (topic, partition, group);
        let mut reader = ExclusiveReader {
            // Its reads block at most as long as the caller asks: up to 1 s.
            conn: connect(
                &self.endpoint,
                self.opts.response_timeout,
                exclusive::EXCLUSIVE_BLOCK,
            )
            .await?,
            reader: reader::PartitionReader::owner(
                reader::ReadMode::NoAck,
                &self.keys,
                at,
                consumer,
                &self.opts,
            ),
        };
        let conn = &mut reader.conn;
        let at = reader::Position {
            start,
            from_frontier: false,
            committed,
        };
        reader.reader.take(conn, at).await?;
        Ok(reader)
    }

    /// Creates `group` on every partition of `topic` where it is missing, at the id `start`
    /// names, and initialises its commit frontier (subscribing does this too).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for names; [`Error::Mq`] if the topic does not exist;
    /// [`Error::Redis`].
    pub async fn ensure_group(
        &self,
        topic: &str,
        group: &str,
        start: StartPolicy,
    ) -> Result<(), Error> {
        validate_name("group", group)?;
        let n = self.partitions(topic).await?;
        let mut conn = self.conn.clone();
        for p in 0..n {
            group::ensure_group(&mut conn, &self.keys, topic, p, group, start, false).await?;
        }
        Ok(())
    }

    /// Acknowledges entries `ids` of `partition` for `group` and advances the commit
    /// frontier, in one script (for callers that read entries themselves, e.g. an engine
    /// that acknowledges at checkpoints). Returns how many ids were pending (`XACK`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for names or more than [`MAX_BATCH_COUNT`] ids;
    /// [`Error::Redis`].
    pub async fn acknowledge(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        ids: &[String],
    ) -> Result<u64, Error> {
        validate_name("topic", topic)?;
        validate_name("group", group)?;
        if ids.len() > MAX_BATCH_COUNT {
            return Err(Error::InvalidConfig {
                field: "ids",
                reason: format!("at most {MAX_BATCH_COUNT} ids per call"),
            });
        }
        let mut conn = self.conn.clone();
        frontier::ack(&mut conn, &self.keys, topic, partition, group, ids).await
    }

    /// The commit frontier of (topic, group, partition), if stored (see [`StartPolicy`]).
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub async fn commit_frontier(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
    ) -> Result<Option<String>, Error> {
        let mut conn = self.conn.clone();
        frontier::read(&mut conn, &self.keys, topic, partition, group).await
    }
}

#[cfg(feature = "redis")]
fn generated_consumer_name() -> String {
    use rand::Rng;
    let r: u64 = rand::rng().random();
    format!("c-{}-{r:016x}", std::process::id())
}
