//! The Redis engine's state cache against a private redis-server: keyed state is fetched
//! per key when a batch needs it (taking a partition does not read it whole), a cache
//! smaller than the state evicts clean keys without losing a count, and a failed record
//! rolls back only the keys its batch changed.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, RetryPolicy};
use streaming::redis::{
    CollectSink, JobClient, ProcessingErrorResult, RedisEnv, RedisRuntimeConfig,
};
use streaming::BoxError;
use support::engine::{earliest, rt, wait_until, EngineSetup};
use support::redis_server::TestRedis;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// A setup on a private redis-server (the test reads its command statistics).
fn private_setup(test: &str) -> EngineSetup {
    EngineSetup {
        redis: TestRedis::private(),
        prefix: support::unique_prefix(test),
        mq_opts: support::fast_options(test).build().unwrap(),
        rt: rt(),
    }
}

fn committed(job: &JobClient) -> u64 {
    (job.diagnostics().partitions.iter())
        .map(|p| p.records + p.failed)
        .sum()
}

/// Starts the keyed count (process function with a `ValueState<u64>`) over `topic`:
/// records `boom*` change their key's count and then fail (dead-lettered).
fn start_count(
    s: &EngineSetup,
    topic: &str,
    config: RedisRuntimeConfig,
) -> (JobClient, CollectSink<(String, u64)>) {
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(50))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.trim_start_matches("boom-").to_string())
        .process(|w: String, ctx, out| {
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            if w.starts_with("boom") {
                return Err::<(), BoxError>("boom".into());
            }
            out.collect((w, n));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    (env.execute_async().unwrap(), out)
}

/// `INFO commandstats` as (command, calls).
fn command_calls(s: &EngineSetup) -> BTreeMap<String, u64> {
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_string(), calls.parse().ok()?))
        })
        .collect()
}

fn reset_stats(s: &EngineSetup) {
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .unwrap();
}

#[test]
fn taking_a_partition_fetches_only_the_keys_its_batches_touch() {
    let s = private_setup("cache-take");
    s.rt.block_on(s.mq().create_topic("take", 1)).unwrap();
    let keys: Vec<String> = (0..2000).map(|i| format!("k{i}")).collect();
    s.produce("take", &keys);
    let config = || s.config("take").build().unwrap();
    let (job, out) = start_count(&s, "take", config());
    wait_until("the first run", &job, || committed(&job) == 2000);
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(out.len(), 2000);

    // A new instance takes the partition holding 2,000 keys; three records arrive.
    reset_stats(&s);
    let (job, out) = start_count(&s, "take", config());
    s.produce(
        "take",
        &["k7".to_string(), "k1999".to_string(), "new".to_string()],
    );
    wait_until("the second run", &job, || out.len() == 3);
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort();
    // The counts continue from the stored state: the keys were fetched.
    assert_eq!(
        got,
        [
            ("k1999".to_string(), 2),
            ("k7".to_string(), 2),
            ("new".to_string(), 1)
        ]
    );
    let calls = command_calls(&s);
    // Nothing read the 2,000-field count hash whole: the one HGETALL is the schema hash's
    // (one field per state), the one HSCAN call the watermark hash's (one field; the
    // count hash would take at least 4 calls of 500). Loading it all took a script that
    // ran HGETALL on every state hash.
    assert_eq!(calls.get("hgetall"), Some(&1), "{calls:?}");
    assert_eq!(calls.get("hscan"), Some(&1), "{calls:?}");
    for whole in ["hvals", "hkeys"] {
        assert_eq!(calls.get(whole), None, "{whole} was called: {calls:?}");
    }
    assert!(calls.get("hmget").copied().unwrap_or(0) >= 1, "{calls:?}");
}

#[test]
fn counts_stay_exact_when_the_state_exceeds_the_cache() {
    let s = private_setup("cache-bound");
    s.rt.block_on(s.mq().create_topic("bound", 1)).unwrap();
    let mq_opts = support::fast_options("cache-bound")
        .key_prefix(s.mq_opts.key_prefix.clone())
        .retry(RetryPolicy {
            max_retries: 0,
            initial_backoff: Duration::from_millis(1),
            multiplier: 1.0,
            max_backoff: Duration::from_millis(1),
            jitter: 0.0,
        })
        .build()
        .unwrap();
    let config = || {
        s.config("bound")
            .mq_options(mq_opts.clone())
            .state_cache_max_entries(16)
            .processing_error_result(ProcessingErrorResult::DeadLetter)
            .build()
            .unwrap()
    };
    // 300 keys, three rounds; a failing record of some key in every 40 records.
    let mut input = Vec::new();
    for round in 0..3 {
        for i in 0..300 {
            input.push(format!("k{}", (i * 7 + round) % 300));
            if i % 40 == 0 {
                input.push(format!("boom-k{i}"));
            }
        }
    }
    let (first, rest) = input.split_at(500);
    s.produce("bound", first);
    let (job, out) = start_count(&s, "bound", config());
    wait_until("the first part", &job, || {
        committed(&job) == first.len() as u64
    });
    job.blocking_shutdown(Duration::MAX);
    // A restart in the middle: the new owner starts with an empty cache.
    s.produce("bound", rest);
    let (job2, out2) = start_count(&s, "bound", config());
    let rest_n = rest.len() as u64;
    wait_until("the rest", &job2, || committed(&job2) == rest_n);
    job2.blocking_shutdown(Duration::MAX);

    let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for w in input.iter().filter(|w| !w.starts_with("boom")) {
        let v = expected.entry(w.clone()).or_default();
        v.push(v.len() as u64 + 1);
    }
    let mut got: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (w, n) in out.snapshot().into_iter().chain(out2.snapshot()) {
        got.entry(w).or_default().push(n);
    }
    // Every key counted exactly its successful records, in order: no eviction lost a
    // count, no failed record's change survived its rollback.
    assert_eq!(got, expected);
    let failed: u64 = (job.diagnostics().partitions.iter())
        .chain(job2.diagnostics().partitions.iter())
        .map(|p| p.failed)
        .sum();
    assert_eq!(
        failed,
        input.iter().filter(|w| w.starts_with("boom")).count() as u64
    );
}
