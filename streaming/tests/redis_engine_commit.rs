//! A batch commit is one transaction: guard script, the state and sink writes as plain
//! commands, tail script. When the guard refuses (another owner took the lease while the
//! batch ran, or a written key holds another type), the writes that follow it are undone
//! by the tail: Redis holds exactly what it held before the commit.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::Message;
use streaming::redis::{AckMode, JobClient, RedisEnv, RedisListSink};
use streaming::time::{BoundedOutOfOrderness, TumblingEventTimeWindows};
use streaming::BoxError;
use support::engine::{earliest, setup, wait_until, EngineSetup};
use support::redis_server::TestRedis;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// Stops the job's processing at the record "slow" until released.
#[derive(Clone, Default)]
struct Gate {
    reached: Arc<AtomicBool>,
    released: Arc<AtomicBool>,
}

impl Gate {
    /// Called by the process function: blocks at "slow" until released (60 s at most).
    fn pass(&self, word: &str) {
        if word != "slow" || self.released.load(Ordering::SeqCst) {
            return;
        }
        self.reached.store(true, Ordering::SeqCst);
        let end = Instant::now() + Duration::from_secs(60);
        while !self.released.load(Ordering::SeqCst) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A keyed count of topic `c` (one partition) into state `count` and list sink `out`; the
/// record "bad" fails for good (dead-lettered at once).
fn start(s: &EngineSetup, mode: AckMode, gate: &Gate) -> JobClient {
    let config = s.config("commit").ack_mode(mode).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let gate = gate.clone();
    env.from_mq_topic_with_options("c", "g", earliest(50))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(move |w: String, ctx, out| {
            gate.pass(&w);
            if w == "bad" {
                return Err(streaming::Error::permanent("a bad word").into());
            }
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            out.collect(format!("{w}={n}"));
            Ok(())
        })
        .sink(RedisListSink::<String>::text("out").unwrap())
        .unwrap();
    env.blocking_start().unwrap()
}

/// What the job's commits write on partition 0: state hash, sink list, committed
/// position, every key of the partition's slot, and the group's pending entries.
type Snapshot = (
    HashMap<String, String>,
    Vec<String>,
    String,
    Vec<String>,
    u64,
);

fn snapshot(s: &EngineSetup) -> Snapshot {
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mq = s.mq();
    let keys = mq.keys();
    let hash = format!("{}:commit:{{c:0}}:g:c.g/3:process:count", s.prefix);
    s.rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let counts: HashMap<String, String> = c.hgetall(&hash).await.unwrap();
        // (A list the test turned into a string reads as empty.)
        let out: Vec<String> = (c.lrange(RedisListSink::<String>::key_for("out", "c", 0), 0, -1))
            .await
            .unwrap_or_default();
        let frontier: Option<String> = c.get(keys.frontier("c", 0, "g")).await.unwrap();
        let stream = keys.stream("c", 0);
        let queue_prefix = &stream[..stream.find('{').unwrap()];
        let mut slot: Vec<String> = c.keys(format!("{queue_prefix}*")).await.unwrap();
        let state: Vec<String> = c.keys(format!("{}*", s.prefix)).await.unwrap();
        slot.extend(state);
        slot.retain(|k| k.contains("{c:0}"));
        slot.sort();
        // (Offset mode reads without a group's pending entries: none.)
        let summary: redis::Value = redis::cmd("XPENDING")
            .arg(&stream)
            .arg("g")
            .query_async(&mut c)
            .await
            .unwrap_or(redis::Value::Nil);
        let pending = match summary {
            redis::Value::Array(v) => redis::from_redis_value(&v[0]).unwrap(),
            _ => 0,
        };
        (counts, out, frontier.unwrap_or_default(), slot, pending)
    })
}

/// Takes partition 0 of `topic` from the job (a new fencing token, as a new owner's take
/// would) while the job is held at the gate, releases it, and waits until the job's
/// commit of that batch is refused.
fn steal_and_release(s: &EngineSetup, topic: &str, gate: &Gate, job: &JobClient) {
    let mq = s.mq();
    let keys = mq.keys();
    let client = redis::Client::open(s.redis.url()).unwrap();
    s.rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let token: u64 = c.incr(keys.fence(topic, 0, "g"), 1).await.unwrap();
        let _: () = c
            .set_ex(keys.lease(topic, 0, "g"), format!("{token} thief"), 60)
            .await
            .unwrap();
    });
    gate.released.store(true, Ordering::SeqCst);
    wait_until("the job finds partition 0 fenced", job, || {
        job.diagnostics().partitions.iter().any(|p| p.fenced >= 1)
    });
}

/// Deletes the lease of partition 0 of `topic` (the test's stolen one): the job takes the
/// partition back.
fn free_lease(s: &EngineSetup, topic: &str) {
    let client = redis::Client::open(s.redis.url()).unwrap();
    let lease = s.mq().keys().lease(topic, 0, "g");
    s.rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = c.del(lease).await.unwrap();
    });
}

fn counts(words: &[&str]) -> HashMap<String, String> {
    let mut n: HashMap<String, u64> = HashMap::new();
    for w in words {
        *n.entry(format!("\"{w}\"")).or_default() += 1;
    }
    n.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

/// The job is held inside a batch (at "slow") while the test takes the lease, as a new
/// owner would; the batch's commit is refused and leaves Redis exactly as it was; once the
/// lease is free again, every record is counted once.
fn a_fenced_commit_writes_nothing(mode: AckMode, test: &str) {
    let s = setup(test);
    let mq = s.mq();
    s.rt.block_on(mq.create_topic("c", 1)).unwrap();
    let first = ["a", "b", "a", "c"];
    s.produce("c", &first.map(String::from));
    let gate = Gate::default();
    let job = start(&s, mode, &gate);
    wait_until("the first batch committed", &job, || {
        snapshot(&s).0 == counts(&first)
    });
    let second = ["a", "d", "slow", "b"];
    s.produce("c", &second.map(String::from));
    wait_until("the job reaches \"slow\"", &job, || {
        gate.reached.load(Ordering::SeqCst)
    });
    let before = snapshot(&s);
    steal_and_release(&s, "c", &gate, &job);
    let after = snapshot(&s);
    assert_eq!(after, before, "the refused commit changed Redis");
    assert_eq!(after.0, counts(&first));

    free_lease(&s, "c");
    let all: Vec<&str> = first.iter().chain(&second).copied().collect();
    wait_until("every record counted", &job, || {
        snapshot(&s).0 == counts(&all)
    });
    job.blocking_shutdown(Duration::MAX);
    let (state, out, _, slot, pending) = snapshot(&s);
    assert_eq!(pending, 0);
    assert_eq!(state, counts(&all));
    assert_eq!(
        out,
        ["a=1", "b=1", "a=2", "c=1", "a=3", "d=1", "slow=1", "b=2"],
        "the sink list holds each output once"
    );
    assert!(
        !slot
            .iter()
            .any(|k| k.contains("\0stash") || k.contains("commitundo")),
        "{slot:?}"
    );
}

/// A record dead-lettered inside a batch whose commit is then refused (the test takes the
/// lease, as a new owner would) is read again when the batch runs again; it is not
/// dead-lettered a second time. (In Offset mode nothing but the `settled` set marks it as
/// handled until the offset commits.)
fn a_record_dead_lettered_before_a_refused_commit_is_dead_lettered_once(mode: AckMode, test: &str) {
    let s = setup(test);
    let mq = s.mq();
    let keys = mq.keys();
    s.rt.block_on(mq.create_topic("c", 1)).unwrap();
    s.produce("c", &["a", "bad", "slow", "b"].map(String::from));
    let gate = Gate::default();
    let job = start(&s, mode, &gate);
    wait_until("the job reaches \"slow\"", &job, || {
        gate.reached.load(Ordering::SeqCst)
    });
    let dead_letters = || -> Vec<String> {
        let dead = s.rt.block_on(mq.dead_letters("c", 100)).unwrap();
        (dead.iter())
            .map(|d| String::from_utf8_lossy(&d.payload).into_owned())
            .collect()
    };
    assert_eq!(
        dead_letters(),
        ["bad"],
        "dead-lettered before the batch ran again"
    );
    steal_and_release(&s, "c", &gate, &job);
    free_lease(&s, "c");
    wait_until("every good record counted", &job, || {
        snapshot(&s).0 == counts(&["a", "slow", "b"])
    });
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(dead_letters(), ["bad"], "one dead letter");
    let (state, out, _, slot, _) = snapshot(&s);
    assert_eq!(state, counts(&["a", "slow", "b"]));
    assert_eq!(out, ["a=1", "slow=1", "b=1"]);
    assert!(
        !slot.contains(&keys.settled("c", 0, "g")),
        "the commit cleared the settled set: {slot:?}"
    );
}

#[test]
fn a_record_dead_lettered_before_a_refused_commit_is_dead_lettered_once_offset_mode() {
    a_record_dead_lettered_before_a_refused_commit_is_dead_lettered_once(
        AckMode::Offset,
        "dlq-once-offset",
    );
}

#[test]
fn a_record_dead_lettered_before_a_refused_commit_is_dead_lettered_once_xack_mode() {
    a_record_dead_lettered_before_a_refused_commit_is_dead_lettered_once(
        AckMode::Xack,
        "dlq-once-xack",
    );
}

#[test]
fn a_fenced_commit_writes_nothing_offset_mode() {
    a_fenced_commit_writes_nothing(AckMode::Offset, "fenced-commit-offset");
}

#[test]
fn a_fenced_commit_writes_nothing_xack_mode() {
    a_fenced_commit_writes_nothing(AckMode::Xack, "fenced-commit-xack");
}

/// A commit whose state hash is found holding a string writes nothing — not the other
/// keys' state, not the sink list, not the acknowledgement — and says which key.
#[test]
fn a_commit_into_a_key_of_another_type_writes_nothing() {
    let s = setup("commit-wrongtype");
    let mq = s.mq();
    s.rt.block_on(mq.create_topic("c", 1)).unwrap();
    let gate = Gate::default();
    gate.released.store(true, Ordering::SeqCst);
    let first = ["a", "b"];
    s.produce("c", &first.map(String::from));
    let job = start(&s, AckMode::Offset, &gate);
    wait_until("the first batch committed", &job, || {
        snapshot(&s).0 == counts(&first)
    });
    // The sink list becomes a string; the state hash stays a hash.
    let client = redis::Client::open(s.redis.url()).unwrap();
    let list = RedisListSink::<String>::key_for("out", "c", 0);
    s.rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = c.del(&list).await.unwrap();
        let _: () = c.set(&list, "not a list").await.unwrap();
    });
    let before = snapshot(&s);
    s.produce("c", &["a", "c"].map(String::from));
    wait_until("the commit fails naming the list", &job, || {
        job.diagnostics().partitions.iter().any(|p| {
            let e = p.last_error.as_deref().unwrap_or("");
            e.contains("WRONGTYPE") && e.contains(&list) && e.contains("nothing of the batch")
        })
    });
    let after = snapshot(&s);
    job.cancel();
    job.blocking_await_termination(Duration::from_secs(30));
    assert_eq!(after.0, before.0, "no state written");
    assert_eq!(after.2, before.2, "nothing acknowledged");
    assert_eq!(after.3, before.3, "no key created or left behind");
    assert_eq!(after.4, before.4, "nothing acknowledged");
}

fn parse(m: &Message) -> Result<(String, i64), BoxError> {
    let text = m.text()?;
    let (k, ts) = text.split_once(',').ok_or("not `key,ts`")?;
    Ok((k.to_string(), ts.parse()?))
}

/// The main sink and the late-data side output append to one list: a refused commit of a
/// batch that writes both leaves the list as it was (the list was moved aside once and
/// put back once; a second undo of the same key deleted the whole list).
#[test]
fn a_fenced_commit_keeps_a_list_two_sinks_write() {
    let s = setup("fenced-commit-two-sinks");
    let mq = s.mq();
    s.rt.block_on(mq.create_topic("w", 1)).unwrap();
    let gate = Gate::default();
    let config = s.config("dup").ack_mode(AckMode::Offset).build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let g = gate.clone();
    env.from_mq_topic_with_options("w", "g", earliest(50))
        .try_map(move |m: Message| {
            let e = parse(&m)?;
            if e.1 == 400 {
                g.pass("slow");
            }
            Ok::<_, BoxError>(e)
        })
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .side_output_late_data(RedisListSink::<(String, i64)>::new("out").unwrap())
        .count()
        .sink(RedisListSink::new("out").unwrap())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let client = redis::Client::open(s.redis.url()).unwrap();
    let list = RedisListSink::<String>::key_for("out", "w", 0);
    let lrange = || -> Vec<String> {
        s.rt.block_on(async {
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            c.lrange(&list, 0, -1).await.unwrap()
        })
    };
    s.produce("w", &["a,10", "a,250"].map(String::from));
    wait_until("the first window's count", &job, || !lrange().is_empty());
    let before = lrange();
    // A late element (side output) and a window firing (main sink) in one batch.
    s.produce("w", &["a,20", "a,260", "a,400"].map(String::from));
    wait_until("the job reaches ts 400", &job, || {
        gate.reached.load(Ordering::SeqCst)
    });
    steal_and_release(&s, "w", &gate, &job);
    let after = lrange();
    job.cancel();
    job.blocking_await_termination(Duration::from_secs(30));
    assert_eq!(after, before, "the refused commit changed the sink list");
}

/// Under `maxmemory` with `noeviction`, Redis refuses a script a write that may grow
/// memory only while the script has written nothing yet. A commit whose plain writes all
/// shrink memory (here one `HDEL`) runs even when the server reached its limit after the
/// commands were queued; the tail must then still move the committed offset (its first
/// write is a `DEL`), else the batch's writes stay applied without their offset and are
/// applied again. Runs the engine's guard and tail scripts as the commit sends them, on a
/// private server.
#[test]
fn a_commit_at_the_memory_limit_moves_the_offset_with_its_writes() {
    let redis = TestRedis::private();
    let rt = support::engine::rt();
    let guard = concat!(
        include_str!("../src/mq/lua/lease_held.lua"),
        include_str!("../src/redis/partition/commit/lua/commit_guard.lua")
    );
    let tail = concat!(
        include_str!("../src/mq/lua/advance.lua"),
        include_str!("../src/redis/partition/commit/lua/commit_tail.lua")
    );
    let client = redis::Client::open(redis.url()).unwrap();
    rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let mut admin = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::pipe()
            .cmd("SET")
            .arg("{p}:lease")
            .arg("5 me")
            .cmd("SET")
            .arg("{p}:fence")
            .arg("5")
            .cmd("HSET")
            .arg("{p}:state")
            .arg("a")
            .arg("1")
            .arg("b")
            .arg("2")
            .cmd("SET")
            .arg("{p}:offset")
            .arg("5-0")
            .query_async(&mut admin)
            .await
            .unwrap();
        let _: () = redis::cmd("MULTI").query_async(&mut c).await.unwrap();
        let queued = [
            redis::cmd("EVAL")
                .arg(guard)
                .arg(4)
                .arg(&["{p}:lease", "{p}:fence", "{p}:undo", "{p}:state"][..])
                .arg(&["5 me", "1500", "hash"][..])
                .clone(),
            redis::cmd("HDEL").arg("{p}:state").arg("a").clone(),
            redis::cmd("EVAL")
                .arg(tail)
                .arg(6)
                .arg(
                    &[
                        "{p}:s",
                        "{p}:acked",
                        "{p}:offset",
                        "{p}:undo",
                        "{p}:settled",
                        "{p}:state",
                    ][..],
                )
                .arg(&["o", "g", "1", "7-0", "", ""][..])
                .clone(),
        ];
        for cmd in &queued {
            let _: () = cmd.query_async(&mut c).await.unwrap();
        }
        let _: () = redis::pipe()
            .cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("noeviction")
            .cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg("1")
            .query_async(&mut admin)
            .await
            .unwrap();
        let exec: redis::Value = redis::cmd("EXEC").query_async(&mut c).await.unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg("0")
            .query_async(&mut admin)
            .await
            .unwrap();
        let state: HashMap<String, String> = admin.hgetall("{p}:state").await.unwrap();
        let offset: String = admin.get("{p}:offset").await.unwrap();
        assert_eq!(
            (state.len(), offset.as_str()),
            (1, "7-0"),
            "the transaction's replies: {exec:?}"
        );
    });
}
