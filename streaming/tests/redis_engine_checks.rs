//! Redis engine checks against a private redis-server: state schema versions (seed §2.2
//! `stateSchemaMismatchPolicy`), keyed state used without a codec, and waiting until a job
//! has caught up with its streams.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Commands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, OutgoingMessage};
use streaming::redis::{
    AckMode, CollectSink, JobClient, JobError, JobErrorKind, PartitionAddr, RedisEnv,
    RedisRuntimeConfig, SchemaMismatchPolicy, HEADER_RUNTIME_ERROR_TYPE,
};
use support::engine::{earliest, setup, wait_until, EngineSetup as Setup};
use support::fast_options;

impl Setup {
    fn create(&self, topic: &str, partitions: u32) {
        self.rt
            .block_on(self.mq().create_topic(topic, partitions))
            .unwrap();
    }

    /// Sends `keys` to partition `p` of `topic`.
    fn produce_to(&self, topic: &str, p: u32, keys: &[String]) {
        let mq = self.mq();
        let producer = mq.producer();
        let msgs: Vec<OutgoingMessage> = keys
            .iter()
            .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()).partition(p))
            .collect();
        self.rt.block_on(producer.send_batch(topic, &msgs)).unwrap();
    }

    fn hgetall(&self, key: &str) -> BTreeMap<String, String> {
        self.conn().hgetall(key).unwrap()
    }

    /// The schema hash of partition `p` of `topic`, group `g`.
    fn schema_hash(&self, job: &str, topic: &str, p: u32) -> String {
        format!("{}:{job}:{{{topic}:{p}}}:g:schema", self.prefix)
    }

    /// Runs version 1 of the counting pipeline (`ValueState<u64>` "count") on `topic`
    /// until `n` records committed.
    fn run_v1(&self, topic: &str, config: RedisRuntimeConfig, n: u64) -> Vec<(String, u64)> {
        let env = RedisEnv::try_with_config(self.redis.url(), config).unwrap();
        let out = CollectSink::new();
        env.from_mq_topic_with_options(topic, "g", earliest(10))
            .map(|m: Message| m.text().unwrap().to_string())
            .key_by(|w: &String| w.clone())
            .process(|w: String, ctx, out| {
                let n = ctx.state(&COUNT_V1)?.value() + 1;
                ctx.state(&COUNT_V1)?.update(n);
                out.collect((w, n));
                Ok(())
            })
            .sink(out.clone())
            .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("v1 commits every record", &job, || records(&job) == n);
        job.blocking_shutdown(Duration::MAX);
        out.snapshot()
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

fn records(job: &JobClient) -> u64 {
    job.diagnostics().partitions.iter().map(|p| p.records).sum()
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k{i}")).collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const COUNT_V1: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
/// Version 2, same state name, another value type that JSON cannot decode from v1's.
const COUNT_TEXT: ValueStateDescriptor<String> =
    ValueStateDescriptor::persistent("count", String::new());
/// Version 2, same state name, a value type v1's JSON decodes as.
const COUNT_SIGNED: ValueStateDescriptor<i64> = ValueStateDescriptor::persistent("count", 0);

const V1: &str = "ValueState<u64> by String";

/// v1 counts k0, k1, k2 on partition 0 of a 2-partition topic; returns the setup.
fn after_v1(test: &str, topic: &str, policy: SchemaMismatchPolicy) -> (Setup, RedisRuntimeConfig) {
    let s = setup(test);
    s.create(topic, 2);
    s.produce_to(topic, 0, &keys(3));
    let config = s
        .config(topic)
        .state_schema_mismatch_policy(policy)
        .build()
        .unwrap();
    let mut out = s.run_v1(topic, config.clone(), 3);
    out.sort();
    assert_eq!(out, [("k0".into(), 1), ("k1".into(), 1), ("k2".into(), 1)]);
    let field = format!("{topic}.g/3:process/count");
    assert_eq!(
        s.hgetall(&s.schema_hash(topic, topic, 0)),
        map(&[(&field, V1)]),
        "the first run writes the fingerprint"
    );
    assert!(
        s.hgetall(&s.schema_hash(topic, topic, 1)).is_empty(),
        "partition 1 never used the state"
    );
    (s, config)
}

/// Runs v2 (`ValueState<String>`, appends "x") on `topic` after producing k0 to partition
/// 0 and k5 to partition 1; waits for `done`.
fn run_v2_text(
    s: &Setup,
    topic: &str,
    config: RedisRuntimeConfig,
    done: impl Fn(&JobClient) -> bool,
) -> (streaming::redis::JobDiagnostics, Vec<(String, String)>) {
    s.produce_to(topic, 0, &strs(&["k0"]));
    s.produce_to(topic, 1, &strs(&["k5"]));
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(10))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut v = ctx.state(&COUNT_TEXT)?.value();
            v.push('x');
            ctx.state(&COUNT_TEXT)?.update(v.clone());
            out.collect((w, v));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("v2 done", &job, || done(&job));
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort();
    (job.diagnostics(), got)
}

#[test]
fn schema_mismatch_fail_stops_only_that_partition_and_keeps_the_state() {
    let topic = "schfail";
    let (s, config) = after_v1("ck-sch-fail", topic, SchemaMismatchPolicy::Fail);
    let caught_up = std::cell::Cell::new(None);
    let (d, out) = run_v2_text(&s, topic, config, |job| {
        let d = job.diagnostics();
        let done = d.partitions.len() == 2
            && d.partitions[0].stopped.is_some()
            && d.partitions[1].records == 1;
        if done {
            caught_up.set(Some(
                job.blocking_await_caught_up(Duration::from_millis(100))
                    .unwrap(),
            ));
        }
        done
    });
    assert_eq!(
        caught_up.get(),
        Some(false),
        "a stopped partition never catches up"
    );
    assert_eq!(
        out,
        [("k5".to_string(), "x".to_string())],
        "partition 1 runs"
    );
    let p0 = &d.partitions[0];
    assert_eq!(
        (p0.records, p0.failed, p0.batches),
        (0, 0, 0),
        "nothing committed"
    );
    let why = p0.stopped.as_deref().unwrap();
    let field = format!("{topic}.g/3:process");
    for part in [
        field.as_str(),
        "`count`",
        V1,
        "ValueState<String> by String",
        "SchemaMismatchPolicy::Clear",
    ] {
        assert!(why.contains(part), "{part:?} not in {why}");
    }
    let reported: Vec<&JobError> = (d.errors.iter())
        .filter(|e| e.message.contains(why))
        .collect();
    assert_eq!(reported.len(), 1, "{:?}", d.errors);
    assert!(reported[0]
        .message
        .starts_with("partition 0 of schfail/g stopped"));
    assert_eq!(reported[0].kind, JobErrorKind::StateSchema);
    assert_eq!(
        reported[0].partition,
        Some(PartitionAddr::new("schfail", "g", 0))
    );
    // Stored state and fingerprint untouched.
    assert_eq!(
        s.hgetall(&s.state_hash(topic, topic, 0, "count")),
        map(&[("\"k0\"", "1"), ("\"k1\"", "1"), ("\"k2\"", "1")])
    );
    assert_eq!(
        s.hgetall(&s.schema_hash(topic, topic, 0)),
        map(&[(&format!("{field}/count"), V1)])
    );
    assert_eq!(
        s.hgetall(&s.schema_hash(topic, topic, 1)),
        map(&[(&format!("{field}/count"), "ValueState<String> by String")])
    );
}

#[test]
fn schema_mismatch_clear_deletes_the_old_state_and_starts_empty() {
    let topic = "schclear";
    let (s, config) = after_v1("ck-sch-clear", topic, SchemaMismatchPolicy::Clear);
    let (d, out) = run_v2_text(&s, topic, config, |job| records(job) == 2);
    assert_eq!(
        out,
        [
            ("k0".to_string(), "x".to_string()),
            ("k5".to_string(), "x".to_string())
        ]
    );
    assert!(
        d.partitions
            .iter()
            .all(|p| p.stopped.is_none() && p.failed == 0),
        "{d:?}"
    );
    assert_eq!(
        s.hgetall(&s.state_hash(topic, topic, 0, "count")),
        map(&[("\"k0\"", "\"x\"")]),
        "k1 and k2 (v1) deleted"
    );
    let field = format!("{topic}.g/3:process/count");
    assert_eq!(
        s.hgetall(&s.schema_hash(topic, topic, 0)),
        map(&[(&field, "ValueState<String> by String")])
    );
}

#[test]
fn schema_mismatch_ignore_decodes_the_stored_state_as_the_new_type() {
    let topic = "schignore";
    let (s, config) = after_v1("ck-sch-ignore", topic, SchemaMismatchPolicy::Ignore);
    s.produce_to(topic, 0, &strs(&["k0", "k1"]));
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(10))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let n = ctx.state(&COUNT_SIGNED)?.value() - 1;
            ctx.state(&COUNT_SIGNED)?.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("v2 done", &job, || records(&job) == 2);
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort();
    assert_eq!(got, [("k0".to_string(), 0), ("k1".to_string(), 0)]);
    assert_eq!(
        s.hgetall(&s.state_hash(topic, topic, 0, "count")),
        map(&[("\"k0\"", "0"), ("\"k1\"", "0"), ("\"k2\"", "1")])
    );
    let field = format!("{topic}.g/3:process/count");
    assert_eq!(
        s.hgetall(&s.schema_hash(topic, topic, 0)),
        map(&[(&field, "ValueState<i64> by String")])
    );
    assert!(job
        .diagnostics()
        .partitions
        .iter()
        .all(|p| p.stopped.is_none()));
}

#[test]
fn schema_check_disabled_writes_no_fingerprint() {
    let s = setup("ck-sch-off");
    s.create("schoff", 1);
    s.produce_to("schoff", 0, &keys(2));
    let config = s
        .config("schoff")
        .state_schema_evolution_enabled(false)
        .build()
        .unwrap();
    assert_eq!(s.run_v1("schoff", config, 2).len(), 2);
    assert!(s.hgetall(&s.schema_hash("schoff", "schoff", 0)).is_empty());
}

const PLAIN: ValueStateDescriptor<u64> = ValueStateDescriptor::new("plain", 0);

#[test]
fn state_without_codec_is_dead_lettered_at_once_and_reported_once() {
    let s = setup("ck-plain");
    s.create("plain", 1);
    s.produce("plain", &keys(3));
    // Default processing_error_result: RETRY; the misuse is not retried anyway.
    let config = s.config("plain").build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
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
    let job = env.blocking_start().unwrap();
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
    job.blocking_shutdown(Duration::MAX);
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
    let reports: Vec<&String> = (d.errors.iter())
        .map(|e| &e.message)
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

/// Registers the keyed count of `topic` (earliest, batches of 50) used by the waits below.
fn register_count(env: &RedisEnv, topic: &str) {
    env.from_mq_topic_with_options(topic, "g", earliest(50))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let n = ctx.state(&COUNT_V1)?.value() + 1;
            ctx.state(&COUNT_V1)?.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(CollectSink::new())
        .unwrap();
}

/// Produces `n` records over `distinct` keys to a 4-partition topic, starts the keyed
/// count, waits with `await_caught_up` and checks the state right then.
fn caught_up_gives_exact_state(test: &str, topic: &str, ack: AckMode, parallelism: u32) {
    let s = setup(test);
    s.create(topic, 4);
    let (n, distinct) = (400usize, 23usize);
    let input: Vec<String> = (0..n).map(|i| format!("k{}", i % distinct)).collect();
    s.produce(topic, &input);
    let config = s
        .config(topic)
        .ack_mode(ack)
        .pipeline_parallelism(parallelism)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    register_count(&env, topic);
    let job = env.blocking_start().unwrap();
    assert!(
        job.blocking_await_caught_up(Duration::from_secs(60))
            .unwrap(),
        "{:?}",
        job.diagnostics()
    );
    // Checked at once: everything produced before is committed.
    let d = job.diagnostics();
    assert_eq!(d.partitions.len(), 4);
    assert!(d.partitions.iter().all(|p| p.taken && p.stopped.is_none()));
    assert_eq!(
        d.partitions.iter().map(|p| p.records).sum::<u64>(),
        n as u64
    );
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for p in 0..4 {
        for (k, v) in s.hgetall(&s.state_hash(topic, topic, p, "count")) {
            let k: String = serde_json::from_str(&k).unwrap();
            assert!(
                counts.insert(k, v.parse().unwrap()).is_none(),
                "one partition per key"
            );
        }
    }
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for k in &input {
        *want.entry(k.clone()).or_default() += 1;
    }
    assert_eq!(counts, want);
    // Still caught up: nothing new arrived.
    assert!(job.blocking_await_caught_up(Duration::ZERO).unwrap());
    // A new record moves the end; caught up again once it is committed.
    s.produce(topic, &strs(&["k0"]));
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    let k0_partition = (0..4)
        .find(|p| {
            s.hgetall(&s.state_hash(topic, topic, *p, "count"))
                .contains_key("\"k0\"")
        })
        .unwrap();
    assert_eq!(
        s.hgetall(&s.state_hash(topic, topic, k0_partition, "count"))["\"k0\""],
        (want["k0"] + 1).to_string()
    );
    job.blocking_shutdown(Duration::MAX);
}

#[test]
fn await_caught_up_offset_mode() {
    caught_up_gives_exact_state("ck-cu-offset", "cuoff", AckMode::Offset, 2);
}

#[test]
fn await_caught_up_xack_mode() {
    caught_up_gives_exact_state("ck-cu-xack", "cuxack", AckMode::Xack, 1);
}

#[test]
fn await_caught_up_waits_for_a_scheduled_retry() {
    let s = setup("ck-cu-retry");
    let topic = "curetry";
    s.create(topic, 1);
    s.produce(topic, &keys(5));
    // Retries after 300 ms: the job commits the other four long before.
    let mq_opts = fast_options("ck-cu-retry")
        .key_prefix(s.mq_opts.key_prefix.clone())
        .retry(
            streaming::mq::RetryPolicy::builder()
                .initial_backoff(Duration::from_millis(300))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let config = s.config(topic).mq_options(mq_opts).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    env.from_mq_topic_with_options(topic, "g", earliest(10))
        .try_map(|m: Message| -> Result<String, &'static str> {
            let text = m.text().unwrap().to_string();
            if text == "k1" && m.retry_count == 0 {
                return Err("first attempt of k1 fails");
            }
            Ok(text)
        })
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let n = ctx.state(&COUNT_V1)?.value() + 1;
            ctx.state(&COUNT_V1)?.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    let d = job.diagnostics();
    assert_eq!((d.partitions[0].records, d.partitions[0].failed), (5, 1));
    assert_eq!(
        s.hgetall(&s.state_hash(topic, topic, 0, "count")),
        map(&[
            ("\"k0\"", "1"),
            ("\"k1\"", "1"),
            ("\"k2\"", "1"),
            ("\"k3\"", "1"),
            ("\"k4\"", "1")
        ]),
        "k1 counted once, after its retry"
    );
    job.blocking_shutdown(Duration::MAX);
}

/// Two jobs given the same explicit `job_instance_id` (two pods with one config) still
/// get distinct consumer names — the sequence is drawn from Redis — so they share the
/// partitions instead of both claiming every one under one membership entry; a restart
/// with that id gets a new name too.
#[test]
fn the_same_explicit_instance_id_twice_still_shares_the_partitions() {
    let s = setup("same-instance");
    let topic = "same-id";
    s.create(topic, 4);
    let start = || {
        let config = s
            .config("same-id-job")
            .job_instance_id("pod-a")
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        env.from_mq_topic_with_options(topic, "g", earliest(8))
            .map(|m: Message| m.text().unwrap().to_string())
            .sink(CollectSink::new())
            .unwrap();
        env.blocking_start().unwrap()
    };
    let (a, b) = (start(), start());
    let lease_owners = || -> BTreeMap<u32, String> {
        let mq = s.mq();
        let mut conn = s.conn();
        (0..4)
            .filter_map(|p| {
                let v: Option<String> = conn.get(mq.keys().lease(topic, p, "g")).ok()?;
                Some((p, v?.split_once(' ')?.1.to_string()))
            })
            .collect()
    };
    wait_until("an even split", &a, || {
        a.diagnostics().owned_partitions == 2 && b.diagnostics().owned_partitions == 2
    });
    let names: std::collections::BTreeSet<String> = lease_owners().into_values().collect();
    assert_eq!(
        names,
        ["same-id-job-pod-a-0", "same-id-job-pod-a-1"]
            .map(String::from)
            .into(),
        "two names, one per process"
    );
    a.blocking_shutdown(Duration::MAX);
    b.blocking_shutdown(Duration::MAX);
    // A restart with the same id does not reuse either name.
    let c = start();
    wait_until("the restarted job owns everything", &c, || {
        c.diagnostics().owned_partitions == 4
    });
    let names: std::collections::BTreeSet<String> = lease_owners().into_values().collect();
    assert_eq!(names, ["same-id-job-pod-a-2".to_string()].into());
    c.blocking_shutdown(Duration::MAX);
}

/// Partitions nothing was written to have no stream key yet: the wait still answers (the
/// review saw `Err(no such key)` at once from `XINFO GROUPS` inside the check's `MULTI`).
#[test]
fn await_caught_up_with_partitions_that_never_received_a_message() {
    let s = setup("ck-cu-empty");
    let topic = "cuempty";
    s.create(topic, 4);
    s.produce(topic, &vec!["k0".to_string(); 50]);
    let config = s.config(topic).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    register_count(&env, topic);
    let job = env.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    let counted: u64 = (0..4)
        .filter_map(|p| {
            s.hgetall(&s.state_hash(topic, topic, p, "count"))
                .get("\"k0\"")
                .map(|v| v.parse::<u64>().unwrap())
        })
        .sum();
    assert_eq!(counted, 50);
    job.blocking_shutdown(Duration::MAX);
}
