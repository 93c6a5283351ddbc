//! The Redis engine survives Redis being killed and restarted (AOF, fsync always) in the
//! middle of a job: it reconnects, resumes every partition from its last commit and ends
//! with exact state and exactly-once list-sink output (both ack modes), whatever the
//! outage's length (every partition commits again soon after Redis answers, its own
//! lease recognised when Redis comes back with it). A
//! shutdown during an outage, or with Redis frozen (`SIGSTOP`), returns within twice the
//! response timeout (within it and a little, with every background task of a job: the
//! registry, leader election, periodic checkpoints, a topic forwarder); the job client's
//! waits honour their own timeouts.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{
    partition_for_key, Message, Mq, MqOptions, OutgoingMessage, StartPolicy, SubscriptionOptions,
};
use streaming::redis::{
    AckMode, JobClient, RedisEnv, RedisListSink, RedisRuntimeConfig, RedisTopicSink,
};
use support::fast_options;
use support::redis_server::TestRedis;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

fn lists(rt: &tokio::runtime::Runtime, url: &str) -> Option<BTreeMap<String, Vec<u64>>> {
    let client = redis::Client::open(url).ok()?;
    rt.block_on(async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for p in 0..4 {
            let list: Vec<String> = conn
                .lrange(RedisListSink::<String>::key_for("out", "t", p), 0, -1)
                .await
                .ok()?;
            for line in list {
                let (w, n) = line.split_once('=')?;
                out.entry(w.to_string()).or_default().push(n.parse().ok()?);
            }
        }
        Some(out)
    })
}

/// Per partition, the length of its sink list (`None` while Redis does not answer).
fn list_lens(rt: &tokio::runtime::Runtime, url: &str) -> Option<Vec<usize>> {
    let client = redis::Client::open(url).ok()?;
    rt.block_on(async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut lens = Vec::new();
        for p in 0..4 {
            let n: usize = conn
                .llen(RedisListSink::<String>::key_for("out", "t", p))
                .await
                .ok()?;
            lens.push(n);
        }
        Some(lens)
    })
}

/// The queue options of these tests: fast leases, `response_timeout`.
fn options(response_timeout: Duration) -> MqOptions {
    fast_options("eng-fault")
        .response_timeout(response_timeout)
        .build()
        .unwrap()
}

/// The outage tests' lease: far longer than any outage-to-commit bound they check, so a
/// process that waits for a lease to expire fails them.
const OUTAGE_LEASE_TTL: Duration = Duration::from_secs(30);

/// A running word-count job over topic `t` (4 partitions, 3000 messages of 13 words):
/// each output `word=n` goes to the partition's list `out`.
struct WordCount {
    redis: TestRedis,
    url: String,
    rt: tokio::runtime::Runtime,
    mq_opts: MqOptions,
    words: Vec<String>,
    job: JobClient,
}

fn start_word_count(mode: AckMode, mq_opts: MqOptions) -> WordCount {
    start_word_count_with(mode, mq_opts, false)
}

/// [`start_word_count`]; with `background`, the job also runs every background task a
/// job can have besides its registry: leader election (renewed every 200 ms), periodic
/// checkpoints (every 100 ms) and a topic forwarder (a second pipeline, group `g2`,
/// sends each word to topic `fwd`).
fn start_word_count_with(mode: AckMode, mq_opts: MqOptions, background: bool) -> WordCount {
    let redis = TestRedis::private();
    let url = redis.url().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq = rt.block_on(Mq::connect(&url, mq_opts.clone())).unwrap();
    rt.block_on(mq.create_topic("t", 4)).unwrap();
    if background {
        rt.block_on(mq.create_topic("fwd", 2)).unwrap();
    }
    let words: Vec<String> = (0..3000).map(|i| format!("w{}", i % 13)).collect();
    let msgs: Vec<OutgoingMessage> = words
        .iter()
        .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
        .collect();
    for chunk in msgs.chunks(500) {
        rt.block_on(mq.producer().send_batch("t", chunk)).unwrap();
    }
    drop(mq);
    let mut config = RedisRuntimeConfig::builder()
        .job_name("faults")
        .job_instance_id("test")
        .mq_options(mq_opts.clone())
        .ack_mode(mode)
        .pipeline_parallelism(2);
    if background {
        config = config
            .leader_election_enabled(true)
            .leader_lease_ttl(Duration::from_secs(2))
            .leader_renew_interval(Duration::from_millis(200))
            .checkpoint_interval(Duration::from_millis(100));
    }
    let env = RedisEnv::try_with_config(url.as_str(), config.build().unwrap()).unwrap();
    if background {
        let earliest = SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .build()
            .unwrap();
        env.from_mq_topic_with_options("t", "g2", earliest)
            .map(|m: Message| m.text().unwrap().to_string())
            .sink(RedisTopicSink::text("fwd").unwrap())
            .unwrap();
    }
    env.from_mq_topic_with_options(
        "t",
        "g",
        SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .batch_count(10)
            .poll_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    )
    .map(|m: Message| m.text().unwrap().to_string())
    .key_by(|w: &String| w.clone())
    .process(|w: String, ctx, out| {
        let mut c = ctx.state(&COUNT)?;
        let n = c.value() + 1;
        c.update(n);
        out.collect(format!("{w}={n}"));
        Ok(())
    })
    .sink(RedisListSink::<String>::text("out").unwrap())
    .unwrap();
    let job = env.blocking_start().unwrap();
    WordCount {
        redis,
        url,
        rt,
        mq_opts,
        words,
        job,
    }
}

fn total(l: &BTreeMap<String, Vec<u64>>) -> usize {
    l.values().map(Vec::len).sum()
}

impl WordCount {
    /// Waits until the job has emitted at least `n` outputs (mid-run).
    fn wait_outputs(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while lists(&self.rt, &self.url).map_or(0, |l| total(&l)) < n {
            assert!(
                Instant::now() < deadline,
                "no progress: {:?}",
                self.job.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends one more message to each partition (a word that hashes there); they count.
    fn send_one_per_partition(&mut self) {
        let mut extra = Vec::new();
        for p in 0..4 {
            let w = (0..)
                .map(|i| format!("x{i}"))
                .find(|w| partition_for_key(w, 4) == p)
                .unwrap();
            extra.push(w);
        }
        let mq = self
            .rt
            .block_on(Mq::connect(&self.url, self.mq_opts.clone()))
            .unwrap();
        let msgs: Vec<OutgoingMessage> = extra
            .iter()
            .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
            .collect();
        self.rt
            .block_on(mq.producer().send_batch("t", &msgs))
            .unwrap();
        self.words.extend(extra);
    }

    /// Waits for every output, then checks exactly-once state and output: each word's
    /// outputs are exactly `1..=its count`.
    fn check_exactly_once(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let expected_total = self.words.len();
        let done = loop {
            if let Some(l) = lists(&self.rt, &self.url) {
                if total(&l) >= expected_total {
                    break l;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not finished: {:?}",
                self.job.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        self.job.blocking_shutdown(Duration::MAX);
        let done = lists(&self.rt, &self.url).unwrap_or(done);
        for (w, counts) in &done {
            let expected = self.words.iter().filter(|x| *x == w).count() as u64;
            assert_eq!(counts, &(1..=expected).collect::<Vec<_>>(), "{what}: {w}");
        }
        assert_eq!(total(&done), expected_total, "{what}: 0 lost, 0 duplicated");
    }
}

fn survives_restart(mode: AckMode) {
    let mut w = start_word_count(mode, options(Duration::from_secs(5)));
    w.wait_outputs(300);
    w.redis.server().kill();
    // A wait started while Redis is down keeps checking through the restart (as the job
    // keeps retrying) and sees the job catch up; `Duration::MAX` is "no deadline".
    let caught_up = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| w.job.blocking_await_caught_up(Duration::MAX));
        std::thread::sleep(Duration::from_millis(300));
        w.redis.server().restart();
        waiting.join().unwrap()
    });
    assert!(caught_up.unwrap(), "{mode:?}");
    w.check_exactly_once(&format!("{mode:?}"));
    assert!(
        !w.job.diagnostics().errors.is_empty(),
        "the outage was noticed and recovered from"
    );
}

/// Kills Redis mid-run for `outage`, restarts it (AOF) and checks that every partition
/// commits again soon after Redis answers, then exactly-once state and output. The leases
/// (`OUTAGE_LEASE_TTL`) outlive a short outage: each process must recognise its own lease
/// when Redis comes back with it, not wait for it to expire as if another process held
/// it. The bound only stops a broken run; the time taken is printed (`BENCHMARKS.md`).
fn survives_outage(mode: AckMode, outage: Duration) {
    let opts = fast_options("eng-fault")
        .response_timeout(Duration::from_secs(1))
        .lease_ttl(OUTAGE_LEASE_TTL)
        .lease_renew_interval(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut w = start_word_count(mode, opts);
    w.wait_outputs(300);
    w.redis.server().kill();
    std::thread::sleep(outage);
    w.redis.server().restart();
    let back = Instant::now();
    let before = list_lens(&w.rt, &w.url).expect("redis answers after the restart");
    w.send_one_per_partition();
    // Every partition emits (= commits) again: its list grows past its length at restart.
    let bound = OUTAGE_LEASE_TTL / 3;
    loop {
        let now = list_lens(&w.rt, &w.url).unwrap_or_default();
        if now.len() == 4 && now.iter().zip(&before).all(|(n, b)| n > b) {
            break;
        }
        assert!(
            back.elapsed() < bound,
            "{mode:?}, outage {outage:?}: not every partition committed within {bound:?} of Redis answering again ({before:?} -> {now:?}): {:#?}",
            w.job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "{mode:?}, outage {outage:?}: every partition committed again {:?} after Redis answered",
        back.elapsed()
    );
    w.check_exactly_once(&format!("{mode:?}, outage {outage:?}"));
}

#[test]
fn outage_1s_offset() {
    survives_outage(AckMode::Offset, Duration::from_secs(1));
}

#[test]
fn outage_1s_xack() {
    survives_outage(AckMode::Xack, Duration::from_secs(1));
}

#[test]
fn outage_5s_xack() {
    survives_outage(AckMode::Xack, Duration::from_secs(5));
}

#[test]
fn outage_30s_offset() {
    survives_outage(AckMode::Offset, Duration::from_secs(30));
}

/// `blocking_shutdown` while Redis is down returns within twice the response timeout.
#[test]
fn cancel_during_outage_is_bounded() {
    let response_timeout = Duration::from_secs(1);
    let mut w = start_word_count(AckMode::Offset, options(response_timeout));
    w.wait_outputs(300);
    w.redis.server().kill();
    // Let the subtasks notice and enter their reconnect loops.
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    w.job.blocking_shutdown(Duration::MAX);
    let took = t.elapsed();
    eprintln!("cancel during an outage took {took:?}");
    assert!(took <= response_timeout * 2, "cancel took {took:?}");
}

/// With Redis frozen (`SIGSTOP`) under a running job, the job client's waits honour their
/// timeouts, the stall shows per partition in the diagnostics, and `blocking_shutdown`
/// returns within twice the response timeout.
#[test]
fn frozen_redis_does_not_hang_the_job_client() {
    let response_timeout = Duration::from_secs(1);
    let mut w = start_word_count(AckMode::Offset, options(response_timeout));
    w.wait_outputs(300);
    let port = w.redis.server().port();
    w.redis.server().freeze();
    let frozen_at = std::time::SystemTime::now();
    // A short wait ends by its own deadline, not by the response timeout.
    let t = Instant::now();
    assert!(w
        .job
        .blocking_await_caught_up(Duration::from_millis(400))
        .is_err());
    let took = t.elapsed();
    assert!(
        took <= Duration::from_millis(600),
        "await_caught_up(400 ms) took {took:?}"
    );
    let t = Instant::now();
    let r = w.job.blocking_await_caught_up(Duration::from_secs(3));
    let took = t.elapsed();
    assert!(
        took <= Duration::from_secs(3) + Duration::from_millis(500),
        "await_caught_up(3 s) took {took:?}"
    );
    match r {
        Err(streaming::Error::Connect { addr, .. }) => {
            assert_eq!(addr, format!("127.0.0.1:{port}"))
        }
        other => panic!("expected a connect error naming the address, got {other:?}"),
    }
    // Each partition's failing call shows as its last error, after its last commit (a
    // commit whose reply was already on its way when Redis froze may land just after
    // `frozen_at`; the error after it is what shows the stall).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d = w.job.diagnostics();
        let stalled = d.partitions.iter().all(|p| {
            p.last_error_at
                .is_some_and(|at| at >= frozen_at && p.last_commit_at.is_none_or(|c| c < at))
        });
        if d.partitions.len() == 4 && stalled {
            assert_eq!(d.running_subtasks, 2, "the subtasks keep retrying");
            break;
        }
        assert!(Instant::now() < deadline, "stall not visible: {d:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    w.job.blocking_shutdown(Duration::MAX);
    let took = t.elapsed();
    eprintln!("cancel with Redis frozen took {took:?}");
    assert!(took <= response_timeout * 2, "cancel took {took:?}");
    w.redis.server().thaw();
}

/// With Redis frozen, `shutdown` with a timeout of the response timeout plus a little
/// returns `true`: the cancel interrupts the job registry's heartbeat at once and its
/// removal of the instance runs within the subtasks' own bound.
#[test]
fn shutdown_with_redis_frozen_ends_within_the_response_timeout() {
    let response_timeout = Duration::from_secs(3);
    let mut w = start_word_count(AckMode::Offset, options(response_timeout));
    w.wait_outputs(300);
    w.redis.server().freeze();
    // Every subtask and the registry are now waiting on Redis.
    std::thread::sleep(Duration::from_millis(500));
    let grace = Duration::from_millis(700);
    let stopped = w.job.blocking_shutdown(response_timeout + grace);
    w.redis.server().thaw();
    assert!(
        stopped,
        "shutdown({:?}) with Redis frozen",
        response_timeout + grace
    );
}

/// The threads of this process named after the job's checkpoints and topic forwarders
/// (as `/proc` shows names: cut at 15 bytes). No other test here runs those.
fn checkpoint_and_forwarder_threads() -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(name) = std::fs::read_to_string(task.path().join("comm")) {
            let name = name.trim_end();
            if ["streaming-check", "streaming-forwa"]
                .iter()
                .any(|p| name.starts_with(p))
            {
                found.push(name.to_string());
            }
        }
    }
    found.sort();
    found
}

/// With Redis frozen, `shutdown` with a timeout of the response timeout plus a little
/// returns `true` for a job running every background task (registry, leader election,
/// periodic checkpoints, a topic forwarder), and they have all ended by then: the cancel
/// gives them one stop deadline, and what they would still do on Redis (release the
/// leader lease, forward the outboxes) is best effort within it.
#[test]
fn shutdown_with_redis_frozen_ends_every_background_task_within_the_response_timeout() {
    let response_timeout = Duration::from_secs(3);
    let mut w = start_word_count_with(AckMode::Offset, options(response_timeout), true);
    w.wait_outputs(300);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = w.job.diagnostics();
        if d.is_leader && d.latest_checkpoint_id.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "no leader checkpointing: {d:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        checkpoint_and_forwarder_threads(),
        ["streaming-check", "streaming-forwa"]
    );
    w.redis.server().freeze();
    // The subtasks, the registry, the leader, the checkpoints and the forwarder are now
    // waiting on Redis.
    std::thread::sleep(Duration::from_millis(500));
    let grace = Duration::from_millis(1500);
    let stopped = w.job.blocking_shutdown(response_timeout + grace);
    // A task's thread exits right after its end is counted.
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut left = checkpoint_and_forwarder_threads();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        left = checkpoint_and_forwarder_threads();
    }
    let leads = w.job.diagnostics().is_leader;
    w.redis.server().thaw();
    assert!(
        stopped,
        "shutdown({:?}) with Redis frozen",
        response_timeout + grace
    );
    assert_eq!(
        left,
        Vec::<String>::new(),
        "threads left after the shutdown"
    );
    assert!(!leads, "a stopped job does not lead");
}

#[test]
fn redis_restart_mid_run_xack() {
    survives_restart(AckMode::Xack);
}

#[test]
fn redis_restart_mid_run_offset() {
    survives_restart(AckMode::Offset);
}
