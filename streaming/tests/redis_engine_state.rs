//! Redis engine state options against a private redis-server: state size sampling and
//! hot-key policies (seed §2.7), keyed state split over shard hashes.

mod support;

use std::time::Duration;

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, StartPolicy, SubscriptionOptions};
use streaming::redis::{
    CollectSink, HotKeyPolicy, JobClient, JobDiagnostics, ProcessingErrorResult, RedisEnv,
    RedisRuntimeConfig, HEADER_RUNTIME_ERROR_TYPE,
};
use support::engine::{setup, wait_until, EngineSetup as Setup};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

impl Setup {
    /// Sends `keys` (one record each, payload = key) to a new 1-partition topic.
    fn send(&self, topic: &str, keys: &[String]) {
        self.rt.block_on(self.mq().create_topic(topic, 1)).unwrap();
        self.produce(topic, keys);
    }

    /// Runs the keyed count over `topic` (group `g`, one record per batch) until `n`
    /// records committed or failed; returns the diagnostics and the outputs.
    fn run_count(
        &self,
        topic: &str,
        config: RedisRuntimeConfig,
        n: u64,
    ) -> (JobDiagnostics, Vec<(String, u64)>) {
        let env = RedisEnv::try_with_config(self.redis.url(), config).unwrap();
        let out = CollectSink::new();
        env.from_mq_topic_with_options(topic, "g", one_per_batch())
            .map(|m: Message| m.text().unwrap().to_string())
            .key_by(|w: &String| w.clone())
            .process(|w: String, ctx, out| {
                let mut count = ctx.state(&COUNT)?;
                let n = count.value() + 1;
                count.update(n);
                out.collect((w, n));
                Ok(())
            })
            .sink(out.clone())
            .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("every record", &job, || committed(&job) == n);
        job.blocking_shutdown(Duration::MAX);
        (job.diagnostics(), out.snapshot())
    }

    fn hlen(&self, key: &str) -> u64 {
        let mut conn = self
            .rt
            .block_on(
                redis::Client::open(self.redis.url())
                    .unwrap()
                    .get_multiplexed_async_connection(),
            )
            .unwrap();
        self.rt.block_on(conn.hlen(key)).unwrap()
    }

    /// The count state's hash of job `job` on partition 0 of `topic`, group `g`.
    fn count_hash(&self, job: &str, topic: &str) -> String {
        format!(
            "{}:{job}:{{{topic}:0}}:g:{topic}.g/3:process:count",
            self.prefix
        )
    }
}

fn one_per_batch() -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(1)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap()
}

fn committed(job: &JobClient) -> u64 {
    job.diagnostics()
        .partitions
        .iter()
        .map(|p| p.records + p.failed)
        .sum()
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i}")).collect()
}

fn records_and_failed(d: &JobDiagnostics) -> (u64, u64) {
    d.partitions
        .iter()
        .fold((0, 0), |(r, f), p| (r + p.records, f + p.failed))
}

#[test]
fn state_size_is_sampled_every_n_writes() {
    let s = setup("st-size");
    s.send("size", &keys(10));
    let config = s
        .config("size")
        .state_size_report_every_n_writes(4)
        .build()
        .unwrap();
    let (d, out) = s.run_count("size", config, 10);
    assert_eq!(out.len(), 10);
    let hash = s.count_hash("size", "size");
    // One field written per batch: samples after writes 4 and 8; the last one saw 8.
    assert_eq!(d.state_sizes.get(&hash), Some(&8), "{:?}", d.state_sizes);
    assert_eq!(d.state_sizes.len(), 1);
    assert_eq!(d.hot_key_warnings, 0, "threshold 0 = no hot-key detection");
    assert_eq!(s.hlen(&hash), 10);
}

#[test]
fn hot_key_log_only_warns_once_per_interval_and_processes_everything() {
    let s = setup("st-hot-log");
    s.send("hotlog", &keys(10));
    let config = s
        .config("hotlog")
        .hot_key_fields_warn_threshold(5)
        .hot_key_policy(HotKeyPolicy::LogOnly)
        .build()
        .unwrap();
    let (d, out) = s.run_count("hotlog", config, 10);
    let hash = s.count_hash("hotlog", "hotlog");
    assert_eq!(out.len(), 10);
    assert_eq!(records_and_failed(&d), (10, 0));
    assert_eq!(
        d.hot_key_warnings, 1,
        "one warning per hash per interval (1 min)"
    );
    assert_eq!((d.hot_key_throttled, d.hot_key_rejected), (0, 0));
    // Without a report interval, the threshold samples each written hash per commit.
    assert_eq!(d.state_sizes.get(&hash), Some(&10), "{:?}", d.state_sizes);
    assert_eq!(s.hlen(&hash), 10);
}

#[test]
fn hot_key_throttle_delays_writes_to_the_hot_hash_and_loses_nothing() {
    let s = setup("st-hot-throttle");
    s.send("hotthr", &keys(10));
    let config = s
        .config("hotthr")
        .hot_key_fields_warn_threshold(3)
        .hot_key_policy(HotKeyPolicy::Throttle)
        .hot_key_throttle_max(Duration::from_millis(5))
        .build()
        .unwrap();
    let (d, out) = s.run_count("hotthr", config, 10);
    assert_eq!(out.len(), 10);
    assert_eq!(records_and_failed(&d), (10, 0));
    assert_eq!(d.hot_key_warnings, 1);
    // The 3rd commit found 3 fields; the 7 commits after it write to the hot hash.
    assert_eq!(d.hot_key_throttled, 7);
    assert_eq!(d.hot_key_rejected, 0);
    assert_eq!(s.hlen(&s.count_hash("hotthr", "hotthr")), 10);
}

#[test]
fn hot_key_fail_fast_dead_letters_records_writing_to_the_hot_hash() {
    let s = setup("st-hot-fail");
    s.send("hotff", &keys(10));
    let config = s
        .config("hotff")
        .hot_key_fields_warn_threshold(3)
        .hot_key_policy(HotKeyPolicy::FailFast)
        .processing_error_result(ProcessingErrorResult::DeadLetter)
        .build()
        .unwrap();
    let (d, out) = s.run_count("hotff", config, 10);
    assert_eq!(
        out,
        [("k0".to_string(), 1), ("k1".into(), 1), ("k2".into(), 1)]
    );
    assert_eq!(records_and_failed(&d), (3, 7));
    assert_eq!((d.hot_key_warnings, d.hot_key_rejected), (1, 7));
    assert_eq!(
        s.hlen(&s.count_hash("hotff", "hotff")),
        3,
        "rejected writes rolled back"
    );
    let dead = s.rt.block_on(s.mq().dead_letters("hotff", 100)).unwrap();
    let mut payloads: Vec<String> = dead
        .iter()
        .map(|d| String::from_utf8(d.payload.to_vec()).unwrap())
        .collect();
    payloads.sort();
    let expected: Vec<String> = keys(10)[3..].to_vec();
    assert_eq!(payloads, expected);
    for l in &dead {
        assert_eq!(l.error_type, "hot_key");
        assert_eq!(
            l.headers.get(HEADER_RUNTIME_ERROR_TYPE).map(String::as_str),
            Some("hot_key")
        );
    }
}

/// FNV-1a 64 (the engine's documented shard hash), written out independently.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn sharded_state_splits_keys_by_fnv1a_and_survives_a_restart() {
    let s = setup("st-shard");
    let input = keys(40);
    s.send("shard", &input);
    let config = || {
        s.config("shard")
            .keyed_state_shard_count(4)
            .build()
            .unwrap()
    };
    let (_, out) = s.run_count("shard", config(), 40);
    assert!(out.iter().all(|(_, n)| *n == 1), "{out:?}");
    let base = s.count_hash("shard", "shard");
    let mut expected = [0u64; 4];
    for k in &input {
        expected[(fnv1a64(format!("\"{k}\"").as_bytes()) % 4) as usize] += 1;
    }
    let sizes: Vec<u64> = (0..4).map(|i| s.hlen(&format!("{base}:s{i}"))).collect();
    assert_eq!(sizes, expected);
    assert_eq!(s.hlen(&base), 0, "no unsharded hash");
    // A new job instance loads every shard: each key counts on from 1.
    s.produce("shard", &input);
    let (_, out) = s.run_count("shard", config(), 40);
    let mut got: Vec<(String, u64)> = out;
    got.sort();
    let mut want: Vec<(String, u64)> = input.iter().map(|k| (k.clone(), 2)).collect();
    want.sort();
    assert_eq!(got, want);
}
