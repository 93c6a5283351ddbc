//! Pipelines that read several topics on the Redis engine: `union` and `connect` of
//! co-partitioned topics, each job partition reading partition n of every input and
//! committing the state and every input's position in one transaction. The same pipeline
//! text runs on the memory engine with the same input and gives the same results.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::api::{Collector, KeyedContext, ValueStateDescriptor};
use streaming::mq::{Message, OutgoingMessage};
use streaming::redis::{CollectSink, RedisEnv, HEADER_RUNTIME_GROUP};
use streaming::time::{TimeWindow, TumblingEventTimeWindows};
use streaming::{BoxError, Error, KeyedCoProcessFunction, MemoryEnv};
use support::engine::{earliest, setup, wait_until, EngineSetup};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
const NAME: ValueStateDescriptor<String> = ValueStateDescriptor::persistent("name", String::new());

/// Per key, how many records of both inputs it has seen so far: `(key, count)`.
macro_rules! counts {
    ($first:expr, $second:expr) => {
        $first
            .union($second)
            .map(|m: Message| m.key.as_deref().unwrap_or_default().to_string())
            .key_by(|k: &String| k.clone())
            .process(|k: String, ctx, out| {
                let mut count = ctx.state(&COUNT)?;
                let n = count.value() + 1;
                count.update(n);
                out.collect((k, n));
                Ok::<(), BoxError>(())
            })
    };
}

/// Sends `(key, payload)` records to `topic`, each to the partition its key picks.
fn produce(s: &EngineSetup, topic: &str, records: &[(&str, &str)]) {
    let msgs: Vec<OutgoingMessage> = (records.iter())
        .map(|(k, p)| OutgoingMessage::new(p.to_string()).key(k.to_string()))
        .collect();
    s.rt.block_on(s.mq().producer().send_batch(topic, &msgs))
        .unwrap();
}

fn create(s: &EngineSetup, topic: &str, partitions: u32) {
    s.rt.block_on(s.mq().create_topic(topic, partitions))
        .unwrap();
}

fn env(s: &EngineSetup, job: &str) -> RedisEnv {
    RedisEnv::try_with_config(s.redis.url(), s.config(job).build().unwrap()).unwrap()
}

/// [`env`] with `watermark_idle_timeout` of `idle_ms`.
fn idle_env(s: &EngineSetup, job: &str, idle_ms: u64) -> RedisEnv {
    let config = s
        .config(job)
        .watermark_idle_timeout(Some(Duration::from_millis(idle_ms)))
        .build()
        .unwrap();
    RedisEnv::try_with_config(s.redis.url(), config).unwrap()
}

/// The last count of each key.
fn last_counts(outputs: &[(String, u64)]) -> BTreeMap<String, u64> {
    outputs.iter().cloned().collect()
}

fn keyed(topic: &str, keys: &[&str]) -> Vec<Message> {
    (keys.iter().enumerate())
        .map(|(i, k)| Message {
            id: format!("1-{i}").into(),
            topic: topic.into(),
            partition: 0,
            key: Some((*k).into()),
            payload: k.as_bytes().to_vec().into(),
            headers: BTreeMap::new(),
            timestamp_ms: 1000 + i as i64,
            retry_count: 0,
            max_retries: None,
            retry_group: None,
        })
        .collect()
}

#[test]
fn a_union_of_two_topics_counts_every_record_once_and_resumes_where_it_committed() {
    union_counts(setup("several-union"));
}

/// On a Redis Cluster the partitions spread over the masters; each commit, with every
/// input's position, still runs in the first topic's partition slot.
#[test]
fn a_union_of_two_topics_on_a_cluster_counts_every_record_once() {
    let mut s = setup("several-union-cluster");
    s.redis = support::redis_cluster::TestCluster::start().into_test_redis();
    union_counts(s);
}

fn union_counts(s: EngineSetup) {
    let clicks = ["a", "b", "a", "c", "a", "d", "b"];
    let views = ["a", "c", "c", "e", "b"];
    let memory_env = MemoryEnv::new();
    let memory = counts!(
        memory_env.from_collection_with_id("clicks.g", keyed("clicks", &clicks)),
        memory_env.from_collection_with_id("views.g", keyed("views", &views))
    )
    .collect_vec()
    .unwrap();
    let expected: BTreeMap<String, u64> = [("a", 4), ("b", 3), ("c", 3), ("d", 1), ("e", 1)]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
    assert_eq!(last_counts(&memory), expected);

    create(&s, "clicks", 3);
    create(&s, "views", 3);
    let pairs = |keys: &[&'static str]| keys.iter().map(|k| (*k, *k)).collect::<Vec<_>>();
    produce(&s, "clicks", &pairs(&clicks));
    produce(&s, "views", &pairs(&views));
    let redis = env(&s, "several-union");
    let out = CollectSink::new();
    counts!(
        redis.from_mq_topic_with_options("clicks", "g", earliest(2)),
        redis.from_mq_topic_with_options("views", "g", earliest(2))
    )
    .sink(out.clone())
    .unwrap();
    let job = redis.blocking_start().unwrap();
    wait_until("every record counted", &job, || out.len() == 12);
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(last_counts(&out.snapshot()), expected);

    // A second run reads only what came after the positions the first one committed.
    produce(&s, "views", &[("a", "a"), ("f", "f")]);
    produce(&s, "clicks", &[("d", "d")]);
    let redis = env(&s, "several-union");
    let again = CollectSink::new();
    counts!(
        redis.from_mq_topic_with_options("clicks", "g", earliest(2)),
        redis.from_mq_topic_with_options("views", "g", earliest(2))
    )
    .sink(again.clone())
    .unwrap();
    let job = redis.blocking_start().unwrap();
    wait_until("the new records counted", &job, || again.len() == 3);
    std::thread::sleep(Duration::from_millis(200));
    job.blocking_shutdown(Duration::MAX);
    let mut after = again.snapshot();
    after.sort();
    assert_eq!(
        after,
        [
            ("a".to_string(), 5),
            ("d".to_string(), 2),
            ("f".to_string(), 1)
        ]
    );
}

/// Customers (the latest record of each) enrich orders: Kafka Streams' stream–table join
/// as a keyed co-process function.
#[derive(Clone)]
struct Enrich;

impl KeyedCoProcessFunction<String, Message, Message> for Enrich {
    type Out = String;
    fn process_element1(
        &mut self,
        customer: Message,
        ctx: &mut KeyedContext<'_, String>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.state(&NAME)?.update(customer.text()?.to_string());
        Ok(())
    }
    fn process_element2(
        &mut self,
        order: Message,
        ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let amount: u64 = order.text()?.parse()?;
        let name = ctx.state(&NAME)?.value();
        out.collect(format!("{name}: {amount}"));
        Ok(())
    }
}

/// Registers [`Enrich`] over topics `customers` (first) and `orders`; returns its output.
fn enrichment(redis: &RedisEnv) -> CollectSink<String> {
    let out = CollectSink::new();
    redis
        .from_mq_topic_with_options("customers", "enrich", earliest(10))
        .connect(redis.from_mq_topic_with_options("orders", "enrich-orders", earliest(10)))
        .key_by(key_of, key_of)
        .process(Enrich)
        .sink(out.clone())
        .unwrap();
    out
}

fn key_of(m: &Message) -> String {
    m.key.as_deref().unwrap_or_default().to_string()
}

/// A stream–table enrichment over a backlog: customers and orders produced before the
/// job starts, at very different rates — customer `a` renamed every 30 minutes while
/// its orders come every 7 hours, customer `b` renamed once while its orders come every
/// hour. Each order meets the customer record of its own time in both directions: the
/// inputs are read in step by event time, an input ahead waits for the other (batches of
/// 10 entries of each input would otherwise run days of one input against hours of the
/// other).
#[test]
fn an_enrichment_over_a_backlog_meets_the_customer_record_of_each_orders_time() {
    const HOUR: i64 = 3_600_000;
    let s = setup("several-in-step");
    create(&s, "customers", 1);
    create(&s, "orders", 1);
    let t0 = 1_700_000_000_000;
    // (customer, name or order number, event time): no order at a customer's time.
    let mut customers: Vec<(&str, String, i64)> = (0..96)
        .map(|i| ("a", format!("a{i}"), t0 + i * HOUR / 2))
        .chain([("b", "b0".into(), t0), ("b", "b1".into(), t0 + 24 * HOUR)])
        .collect();
    customers.sort_by_key(|c| c.2);
    let mut orders: Vec<(&str, String, i64)> = (0..48)
        .map(|h| ("b", (100 + h).to_string(), t0 + h * HOUR + 7 * 60_000))
        .chain((0..7).map(|k| ("a", k.to_string(), t0 + k * 7 * HOUR + 7 * 60_000)))
        .collect();
    orders.sort_by_key(|o| o.2);
    let timed = |records: &[(&str, String, i64)]| -> Vec<(String, String, i64)> {
        (records.iter())
            .map(|(k, v, t)| (k.to_string(), v.clone(), *t))
            .collect()
    };
    for (topic, records) in [("customers", timed(&customers)), ("orders", timed(&orders))] {
        let records: Vec<(&str, &str, i64)> = (records.iter())
            .map(|(k, v, t)| (k.as_str(), v.as_str(), *t))
            .collect();
        send_timed(&s, topic, &records);
    }
    let mut expected: Vec<String> = (orders.iter())
        .map(|(key, n, t)| {
            let latest = (customers.iter()).rfind(|c| c.0 == *key && c.2 < *t);
            format!("{}: {n}", latest.unwrap().1)
        })
        .collect();
    expected.sort();

    let redis = env(&s, "several-in-step");
    let out = enrichment(&redis);
    let job = redis.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    job.blocking_shutdown(Duration::MAX);
    let mut lines = out.snapshot();
    lines.sort();
    assert_eq!(lines, expected);
}

#[test]
fn connected_topics_share_keyed_state_and_a_bad_record_goes_to_its_own_topics_dead_letters() {
    let s = setup("several-connect");
    create(&s, "customers", 2);
    create(&s, "orders", 2);
    produce(&s, "customers", &[("1", "ada"), ("2", "bob"), ("3", "cy")]);
    produce(
        &s,
        "orders",
        &[("1", "30"), ("2", "5"), ("3", "x"), ("2", "7")],
    );
    let redis = env(&s, "several-connect");
    let out = enrichment(&redis);
    let job = redis.blocking_start().unwrap();
    let mq = s.mq();
    let letters = || s.rt.block_on(mq.dead_letters("orders", 10)).unwrap();
    wait_until("the enriched orders", &job, || out.len() == 3);
    wait_until("the bad order's dead letter", &job, || letters().len() == 1);
    job.blocking_shutdown(Duration::MAX);
    let mut lines = out.snapshot();
    lines.sort();
    assert_eq!(lines, ["ada: 30", "bob: 5", "bob: 7"]);
    let letter = &letters()[0];
    assert_eq!(letter.payload.as_ref(), b"x");
    assert_eq!(letter.headers[HEADER_RUNTIME_GROUP], "enrich-orders");
    let customers = s.rt.block_on(mq.dead_letters("customers", 10)).unwrap();
    assert!(customers.is_empty(), "{customers:?}");
}

#[test]
fn inputs_that_are_not_co_partitioned_are_refused_at_start_naming_their_partition_counts() {
    let s = setup("several-refused");
    create(&s, "left", 4);
    create(&s, "right", 2);
    let redis = env(&s, "several-refused");
    counts!(
        redis.from_mq_topic("left", "g"),
        redis.from_mq_topic("right", "g")
    )
    .sink(CollectSink::new())
    .unwrap();
    let err = redis.blocking_start().unwrap_err();
    match &err {
        Error::InvalidConfig { field, reason } => {
            assert_eq!(*field, "inputs");
            assert!(
                reason.contains("`left` has 4, `right` has 2 partitions"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }

    let redis = env(&s, "several-missing");
    counts!(
        redis.from_mq_topic("left", "g"),
        redis.from_mq_topic("nowhere", "g")
    )
    .sink(CollectSink::new())
    .unwrap();
    let err = redis.blocking_start().unwrap_err().to_string();
    assert!(
        err.contains("topic `nowhere`") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn a_topic_combined_with_itself_is_refused_when_the_pipeline_is_registered() {
    let s = setup("several-twice");
    let redis = env(&s, "several-twice");
    let err = counts!(
        redis.from_mq_topic("same", "g"),
        redis.from_mq_topic_with_id("other-id", "same", "g2")
    )
    .sink(CollectSink::new())
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "inputs",
                ..
            }
        ),
        "{err:?}"
    );
    // With one group and the default source ids the rule is the same (not the source
    // ids', whose remedy would not help).
    let err = counts!(
        redis.from_mq_topic("same", "g"),
        redis.from_mq_topic("same", "g")
    )
    .sink(CollectSink::new())
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("topic `same` is an input of the pipeline twice"),
        "{err}"
    );
}

/// `(key, payload)` messages of `topic` at their event times.
fn timed(topic: &str, records: &[(&str, &str, i64)]) -> Vec<(Message, i64)> {
    (records.iter().enumerate())
        .map(|(i, (k, p, t))| {
            let mut m = keyed(topic, &[k]).remove(0);
            m.id = format!("1-{i}").into();
            m.payload = p.as_bytes().to_vec().into();
            m.timestamp_ms = *t;
            (m, *t)
        })
        .collect()
}

fn send_timed(s: &EngineSetup, topic: &str, records: &[(&str, &str, i64)]) {
    let msgs: Vec<OutgoingMessage> = (records.iter())
        .map(|(k, p, t)| {
            OutgoingMessage::new(p.to_string())
                .key(k.to_string())
                .timestamp_ms(*t)
        })
        .collect();
    s.rt.block_on(s.mq().producer().send_batch(topic, &msgs))
        .unwrap();
}

fn amount(m: &Message) -> u64 {
    m.text().unwrap().parse().unwrap()
}

/// `(key, text)` of a message: what the join buffers (the Redis engine keeps it as JSON).
fn pair(m: Message) -> (String, String) {
    (key_of(&m), m.text().unwrap().to_string())
}

/// Orders joined with their customer's payments within 10 minutes after the order.
macro_rules! paid {
    ($orders:expr, $payments:expr) => {
        $orders
            .map(pair)
            .key_by(|o: &(String, String)| o.0.clone())
            .interval_join(
                $payments
                    .map(pair)
                    .key_by(|p: &(String, String)| p.0.clone()),
            )
            .between(0, 10 * 60_000)
            .unwrap()
            .process(|order: &(String, String), payment: &(String, String)| {
                (order.1.clone(), payment.1.parse::<u64>().unwrap())
            })
    };
}

/// Per key and 10-second window, the sum of both inputs' amounts.
macro_rules! window_sums {
    ($first:expr, $second:expr) => {
        $first
            .union($second)
            .map(|m: Message| (key_of(&m), amount(&m)))
            .key_by(|e: &(String, u64)| e.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(10)).unwrap())
            .sum_by(|e: &(String, u64)| e.1)
            .map(|(k, w, sum): (String, TimeWindow, u64)| (k, w.start(), sum))
    };
}

#[test]
fn event_time_joins_and_windows_over_two_topics_match_the_memory_engine() {
    let orders = [
        ("ada", "o1", 0),
        ("bob", "o2", 1_000),
        ("ada", "o3", 700_000),
    ];
    let payments = [
        ("ada", "30", 60_000),
        ("bob", "5", 900_000),
        ("ada", "8", 1_200_000),
    ];
    let memory_env = MemoryEnv::new();
    let mut memory_paid = paid!(
        memory_env.from_timestamped_collection(timed("orders", &orders)),
        memory_env.from_timestamped_collection(timed("payments", &payments))
    )
    .collect_vec()
    .unwrap();
    memory_paid.sort();
    // bob paid after 15 minutes; ada's 8 came 500 s after o3.
    assert_eq!(memory_paid, [("o1".to_string(), 30), ("o3".to_string(), 8)]);
    let clicks = [
        ("a", "1", 1_000),
        ("b", "2", 4_000),
        ("a", "3", 12_000),
        ("a", "4", 25_000),
    ];
    let views = [("a", "10", 2_000), ("a", "20", 11_000), ("b", "30", 19_000)];
    let memory_env = MemoryEnv::new();
    let mut memory_sums = window_sums!(
        memory_env.from_timestamped_collection(timed("clicks", &clicks)),
        memory_env.from_timestamped_collection(timed("views", &views))
    )
    .collect_vec()
    .unwrap();
    memory_sums.sort();
    let s_ = |k: &str, start: i64, sum: u64| (k.to_string(), start, sum);
    assert_eq!(
        memory_sums,
        [
            s_("a", 0, 11),
            s_("a", 10_000, 23),
            s_("a", 20_000, 4),
            s_("b", 0, 2),
            s_("b", 10_000, 30)
        ]
    );

    let s = setup("several-event-time");
    for topic in ["orders", "payments", "clicks", "views"] {
        create(&s, topic, 2);
    }
    send_timed(&s, "orders", &orders);
    send_timed(&s, "payments", &payments);
    send_timed(&s, "clicks", &clicks);
    send_timed(&s, "views", &views);
    let redis = idle_env(&s, "several-event-time", 200);
    let paid_out = CollectSink::new();
    paid!(
        redis.from_mq_topic_with_options("orders", "g", earliest(1)),
        redis.from_mq_topic_with_options("payments", "g", earliest(1))
    )
    .sink(paid_out.clone())
    .unwrap();
    let sums_out = CollectSink::new();
    window_sums!(
        redis.from_mq_topic_with_options("clicks", "g", earliest(1)),
        redis.from_mq_topic_with_options("views", "g", earliest(1))
    )
    .sink(sums_out.clone())
    .unwrap();
    let job = redis.blocking_start().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    job.blocking_shutdown(Duration::MAX);
    let mut redis_paid = paid_out.snapshot();
    redis_paid.sort();
    assert_eq!(redis_paid, memory_paid);
    let mut redis_sums = sums_out.snapshot();
    redis_sums.sort();
    assert_eq!(redis_sums, memory_sums);
}

/// The job is caught up once every input is: the second topic's entries, read behind
/// the first's few, are all counted when the wait returns.
#[test]
fn await_caught_up_waits_for_every_input() {
    let s = setup("several-caught-up");
    create(&s, "few", 2);
    create(&s, "many", 2);
    produce(&s, "few", &[("a", "a")]);
    let many: Vec<(String, String)> = (0..300)
        .map(|i| (format!("k{}", i % 7), "x".into()))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    produce(&s, "many", &many);
    let redis = env(&s, "several-caught-up");
    let out = CollectSink::new();
    redis
        .from_mq_topic_with_options("few", "g", earliest(5))
        .union(redis.from_mq_topic_with_options("many", "g", earliest(5)))
        .map(|m: Message| {
            std::thread::sleep(Duration::from_millis(2));
            key_of(&m)
        })
        .sink(out.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    assert_eq!(out.len(), 301);
    job.blocking_shutdown(Duration::MAX);
}

/// A checkpoint of a two-input job records every input's position with the state; a
/// restore puts both back, and the run after it reads each input from there: the counts
/// come out as if the job had run once.
#[test]
fn a_checkpoint_restores_the_state_and_every_inputs_position() {
    let s = setup("several-checkpoint");
    create(&s, "a", 2);
    create(&s, "b", 2);
    produce(&s, "a", &[("x", "x"), ("y", "y")]);
    produce(&s, "b", &[("x", "x"), ("z", "z"), ("x", "x")]);
    let config = |s: &EngineSetup| {
        s.config("several-checkpoint")
            .checkpoint_key_prefix(format!("{}:ck:", s.prefix))
            .build()
            .unwrap()
    };
    let run = |restore: Option<u64>, more: &[(&str, &str, &str)]| {
        let redis = RedisEnv::try_with_config(s.redis.url(), config(&s)).unwrap();
        if let Some(id) = restore {
            redis.restore_from_checkpoint(id).unwrap();
        }
        let out = CollectSink::new();
        counts!(
            redis.from_mq_topic_with_options("a", "g", earliest(10)),
            redis.from_mq_topic_with_options("b", "g", earliest(10))
        )
        .sink(out.clone())
        .unwrap();
        let job = redis.blocking_start().unwrap();
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
        for (topic, k, v) in more {
            produce(&s, topic, &[(*k, *v)]);
        }
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        (ck, out.snapshot())
    };
    let (ck, first) = run(None, &[("a", "x", "x"), ("b", "y", "y"), ("b", "w", "w")]);
    assert_eq!(ck.status, streaming::redis::CheckpointStatus::Complete);
    assert_eq!(first.len(), 8);
    // Back to the checkpoint (after 5 records): the 3 records after it are read again,
    // counted from the checkpoint's state.
    let (_, again) = run(Some(ck.id), &[]);
    let mut again = again;
    again.sort();
    assert_eq!(
        again,
        [
            ("w".to_string(), 1),
            ("x".to_string(), 4),
            ("y".to_string(), 2)
        ]
    );
}

/// With `watermark_idle_timeout`, an input without records while the other has them is
/// idle: its watermark no longer holds the windows back, which fire as the busy input's
/// event time moves — not only once the whole partition is idle.
#[test]
fn an_idle_input_does_not_hold_event_time_back() {
    let s = setup("several-idle-input");
    create(&s, "busy", 1);
    create(&s, "quiet", 1);
    let redis = idle_env(&s, "several-idle-input", 300);
    let out = CollectSink::new();
    window_sums!(
        redis.from_mq_topic_with_options("busy", "g", earliest(10)),
        redis.from_mq_topic_with_options("quiet", "g", earliest(10))
    )
    .sink(out.clone())
    .unwrap();
    let job = redis.blocking_start().unwrap();
    // One record every 50 ms (the partition is never idle), 1 s of event time apart: a
    // 10 s window closes every 10 records once the quiet input is idle.
    let mut fired_while_busy = false;
    for i in 0..80 {
        send_timed(&s, "busy", &[("a", "1", i * 1_000)]);
        std::thread::sleep(Duration::from_millis(50));
        if !out.is_empty() {
            fired_while_busy = true;
            break;
        }
    }
    job.blocking_shutdown(Duration::MAX);
    assert!(
        fired_while_busy,
        "no window fired while the busy input had records"
    );
    assert_eq!(out.snapshot()[0], ("a".to_string(), 0, 10));
}

/// A window join, a co-group and a co-flat-map over two topics: the same pipeline text
/// gives the same results on the memory engine, one Redis and a Redis Cluster.
/// `(key, text)` pairs from both inputs, joined per key and 10-second window.
macro_rules! window_joined {
    ($clicks:expr, $views:expr) => {
        $clicks
            .map(pair)
            .connect($views.map(pair))
            .key_by(
                |c: &(String, String)| c.0.clone(),
                |v: &(String, String)| v.0.clone(),
            )
            .window(TumblingEventTimeWindows::of(Duration::from_secs(10)).unwrap())
            .join(|c: &(String, String), v: &(String, String)| format!("{}:{}+{}", c.0, c.1, v.1))
    };
}

/// Per key and window, how many elements each input had (also when one had none).
macro_rules! co_grouped {
    ($clicks:expr, $views:expr) => {
        $clicks
            .map(pair)
            .connect($views.map(pair))
            .key_by(
                |c: &(String, String)| c.0.clone(),
                |v: &(String, String)| v.0.clone(),
            )
            .window(TumblingEventTimeWindows::of(Duration::from_secs(10)).unwrap())
            .co_group(
                |k: &String,
                 w: &TimeWindow,
                 cs: &[(String, String)],
                 vs: &[(String, String)],
                 out: &mut Collector<'_, (String, i64, usize, usize)>| {
                    out.collect((k.clone(), w.start(), cs.len(), vs.len()));
                    Ok(())
                },
            )
    };
}

/// Each input's records as text, through one function per input.
macro_rules! co_flat_mapped {
    ($clicks:expr, $views:expr) => {
        $clicks.connect($views).co_flat_map(
            |c: Message| vec![format!("click {}", key_of(&c))],
            |v: Message| vec![format!("view {}", key_of(&v)); 2],
        )
    };
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn window_operators_on(s: EngineSetup, job: &str) {
    let clicks = [("a", "c1", 1_000), ("b", "c2", 2_000), ("a", "c3", 12_000)];
    let views = [("a", "v1", 3_000), ("a", "v2", 4_000), ("c", "v3", 15_000)];
    let mem_env = MemoryEnv::new();
    let mem_joined = sorted(
        window_joined!(
            mem_env.from_timestamped_collection(timed("clicks", &clicks)),
            mem_env.from_timestamped_collection(timed("views", &views))
        )
        .collect_vec()
        .unwrap(),
    );
    assert_eq!(mem_joined, ["a:c1+v1", "a:c1+v2"]);
    let mem_env = MemoryEnv::new();
    let mem_grouped = sorted(
        co_grouped!(
            mem_env.from_timestamped_collection(timed("clicks", &clicks)),
            mem_env.from_timestamped_collection(timed("views", &views))
        )
        .collect_vec()
        .unwrap(),
    );
    let g = |k: &str, start: i64, c: usize, v: usize| (k.to_string(), start, c, v);
    assert_eq!(
        mem_grouped,
        [
            g("a", 0, 1, 2),
            g("a", 10_000, 1, 0),
            g("b", 0, 1, 0),
            g("c", 10_000, 0, 1)
        ]
    );
    let mem_env = MemoryEnv::new();
    let mem_flat = sorted(
        co_flat_mapped!(
            mem_env.from_timestamped_collection(timed("clicks", &clicks)),
            mem_env.from_timestamped_collection(timed("views", &views))
        )
        .collect_vec()
        .unwrap(),
    );
    assert_eq!(mem_flat.len(), 9);

    for topic in ["clicks", "views"] {
        create(&s, topic, 2);
    }
    send_timed(&s, "clicks", &clicks);
    send_timed(&s, "views", &views);
    let redis = idle_env(&s, job, 200);
    let (joined, grouped, flat) = (CollectSink::new(), CollectSink::new(), CollectSink::new());
    let from =
        |topic: &str, group: &str| redis.from_mq_topic_with_options(topic, group, earliest(2));
    window_joined!(from("clicks", "j"), from("views", "j"))
        .sink(joined.clone())
        .unwrap();
    co_grouped!(from("clicks", "cg"), from("views", "cg"))
        .sink(grouped.clone())
        .unwrap();
    co_flat_mapped!(from("clicks", "fm"), from("views", "fm"))
        .sink(flat.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(sorted(joined.snapshot()), mem_joined);
    assert_eq!(sorted(grouped.snapshot()), mem_grouped);
    assert_eq!(sorted(flat.snapshot()), mem_flat);
}

#[test]
fn window_joins_co_groups_and_co_flat_maps_match_the_memory_engine() {
    window_operators_on(setup("several-window-ops"), "several-window-ops");
}

#[test]
fn window_joins_co_groups_and_co_flat_maps_on_a_cluster_match_the_memory_engine() {
    let mut s = setup("several-window-ops-cluster");
    s.redis = support::redis_cluster::TestCluster::start().into_test_redis();
    window_operators_on(s, "several-window-ops-cluster");
}

const RULES: streaming::api::BroadcastStateDescriptor<String, u64> =
    streaming::api::BroadcastStateDescriptor::persistent("rules");
const OVER: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("over", 0);

/// Rules `name=value` (a rule message's payload; another payload fails) kept in the
/// broadcast state with a count of the rules applied (`#`): a rule outputs
/// `rule {rule} #{count}`, an amount over the `limit` rule `user: amount over limit (n)
/// after {count} rules` — so a state not restored, or a rule applied twice, shows.
#[derive(Clone)]
struct Limits;

impl streaming::api::KeyedBroadcastProcessFunction<String, Message, Message, String, u64>
    for Limits
{
    type Out = String;

    fn process_element(
        &mut self,
        amount: Message,
        ctx: &mut streaming::api::ReadOnlyBroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let amount: u64 = amount.text()?.parse()?;
        let rules = ctx.broadcast_state()?;
        let limit = rules.get(&"limit".to_string()).copied().unwrap_or(u64::MAX);
        let applied = rules.get(&"#".to_string()).copied().unwrap_or(0);
        if amount > limit {
            let mut over = ctx.state(&OVER)?;
            let n = over.value() + 1;
            over.update(n);
            let user = ctx.current_key();
            out.collect(format!(
                "{user}: {amount} over {limit} ({n}) after {applied} rules"
            ));
        }
        Ok(())
    }

    fn process_broadcast_element(
        &mut self,
        rule: Message,
        ctx: &mut streaming::api::BroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let text = rule.text()?;
        let (name, value) = text.split_once('=').ok_or("a rule is name=value")?;
        let mut rules = ctx.broadcast_state()?;
        let n = rules.get(&"#".to_string()).copied().unwrap_or(0) + 1;
        rules.put("#".to_string(), n);
        rules.put(name.to_string(), value.parse()?);
        out.collect(format!("rule {text} #{n}"));
        Ok(())
    }
}

/// Registers the pipeline of [`Limits`] over topic `amounts` keyed by user, with topic
/// `rules` broadcast; returns its output.
fn limits_over_amounts(redis: &RedisEnv) -> CollectSink<String> {
    let out = CollectSink::new();
    redis
        .from_mq_topic_with_options("amounts", "g", earliest(10))
        .key_by(key_of)
        .connect(
            redis
                .from_mq_topic_with_options("rules", "g-rules", earliest(10))
                .broadcast(RULES),
        )
        .process(Limits)
        .sink(out.clone())
        .unwrap();
    out
}

/// A rules topic (one partition) broadcast to every partition of a keyed amounts topic:
/// each partition holds the rules, reads them with its keyed state, and a bad rule is
/// dead-lettered once (by job partition 0) while every partition skips it.
#[test]
fn broadcast_rules_reach_every_partition_and_a_bad_rule_is_dead_lettered_once() {
    let s = setup("several-broadcast");
    create(&s, "amounts", 3);
    create(&s, "rules", 1);
    produce(
        &s,
        "rules",
        &[("r", "limit=20"), ("r", "nonsense"), ("r", "limit=10")],
    );
    let redis = env(&s, "several-broadcast");
    let out = limits_over_amounts(&redis);
    let job = redis.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    // Every partition read both good rules; the bad one was skipped everywhere.
    let mut rules = out.snapshot();
    rules.sort();
    let expected_rules: Vec<String> = ["rule limit=10 #2"; 3]
        .into_iter()
        .chain(["rule limit=20 #1"; 3])
        .map(String::from)
        .collect();
    assert_eq!(rules, expected_rules);
    let mq = s.mq();
    let letters = s.rt.block_on(mq.dead_letters("rules", 10)).unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].payload.as_ref(), b"nonsense");
    produce(
        &s,
        "amounts",
        &[
            ("ann", "5"),
            ("bob", "30"),
            ("ann", "25"),
            ("ann", "40"),
            ("bob", "9"),
        ],
    );
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    job.blocking_shutdown(Duration::MAX);
    let mut over: Vec<String> = (out.snapshot().into_iter())
        .filter(|l| !l.starts_with("rule"))
        .collect();
    over.sort();
    assert_eq!(
        over,
        [
            "ann: 25 over 10 (1) after 2 rules",
            "ann: 40 over 10 (2) after 2 rules",
            "bob: 30 over 10 (1) after 2 rules"
        ]
    );
}

#[test]
fn a_broadcast_topic_of_several_partitions_is_refused_at_start() {
    let s = setup("several-broadcast-refused");
    create(&s, "amounts", 2);
    create(&s, "rules", 2);
    let redis = env(&s, "several-broadcast-refused");
    redis
        .from_mq_topic("amounts", "g")
        .key_by(key_of)
        .connect(redis.from_mq_topic("rules", "g-rules").broadcast(RULES))
        .process(Limits)
        .sink(CollectSink::new())
        .unwrap();
    let err = redis.blocking_start().unwrap_err().to_string();
    assert!(
        err.contains("`rules` is broadcast") && err.contains("has 2 partitions"),
        "{err}"
    );
}

/// A checkpoint of a broadcast job holds every partition's broadcast state and its
/// position in the rules topic: a restore applies the rules after the checkpoint again,
/// on every partition, to the state the checkpoint had, and the users of both partitions
/// then see the same rules.
#[test]
fn a_checkpoint_restores_the_broadcast_state_and_position_of_every_partition() {
    let s = setup("several-broadcast-checkpoint");
    create(&s, "amounts", 2);
    create(&s, "rules", 1);
    let users = ["ann", "bob", "cy", "dan"];
    let config = |s: &EngineSetup| {
        s.config("several-broadcast-checkpoint")
            .checkpoint_key_prefix(format!("{}:ck:", s.prefix))
            .build()
            .unwrap()
    };
    let start = |restore: Option<u64>| {
        let redis = RedisEnv::try_with_config(s.redis.url(), config(&s)).unwrap();
        if let Some(id) = restore {
            redis.restore_from_checkpoint(id).unwrap();
        }
        let out = limits_over_amounts(&redis);
        (redis.blocking_start().unwrap(), out)
    };
    let caught_up = |job: &streaming::redis::JobClient| {
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
    };
    let amounts = |amount: &str| {
        let msgs: Vec<OutgoingMessage> = (users.iter())
            .map(|u| OutgoingMessage::new(amount.to_string()).key(u.to_string()))
            .collect();
        let sent =
            s.rt.block_on(s.mq().producer().send_batch("amounts", &msgs));
        let partitions: std::collections::BTreeSet<u32> =
            sent.unwrap().into_iter().map(|(p, _)| p).collect();
        assert_eq!(partitions.len(), 2, "the users are on both partitions");
    };
    let sorted = |out: &CollectSink<String>| {
        let mut lines = out.snapshot();
        lines.sort();
        lines
    };

    produce(&s, "rules", &[("r", "limit=20")]);
    amounts("25");
    let (job, out) = start(None);
    caught_up(&job);
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert_eq!(ck.status, streaming::redis::CheckpointStatus::Complete);
    produce(&s, "rules", &[("r", "limit=10")]);
    caught_up(&job);
    job.blocking_shutdown(Duration::MAX);
    let mut expected: Vec<String> = (users.iter())
        .map(|u| format!("{u}: 25 over 20 (1) after 1 rules"))
        .chain(["rule limit=10 #2", "rule limit=10 #2"].map(String::from))
        .chain(["rule limit=20 #1", "rule limit=20 #1"].map(String::from))
        .collect();
    expected.sort();
    assert_eq!(sorted(&out), expected);

    // Back to the checkpoint: each partition applies the second rule again, to the
    // state of one rule (#2, not #3), and the users' counts continue from there.
    let (job, out) = start(Some(ck.id));
    caught_up(&job);
    assert_eq!(sorted(&out), ["rule limit=10 #2", "rule limit=10 #2"]);
    amounts("12");
    caught_up(&job);
    job.blocking_shutdown(Duration::MAX);
    let over: Vec<String> = (sorted(&out).into_iter())
        .filter(|l| !l.starts_with("rule"))
        .collect();
    let expected: Vec<String> = (users.iter())
        .map(|u| format!("{u}: 12 over 10 (2) after 2 rules"))
        .collect();
    assert_eq!(over, expected);
}
