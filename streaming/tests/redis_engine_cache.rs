//! The Redis engine's state cache against a private redis-server: keyed state is fetched
//! per key when a batch needs it (taking a partition does not read it whole), a cache
//! smaller than the state evicts clean keys without losing a count, a failed record
//! rolls back only the keys its batch changed, and a stored value that does not decode
//! fails only its key's records.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, RetryPolicy};
use streaming::redis::{
    CollectSink, JobClient, ProcessingErrorResult, RedisEnv, RedisRuntimeConfig,
    HEADER_RUNTIME_ERROR_MESSAGE, HEADER_RUNTIME_ERROR_TYPE,
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
    (env.blocking_start().unwrap(), out)
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
    let mut s = private_setup("cache-take");
    // One membership heartbeat per run (at its start): its script reads the small
    // assignment hash with one HGETALL.
    s.mq_opts = support::fast_options("cache-take")
        .lease_ttl(Duration::from_secs(60))
        .lease_renew_interval(Duration::from_secs(20))
        .build()
        .unwrap();
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
    // Nothing read the 2,000-field count hash whole: the two HGETALLs are the schema
    // hash's (one field per state) and the membership heartbeat's (the assignment hash),
    // the one HSCAN call the watermark hash's (one field; the count hash would take at
    // least 4 calls of 500). Loading it all took a script that ran HGETALL on every
    // state hash.
    assert_eq!(calls.get("hgetall"), Some(&2), "{calls:?}");
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
        .retry(
            RetryPolicy::builder()
                .max_retries(0)
                .initial_backoff(Duration::from_millis(1))
                .multiplier(1.0)
                .max_backoff(Duration::from_millis(1))
                .jitter(0.0)
                .build()
                .unwrap(),
        )
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

/// A plain connection to the test's redis-server, as `redis-cli` would use.
fn raw(s: &EngineSetup) -> redis::Connection {
    redis::Client::open(s.redis.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// The one state hash of this test whose name ends with `suffix` (e.g. `:process:count`).
fn state_hash(s: &EngineSetup, suffix: &str) -> String {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*{suffix}", s.prefix))
        .query(&mut raw(s))
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys.into_iter().next().unwrap()
}

fn hget(s: &EngineSetup, hash: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(hash)
        .arg(field)
        .query(&mut raw(s))
        .unwrap()
}

fn hset(s: &EngineSetup, hash: &str, field: &str, value: &str) {
    let _: i64 = redis::cmd("HSET")
        .arg(hash)
        .arg(field)
        .arg(value)
        .query(&mut raw(s))
        .unwrap();
}

/// Asserts that the dead-letter queue of `topic` holds `n` records of key `p`, each with
/// headers naming the state decode error of `state` and the key.
fn assert_dead_lettered_for_decode(s: &EngineSetup, topic: &str, state: &str, n: usize) {
    let dead = s.rt.block_on(s.mq().dead_letters(topic, 100)).unwrap();
    assert_eq!(dead.len(), n, "{dead:?}");
    for d in &dead {
        assert_eq!(&d.payload[..], b"p");
        assert_eq!(d.error_type, "state_decode");
        let header = |h: &str| d.headers.get(h).cloned().unwrap_or_default();
        assert_eq!(header(HEADER_RUNTIME_ERROR_TYPE), "state_decode");
        let message = header(HEADER_RUNTIME_ERROR_MESSAGE);
        for part in [&format!("state `{state}`"), "key \"p\"", "does not decode"] {
            assert!(message.contains(part), "{part} not in {message}");
        }
    }
}

#[test]
fn a_process_state_value_that_does_not_decode_fails_only_its_keys_records() {
    let s = private_setup("cache-poison");
    s.rt.block_on(s.mq().create_topic("poison", 1)).unwrap();
    let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    s.produce("poison", &words(&["a", "b", "p"]));
    let config = || s.config("poison").build().unwrap();
    let (job, _) = start_count(&s, "poison", config());
    wait_until("the first run", &job, || committed(&job) == 3);
    job.blocking_shutdown(Duration::MAX);

    // Someone writes garbage into key `p`'s stored count; a new instance takes over.
    let hash = state_hash(&s, ":process:count");
    hset(&s, &hash, "\"p\"", "{not json");
    s.produce("poison", &words(&["a", "p", "b", "p", "a"]));
    let (job, out) = start_count(&s, "poison", config());
    wait_until("the batch with `p`", &job, || committed(&job) == 5);
    let mut got = out.snapshot();
    got.sort();
    let counts = |c: &[(&str, u64)]| c.iter().map(|(w, n)| (w.to_string(), *n)).collect();
    let expected: Vec<(String, u64)> = counts(&[("a", 2), ("a", 3), ("b", 2)]);
    assert_eq!(got, expected);
    assert_dead_lettered_for_decode(&s, "poison", "count", 2);
    assert_eq!(hget(&s, &hash, "\"p\"").as_deref(), Some("{not json"));

    // The partition goes on committing, and `p` fails again until the value is fixed.
    s.produce("poison", &words(&["p", "a"]));
    wait_until("the next batch", &job, || committed(&job) == 7);
    assert_dead_lettered_for_decode(&s, "poison", "count", 3);
    hset(&s, &hash, "\"p\"", "41");
    s.produce("poison", &words(&["p"]));
    wait_until("the fixed key", &job, || committed(&job) == 8);
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort();
    let expected: Vec<(String, u64)> = counts(&[("a", 2), ("a", 3), ("a", 4), ("b", 2), ("p", 42)]);
    assert_eq!(got, expected);
    assert_eq!(hget(&s, &hash, "\"p\"").as_deref(), Some("42"));
}

#[test]
fn a_rolling_reduce_value_that_does_not_decode_fails_only_its_keys_records() {
    let s = private_setup("cache-poison-rolling");
    s.rt.block_on(s.mq().create_topic("rpoison", 1)).unwrap();
    let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let start = || {
        let env =
            RedisEnv::try_with_config(s.redis.url(), s.config("rpoison").build().unwrap()).unwrap();
        let out = CollectSink::new();
        env.from_mq_topic_with_options("rpoison", "g", earliest(50))
            .map(|m: Message| (m.text().unwrap().to_string(), 1u64))
            .key_by(|(w, _): &(String, u64)| w.clone())
            .reduce(|(w, a), (_, b)| (w, a + b))
            .sink(out.clone())
            .unwrap();
        (env.blocking_start().unwrap(), out)
    };
    s.produce("rpoison", &words(&["a", "b", "p"]));
    let (job, _) = start();
    wait_until("the first run", &job, || committed(&job) == 3);
    job.blocking_shutdown(Duration::MAX);

    // An older encoding: valid JSON, not the table's value type.
    let hash = state_hash(&s, ":reduce:rolling");
    hset(&s, &hash, "\"p\"", "{\"count\":1}");
    s.produce("rpoison", &words(&["a", "p", "b", "p", "a"]));
    let (job, out) = start();
    wait_until("the batch with `p`", &job, || committed(&job) == 5);
    let mut got = out.snapshot();
    got.sort();
    let counts = |c: &[(&str, u64)]| c.iter().map(|(w, n)| (w.to_string(), *n)).collect();
    let expected: Vec<(String, u64)> = counts(&[("a", 2), ("a", 3), ("b", 2)]);
    assert_eq!(got, expected);
    assert_dead_lettered_for_decode(&s, "rpoison", "rolling", 2);
    assert_eq!(hget(&s, &hash, "\"p\"").as_deref(), Some("{\"count\":1}"));

    // The user deletes the value: `p` starts over.
    let _: i64 = redis::cmd("HDEL")
        .arg(&hash)
        .arg("\"p\"")
        .query(&mut raw(&s))
        .unwrap();
    s.produce("rpoison", &words(&["p", "a"]));
    wait_until("the next batch", &job, || committed(&job) == 7);
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort();
    let expected: Vec<(String, u64)> = counts(&[("a", 2), ("a", 3), ("a", 4), ("b", 2), ("p", 1)]);
    assert_eq!(got, expected);
}

/// The delay a partition error announces (`… in 37.5ms: …` / `… retrying in 1.2s: …`).
fn announced_delay(error: &str) -> Option<Duration> {
    let (_, rest) = error.split_once(" in ")?;
    let (text, _) = rest.split_once(": ")?;
    let (number, unit) = text.split_at(text.find(|c: char| c.is_alphabetic() || c == 'µ')?);
    let n: f64 = number.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "ms" => n / 1e3,
        "µs" => n / 1e6,
        "ns" => n / 1e9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

#[test]
fn a_batch_that_fails_every_time_is_retried_with_a_growing_backoff() {
    let s = private_setup("cache-backoff");
    s.rt.block_on(s.mq().create_topic("backoff", 1)).unwrap();
    s.produce("backoff", &["a".to_string()]);
    let config = || s.config("backoff").build().unwrap();
    let (job, _) = start_count(&s, "backoff", config());
    wait_until("the first run", &job, || committed(&job) == 1);
    job.blocking_shutdown(Duration::MAX);

    // The count's hash becomes a string: every batch touching it fails with WRONGTYPE.
    let hash = state_hash(&s, ":process:count");
    let _: () = redis::cmd("SET")
        .arg(&hash)
        .arg("not a hash")
        .query(&mut raw(&s))
        .unwrap();
    s.produce("backoff", &["a".to_string(), "b".to_string()]);
    let (job, out) = start_count(&s, "backoff", config());
    let failures = || {
        (job.diagnostics().errors.into_iter())
            .filter(|e| e.message.contains("WRONGTYPE"))
            .collect::<Vec<_>>()
    };
    wait_until("five failed attempts", &job, || failures().len() >= 5);
    let delays: Vec<Duration> = failures()
        .iter()
        .take(5)
        .map(|e| announced_delay(&e.message).unwrap_or_else(|| panic!("no delay in {e}")))
        .collect();
    // Equal jitter: attempt k waits within [d/2, d] for d = 50 ms · 2^k (up to 2 s), so the
    // fifth waits at least 8 times as long as the first; before, a successful re-take
    // reset the backoff and every attempt waited 25–50 ms.
    assert!(delays[4] >= delays[0] * 4, "{delays:?}");
    assert!(delays.windows(2).all(|w| w[0] <= w[1]), "{delays:?}");

    // Once the key is fixed the partition commits again, from a fresh count.
    let _: () = redis::cmd("DEL").arg(&hash).query(&mut raw(&s)).unwrap();
    wait_until("the batch after the fix", &job, || committed(&job) == 2);
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort();
    assert_eq!(got, [("a".to_string(), 1), ("b".to_string(), 1)]);
}
