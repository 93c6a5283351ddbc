//! Redis engine checks against a private redis-server: state schema versions (seed §2.2
//! `stateSchemaMismatchPolicy`), keyed state used without a codec, and waiting until a job
//! has caught up with its streams.

mod support;

use std::time::Duration;

use redis::Commands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{
    CollectSink, JobClient, RedisEnv, RedisRuntimeConfig, RedisRuntimeConfigBuilder,
    HEADER_RUNTIME_ERROR_TYPE,
};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

struct Setup {
    redis: TestRedis,
    prefix: String,
    mq_opts: streaming::mq::MqOptions,
    rt: tokio::runtime::Runtime,
}

fn setup(test: &str) -> Setup {
    Setup {
        redis: TestRedis::shared(),
        prefix: unique_prefix(test),
        mq_opts: fast_options(test).build().unwrap(),
        rt: rt(),
    }
}

impl Setup {
    fn mq(&self) -> Mq {
        self.rt
            .block_on(Mq::connect(self.redis.url(), self.mq_opts.clone()))
            .unwrap()
    }

    fn config(&self, job: &str) -> RedisRuntimeConfigBuilder {
        RedisRuntimeConfig::builder()
            .job_name(job)
            .job_instance_id("test")
            .state_key_prefix(&self.prefix)
            .mq_options(self.mq_opts.clone())
    }

    fn create(&self, topic: &str, partitions: u32) {
        self.rt
            .block_on(self.mq().create_topic(topic, partitions))
            .unwrap();
    }

    /// Sends `keys` to `topic` (key = payload).
    fn produce(&self, topic: &str, keys: &[String]) {
        let mq = self.mq();
        let mut producer = mq.producer();
        let msgs: Vec<OutgoingMessage> = keys
            .iter()
            .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
            .collect();
        self.rt.block_on(producer.send_batch(topic, &msgs)).unwrap();
    }

    fn conn(&self) -> redis::Connection {
        redis::Client::open(self.redis.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    /// The hash of state `state` of the process operator at position 3 of the pipeline
    /// reading `topic` as group `g`, partition `p`.
    fn state_hash(&self, job: &str, topic: &str, p: u32, state: &str) -> String {
        format!(
            "{}:{job}:{{{topic}:{p}}}:g:{topic}.g/3:process:{state}",
            self.prefix
        )
    }
}

fn earliest(batch: usize) -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(batch)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap()
}

/// Polls `check` every 20 ms until it is true; panics after a generous deadline (it bounds
/// a failing test; it is not what the test asserts).
fn wait_until(what: &str, job: &JobClient, mut check: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {:?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i}")).collect()
}

const PLAIN: ValueStateDescriptor<u64> = ValueStateDescriptor::new("plain", 0);

#[test]
fn state_without_codec_is_dead_lettered_at_once_and_reported_once() {
    let s = setup("ck-plain");
    s.create("plain", 1);
    s.produce("plain", &keys(3));
    // Default processing_error_result: RETRY; the misuse is not retried anyway.
    let config = s.config("plain").build().unwrap();
    let env = RedisEnv::create_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options("plain", "g", earliest(1))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let n = ctx.state(&PLAIN)?.value() + 1;
            ctx.state(&PLAIN)?.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    let job = env.execute_async().unwrap();
    let mq = s.mq();
    let dead = {
        let mut dead = Vec::new();
        wait_until("3 dead letters", &job, || {
            dead = s.rt.block_on(mq.dead_letters("plain", 100)).unwrap();
            dead.len() >= 3
        });
        dead
    };
    wait_until("3 failures counted", &job, || {
        job.diagnostics()
            .partitions
            .iter()
            .map(|p| p.failed)
            .sum::<u64>()
            == 3
    });
    job.cancel();
    let d = job.diagnostics();
    assert_eq!(dead.len(), 3);
    let mut payloads: Vec<String> = dead
        .iter()
        .map(|l| String::from_utf8(l.payload.to_vec()).unwrap())
        .collect();
    payloads.sort();
    assert_eq!(payloads, keys(3));
    for l in &dead {
        assert_eq!(l.error_type, "state", "not retried: {l:?}");
        assert_eq!(l.attempts, 1);
        assert_eq!(
            l.headers.get(HEADER_RUNTIME_ERROR_TYPE).map(String::as_str),
            Some("state")
        );
    }
    assert!(out.is_empty());
    let p = &d.partitions[0];
    assert_eq!((p.records, p.failed), (0, 3), "each record failed once");
    let reports: Vec<&String> = d
        .errors
        .iter()
        .filter(|e| e.contains("not persistent"))
        .collect();
    assert_eq!(reports.len(), 1, "reported once: {:?}", d.errors);
    assert!(
        reports[0].contains("ValueStateDescriptor::persistent(..)")
            && reports[0].contains(".state(")
            && reports[0].contains("`plain`"),
        "{}",
        reports[0]
    );
    let retries: u64 = s.conn().zcard(s.mq().keys().retry_due("plain", 0)).unwrap();
    assert_eq!(retries, 0, "nothing scheduled for retry");
}
