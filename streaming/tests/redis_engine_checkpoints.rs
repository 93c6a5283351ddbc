//! Checkpoints of the Redis engine against a private redis-server: a restore reproduces
//! exactly what an uninterrupted run produced after the checkpoint (keyed state, window
//! panes and watermarks, at another parallelism), periodic checkpoints and retention,
//! single flight, drain timeout, trimmed streams, a refused restore (changes no
//! partition), a stale leader's checkpoint, a leader that lost its lease mid-checkpoint
//! and leads again, parts of deleted checkpoints.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use streaming::api::ListStateDescriptor;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, OutgoingMessage};
use streaming::redis::{
    AckMode, CheckpointStatus, CollectSink, JobClient, RedisEnv, RedisRuntimeConfigBuilder,
};
use streaming::time::{TimeWindow, TumblingEventTimeWindows};
use support::engine::{earliest, setup, wait_until, EngineSetup as Setup};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
const PARTITIONS: u32 = 4;

type Counted = (String, u64);
type Windowed = (String, TimeWindow, u64);

/// The two pipelines of the job: a keyed running count of topic `c` and a 100 ms
/// tumbling event-time window count of topic `w` (event time = message timestamp).
struct Outputs {
    counts: CollectSink<Counted>,
    windows: CollectSink<Windowed>,
}

fn register(env: &RedisEnv, topics: (&str, &str)) -> Outputs {
    let out = Outputs {
        counts: CollectSink::new(),
        windows: CollectSink::new(),
    };
    env.from_mq_topic_with_options(topics.0, "g", earliest(7))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(out.counts.clone())
        .unwrap();
    env.from_mq_topic_with_options(topics.1, "g", earliest(5))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .sink(out.windows.clone())
        .unwrap();
    out
}

impl Setup {
    fn ck_config(&self, job: &str, mode: AckMode) -> RedisRuntimeConfigBuilder {
        self.config(job)
            .ack_mode(mode)
            .checkpoint_key_prefix(format!("{}:ck:", self.prefix))
    }

    /// `n` messages to each topic from message `from` on: keys `k0`..`k9`; the window
    /// topic's timestamps grow 7 ms per message.
    fn produce_both(&self, topics: (&str, &str), from: usize, n: usize) {
        let producer = self.mq().producer();
        let (mut c, mut w) = (Vec::new(), Vec::new());
        for i in from..from + n {
            let key = format!("k{}", i % 10);
            c.push(OutgoingMessage::new(key.clone()).key(key.clone()));
            w.push(
                OutgoingMessage::new(key.clone())
                    .key(key)
                    .timestamp_ms(1_000 + 7 * i as i64),
            );
        }
        self.rt.block_on(producer.send_batch(topics.0, &c)).unwrap();
        self.rt.block_on(producer.send_batch(topics.1, &w)).unwrap();
    }

    fn topics(&self, name: &str) -> (String, String) {
        let topics = (format!("{name}-c"), format!("{name}-w"));
        let mq = self.mq();
        for t in [&topics.0, &topics.1] {
            self.rt.block_on(mq.create_topic(t, PARTITIONS)).unwrap();
        }
        topics
    }

    fn conn(&self) -> redis::aio::MultiplexedConnection {
        self.rt
            .block_on(
                redis::Client::open(self.redis.url())
                    .unwrap()
                    .get_multiplexed_async_connection(),
            )
            .unwrap()
    }

    /// Every count state hash of the job (one per partition of the count topic).
    fn counts(&self, job: &str, topic: &str) -> Vec<HashMap<String, String>> {
        let mut conn = self.conn();
        (0..PARTITIONS)
            .map(|p| {
                let hash = format!(
                    "{}:{job}:{{{topic}:{p}}}:g:{topic}.g/3:process:count",
                    self.prefix
                );
                self.rt.block_on(conn.hgetall(&hash)).unwrap()
            })
            .collect()
    }
}

fn caught_up(job: &JobClient) {
    assert!(
        job.blocking_await_caught_up(Duration::from_secs(60))
            .unwrap(),
        "{:#?}",
        job.diagnostics()
    );
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn windows_sorted(v: Vec<Windowed>) -> Vec<(String, i64, i64, u64)> {
    sorted(
        v.into_iter()
            .map(|(k, w, n)| (k, w.start(), w.end(), n))
            .collect(),
    )
}

/// A restore at parallelism 3 of a checkpoint taken at 2 reproduces exactly the outputs
/// and state the uninterrupted run produced after the checkpoint, in both ack modes.
#[test]
fn a_restore_at_parallelism_3_replays_exactly_what_the_run_at_2_produced_after_the_checkpoint() {
    for mode in [AckMode::Offset, AckMode::Xack] {
        let s = setup(&format!("ck-restore-{mode:?}"));
        let job_name = "restore";
        let names = s.topics("r");
        let topics = (names.0.as_str(), names.1.as_str());
        s.produce_both(topics, 0, 300);
        let env = RedisEnv::try_with_config(
            s.redis.url(),
            s.ck_config(job_name, mode)
                .pipeline_parallelism(2)
                .build()
                .unwrap(),
        )
        .unwrap();
        let first = register(&env, topics);
        let job = env.blocking_start().unwrap();
        caught_up(&job);
        let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
        assert_eq!(ck.status, CheckpointStatus::Complete, "{ck:?}");
        assert_eq!(ck.pipelines.len(), 2);
        assert_eq!(ck.parallelism, 2);
        assert_eq!(job.blocking_latest_checkpoint().unwrap(), Some(ck.clone()));
        assert_eq!(job.diagnostics().latest_checkpoint_id, Some(ck.id));
        let (counts_at_ck, windows_at_ck) = (first.counts.len(), first.windows.len());
        assert_eq!(counts_at_ck, 300);
        s.produce_both(topics, 300, 200);
        caught_up(&job);
        assert!(job.blocking_shutdown(Duration::from_secs(30)));
        let counts_after = first.counts.snapshot()[counts_at_ck..].to_vec();
        let windows_after = first.windows.snapshot()[windows_at_ck..].to_vec();
        assert_eq!(counts_after.len(), 200);
        assert!(
            !windows_after.is_empty(),
            "windows fired after the checkpoint"
        );
        let state = s.counts(job_name, topics.0);

        let env = RedisEnv::try_with_config(
            s.redis.url(),
            s.ck_config(job_name, mode)
                .pipeline_parallelism(3)
                .build()
                .unwrap(),
        )
        .unwrap();
        let second = register(&env, topics);
        env.restore_from_checkpoint(ck.id).unwrap();
        let job = env.blocking_start().unwrap();
        caught_up(&job);
        assert!(job.blocking_shutdown(Duration::from_secs(30)));
        assert_eq!(
            sorted(second.counts.snapshot()),
            sorted(counts_after),
            "{mode:?}"
        );
        assert_eq!(
            windows_sorted(second.windows.snapshot()),
            windows_sorted(windows_after),
            "{mode:?}"
        );
        assert_eq!(s.counts(job_name, topics.0), state, "{mode:?}");
    }
}

const LOG: ListStateDescriptor<u32> = ListStateDescriptor::persistent("log");

/// A job whose keyed list state (one Redis list per key) logs each record's number.
fn register_log(env: &RedisEnv, topic: &str) -> CollectSink<(String, Vec<u32>)> {
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(3))
        .map(|m: Message| {
            let (k, n) = m.text().unwrap().split_once(',').unwrap();
            (k.to_string(), n.parse::<u32>().unwrap())
        })
        .key_by(|e: &(String, u32)| e.0.clone())
        .process(|(k, n): (String, u32), ctx, out| {
            let mut log = ctx.state(&LOG)?;
            log.add(n);
            out.collect((k, log.get().to_vec()));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    out
}

fn send_log(s: &Setup, topic: &str, keys: &[&str], from: u32) {
    let producer = s.mq().producer();
    let msgs: Vec<OutgoingMessage> = (keys.iter().enumerate())
        .map(|(i, k)| OutgoingMessage::new(format!("{k},{}", from + i as u32)).key(k.to_string()))
        .collect();
    s.rt.block_on(producer.send_batch(topic, &msgs)).unwrap();
}

/// Per-key collections (a list per key in its own Redis key) come back as they were,
/// and a key first seen after the checkpoint starts empty again.
#[test]
fn a_restore_brings_back_per_key_collections_and_drops_newer_keys() {
    let s = setup("ck-collections");
    let topic = "log";
    s.rt.block_on(s.mq().create_topic(topic, 2)).unwrap();
    let old: Vec<&str> = ["a", "b", "c", "a", "b", "a"].to_vec();
    send_log(&s, topic, &old, 0);
    let config = || s.ck_config("log", AckMode::Offset).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    let first = register_log(&env, topic);
    let job = env.blocking_start().unwrap();
    caught_up(&job);
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(ck.status, CheckpointStatus::Complete);
    let at_ck = first.len();
    send_log(&s, topic, &["a", "new", "c", "new"], 100);
    caught_up(&job);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    let after = first.snapshot()[at_ck..].to_vec();
    assert!(
        after.contains(&("new".to_string(), vec![101, 103])),
        "{after:?}"
    );
    assert!(
        after.contains(&("a".to_string(), vec![0, 3, 5, 100])),
        "{after:?}"
    );

    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    let second = register_log(&env, topic);
    env.restore_from_checkpoint(ck.id).unwrap();
    let job = env.blocking_start().unwrap();
    caught_up(&job);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    assert_eq!(sorted(second.snapshot()), sorted(after));
}

/// Periodic checkpoints under load; retention keeps exactly `checkpoints_to_keep`
/// complete ones and deletes the others' keys.
#[test]
fn periodic_checkpoints_run_under_load_and_retention_keeps_exactly_three() {
    let s = setup("ck-periodic");
    let names = s.topics("p");
    let topics = (names.0.as_str(), names.1.as_str());
    let config = s
        .ck_config("periodic", AckMode::Offset)
        .checkpoint_interval(Duration::from_millis(50))
        .checkpoints_to_keep(3)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = register(&env, topics);
    let job = env.blocking_start().unwrap();
    for round in 0..20 {
        s.produce_both(topics, round * 50, 50);
        std::thread::sleep(Duration::from_millis(30));
    }
    caught_up(&job);
    wait_until("ten checkpoints", &job, || {
        job.diagnostics().latest_checkpoint_id.unwrap_or(0) >= 10
    });
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    assert_eq!(out.counts.len(), 1000);
    let stored = s.rt.block_on(env.checkpoints()).unwrap();
    let complete: Vec<u64> = (stored.iter())
        .filter(|c| c.status == CheckpointStatus::Complete)
        .map(|c| c.id)
        .collect();
    assert_eq!(complete.len(), 3, "{stored:?}");
    let newest = *complete.last().unwrap();
    assert!(newest >= 10, "{stored:?}");
    assert!(
        stored
            .iter()
            .all(|c| c.id >= complete[0] || c.status != CheckpointStatus::Complete),
        "older checkpoints are deleted: {stored:?}"
    );
    // No key of a deleted checkpoint is left.
    let mut conn = s.conn();
    let pattern = format!("{}:ck:periodic:1:*", s.prefix);
    let left: Vec<String> = s.rt.block_on(conn.keys(&pattern)).unwrap();
    assert!(left.is_empty(), "{left:?}");
    let pattern = format!("{}:ck:periodic:{newest}:*", s.prefix);
    let kept: Vec<String> = s.rt.block_on(conn.keys(&pattern)).unwrap();
    assert!(kept.iter().any(|k| k.ends_with(":part")), "{kept:?}");
}

/// A one-partition job whose map sleeps 1.5 s on the payload `slow`.
fn register_slow(env: &RedisEnv, topic: &str) -> CollectSink<String> {
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(1))
        .map(|m: Message| {
            let text = m.text().unwrap().to_string();
            if text == "slow" {
                std::thread::sleep(Duration::from_millis(1500));
            }
            text
        })
        .sink(out.clone())
        .unwrap();
    out
}

/// A partition that does not reach a batch boundary within `checkpoint_drain_timeout`
/// fails the checkpoint (it never hangs, never completes); one checkpoint runs at a time.
#[test]
fn a_checkpoint_fails_past_its_drain_timeout_and_runs_one_at_a_time() {
    let s = setup("ck-drain");
    let topic = "slow";
    s.rt.block_on(s.mq().create_topic(topic, 1)).unwrap();
    let config = s
        .ck_config("drain", AckMode::Offset)
        .checkpoint_drain_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = register_slow(&env, topic);
    let job = std::sync::Arc::new(env.blocking_start().unwrap());
    s.produce(topic, &["fast".to_string()]);
    caught_up(&job);
    let first = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(first.status, CheckpointStatus::Complete);
    s.produce(topic, &["slow".to_string()]);
    wait_until("the slow record is read", &job, || job.in_flight() > 0);
    let running = {
        let job = std::sync::Arc::clone(&job);
        std::thread::spawn(move || job.blocking_trigger_checkpoint_now())
    };
    wait_until("the checkpoint runs", &job, || {
        job.diagnostics().checkpointing
    });
    assert_eq!(
        job.blocking_trigger_checkpoint_now().unwrap(),
        None,
        "single flight"
    );
    let failed = running.join().unwrap().unwrap().unwrap();
    assert_eq!(failed.status, CheckpointStatus::Failed, "{failed:?}");
    assert!(
        failed
            .failure
            .as_deref()
            .unwrap()
            .contains("0 of 1 partitions wrote their part within checkpoint_drain_timeout (300ms); missing: slow/g/0"),
        "{failed:?}"
    );
    assert_eq!(
        job.blocking_latest_checkpoint().unwrap().unwrap().id,
        first.id
    );
    // Two more fail while the record is still running: failures do not pile up, only the
    // newest is kept.
    let second = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    let third = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(
        (second.status, third.status),
        (CheckpointStatus::Failed, CheckpointStatus::Failed)
    );
    let ids: Vec<u64> = (job.blocking_checkpoints().unwrap().iter())
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, [first.id, third.id], "older failures deleted");
    caught_up(&job);
    let next = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(next.status, CheckpointStatus::Complete);
    assert!(next.id > failed.id);
    assert_eq!(
        job.blocking_latest_checkpoint().unwrap().unwrap().id,
        next.id
    );
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    assert_eq!(out.snapshot(), ["fast", "slow"]);
    let stored = s.rt.block_on(env.checkpoints()).unwrap();
    assert!(
        stored.iter().all(|c| c.id != failed.id),
        "the failed one is swept once a newer one completed: {stored:?}"
    );
}

/// A leader that lost its lease while a checkpoint ran cannot complete it: the write is
/// refused, the checkpoint never becomes the latest, and the process stops leading.
#[test]
fn a_stale_leader_cannot_complete_a_checkpoint() {
    let s = setup("ck-stale-leader");
    let topic = "slow";
    s.rt.block_on(s.mq().create_topic(topic, 1)).unwrap();
    let config = s
        .ck_config("stale", AckMode::Offset)
        .leader_election_enabled(true)
        .leader_lease_ttl(Duration::from_secs(30))
        .leader_renew_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let _out = register_slow(&env, topic);
    let job = std::sync::Arc::new(env.blocking_start().unwrap());
    wait_until("leading", &job, || job.diagnostics().is_leader);
    let d = job.diagnostics();
    assert_eq!(d.leader_instance_id.as_deref(), Some("test"));
    assert!(d.fencing_token > 0);
    s.produce(topic, &["slow".to_string()]);
    wait_until("the slow record is read", &job, || job.in_flight() > 0);
    let running = {
        let job = std::sync::Arc::clone(&job);
        std::thread::spawn(move || job.blocking_trigger_checkpoint_now())
    };
    // Opened (its record written), not only triggered: a lease taken before the open
    // would refuse the open itself, and no checkpoint would exist.
    wait_until("the checkpoint runs", &job, || {
        job.diagnostics().checkpointing && job.blocking_checkpoints().unwrap().len() == 1
    });
    // Another process takes the lease (as after this one paused past its TTL).
    let mut conn = s.conn();
    let leader = format!("{}:ck:{{stale}}:leader", s.prefix);
    let token: u64 =
        s.rt.block_on(conn.incr(format!("{leader}:token"), 1))
            .unwrap();
    let _: () =
        s.rt.block_on(conn.set(&leader, format!("{token} thief")))
            .unwrap();
    let refused = running.join().unwrap().unwrap_err();
    assert!(
        refused.to_string().contains("lost the leader lease"),
        "{refused}"
    );
    assert!(!job.diagnostics().is_leader);
    assert_eq!(job.blocking_latest_checkpoint().unwrap(), None);
    let stored = job.blocking_checkpoints().unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].status, CheckpointStatus::Pending);
    assert_eq!(stored[0].fencing_token, d.fencing_token);
    let follower = job.blocking_trigger_checkpoint_now().unwrap_err();
    assert!(
        follower.to_string().contains("not the job's leader"),
        "{follower}"
    );
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
}

/// Set when the records `hold` may go on (see [`register_held`]).
static HELD_RELEASED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A one-partition job whose map holds the payload `hold` until [`HELD_RELEASED`] is set
/// (at most 60 s): the partition reaches no batch boundary meanwhile.
fn register_held(env: &RedisEnv, topic: &str) -> CollectSink<String> {
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(1))
        .map(|m: Message| {
            let text = m.text().unwrap().to_string();
            let end = std::time::Instant::now() + Duration::from_secs(60);
            while text == "hold"
                && !HELD_RELEASED.load(std::sync::atomic::Ordering::SeqCst)
                && std::time::Instant::now() < end
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            text
        })
        .sink(out.clone())
        .unwrap();
    out
}

/// Polls `check` every 20 ms for at most `bound` (a bound the behaviour under test
/// promises, far below `checkpoint_drain_timeout`).
fn within(bound: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + bound;
    while !check() {
        assert!(
            std::time::Instant::now() < end,
            "not within {bound:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A leader whose lease is lost while its checkpoint waits for a part (another process
/// took it, then left), and which then leads again under a new token as the only
/// candidate, ends that wait at once, not at `checkpoint_drain_timeout` (60 s here): it
/// checkpoints in its new term, the old checkpoint's end leaves the new term's lease
/// alone, and the abandoned checkpoint is swept with all its keys.
#[test]
fn a_leader_that_lost_its_lease_mid_checkpoint_leads_again_and_checkpoints_at_once() {
    let s = setup("ck-relead");
    let topic = "held";
    s.rt.block_on(s.mq().create_topic(topic, 1)).unwrap();
    let config = s
        .ck_config("relead", AckMode::Offset)
        .leader_election_enabled(true)
        .leader_lease_ttl(Duration::from_secs(2))
        .leader_renew_interval(Duration::from_millis(200))
        .checkpoint_drain_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = register_held(&env, topic);
    let job = std::sync::Arc::new(env.blocking_start().unwrap());
    wait_until("leading", &job, || job.diagnostics().is_leader);
    let first_term = job.diagnostics().fencing_token;
    s.produce(topic, &["hold".to_string()]);
    wait_until("the held record is read", &job, || job.in_flight() > 0);
    let trigger = || {
        let job = std::sync::Arc::clone(&job);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(job.blocking_trigger_checkpoint_now()));
        rx
    };
    let old = trigger();
    wait_until("the checkpoint waits for the held part", &job, || {
        job.blocking_checkpoints().unwrap().len() == 1
    });
    let abandoned = job.blocking_checkpoints().unwrap()[0].clone();
    assert_eq!(abandoned.fencing_token, first_term);
    // The lease is lost: another process took it under a new token, then its lease
    // expired (it died).
    let mut conn = s.conn();
    let leader = format!("{}:ck:{{relead}}:leader", s.prefix);
    let taken: u64 =
        s.rt.block_on(conn.incr(format!("{leader}:token"), 1))
            .unwrap();
    let _: () = s.rt.block_on(conn.del(&leader)).unwrap();
    let ended = old
        .recv_timeout(Duration::from_secs(15))
        .expect("the old checkpoint still waits for its part after its term ended");
    let refused = ended.unwrap_err().to_string();
    assert!(refused.contains("lost the leader lease"), "{refused}");
    // The only candidate leads again, under the next token, and checkpoints in its new
    // term while the held part of the old checkpoint is still missing.
    let term = taken + 1;
    within(Duration::from_secs(15), "leads again", || {
        let d = job.diagnostics();
        d.is_leader && d.fencing_token == term
    });
    let new = trigger();
    within(
        Duration::from_secs(15),
        "a checkpoint of the new term opens",
        || (job.blocking_checkpoints().unwrap().iter()).any(|c| c.fencing_token == term),
    );
    HELD_RELEASED.store(true, std::sync::atomic::Ordering::SeqCst);
    let done = new
        .recv_timeout(Duration::from_secs(15))
        .unwrap()
        .unwrap()
        .expect("not single flight: the old checkpoint ended");
    assert_eq!(
        (done.status, done.fencing_token),
        (CheckpointStatus::Complete, term),
        "{done:?}"
    );
    // The new term's lease was never cleared (no third token).
    let held: Option<String> = s.rt.block_on(conn.get(&leader)).unwrap();
    assert_eq!(held, Some(format!("{term} test")));
    let d = job.diagnostics();
    assert_eq!((d.is_leader, d.fencing_token), (true, term));
    // Retention swept the abandoned checkpoint, keys and all.
    let stored = job.blocking_checkpoints().unwrap();
    assert_eq!(stored, std::slice::from_ref(&done));
    let pattern = format!("{}:ck:relead:{}:*", s.prefix, abandoned.id);
    let left: Vec<String> = s.rt.block_on(conn.keys(&pattern)).unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    assert_eq!(out.snapshot(), ["hold"]);
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A partition owner that still sees a checkpoint open after retention deleted it (its
/// list of open checkpoints is a little old) leaves nothing of it for good: a part
/// written after the checkpoint left the id set is swept by the next retention as an
/// orphan, and once retention deleted a part, a new owner that still sees the
/// checkpoint open writes nothing of it again (neither copies nor its report).
#[test]
fn parts_of_a_checkpoint_retention_deleted_are_swept_and_never_written_again() {
    let s = setup("ck-orphans");
    let topic = "log";
    s.rt.block_on(s.mq().create_topic(topic, 1)).unwrap();
    send_log(&s, topic, &["a", "b", "a"], 0);
    let start = |keep: u32| {
        let config = s
            .ck_config("orphan", AckMode::Offset)
            .checkpoints_to_keep(keep)
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        register_log(&env, topic);
        env.blocking_start().unwrap()
    };
    let job = start(3);
    caught_up(&job);
    let first = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(first.status, CheckpointStatus::Complete);
    // Checkpoint `x` is no longer in the id set (deleted), but an owner still sees it
    // open; it comes before any later checkpoint (an earlier deadline).
    let mut conn = s.conn();
    let job_keys = format!("{}:ck:{{orphan}}", s.prefix);
    let x: u64 =
        s.rt.block_on(conn.incr(format!("{job_keys}:seq"), 1))
            .unwrap();
    let open = format!("{job_keys}:open");
    let _: i64 =
        s.rt.block_on(conn.zadd(&open, x, now_ms() + 20_000))
            .unwrap();
    let copies = format!("{}:ck:orphan:{x}:*", s.prefix);
    let mut look = conn.clone();
    let mut keys_of_x = || {
        let mut keys: Vec<String> = s.rt.block_on(look.keys(&copies)).unwrap();
        for k in [
            format!("{job_keys}:meta:{x}"),
            format!("{job_keys}:parts:{x}"),
        ] {
            if s.rt.block_on(look.exists(&k)).unwrap() {
                keys.push(k);
            }
        }
        keys.sort();
        keys
    };
    wait_until("the owner wrote a part of x", &job, || {
        keys_of_x().iter().any(|k| k.ends_with(":part"))
    });
    let written = keys_of_x();
    assert!(
        written.iter().any(|k| k.contains(":k:")),
        "a key's collection was copied: {written:?}"
    );
    let _: i64 = s.rt.block_on(conn.zrem(&open, x)).unwrap();
    let next = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(next.status, CheckpointStatus::Complete);
    assert_eq!(
        keys_of_x(),
        Vec::<String>::new(),
        "retention swept the orphan"
    );
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    // A new owner (another process, without retention) still sees x open: it writes
    // nothing of it before the part of the next checkpoint (x comes first).
    let _: i64 =
        s.rt.block_on(conn.zadd(&open, x, now_ms() + 20_000))
            .unwrap();
    let job = start(0);
    let last = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(last.status, CheckpointStatus::Complete);
    assert_eq!(keys_of_x(), Vec::<String>::new(), "nothing written again");
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
}

/// A restore refuses, naming the partition, when entries after the checkpoint's offset
/// were trimmed; nothing is restored then.
#[test]
fn a_restore_refuses_when_entries_after_the_offset_were_trimmed() {
    let s = setup("ck-trimmed");
    let names = s.topics("t");
    let topics = (names.0.as_str(), names.1.as_str());
    s.produce_both(topics, 0, 40);
    let config = || s.ck_config("trim", AckMode::Offset).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    register(&env, topics);
    let job = env.blocking_start().unwrap();
    caught_up(&job);
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    s.produce_both(topics, 40, 40);
    caught_up(&job);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    let state = s.counts("trim", topics.0);
    let mut conn = s.conn();
    let p = streaming::mq::partition_for_key("k0", PARTITIONS);
    let stream = s.mq().keys().stream(topics.0, p);
    let _: u64 =
        s.rt.block_on(
            redis::cmd("XTRIM")
                .arg(&stream)
                .arg("MAXLEN")
                .arg(0)
                .query_async(&mut conn),
        )
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    register(&env, topics);
    env.restore_from_checkpoint(ck.id).unwrap();
    let e = env.blocking_start().unwrap_err().to_string();
    assert!(
        e.contains(&format!("partition {p} of `{}`", topics.0)) && e.contains("trimmed"),
        "{e}"
    );
    assert_eq!(s.counts("trim", topics.0), state, "nothing restored");
}

/// What a restore rewinds, per partition of both topics: the count state (count topic),
/// the commit frontier and the consumer group's last-delivered id.
type Positions = (Vec<HashMap<String, String>>, Vec<(Option<String>, String)>);

impl Setup {
    fn positions(&self, job: &str, topics: (&str, &str)) -> Positions {
        let mut conn = self.conn();
        let keys = self.mq().keys().clone();
        let mut offsets = Vec::new();
        for topic in [topics.0, topics.1] {
            for p in 0..PARTITIONS {
                let frontier: Option<String> = self
                    .rt
                    .block_on(conn.get(keys.frontier(topic, p, "g")))
                    .unwrap();
                let groups: redis::streams::StreamInfoGroupsReply = self
                    .rt
                    .block_on(conn.xinfo_groups(keys.stream(topic, p)))
                    .unwrap();
                let group = groups.groups.into_iter().find(|g| g.name == "g").unwrap();
                offsets.push((frontier, group.last_delivered_id));
            }
        }
        (self.counts(job, topics.0), offsets)
    }
}

/// A restore refused on one partition's lease (held by another restorer) changes no
/// partition, before or after that one, and leaves no lease of its own behind; once the
/// lease is free, the same restore rewinds every partition: the run replays exactly what
/// the first run produced after the checkpoint.
#[test]
fn a_restore_refused_on_a_lease_changes_no_partition_and_can_run_again() {
    let s = setup("ck-refused");
    let job_name = "refused";
    let names = s.topics("f");
    let topics = (names.0.as_str(), names.1.as_str());
    s.produce_both(topics, 0, 100);
    let config = || s.ck_config(job_name, AckMode::Offset).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    let first = register(&env, topics);
    let job = env.blocking_start().unwrap();
    caught_up(&job);
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(ck.status, CheckpointStatus::Complete, "{ck:?}");
    let (counts_at_ck, windows_at_ck) = (first.counts.len(), first.windows.len());
    s.produce_both(topics, 100, 100);
    caught_up(&job);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    let counts_after = first.counts.snapshot()[counts_at_ck..].to_vec();
    let windows_after = first.windows.snapshot()[windows_at_ck..].to_vec();
    assert_eq!(counts_after.len(), 100);
    let before = s.positions(job_name, topics);

    // Another restorer holds the lease of the last partition a restore goes through.
    let keys = s.mq().keys().clone();
    let last = PARTITIONS - 1;
    let held = keys.lease(topics.1, last, "g");
    let mut conn = s.conn();
    let _: () =
        s.rt.block_on(conn.set_ex(&held, "7 other-restore", 120))
            .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    register(&env, topics);
    env.restore_from_checkpoint(ck.id).unwrap();
    let e = env.blocking_start().unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "partition {last} of `{}` (group `g`) is leased by `7 other-restore`",
            topics.1
        )),
        "{e}"
    );
    assert_eq!(
        s.positions(job_name, topics),
        before,
        "no partition restored"
    );
    for topic in [topics.0, topics.1] {
        for p in 0..PARTITIONS {
            let lease: Option<String> = s.rt.block_on(conn.get(keys.lease(topic, p, "g"))).unwrap();
            let expected = (topic == topics.1 && p == last).then(|| "7 other-restore".into());
            assert_eq!(lease, expected, "lease of partition {p} of `{topic}`");
        }
    }

    // The lease freed, the same restore rewinds every partition.
    let _: i64 = s.rt.block_on(conn.del(&held)).unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config()).unwrap();
    let second = register(&env, topics);
    env.restore_from_checkpoint(ck.id).unwrap();
    let job = env.blocking_start().unwrap();
    assert_eq!(job.diagnostics().latest_checkpoint_id, Some(ck.id));
    caught_up(&job);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    assert_eq!(sorted(second.counts.snapshot()), sorted(counts_after));
    assert_eq!(
        windows_sorted(second.windows.snapshot()),
        windows_sorted(windows_after)
    );
    assert_eq!(s.positions(job_name, topics), before);
}

/// `restore_from_checkpoint` of an unknown id fails the start; `restore_from_latest_checkpoint`
/// restores the latest, and is skipped (the job starts) while another process runs the
/// job, where an explicit restore fails naming that process.
#[test]
fn restores_need_a_complete_checkpoint_and_a_stopped_job() {
    let s = setup("ck-latest");
    let names = s.topics("l");
    let topics = (names.0.as_str(), names.1.as_str());
    s.produce_both(topics, 0, 30);
    let env = RedisEnv::try_with_config(
        s.redis.url(),
        s.ck_config("latest", AckMode::Offset).build().unwrap(),
    )
    .unwrap();
    register(&env, topics);
    env.restore_from_checkpoint(99).unwrap();
    let e = env.blocking_start().unwrap_err().to_string();
    assert!(e.contains("no checkpoint 99"), "{e}");
    let env = RedisEnv::try_with_config(
        s.redis.url(),
        s.ck_config("latest", AckMode::Offset).build().unwrap(),
    )
    .unwrap();
    register(&env, topics);
    let job = env.blocking_start().unwrap();
    caught_up(&job);
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    s.produce_both(topics, 30, 20);
    caught_up(&job);
    // Another process of the job runs (instance `test`).
    let latest = |instance: &str| {
        let config = s
            .ck_config("latest", AckMode::Offset)
            .job_instance_id(instance)
            .restore_from_latest_checkpoint(true)
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        let out = register(&env, topics);
        (env, out)
    };
    let (env2, _) = latest("second");
    let joined = env2.blocking_start().unwrap();
    assert_eq!(joined.diagnostics().latest_checkpoint_id, None, "skipped");
    assert!(joined.blocking_shutdown(Duration::from_secs(30)));
    let (env3, _) = latest("third");
    env3.restore_from_checkpoint(ck.id).unwrap();
    let e = env3.blocking_start().unwrap_err().to_string();
    assert!(e.contains("running in other processes (test,"), "{e}");
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    // Stopped: the latest checkpoint comes back and the 20 later records run again.
    let (env4, out) = latest("fourth");
    let job = env4.blocking_start().unwrap();
    assert_eq!(job.diagnostics().latest_checkpoint_id, Some(ck.id));
    caught_up(&job);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    assert_eq!(out.counts.len(), 20);
}

/// A consumer group destroyed while the job runs (with periodic checkpoints) is rebuilt
/// from the partitions' committed offsets: no replay from `0`, no skip to `$`; and
/// checkpoints go on completing.
#[test]
fn a_group_destroyed_while_the_job_runs_recovers_from_its_committed_offsets() {
    for mode in [AckMode::Offset, AckMode::Xack] {
        let s = setup(&format!("ck-group-loss-{mode:?}"));
        let names = s.topics("g");
        let topics = (names.0.as_str(), names.1.as_str());
        s.produce_both(topics, 0, 100);
        let config = s
            .ck_config("loss", mode)
            .checkpoint_interval(Duration::from_millis(50))
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        let out = register(&env, topics);
        let job = env.blocking_start().unwrap();
        caught_up(&job);
        let before = job
            .blocking_latest_checkpoint()
            .unwrap()
            .map_or(0, |c| c.id);
        let mut conn = s.conn();
        for p in 0..PARTITIONS {
            let stream = s.mq().keys().stream(topics.0, p);
            let _: i64 =
                s.rt.block_on(
                    redis::cmd("XGROUP")
                        .arg("DESTROY")
                        .arg(&stream)
                        .arg("g")
                        .query_async(&mut conn),
                )
                .unwrap();
        }
        s.produce_both(topics, 100, 50);
        wait_until("every record counted", &job, || out.counts.len() >= 150);
        caught_up(&job);
        wait_until("a checkpoint after the loss", &job, || {
            job.diagnostics().latest_checkpoint_id.unwrap_or(0) > before + 1
        });
        assert!(job.blocking_shutdown(Duration::from_secs(30)));
        let counts = out.counts.snapshot();
        assert_eq!(counts.len(), 150, "{mode:?}: nothing replayed or skipped");
        let distinct: std::collections::BTreeSet<&Counted> = counts.iter().collect();
        assert_eq!(distinct.len(), 150, "{mode:?}: no count emitted twice");
        assert!(counts.contains(&("k0".to_string(), 15)), "{mode:?}");
    }
}

/// A partition owner that finds its part already written (an earlier owner died between
/// writing it and telling the coordinator) tells the coordinator itself.
#[test]
fn a_part_written_by_an_earlier_owner_is_reported_by_the_next() {
    let s = setup("ck-reported");
    let topic = "slow";
    s.rt.block_on(s.mq().create_topic(topic, 1)).unwrap();
    let start = || {
        let config = s.ck_config("reported", AckMode::Offset).build().unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        register_slow(&env, topic);
        env.blocking_start().unwrap()
    };
    let job = start();
    s.produce(topic, &["fast".to_string()]);
    caught_up(&job);
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(ck.status, CheckpointStatus::Complete);
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    // As if the writer had died before its report: no report, the checkpoint still open.
    let mut conn = s.conn();
    let base = format!("{}:ck:{{reported}}", s.prefix);
    let parts = format!("{base}:parts:{}", ck.id);
    let _: i64 = s.rt.block_on(conn.hdel(&parts, "slow/g/0")).unwrap();
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 60_000;
    let _: i64 =
        s.rt.block_on(conn.zadd(format!("{base}:open"), ck.id, deadline))
            .unwrap();
    // The next owner finds the part written and reports it.
    let job = start();
    wait_until("the part reported again", &job, || {
        let reported: Option<String> = s.rt.block_on(conn.hget(&parts, "slow/g/0")).unwrap();
        reported.is_some()
    });
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
}
