//! `await_flushed` and `await_caught_up` judge the whole job: partitions another process
//! holds, and partitions a killed process left leased, are done only once a live owner
//! has committed (and, for `await_flushed`, idle-flushed) them.

mod support;

use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::{Message, Mq, OutgoingMessage};
use streaming::redis::{AckMode, CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use streaming::time::{BoundedOutOfOrderness, TimeWindow, TumblingEventTimeWindows};
use streaming::BoxError;
use streaming::MemoryEnv;
use support::engine::{earliest, rt, wait_until};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

type Counted = (String, TimeWindow, u64);

/// Per key: one window that fires in the first run (the watermark passes it) and one
/// left open until an idle flush, on both partitions of the topic.
const INPUT: [&str; 16] = [
    "a,10", "b,10", "c,10", "d,10", "e,10", "f,10", "g,10", "h,10", "a,150", "b,150", "c,150",
    "d,150", "e,150", "f,150", "g,150", "h,150",
];

const OOO: Duration = Duration::from_millis(25);

struct Setup {
    redis: TestRedis,
    prefix: String,
    mq_opts: streaming::mq::MqOptions,
    rt: tokio::runtime::Runtime,
}

impl Setup {
    fn new(test: &str) -> Self {
        Setup {
            redis: TestRedis::private(),
            prefix: unique_prefix(test),
            mq_opts: fast_options(test).build().unwrap(),
            rt: rt(),
        }
    }

    fn mq(&self) -> Mq {
        self.rt
            .block_on(Mq::connect(self.redis.url(), self.mq_opts.clone()))
            .unwrap()
    }

    fn conn(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.redis.url()).unwrap();
        self.rt
            .block_on(client.get_multiplexed_async_connection())
            .unwrap()
    }

    /// Sends [`INPUT`] to a new 2-partition `topic`, keyed by the event's key.
    fn produce(&self, topic: &str) {
        let mq = self.mq();
        self.rt.block_on(mq.create_topic(topic, 2)).unwrap();
        let msgs: Vec<OutgoingMessage> = (INPUT.iter())
            .map(|p| OutgoingMessage::new(p.to_string()).key(p[..1].to_string()))
            .collect();
        (self.rt.block_on(mq.producer().send_batch(topic, &msgs))).unwrap();
    }

    /// Instance `instance` of job `job`: 100 ms tumbling counts per key of `topic`,
    /// flushing after `idle`.
    fn run(
        &self,
        (job, instance, mode): (&str, &str, AckMode),
        topic: &str,
        idle: Duration,
        out: &CollectSink<Counted>,
    ) -> JobClient {
        let config = RedisRuntimeConfig::builder()
            .job_name(job)
            .job_instance_id(instance)
            .state_key_prefix(&self.prefix)
            .mq_options(self.mq_opts.clone())
            .ack_mode(mode)
            .watermark_idle_timeout(Some(idle))
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(self.redis.url(), config).unwrap();
        env.from_mq_topic_with_options(topic, "g", earliest(32))
            .try_map(|m: Message| parse(&m))
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new(OOO).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
            .count()
            .sink(out.clone())
            .unwrap();
        env.blocking_start().unwrap()
    }
}

/// `key,ts` → `(key, ts)`.
fn parse(m: &Message) -> Result<(String, i64), BoxError> {
    let text = m.text()?;
    let (k, ts) = text.split_once(',').ok_or("not `key,ts`")?;
    Ok((k.to_string(), ts.parse()?))
}

fn sorted(mut v: Vec<Counted>) -> Vec<Counted> {
    v.sort_by_key(|(k, w, n)| (k.clone(), w.start(), *n));
    v
}

/// What the memory engine emits for [`INPUT`] on one partition: every window.
fn expected() -> Vec<Counted> {
    let events: Vec<(String, i64)> = (INPUT.iter())
        .map(|p| {
            let (k, ts) = p.split_once(',').unwrap();
            (k.to_string(), ts.parse().unwrap())
        })
        .collect();
    let env = MemoryEnv::new();
    let counts = env
        .from_collection(events)
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(OOO).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .collect_vec()
        .unwrap();
    sorted(counts)
}

/// Records per partition in `job`'s diagnostics.
fn records_per_partition(job: &JobClient) -> Vec<(u32, u64)> {
    let mut v: Vec<(u32, u64)> = (job.diagnostics().partitions.iter())
        .map(|p| (p.partition, p.records))
        .collect();
    v.sort_unstable();
    v
}

/// A process is killed (`kill -9`) with windows open on both partitions: its leases stay
/// in Redis, its membership heartbeat stops. A new process's `await_flushed` returns only
/// once it has taken both partitions and fired every window — before, it returned `true`
/// at once, judging the dead process's partitions by what they had committed.
#[test]
fn await_flushed_waits_for_the_partitions_a_killed_process_left_leased() {
    let s = Setup::new("flushed-killed");
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("killed-{mode:?}");
        let job_name = format!("killed-{mode:?}");
        s.produce(&topic);
        // The first run never idle-flushes: the windows [100, 200) stay open.
        let first = CollectSink::new();
        let job = s.run(
            (&job_name, "first", mode),
            &topic,
            Duration::from_secs(3600),
            &first,
        );
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        let per_partition = records_per_partition(&job);
        assert_eq!(per_partition.len(), 2, "{per_partition:?}");
        assert!(
            per_partition.iter().all(|(_, n)| *n > 0),
            "{per_partition:?}"
        );
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        assert_eq!(first.len(), 8, "{:?}", first.snapshot());
        // What a killed process leaves: each partition's lease (still valid for a lease
        // ttl) and a membership entry whose last heartbeat is three intervals old.
        let ghost = "ghost-subtask";
        let mq = s.mq();
        let mut conn = s.conn();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let (ttl, renew) = (1500, 200);
        let _: () =
            s.rt.block_on(conn.hset(
                mq.keys().assignment(&topic, "g"),
                format!("m:{ghost}"),
                now_ms - 3 * renew + ttl,
            ))
            .unwrap();
        for p in 0..2 {
            let token: Option<u64> = (s.rt)
                .block_on(conn.get(mq.keys().fence(&topic, p, "g")))
                .unwrap();
            let lease = format!("{} {ghost}", token.unwrap());
            let set: bool = (s.rt)
                .block_on(
                    redis::cmd("SET")
                        .arg(mq.keys().lease(&topic, p, "g"))
                        .arg(lease)
                        .arg("PX")
                        .arg(ttl)
                        .query_async(&mut conn),
                )
                .unwrap();
            assert!(set);
        }
        let second = CollectSink::new();
        let job = s.run(
            (&job_name, "second", mode),
            &topic,
            Duration::from_millis(300),
            &second,
        );
        assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
        let mut all = first.snapshot();
        all.extend(second.snapshot());
        assert_eq!(sorted(all), expected(), "{mode:?}");
        let flushes: Vec<u64> = (job.diagnostics().partitions.iter())
            .map(|p| p.idle_flushes)
            .collect();
        assert_eq!(flushes, vec![1, 1], "{mode:?}");
        assert!(job.blocking_shutdown(Duration::from_secs(30)));
    }
}

/// A lease whose owner missed its membership heartbeats is not "held by another
/// process": `await_caught_up` waits until a live subtask has taken the partition (before,
/// it returned while a dead owner's lease still held it).
#[test]
fn await_caught_up_does_not_count_a_lease_whose_owner_stopped_heartbeating() {
    let s = Setup::new("caught-up-ghost");
    let topic = "ghost";
    s.produce(topic);
    let out = CollectSink::new();
    let first = s.run(
        ("ghost", "first", AckMode::Offset),
        topic,
        Duration::from_secs(3600),
        &out,
    );
    assert!(first
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    assert!(first.blocking_shutdown(Duration::from_secs(30)));
    // Partition 1 leased for 2 s by a subtask that never heartbeats (a killed process).
    let mq = s.mq();
    let mut conn = s.conn();
    let lease = mq.keys().lease(topic, 1, "g");
    let _: () = (s.rt)
        .block_on(conn.pset_ex(&lease, "1000 ghost", 2000))
        .unwrap();
    let second = s.run(
        ("ghost", "second", AckMode::Offset),
        topic,
        Duration::from_secs(3600),
        &out,
    );
    assert!(second
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    let owned: Vec<u32> = (second.diagnostics().partitions.iter())
        .filter(|p| p.owned)
        .map(|p| p.partition)
        .collect();
    assert_eq!(owned, vec![0, 1]);
    assert!(second.blocking_shutdown(Duration::from_secs(30)));
}

/// Two processes of one job share its partitions. `await_flushed` in one waits for the
/// other's partitions too (before, it returned once its own were flushed), and a process
/// that handed a partition over no longer reports it awaiting a flush.
#[test]
fn await_flushed_waits_for_every_process_of_the_job() {
    let s = Setup::new("flushed-two");
    let topic = "two";
    s.produce(topic);
    // A never idle-flushes; it takes both partitions first.
    let out_a = CollectSink::new();
    let a = s.run(
        ("two", "a", AckMode::Xack),
        topic,
        Duration::from_secs(3600),
        &out_a,
    );
    assert!(a.blocking_await_caught_up(Duration::from_secs(60)).unwrap());
    assert_eq!(records_per_partition(&a).len(), 2);
    // B joins: the assignment gives it one partition, which it flushes after 300 ms.
    let out_b = CollectSink::new();
    let b = s.run(
        ("two", "b", AckMode::Xack),
        topic,
        Duration::from_millis(300),
        &out_b,
    );
    wait_until("B flushed the partition it took", &b, || {
        b.diagnostics()
            .partitions
            .iter()
            .any(|p| p.owned && p.idle_flushes == 1)
    });
    let moved = (b.diagnostics().partitions.iter())
        .find(|p| p.owned)
        .map(|p| p.partition)
        .unwrap();
    wait_until("A let the partition go", &a, || {
        (a.diagnostics().partitions.iter())
            .any(|p| p.partition == moved && !p.owned && !p.awaiting_flush)
    });
    // A's partition still holds open windows: not flushed.
    assert!(!b.blocking_await_flushed(Duration::from_secs(2)).unwrap());
    assert!(!a
        .blocking_await_flushed(Duration::from_millis(500))
        .unwrap());
    // A stops and hands its partition over; B flushes it.
    a.cancel();
    assert!(a.blocking_await_termination(Duration::from_secs(10)));
    assert!(b.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    let mut all = out_a.snapshot();
    all.extend(out_b.snapshot());
    assert_eq!(sorted(all), expected());
    assert!(b.blocking_shutdown(Duration::from_secs(30)));
}
