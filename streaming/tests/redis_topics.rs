//! The topic forwarder against a real Redis: its script appends a record once per
//! forwarding mark (stream ids compared by milliseconds then sequence, as numbers);
//! outbox records reach the target topic's partitions as queue messages (key, payload,
//! timestamp, idempotency header); a restarted forwarder goes on after the marks; two
//! forwarders side by side append each record once, in order; a job forwards its topic
//! sink's outputs itself.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::{partition_for_key, Mq, HEADER_IDEMPOTENCY_KEY};
use streaming::redis::{RedisTopicForwarder, TopicForwardStats};
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

const SOURCE: &str = "in";
const TARGET: &str = "mid";

type Conn = redis::aio::MultiplexedConnection;

struct Setup {
    _redis: TestRedis,
    mq: Mq,
    conn: Conn,
    forwarder: RedisTopicForwarder,
}

async fn setup(test: &str) -> Setup {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options(test).build().unwrap()).await;
    mq.create_topic(TARGET, 2).await.unwrap();
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let forwarder = RedisTopicForwarder::builder(&mq, SOURCE, TARGET)
        .partitions(0..2)
        .poll_interval(Duration::from_millis(20))
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
        .build()
        .unwrap();
    Setup {
        _redis: redis,
        mq,
        conn,
        forwarder,
    }
}

/// An outbox entry as the topic sink writes it: (entry id, key).
type Entry = (&'static str, Option<&'static str>);

/// Replaces source partition `p`'s outbox by `entries` (explicit entry ids; fields `id`,
/// `payload`, `ts`, `key`), as a crash that forwards them again would leave it; the
/// group goes with the stream and the forwarder makes it again.
async fn outbox(s: &mut Setup, p: u32, entries: &[Entry]) {
    let key = s.forwarder.outbox_key(p);
    let _: () = s.conn.del(&key).await.unwrap();
    for (id, k) in entries {
        let mut fields = vec![
            ("id", format!("job/{SOURCE}/{p}/{id}/0")),
            ("payload", format!("{{\"v\":\"{p}@{id}\"}}")),
            ("ts", "1700".to_string()),
        ];
        if let Some(k) = k {
            fields.push(("key", (*k).to_string()));
        }
        let _: String = s.conn.xadd(&key, *id, &fields).await.unwrap();
    }
}

/// Runs a forwarder until both outboxes are empty (forwarded and trimmed); its counters.
async fn forward(s: &Setup) -> TopicForwardStats {
    let running = s.forwarder.start().await.unwrap();
    let keys = [s.forwarder.outbox_key(0), s.forwarder.outbox_key(1)];
    eventually("outboxes forwarded", DEADLINE, || {
        let mut conn = s.conn.clone();
        let keys = keys.clone();
        async move {
            let mut left = 0;
            for k in &keys {
                left += conn.xlen::<_, usize>(k).await.unwrap();
            }
            (left == 0).then_some(())
        }
    })
    .await;
    let stats = running.stats();
    running.stop().await;
    stats
}

/// The payloads of target partition `q`, in stream order, with each message's key and
/// idempotency header.
async fn target(s: &mut Setup, q: u32) -> Vec<(String, Option<String>, String)> {
    let key = s.mq.keys().stream(TARGET, q);
    let reply: redis::streams::StreamRangeReply = s.conn.xrange_all(&key).await.unwrap();
    reply
        .ids
        .into_iter()
        .map(|e| {
            let text = |f: &str| e.get::<String>(f);
            let headers: BTreeMap<String, String> =
                serde_json::from_str(&text("h").unwrap()).unwrap();
            assert_eq!(
                text("ts").as_deref(),
                Some("1700"),
                "the record's timestamp"
            );
            (
                text("p").unwrap(),
                text("k"),
                headers[HEADER_IDEMPOTENCY_KEY].clone(),
            )
        })
        .collect()
}

fn payload(p: u32, id: &str) -> String {
    format!("{{\"v\":\"{p}@{id}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_become_messages_and_a_restart_goes_on_after_the_marks() {
    let mut s = setup("topics-marks").await;
    let first0: [Entry; 4] = [
        ("5-1", Some("a")),
        ("5-2", Some("b")),
        ("9-0", None),
        ("100-0", None),
    ];
    let first1: [Entry; 2] = [("9-0", None), ("10-9", None)];
    outbox(&mut s, 0, &first0).await;
    outbox(&mut s, 1, &first1).await;
    let st = forward(&s).await;
    assert_eq!((st.appended, st.skipped, st.failed), (6, 0, 0));

    // Keyed records go where the producer puts their key; unkeyed ones to the source
    // partition (modulo 2), in outbox order.
    let (qa, qb) = (partition_for_key("a", 2), partition_for_key("b", 2));
    let mut want: BTreeMap<u32, Vec<(String, Option<String>, String)>> = BTreeMap::new();
    for (p, entries) in [(0u32, &first0[..]), (1, &first1[..])] {
        for (id, k) in entries {
            let q = match k {
                Some("a") => qa,
                Some(_) => qb,
                None => p,
            };
            let stable = format!("job/{SOURCE}/{p}/{id}/0");
            want.entry(q)
                .or_default()
                .push((payload(p, id), k.map(str::to_string), stable));
        }
    }
    for q in 0..2 {
        assert_eq!(target(&mut s, q).await, want[&q], "target partition {q}");
    }

    // The same records again (a forwarder that died before trimming them): the next one
    // reads the outbox from its start, appends nothing (the marks have every record) and
    // trims them.
    outbox(&mut s, 0, &first0).await;
    outbox(&mut s, 1, &first1).await;
    let st = forward(&s).await;
    assert_eq!((st.appended, st.skipped), (0, 6));
    for q in 0..2 {
        assert_eq!(
            target(&mut s, q).await,
            want[&q],
            "target partition {q} unchanged"
        );
    }

    // Ids around the marks (p0 → q0 at 100-0; p1 → q1 at 10-9): only what is after them,
    // by ms then seq as numbers ("10-10" is after "10-9", "99-9" before "100-0").
    outbox(
        &mut s,
        0,
        &[("99-9", None), ("100-0", None), ("100-1", None)],
    )
    .await;
    outbox(
        &mut s,
        1,
        &[("10-9", None), ("10-10", None), ("11-0", None)],
    )
    .await;
    let st = forward(&s).await;
    assert_eq!((st.appended, st.skipped), (3, 3));
    let tail = |v: Vec<(String, Option<String>, String)>, n: usize| -> Vec<String> {
        v[v.len() - n..].iter().map(|m| m.0.clone()).collect()
    };
    assert_eq!(target(&mut s, 0).await.len(), want[&0].len() + 1);
    assert_eq!(target(&mut s, 1).await.len(), want[&1].len() + 2);
    assert_eq!(tail(target(&mut s, 0).await, 1), [payload(0, "100-1")]);
    assert_eq!(
        tail(target(&mut s, 1).await, 2),
        [payload(1, "10-10"), payload(1, "11-0")]
    );
    let mark = |q: u32, p: u32| {
        let key = s.forwarder.marks_key(q);
        let mut conn = s.conn.clone();
        async move {
            let m: Option<String> = conn
                .hget(key, format!("topic.{TARGET}/{SOURCE}/{p}"))
                .await
                .unwrap();
            m
        }
    };
    // A mark is the last record's position: its outbox entry and its index there.
    assert_eq!(mark(0, 0).await.as_deref(), Some("100-1/0"));
    assert_eq!(mark(1, 1).await.as_deref(), Some("11-0/0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_target_or_source_topic_fails_the_start() {
    let s = setup("topics-missing").await;
    let f = RedisTopicForwarder::builder(&s.mq, SOURCE, "nope")
        .partitions([0])
        .build()
        .unwrap();
    let err = f.start().await.unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    // Without partitions given it reads the source topic's count, so that must exist.
    let f = RedisTopicForwarder::builder(&s.mq, "absent", TARGET)
        .build()
        .unwrap();
    let err = f.start().await.unwrap_err();
    assert!(err.to_string().contains("absent"), "{err}");
    assert!(RedisTopicForwarder::builder(&s.mq, SOURCE, "a b")
        .build()
        .is_err());
}

/// The forwarding script as the forwarder runs it.
const FORWARD: &str = concat!(
    include_str!("../src/redis/sinks/topics/lua/positions.lua"),
    include_str!("../src/redis/sinks/topics/lua/topic_forward.lua")
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_appends_once_per_mark_comparing_ids_as_numbers() {
    let mut s = setup("topics-script").await;
    let stream = s.mq.keys().stream(TARGET, 0);
    let marks = s.forwarder.marks_key(0);
    // (mark field, record position `{entry id}/{index}`, appended?) in call order.
    let calls = [
        ("o/in/0", "9-0/0", 1),
        ("o/in/0", "9-0/0", 0),
        ("o/in/0", "10-0/0", 1), // "10-0" < "9-0" as text
        ("o/in/0", "9-9/0", 0),
        ("o/in/0", "10-9/0", 1),
        ("o/in/0", "10-10/0", 1), // "10-10" < "10-9" as text
        ("o/in/0", "10-10/0", 0),
        ("o/in/0", "10-9/0", 0),
        ("o/in/1", "1-0/0", 1), // another source partition: its own mark
        ("o/in/0", "9-99/0", 0),
        ("o/in/0", "100-0/0", 1),
        ("o/in/0", "100-0/2", 1), // a later record of the same entry
        ("o/in/0", "100-0/1", 0),
        ("o/in/0", "100-0/10", 1), // "10" < "2" as text
        ("o/in/0", "100-0/10", 0),
    ];
    let mut appended = Vec::new();
    for (field, id, want) in &calls {
        let n: i64 = redis::cmd("EVAL")
            .arg(FORWARD)
            .arg(2)
            .arg(&stream)
            .arg(&marks)
            .arg(*field)
            .arg("")
            .arg("")
            .arg(*id)
            .arg(2)
            .arg("p")
            .arg(format!("{field}@{id}"))
            .query_async(&mut s.conn)
            .await
            .unwrap();
        assert_eq!(n, *want, "{field} {id}");
        if n == 1 {
            appended.push(format!("{field}@{id}"));
        }
    }
    let reply: redis::streams::StreamRangeReply = s.conn.xrange_all(&stream).await.unwrap();
    let got: Vec<String> = reply.ids.iter().map(|e| e.get("p").unwrap()).collect();
    assert_eq!(got, appended);
    let mark: String = s.conn.hget(&marks, "o/in/0").await.unwrap();
    assert_eq!(mark, "100-0/10");
    for malformed in ["12", "12-0", "12-0/"] {
        let bad: redis::RedisResult<i64> = redis::cmd("EVAL")
            .arg(FORWARD)
            .arg(2)
            .arg(&stream)
            .arg(&marks)
            .arg("o/in/0")
            .arg("")
            .arg("")
            .arg(malformed)
            .arg(0)
            .query_async(&mut s.conn)
            .await;
        assert!(
            bad.is_err(),
            "a malformed position `{malformed}` is refused"
        );
    }
    // A call that follows another of its pipeline (records after `required`) appends
    // nothing unless the mark reached `required`: the earlier call may have failed.
    let follow = |required: &'static str, position: &'static str| {
        let mut conn = s.conn.clone();
        let (stream, marks) = (stream.clone(), marks.clone());
        async move {
            redis::cmd("EVAL")
                .arg(FORWARD)
                .arg(2)
                .arg(&stream)
                .arg(&marks)
                .arg("o/in/0")
                .arg("")
                .arg(required)
                .arg(position)
                .arg(2)
                .arg("p")
                .arg(position)
                .query_async::<i64>(&mut conn)
                .await
        }
    };
    let err = follow("200-0/0", "200-0/1").await.unwrap_err();
    assert!(err.to_string().contains("not forwarded yet"), "{err}");
    assert_eq!(follow("100-0/10", "200-0/0").await.unwrap(), 1);
    let mark: String = s.conn.hget(&marks, "o/in/0").await.unwrap();
    assert_eq!(
        mark, "200-0/0",
        "only the follower whose predecessor went through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_forwarders_side_by_side_append_each_record_once_in_order() {
    let mut s = setup("topics-twice").await;
    let (a, b) = (
        s.forwarder.start().await.unwrap(),
        s.forwarder.start().await.unwrap(),
    );
    const N: usize = 300;
    for n in 0..N {
        let p = (n % 2) as u32;
        let key = s.forwarder.outbox_key(p);
        let k = format!("k{}", n % 5);
        let fields = [
            ("id", format!("job/{SOURCE}/{p}/{n}-0/0")),
            ("payload", format!("{n}")),
            ("ts", "1700".to_string()),
            ("key", k),
        ];
        let _: String = s.conn.xadd(&key, "*", &fields).await.unwrap();
    }
    let streams = [s.mq.keys().stream(TARGET, 0), s.mq.keys().stream(TARGET, 1)];
    eventually("every record in the target", DEADLINE, || {
        let mut conn = s.conn.clone();
        let streams = streams.clone();
        async move {
            let mut n = 0;
            for k in &streams {
                n += conn.xlen::<_, usize>(k).await.unwrap();
            }
            (n >= N).then_some(())
        }
    })
    .await;
    let (sa, sb) = (a.stats(), b.stats());
    a.stop().await;
    b.stop().await;
    assert_eq!(sa.appended + sb.appended, N as u64, "{sa:?} {sb:?}");
    let mut all = Vec::new();
    for q in 0..2 {
        let got = target(&mut s, q).await;
        // Per source partition (and key), the records keep their outbox order.
        let mut last: BTreeMap<(u32, String), usize> = BTreeMap::new();
        for (payload, key, _) in &got {
            let n: usize = payload.parse().unwrap();
            let k = key.clone().unwrap();
            assert_eq!(partition_for_key(&k, 2), q, "{k} in its partition");
            if let Some(prev) = last.insert(((n % 2) as u32, k), n) {
                assert!(prev < n, "{prev} before {n} in partition {q}");
            }
            all.push(n);
        }
    }
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "each record once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_forwards_its_topic_sink_itself() {
    use streaming::mq::{Message, OutgoingMessage, StartPolicy, SubscriptionOptions};
    use streaming::redis::{RedisEnv, RedisRuntimeConfig, RedisTopicSink};

    let mut s = setup("topics-job").await;
    s.mq.create_topic("src", 2).await.unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("fwd")
        .mq_options(s.mq.options().clone())
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s._redis.url(), config).unwrap();
    let options = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .build()
        .unwrap();
    env.from_mq_topic_with_options("src", "g", options)
        .map(|m: Message| format!("{}!", m.text().unwrap()))
        .sink(
            RedisTopicSink::text(TARGET)
                .unwrap()
                .key(|v: &String| v.clone())
                .timestamp(|v: &String| v.len() as i64),
        )
        .unwrap();
    let job = env.blocking_start().unwrap();
    const N: usize = 20;
    let msgs: Vec<OutgoingMessage> = (0..N)
        .map(|i| OutgoingMessage::new(format!("v{i}")).key(format!("k{i}")))
        .collect();
    s.mq.producer().send_batch("src", &msgs).await.unwrap();
    let streams = [s.mq.keys().stream(TARGET, 0), s.mq.keys().stream(TARGET, 1)];
    eventually("the job's outputs in the target topic", DEADLINE, || {
        let mut conn = s.conn.clone();
        let streams = streams.clone();
        async move {
            let mut n = 0;
            for k in &streams {
                n += conn.xlen::<_, usize>(k).await.unwrap();
            }
            (n >= N).then_some(())
        }
    })
    .await;
    assert!(job.shutdown(Duration::from_secs(30)).await);
    let mut got = Vec::new();
    for (q, stream) in (0u32..).zip(&streams) {
        let reply: redis::streams::StreamRangeReply = s.conn.xrange_all(stream).await.unwrap();
        for e in reply.ids {
            let text = |f: &str| e.get::<String>(f).unwrap();
            let payload = text("p");
            assert_eq!(text("k"), payload, "the key function's key");
            assert_eq!(partition_for_key(&payload, 2), q, "partitioned by key");
            assert_eq!(
                text("ts"),
                payload.len().to_string(),
                "the timestamp function's"
            );
            let headers: BTreeMap<String, String> = serde_json::from_str(&text("h")).unwrap();
            assert!(headers[HEADER_IDEMPOTENCY_KEY].starts_with("fwd/g/src/"));
            got.push(payload);
        }
    }
    got.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("v{i}!")).collect();
    want.sort();
    assert_eq!(got, want);
}

/// A job that shuts down forwards what its last batches committed before `shutdown`
/// returns: here its forwarder cannot start while the job runs (the target topic does not
/// exist yet), so every output is still in the outbox at the cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_forwards_what_the_outbox_holds() {
    use streaming::mq::{Message, OutgoingMessage, StartPolicy, SubscriptionOptions};
    use streaming::redis::{RedisEnv, RedisRuntimeConfig, RedisTopicSink};

    const LATE: &str = "late";
    let mut s = setup("topics-drain").await;
    s.mq.create_topic("src", 2).await.unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("drain")
        .mq_options(s.mq.options().clone())
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s._redis.url(), config).unwrap();
    let options = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .build()
        .unwrap();
    env.from_mq_topic_with_options("src", "g", options)
        .map(|m: Message| m.text().unwrap().to_owned())
        .sink(RedisTopicSink::text(LATE).unwrap())
        .unwrap();
    let job = env.blocking_start().unwrap();
    const N: usize = 30;
    let msgs: Vec<OutgoingMessage> = (0..N)
        .map(|i| OutgoingMessage::new(format!("v{i}")))
        .collect();
    s.mq.producer().send_batch("src", &msgs).await.unwrap();
    assert!(
        job.await_caught_up(DEADLINE).await.unwrap(),
        "the job processed its input"
    );
    let outboxes = [0, 1].map(|p| {
        format!(
            "{}:outbox:topic.{LATE}:{}",
            s.mq.options().key_prefix,
            s.mq.keys().hash_tag("src", p)
        )
    });
    // One entry per batch commit, holding `n` records.
    let mut held = 0;
    for k in &outboxes {
        let entries: redis::streams::StreamRangeReply = s.conn.xrange_all(k).await.unwrap();
        held += (entries.ids.iter())
            .map(|e| e.get::<usize>("n").unwrap())
            .sum::<usize>();
    }
    assert_eq!(held, N, "every output waits in the outboxes");
    s.mq.create_topic(LATE, 2).await.unwrap();
    assert!(job.shutdown(Duration::from_secs(60)).await);
    let mut got = Vec::new();
    for q in 0..2 {
        let stream = s.mq.keys().stream(LATE, q);
        let reply: redis::streams::StreamRangeReply = s.conn.xrange_all(&stream).await.unwrap();
        got.extend(reply.ids.iter().map(|e| e.get::<String>("p").unwrap()));
    }
    got.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("v{i}")).collect();
    want.sort();
    assert_eq!(got, want, "forwarded at the shutdown, each once");
}

/// Two pipelines of one job (two consumer groups of one source) into one target topic:
/// each output once, each with an idempotency key of its own (the group is part of it),
/// so a downstream job deduplicating by it drops nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pipelines_into_one_topic_give_each_output_its_own_id() {
    use streaming::mq::{Message, OutgoingMessage, StartPolicy, SubscriptionOptions};
    use streaming::redis::{RedisEnv, RedisRuntimeConfig, RedisTopicSink};

    let mut s = setup("topics-groups").await;
    s.mq.create_topic("src", 2).await.unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("two")
        .mq_options(s.mq.options().clone())
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s._redis.url(), config).unwrap();
    for group in ["g1", "g2"] {
        let options = SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .build()
            .unwrap();
        env.from_mq_topic_with_options("src", group, options)
            .map(move |m: Message| format!("{group}:{}", m.text().unwrap()))
            .sink(RedisTopicSink::text(TARGET).unwrap())
            .unwrap();
    }
    let job = env.blocking_start().unwrap();
    const N: usize = 40;
    let msgs: Vec<OutgoingMessage> = (0..N)
        .map(|i| OutgoingMessage::new(format!("v{i}")))
        .collect();
    s.mq.producer().send_batch("src", &msgs).await.unwrap();
    assert!(job.await_caught_up(DEADLINE).await.unwrap());
    assert!(job.shutdown(Duration::from_secs(60)).await);
    let (mut payloads, mut ids) = (Vec::new(), std::collections::BTreeSet::new());
    for q in 0..2 {
        let stream = s.mq.keys().stream(TARGET, q);
        let reply: redis::streams::StreamRangeReply = s.conn.xrange_all(&stream).await.unwrap();
        for e in reply.ids {
            payloads.push(e.get::<String>("p").unwrap());
            let headers: BTreeMap<String, String> =
                serde_json::from_str(&e.get::<String>("h").unwrap()).unwrap();
            ids.insert(headers[HEADER_IDEMPOTENCY_KEY].clone());
        }
    }
    payloads.sort();
    let mut want: Vec<String> = (0..N)
        .flat_map(|i| [format!("g1:v{i}"), format!("g2:v{i}")])
        .collect();
    want.sort();
    assert_eq!(payloads, want, "each pipeline's outputs once");
    assert_eq!(ids.len(), 2 * N, "one idempotency key per output");
}

/// A source partition whose records cannot be appended (its target partition's key holds
/// a string) waits its own backoff — here a minute — while the other partition goes on
/// forwarding what arrives, read after read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_source_partition_does_not_hold_up_the_others() {
    let mut s = setup("topics-failing").await;
    let broken = s.mq.keys().stream(TARGET, 0);
    let _: () = s.conn.set(&broken, "not a stream").await.unwrap();
    // Without keys, source partition p goes to target partition p.
    outbox(&mut s, 0, &[("1-0", None)]).await;
    outbox(&mut s, 1, &[("1-0", None)]).await;
    let f = RedisTopicForwarder::builder(&s.mq, SOURCE, TARGET)
        .partitions(0..2)
        .poll_interval(Duration::from_millis(20))
        .backoff(Duration::from_secs(60), Duration::from_secs(60))
        .build()
        .unwrap();
    let running = f.start().await.unwrap();
    let healthy = s.mq.keys().stream(TARGET, 1);
    let watcher = s.conn.clone();
    let arrived = |n: usize| {
        let mut conn = watcher.clone();
        let healthy = healthy.clone();
        async move { (conn.xlen::<_, usize>(&healthy).await.unwrap() == n).then_some(()) }
    };
    eventually("partition 1's first record", DEADLINE, || arrived(1)).await;
    assert!(running.stats().failed >= 1, "partition 0 failed");
    // More for partition 1 after partition 0 failed: forwarded within the minute of
    // partition 0's backoff.
    let key = f.outbox_key(1);
    let fields = [
        ("id", "job/g/in/1/2-0/0"),
        ("payload", "{}"),
        ("ts", "1700"),
    ];
    let _: String = s.conn.xadd(&key, "2-0", &fields).await.unwrap();
    eventually("partition 1's second record", DEADLINE, || arrived(2)).await;
    running.stop().await;
    let stuck: usize = s.conn.xlen(f.outbox_key(0)).await.unwrap();
    assert_eq!(stuck, 1, "partition 0's record waits in its outbox");
}
