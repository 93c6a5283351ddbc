//! Helpers shared by the Redis-engine tests (`redis_engine*.rs`, `redis_windows.rs`).

use std::time::Duration;

use streaming::mq::{StartPolicy, SubscriptionOptions};
use streaming::redis::JobClient;

/// A current-thread tokio runtime for the test's own async calls (producing, admin).
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Read from the beginning of each partition, `batch` entries per read.
pub fn earliest(batch: usize) -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(batch)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap()
}

/// Polls `check` every 20 ms until it is true; panics with the job's diagnostics after a
/// generous deadline (it bounds a failing test; it is not what the test asserts).
pub fn wait_until(what: &str, job: &JobClient, mut check: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {:#?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A test's private key space on the test Redis, with a runtime for its async calls.
pub struct EngineSetup {
    /// The test Redis.
    pub redis: crate::support::redis_server::TestRedis,
    /// The state key prefix of this test.
    pub prefix: String,
    /// Queue options with this test's key prefix.
    pub mq_opts: streaming::mq::MqOptions,
    /// A runtime for the test's own async calls.
    pub rt: tokio::runtime::Runtime,
}

/// A fresh [`EngineSetup`] for `test`.
pub fn setup(test: &str) -> EngineSetup {
    EngineSetup {
        redis: crate::support::redis_server::TestRedis::shared(),
        prefix: crate::support::unique_prefix(test),
        mq_opts: crate::support::fast_options(test).build().unwrap(),
        rt: rt(),
    }
}

impl EngineSetup {
    /// A queue client with this test's options.
    pub fn mq(&self) -> streaming::mq::Mq {
        self.rt
            .block_on(streaming::mq::Mq::connect(
                self.redis.url(),
                self.mq_opts.clone(),
            ))
            .unwrap()
    }

    /// A config for job `job` with this test's prefixes.
    pub fn config(&self, job: &str) -> streaming::redis::RedisRuntimeConfigBuilder {
        streaming::redis::RedisRuntimeConfig::builder()
            .job_name(job)
            .job_instance_id("test")
            .state_key_prefix(&self.prefix)
            .mq_options(self.mq_opts.clone())
    }

    /// Sends `keys` to `topic`, one message each (key = payload).
    pub fn produce(&self, topic: &str, keys: &[String]) {
        let mq = self.mq();
        let producer = mq.producer();
        let msgs: Vec<streaming::mq::OutgoingMessage> = keys
            .iter()
            .map(|w| streaming::mq::OutgoingMessage::new(w.clone()).key(w.clone()))
            .collect();
        self.rt.block_on(producer.send_batch(topic, &msgs)).unwrap();
    }
}
