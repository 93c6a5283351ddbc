//! The sinks that write in the batch commit: `RedisHashSink`, `RedisStreamSink`,
//! `RedisIdempotentListSink`. A commit refused (another owner took the lease while the
//! batch ran) writes none of them; once the partition is taken back, each output is in
//! Redis once. The idempotent list drops a record whose key an earlier input produced
//! (a producer's retried send), in the engine and standalone. Two jobs with one sink name
//! write their own keys when the sinks are job-scoped, the same keys when not.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde::Serialize;
use streaming::api::ValueStateDescriptor;
use streaming::mq::Message;
use streaming::redis::{
    JobClient, RedisEnv, RedisHashSink, RedisIdempotentListSink, RedisListSink, RedisStreamSink,
    SinkScope,
};
use support::engine::{earliest, setup, wait_until, EngineSetup};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

#[derive(Clone, Debug, Serialize)]
struct Counted {
    word: String,
    n: u64,
    /// The input message's id.
    id: String,
}

/// Holds every pipeline at the record "slow" until released.
#[derive(Clone, Default)]
struct Gate {
    reached: Arc<std::sync::atomic::AtomicUsize>,
    released: Arc<AtomicBool>,
}

impl Gate {
    fn pass(&self, word: &str) {
        if word != "slow" || self.released.load(Ordering::SeqCst) {
            return;
        }
        self.reached.fetch_add(1, Ordering::SeqCst);
        let end = Instant::now() + Duration::from_secs(60);
        while !self.released.load(Ordering::SeqCst) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Registers the keyed count of topic `c` read by `group`, ending in `sink`.
macro_rules! count_into {
    ($env:expr, $group:expr, $gate:expr, $sink:expr) => {{
        let gate = $gate.clone();
        $env.from_mq_topic_with_options("c", $group, earliest(50))
            .map(|m: Message| (m.text().unwrap().to_string(), m.id.to_string()))
            .key_by(|(w, _): &(String, String)| w.clone())
            .process(move |(word, id): (String, String), ctx, out| {
                gate.pass(&word);
                let mut c = ctx.state(&COUNT)?;
                let n = c.value() + 1;
                c.update(n);
                out.collect(Counted { word, n, id });
                Ok(())
            })
            .sink($sink)
            .unwrap();
    }};
}

fn start(s: &EngineSetup, gate: &Gate) -> JobClient {
    let env = RedisEnv::try_with_config(s.redis.url(), s.config("sinks").build().unwrap()).unwrap();
    count_into!(
        env,
        "h",
        gate,
        RedisHashSink::new("latest", |c: &Counted| c.word.clone()).unwrap()
    );
    count_into!(
        env,
        "s",
        gate,
        RedisStreamSink::new("events", None).unwrap()
    );
    count_into!(
        env,
        "i",
        gate,
        RedisIdempotentListSink::new("once", Duration::from_secs(60), |c: &Counted| format!(
            "{}#{}",
            c.word, c.n
        ))
        .unwrap()
    );
    env.blocking_start().unwrap()
}

/// What the three sinks hold on partition 0.
fn outputs(s: &EngineSetup) -> (HashMap<String, String>, usize, Vec<String>) {
    let client = redis::Client::open(s.redis.url()).unwrap();
    s.rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let hash: HashMap<String, String> = c
            .hgetall(RedisHashSink::<Counted>::key_for("latest", "c", 0))
            .await
            .unwrap();
        let stream: usize = c
            .xlen(RedisStreamSink::<Counted>::key_for("events", "c", 0))
            .await
            .unwrap();
        let (list, _) = RedisIdempotentListSink::<Counted>::keys_for("once", "c", 0);
        let list: Vec<String> = c.lrange(list, 0, -1).await.unwrap();
        (hash, stream, list)
    })
}

/// Takes partition 0 of every group from the job (new fencing tokens) while the job is
/// held at the gate, releases the gate, waits until the three commits were refused, then
/// frees the leases.
fn steal_all(s: &EngineSetup, gate: &Gate, job: &JobClient) {
    steal(s, gate, job, &["h", "s", "i"]);
}

/// [`steal_all`] for the groups `groups` of topic `c`.
fn steal(s: &EngineSetup, gate: &Gate, job: &JobClient, groups: &[&str]) {
    let keys = s.mq().keys().clone();
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mut c =
        s.rt.block_on(client.get_multiplexed_async_connection())
            .unwrap();
    for g in groups {
        let g = *g;
        s.rt.block_on(async {
            let token: u64 = c.incr(keys.fence("c", 0, g), 1).await.unwrap();
            let _: () = c
                .set_ex(keys.lease("c", 0, g), format!("{token} thief"), 60)
                .await
                .unwrap();
        });
    }
    gate.released.store(true, Ordering::SeqCst);
    wait_until("the commits refused", job, || {
        job.diagnostics()
            .partitions
            .iter()
            .filter(|p| p.fenced >= 1)
            .count()
            == groups.len()
    });
    for g in groups {
        let _: () = s.rt.block_on(c.del(keys.lease("c", 0, g))).unwrap();
    }
}

#[test]
fn commit_sinks_write_nothing_when_the_commit_is_refused_and_each_output_once_after() {
    let s = setup("sinks-refused");
    s.rt.block_on(s.mq().create_topic("c", 1)).unwrap();
    let first = ["a", "b", "a"];
    s.produce("c", &first.map(String::from));
    let gate = Gate::default();
    let job = start(&s, &gate);
    wait_until("the first batches committed", &job, || {
        outputs(&s).1 == 3 && outputs(&s).2.len() == 3
    });
    s.produce("c", &["a", "slow", "b"].map(String::from));
    wait_until("every pipeline at \"slow\"", &job, || {
        gate.reached.load(Ordering::SeqCst) == 3
    });
    let before = outputs(&s);
    steal_all(&s, &gate, &job);
    assert_eq!(outputs(&s), before, "a refused commit wrote sink output");
    wait_until("every record written", &job, || {
        let (hash, stream, list) = outputs(&s);
        hash.get("b").is_some_and(|b| b.contains("\"n\":2")) && stream == 6 && list.len() == 6
    });
    job.blocking_shutdown(Duration::MAX);
    let (hash, stream, list) = outputs(&s);
    assert_eq!(stream, 6, "one stream entry per input");
    let firsts: Vec<String> = list
        .iter()
        .map(|v| {
            let v: serde_json::Value = serde_json::from_str(v).unwrap();
            format!("{}={}", v["word"].as_str().unwrap(), v["n"])
        })
        .collect();
    assert_eq!(firsts, ["a=1", "b=1", "a=2", "a=3", "slow=1", "b=2"]);
    let latest: serde_json::Value = serde_json::from_str(&hash["a"]).unwrap();
    assert_eq!(latest["n"], 3, "the hash holds each word's latest count");
    assert_eq!(hash.len(), 3);
}

/// A producer's retried send (the same payload twice, two stream entries) reaches the
/// idempotent list once when the key is the input's business id; `append` does the same
/// outside the engine.
#[test]
fn the_idempotent_list_drops_a_repeated_key_in_the_engine_and_standalone() {
    let s = setup("sinks-idempotent");
    s.rt.block_on(s.mq().create_topic("orders", 1)).unwrap();
    s.produce("orders", &["o1", "o2", "o1", "o3", "o2"].map(String::from));
    let env = RedisEnv::try_with_config(s.redis.url(), s.config("idem").build().unwrap()).unwrap();
    env.from_mq_topic_with_options("orders", "g", earliest(2))
        .map(|m: Message| m.text().unwrap().to_string())
        .sink(
            RedisIdempotentListSink::new("placed", Duration::from_secs(60), |o: &String| o.clone())
                .unwrap(),
        )
        .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    job.blocking_shutdown(Duration::MAX);
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mut c =
        s.rt.block_on(client.get_multiplexed_async_connection())
            .unwrap();
    let (list, dedup) = RedisIdempotentListSink::<String>::keys_for("placed", "orders", 0);
    let placed: Vec<String> = s.rt.block_on(c.lrange(&list, 0, -1)).unwrap();
    assert_eq!(placed, ["\"o1\"", "\"o2\"", "\"o3\""]);
    let marks: usize = s.rt.block_on(c.zcard(&dedup)).unwrap();
    assert_eq!(marks, 3);

    let sink =
        RedisIdempotentListSink::new("x", Duration::from_millis(300), |o: &String| o.clone())
            .unwrap();
    let keys = ("standalone:{eu}", "standalone:dedup:{eu}");
    let n =
        s.rt.block_on(sink.append(&mut c, keys, &["p1".into(), "p2".into(), "p1".into()]))
            .unwrap();
    assert_eq!(n, 2);
    let n =
        s.rt.block_on(sink.append(&mut c, keys, &["p2".into()]))
            .unwrap();
    assert_eq!(n, 0, "seen within the TTL");
    std::thread::sleep(Duration::from_millis(400));
    let n =
        s.rt.block_on(sink.append(&mut c, keys, &["p2".into()]))
            .unwrap();
    assert_eq!(n, 1, "appended again after the TTL");
    let all: Vec<String> = s.rt.block_on(c.lrange(keys.0, 0, -1)).unwrap();
    assert_eq!(all, ["\"p1\"", "\"p2\"", "\"p2\""]);
}

#[test]
fn bad_sink_arguments_fail_naming_the_field() {
    let field = |e: streaming::Error| match e {
        streaming::Error::InvalidConfig { field, .. } => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field(RedisStreamSink::<u8>::new("a{b}", None).unwrap_err()),
        "name"
    );
    assert_eq!(
        field(RedisStreamSink::<u8>::new("a", Some(0)).unwrap_err()),
        "max_len"
    );
    assert_eq!(
        field(RedisHashSink::<u8>::new("", |_| String::new()).unwrap_err()),
        "name"
    );
    assert_eq!(
        field(
            RedisIdempotentListSink::<u8>::new("l", Duration::ZERO, |_| String::new()).unwrap_err()
        ),
        "ttl"
    );
}

/// With `sink_deduplication_enabled`, a producer's retried send (same
/// `x-idempotency-key`), a message repeated in one batch and a replayed dead letter of a
/// processed message (its `x-original-message-id`) run the pipeline once; a message that
/// failed is not marked, so its retry runs. Without the option every send runs.
#[test]
fn input_deduplication_runs_one_message_per_idempotency_key() {
    use streaming::mq::OutgoingMessage;
    for enabled in [true, false] {
        let s = setup(&format!("sinks-dedup-{enabled}"));
        let topic = "pay";
        s.rt.block_on(s.mq().create_topic(topic, 1)).unwrap();
        let send = |msgs: Vec<OutgoingMessage>| {
            s.rt.block_on(s.mq().producer().send_batch(topic, &msgs))
                .unwrap();
        };
        let keyed = |p: &str, k: &str| OutgoingMessage::new(p.to_string()).idempotency_key(k);
        let dedup_prefix = format!("{}:dedup:", s.prefix);
        let config = s
            .config("dedup")
            .sink_deduplication_enabled(enabled)
            .sink_dedup_key_prefix(&dedup_prefix)
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        let out = streaming::redis::CollectSink::new();
        let failed_once = Arc::new(AtomicBool::new(false));
        let fail = Arc::clone(&failed_once);
        env.from_mq_topic_with_options(topic, "g", earliest(3))
            .try_map(move |m: Message| {
                let text = m.text().unwrap().to_string();
                if text == "flaky" && !fail.swap(true, Ordering::SeqCst) {
                    return Err("fails once".into());
                }
                Ok::<_, streaming::BoxError>((text, m.id.clone()))
            })
            .sink(out.clone())
            .unwrap();
        // p1 and its retried send in one batch, p2 now and again in a later batch.
        send(vec![
            keyed("p1", "pay-1"),
            keyed("p1 again", "pay-1"),
            keyed("p2", "pay-2"),
        ]);
        let job = env.blocking_start().unwrap();
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        send(vec![
            keyed("p2 again", "pay-2"),
            OutgoingMessage::new("plain"),
            OutgoingMessage::new("flaky"),
        ]);
        wait_until("flaky retried", &job, || {
            out.snapshot().iter().any(|(t, _)| t == "flaky")
        });
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        let plain_id = (out.snapshot().into_iter())
            .find(|(t, _)| t == "plain")
            .map(|(_, id)| id)
            .unwrap();
        // A dead letter of "plain" (say another delivery of it failed) replayed: it was
        // in fact processed.
        replay_as_dead_letter(&s, topic, &plain_id);
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        let texts: Vec<String> = out.snapshot().into_iter().map(|(t, _)| t).collect();
        let d = job.diagnostics();
        let deduplicated: u64 = d.partitions.iter().map(|p| p.deduplicated).sum();
        if enabled {
            assert_eq!(texts, ["p1", "p2", "plain", "flaky"]);
            assert_eq!(deduplicated, 3);
            let client = redis::Client::open(s.redis.url()).unwrap();
            let mut c =
                s.rt.block_on(client.get_multiplexed_async_connection())
                    .unwrap();
            // `{prefix}{job}:{queue prefix}:{T:n}:{group}`.
            let queue = &s.mq_opts.key_prefix;
            let key = format!("{dedup_prefix}dedup:{queue}:{{{topic}:0}}:g");
            let marks: usize = s.rt.block_on(c.zcard(key)).unwrap();
            assert_eq!(marks, 4, "pay-1, pay-2, plain's id, flaky's first id");
        } else {
            assert_eq!(texts.len(), 7, "{texts:?}");
            assert_eq!(texts[6], "plain", "the replayed dead letter ran");
            assert_eq!(deduplicated, 0);
        }
    }
}

/// Writes a dead letter of message `id` (payload "plain", group `g`) into partition 0's
/// dead-letter stream and replays it: the replayed entry carries
/// `x-original-message-id` = `id`.
fn replay_as_dead_letter(s: &EngineSetup, topic: &str, id: &str) {
    let mq = s.mq();
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mut c =
        s.rt.block_on(client.get_multiplexed_async_connection())
            .unwrap();
    let fields = [
        ("p", "plain"),
        ("ts", "1"),
        ("dlq.topic", topic),
        ("dlq.partition", "0"),
        ("dlq.id", id),
        ("dlq.original_id", id),
        ("dlq.group", "g"),
        ("dlq.attempts", "1"),
        ("dlq.error_type", "fail:test"),
        ("dlq.error", "another delivery failed"),
        ("dlq.failed_ms", "1"),
    ];
    let dlq_id: String =
        s.rt.block_on(c.xadd(mq.keys().dlq(topic, 0), "*", &fields))
            .unwrap();
    let replayed =
        s.rt.block_on(mq.replay_dead_letter(topic, 0, &dlq_id))
            .unwrap();
    assert!(replayed.is_some());
}

/// Collects what the outbox dispatcher delivers: (record id, payload).
struct Collect(Arc<std::sync::Mutex<Vec<(String, String)>>>);

impl streaming::redis::outbox::OutboxTarget for Collect {
    async fn deliver(
        &mut self,
        r: &streaming::redis::outbox::OutboxRecord,
    ) -> Result<(), streaming::BoxError> {
        self.0
            .lock()
            .unwrap()
            .push((r.id.clone(), r.text()?.to_string()));
        Ok(())
    }
}

/// The outbox sink appends in the batch commit: a refused commit appends nothing, and
/// the dispatcher delivers every output once, each with its own id.
#[test]
fn the_outbox_sink_appends_in_the_commit_and_the_dispatcher_delivers_each_record_once() {
    use streaming::redis::outbox::{RedisOutboxDispatcher, RedisOutboxSink};
    let s = setup("sinks-outbox");
    s.rt.block_on(s.mq().create_topic("c", 1)).unwrap();
    s.produce("c", &["a", "b", "a"].map(String::from));
    let gate = Gate::default();
    let env =
        RedisEnv::try_with_config(s.redis.url(), s.config("outbox").build().unwrap()).unwrap();
    count_into!(env, "o", gate, RedisOutboxSink::new("mails").unwrap());
    let job = env.blocking_start().unwrap();
    let dispatcher = RedisOutboxDispatcher::builder(&s.mq(), "mails", "c")
        .build()
        .unwrap();
    let outbox = dispatcher.outbox_key(0);
    let client = redis::Client::open(s.redis.url()).unwrap();
    let mut c =
        s.rt.block_on(client.get_multiplexed_async_connection())
            .unwrap();
    // Records in the outbox: one entry per commit, holding `n` records.
    let mut len = || -> usize {
        let entries: redis::streams::StreamRangeReply =
            s.rt.block_on(c.xrange_all(&outbox)).unwrap();
        (entries.ids.iter())
            .map(|e| e.get::<usize>("n").unwrap())
            .sum()
    };
    wait_until("the first batch in the outbox", &job, || len() == 3);
    s.produce("c", &["a", "slow", "b"].map(String::from));
    wait_until("at \"slow\"", &job, || {
        gate.reached.load(Ordering::SeqCst) == 1
    });
    steal(&s, &gate, &job, &["o"]);
    assert_eq!(len(), 3, "a refused commit appended to the outbox");
    wait_until("every record in the outbox", &job, || len() == 6);
    job.blocking_shutdown(Duration::MAX);

    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    // The dispatcher's task runs on the test's runtime: wait inside it.
    s.rt.block_on(async {
        let running = dispatcher.start(Collect(Arc::clone(&got))).await.unwrap();
        let end = Instant::now() + Duration::from_secs(60);
        while got.lock().unwrap().len() < 6 {
            assert!(Instant::now() < end, "{:?}", got.lock().unwrap());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        running.stop().await;
    });
    let got = got.lock().unwrap().clone();
    let words: Vec<String> = (got.iter())
        .map(|(_, p)| {
            let v: serde_json::Value = serde_json::from_str(p).unwrap();
            format!("{}={}", v["word"].as_str().unwrap(), v["n"])
        })
        .collect();
    assert_eq!(words, ["a=1", "b=1", "a=2", "a=3", "slow=1", "b=2"]);
    let ids: std::collections::BTreeSet<&String> = got.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 6, "unique ids: {got:?}");
    assert!(got[0].0.starts_with("outbox/o/c/0/"), "{got:?}");
    assert_eq!(len(), 0, "delivered records are deleted");
}

/// Two jobs (`alpha`, `beta`) count the same topic into sinks of the same names: the
/// job-scoped list of each holds that job's outputs only, under `{job}:{name}:{T:n}`; the
/// shared list (the default) holds both jobs' outputs.
#[test]
fn job_scoped_sinks_of_two_jobs_with_one_name_write_their_own_keys() {
    let s = setup("sinks-scoped");
    s.rt.block_on(s.mq().create_topic("c", 1)).unwrap();
    s.produce("c", &["a", "b", "a"].map(String::from));
    // Sink keys carry no key prefix: names unique to this test on the shared server.
    let (scoped, shared) = (format!("{}-own", s.prefix), format!("{}-all", s.prefix));
    let gate = Gate::default();
    let jobs = ["alpha", "beta"].map(|name| {
        let config = s.config(name).build().unwrap();
        let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
        let own = RedisListSink::new(scoped.clone()).unwrap().job_scoped();
        assert_eq!(own.scope(), SinkScope::Job);
        count_into!(env, name, gate, own);
        count_into!(
            env,
            &format!("{name}-all"),
            gate,
            RedisListSink::new(shared.clone()).unwrap()
        );
        env.blocking_start().unwrap()
    });
    let client = redis::Client::open(s.redis.url()).unwrap();
    let list = |base: &str| -> Vec<String> {
        let key = RedisListSink::<Counted>::key_for(base, "c", 0);
        s.rt.block_on(async {
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            c.lrange(key, 0, -1).await.unwrap()
        })
    };
    let words = |values: Vec<String>| -> Vec<String> {
        (values.iter())
            .map(|v| {
                let v: serde_json::Value = serde_json::from_str(v).unwrap();
                format!("{}={}", v["word"].as_str().unwrap(), v["n"])
            })
            .collect()
    };
    let alpha = SinkScope::Job.base_name("alpha", &scoped);
    let beta = SinkScope::Job.base_name("beta", &scoped);
    assert_eq!(alpha, format!("alpha:{scoped}"));
    wait_until("both jobs' outputs", &jobs[0], || {
        list(&alpha).len() == 3 && list(&beta).len() == 3 && list(&shared).len() == 6
    });
    for job in &jobs {
        job.blocking_shutdown(Duration::MAX);
    }
    assert_eq!(words(list(&alpha)), ["a=1", "b=1", "a=2"]);
    assert_eq!(words(list(&beta)), ["a=1", "b=1", "a=2"]);
    assert!(
        list(&scoped).is_empty(),
        "a job-scoped sink wrote the shared key"
    );
    let mut both = words(list(&shared));
    both.sort();
    assert_eq!(both, ["a=1", "a=1", "a=2", "a=2", "b=1", "b=1"]);
}
