//! Two-input fragments: one function runs under the two-input test driver, on the memory
//! engine and on the Redis engine (two co-partitioned topics) with the same outputs, and
//! with the operator ids of the same pipeline written inline, so keyed state written by
//! the inline pipeline is found by the fragment.

mod support;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use streaming::api::{Collector, KeyedContext, ValueStateDescriptor};
use streaming::fragment::{Input, TwoInputFragment};
use streaming::mq::{Message, OutgoingMessage};
use streaming::redis::{CollectSink, RedisEnv};
use streaming::testing::TwoInputTestDriver;
use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};
use streaming::{BoxError, Error, KeyedCoProcessFunction, MemoryEnv};
use support::engine::{earliest, setup, wait_until, EngineSetup};

const MINUTE: i64 = 60_000;
/// The event time the records start at (ms).
const T0: i64 = 1_700_000_000_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Customer {
    id: String,
    name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u32,
    customer: String,
    cents: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Payment {
    customer: String,
    cents: u64,
}

/// Each customer's latest record.
const LATEST: ValueStateDescriptor<Option<Customer>> =
    ValueStateDescriptor::persistent("customer", None);

/// Customers keep their latest record; each order goes out with its customer's name
/// (`?` when none came yet): `(order id, name, cents)`.
#[derive(Clone)]
struct Enrich;

impl KeyedCoProcessFunction<String, Customer, Order> for Enrich {
    type Out = (u32, String, u64);
    fn process_element1(
        &mut self,
        customer: Customer,
        ctx: &mut KeyedContext<'_, String>,
        _out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        ctx.state(&LATEST)?.update(Some(customer));
        Ok(())
    }
    fn process_element2(
        &mut self,
        order: Order,
        ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        let name = match ctx.state(&LATEST)?.value() {
            Some(customer) => customer.name,
            None => "?".to_string(),
        };
        out.collect((order.id, name, order.cents));
        Ok(())
    }
}

/// The service's enrichment, written once.
fn enrich(
    customers: Input<Message>,
    orders: Input<Message>,
) -> impl TwoInputFragment<Message, Message, Out = (u32, String, u64)> {
    customers
        .try_map(|m: Message| m.json::<Customer>())
        .connect(orders.try_map(|m: Message| m.json::<Order>()))
        .key_by(|c: &Customer| c.id.clone(), |o: &Order| o.customer.clone())
        .process(Enrich)
}

/// Each order with the payments of its customer made within 10 minutes after it:
/// `(order id, payment cents)`.
fn paid(
    orders: Input<Message>,
    payments: Input<Message>,
) -> impl TwoInputFragment<Message, Message, Out = (u32, u64)> {
    let payments = payments
        .try_map(|m: Message| m.json::<Payment>())
        .key_by(|p: &Payment| p.customer.clone());
    orders
        .try_map(|m: Message| m.json::<Order>())
        .key_by(|o: &Order| o.customer.clone())
        .interval_join(payments)
        .between(0, 10 * MINUTE)
        .map(|join| join.process(|o: &Order, p: &Payment| (o.id, p.cents)))
}

fn json_message(value: &impl Serialize, key: &str, at: i64) -> Message {
    Message::new(serde_json::to_vec(value).unwrap())
        .with_key(key)
        .with_timestamp_ms(at)
}

fn customers() -> Vec<Message> {
    let customer = |id: &str, name: &str, at| {
        let c = Customer {
            id: id.into(),
            name: name.into(),
        };
        json_message(&c, id, at)
    };
    vec![
        customer("c1", "Ada", T0),
        customer("c2", "Bob", T0 + 100),
        customer("c1", "Ada Lovelace", T0 + 200),
    ]
}

fn order(id: u32, customer: &str, cents: u64, at: i64) -> Message {
    let o = Order {
        id,
        customer: customer.into(),
        cents,
    };
    json_message(&o, customer, at)
}

fn orders() -> Vec<Message> {
    vec![
        order(7, "c1", 300, T0 + 1_000),
        order(8, "c2", 50, T0 + 1_100),
        order(9, "c3", 20, T0 + 1_200),
        order(10, "c1", 25, T0 + 1_300),
    ]
}

fn enriched() -> Vec<(u32, String, u64)> {
    vec![
        (7, "Ada Lovelace".into(), 300),
        (8, "Bob".into(), 50),
        (9, "?".into(), 20),
        (10, "Ada Lovelace".into(), 25),
    ]
}

fn payment(customer: &str, cents: u64, at: i64) -> Message {
    let p = Payment {
        customer: customer.into(),
        cents,
    };
    json_message(&p, customer, at)
}

fn join_orders() -> Vec<Message> {
    vec![
        order(7, "ada", 100, T0),
        order(8, "bob", 200, T0),
        order(9, "ada", 300, T0 + 5 * MINUTE),
    ]
}

/// Ada pays 30 after 1 minute (order 7), and 12 and 4 in the same millisecond after 9
/// (orders 7 and 9: the second payment is at the watermark the first set, and on time);
/// Bob pays after 15 minutes, too late for order 8.
fn payments() -> Vec<Message> {
    vec![
        payment("ada", 30, T0 + MINUTE),
        payment("ada", 12, T0 + 9 * MINUTE),
        payment("ada", 4, T0 + 9 * MINUTE),
        payment("bob", 5, T0 + 15 * MINUTE),
    ]
}

fn paid_pairs() -> Vec<(u32, u64)> {
    vec![(7, 4), (7, 12), (7, 30), (9, 4), (9, 12)]
}

fn timestamped(messages: Vec<Message>) -> Vec<(Message, i64)> {
    (messages.into_iter())
        .map(|m| {
            let at = m.timestamp_ms;
            (m, at)
        })
        .collect()
}

fn sorted<T: Ord>(mut values: Vec<T>) -> Vec<T> {
    values.sort();
    values
}

#[test]
fn the_driver_enriches_orders_with_the_latest_customer_and_reads_its_keyed_state(
) -> Result<(), Error> {
    let mut driver = TwoInputTestDriver::builder()
        .source_ids("customers.enrich", "orders.enrich")
        .build(enrich)?;
    for customer in customers() {
        driver.push_message_first(customer)?;
    }
    for order in orders() {
        driver.push_message_second(order)?;
    }
    assert_eq!(driver.output(), enriched());
    assert_eq!(driver.stateful_operators(), ["customers.enrich/4:process"]);
    let latest = driver.with_keyed_state("process", &"c1".to_string(), |ctx| {
        ctx.state(&LATEST).map(|s| s.value())
    })??;
    assert_eq!(latest.map(|c| c.name).as_deref(), Some("Ada Lovelace"));

    // A customer record that does not decode is the first input's dead letter.
    driver.push_message_first(Message::new("{").with_key("c9"))?;
    driver.push_message_second(order(11, "c2", 1, T0 + 2_000))?;
    let letters = driver.dead_letters_first();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].error_type, "decode");
    assert!(driver.dead_letters_second().is_empty());
    assert_eq!(driver.output(), [(11, "Bob".to_string(), 1)]);
    driver.finish()?;
    Ok(())
}

#[test]
fn on_the_memory_engine_the_fragment_enriches_like_the_driver_with_inline_ids() -> Result<(), Error>
{
    let env = MemoryEnv::new();
    let spliced = env
        .from_timestamped_collection_with_id("customers.enrich", timestamped(customers()))
        .transform_with(
            env.from_timestamped_collection_with_id("orders.enrich", timestamped(orders())),
            enrich,
        );
    let inline = env
        .from_timestamped_collection_with_id("customers.enrich", timestamped(customers()))
        .try_map(|m: Message| m.json::<Customer>())
        .connect(
            env.from_timestamped_collection_with_id("orders.enrich", timestamped(orders()))
                .try_map(|m: Message| m.json::<Order>()),
        )
        .key_by(|c: &Customer| c.id.clone(), |o: &Order| o.customer.clone())
        .process(Enrich);
    assert_eq!(spliced.next_operator_id("map"), "customers.enrich/5:map");
    assert_eq!(inline.next_operator_id("map"), "customers.enrich/5:map");
    assert_eq!(spliced.collect_vec()?, enriched());
    assert_eq!(inline.collect_vec()?, enriched());
    Ok(())
}

#[test]
fn an_interval_join_fragment_gives_the_same_pairs_under_the_driver_and_on_the_memory_engine(
) -> Result<(), Error> {
    let mut driver = TwoInputTestDriver::new(paid)?;
    for order in join_orders() {
        driver.push_message_first(order)?;
    }
    for payment in payments() {
        driver.push_message_second(payment)?;
    }
    assert_eq!(sorted(driver.output()), paid_pairs());
    // Each key keeps one cleanup timer, at its earliest expiry: Ada's first payment's
    // (1 ms after its own time: no later order can meet it), Bob's order's (1 ms after the
    // 10 minutes an on-time payment may still come).
    let timers = driver.pending_timers::<String>("process")?;
    let times: Vec<(i64, &str)> = (timers.iter())
        .map(|t| (t.time - T0, t.key.as_str()))
        .collect();
    assert_eq!(times, [(MINUTE + 1, "ada"), (10 * MINUTE + 1, "bob")]);

    // The first input's watermark alone does not expire anything: the payments' holds
    // the join's back.
    driver.advance_watermark_first(T0 + 20 * MINUTE)?;
    assert_eq!(driver.watermark(), i64::MIN);
    driver.push_message_second(payment("ada", 7, T0 + 12 * MINUTE))?;
    assert_eq!(driver.output(), [(9, 7)]);
    driver.advance_watermark_second(T0 + 20 * MINUTE)?;
    assert_eq!(driver.watermark(), T0 + 20 * MINUTE);
    assert!(driver.pending_timers::<String>("process")?.is_empty());
    // Behind the watermark: late, joins nothing.
    driver.push_message_second(payment("ada", 1, T0 + 11 * MINUTE))?;
    assert!(driver.output().is_empty());
    assert_eq!(driver.summary().late_elements, 1);
    driver.finish()?;

    let env = MemoryEnv::new();
    let pairs = env
        .from_timestamped_collection(timestamped(join_orders()))
        .transform_with(
            env.from_timestamped_collection(timestamped(payments())),
            paid,
        )
        .collect_vec()?;
    assert_eq!(sorted(pairs), paid_pairs());
    Ok(())
}

type Seen = (String, i64); // (ad, event time ms)

/// Each click with each view of the same ad in the same 10-second window:
/// `(ad, click ms, view ms)`.
fn clicks_with_views(
    clicks: Input<Seen>,
    views: Input<Seen>,
) -> impl TwoInputFragment<Seen, Seen, Out = (String, i64, i64)> {
    TumblingEventTimeWindows::of(Duration::from_secs(10)).map(|windows| {
        (clicks.connect(views))
            .key_by(|c: &Seen| c.0.clone(), |v: &Seen| v.0.clone())
            .window(windows)
            .join(|click: &Seen, view: &Seen| (click.0.clone(), click.1, view.1))
    })
}

#[test]
fn a_window_join_fragment_fires_at_the_lowest_watermark_under_the_driver_and_on_memory(
) -> Result<(), Error> {
    let seen = |ad: &str, at: i64| ((ad.to_string(), at), at);
    let clicks = [seen("ad1", 5_000), seen("ad2", 12_000)];
    let views = [seen("ad1", 1_000), seen("ad2", 3_000)];
    let mut driver = TwoInputTestDriver::new(clicks_with_views)?;
    driver.push_all_first(clicks.clone())?;
    driver.push_all_second(views.clone())?;
    driver.advance_watermark_first(19_999)?;
    assert!(driver.output().is_empty());
    driver.advance_watermark_second(19_999)?;
    let pairs = [("ad1".to_string(), 5_000, 1_000)];
    assert_eq!(driver.output(), pairs);
    driver.finish()?;
    assert!(driver.output().is_empty()); // ad2's click and view are in different windows

    let env = MemoryEnv::new();
    let joined = env
        .from_timestamped_collection(clicks)
        .transform_with(env.from_timestamped_collection(views), clicks_with_views)
        .collect_vec()?;
    assert_eq!(joined, pairs);
    Ok(())
}

/// Per minute of event time, how many times each word came, counted in each input on
/// its own: `(word, minute start, count)`.
fn counts_per_input(
    first: Input<String>,
    second: Input<String>,
) -> impl TwoInputFragment<String, String, Out = (String, i64, u64)> {
    let counts = || -> Result<_, Error> {
        let minutes = TumblingEventTimeWindows::of(Duration::from_secs(60))?;
        let first = (first.key_by(|w: &String| w.clone()).window(minutes))
            .count()
            .map(|(w, window, n)| (w, window.start(), n));
        let second = (second.key_by(|w: &String| w.clone()).window(minutes))
            .count()
            .map(|(w, window, n)| (w, window.start(), n));
        Ok(first.union(second))
    };
    counts()
}

/// Per minute of event time, how many times each word came in both inputs together.
fn counts_of_both(
    first: Input<String>,
    second: Input<String>,
) -> impl TwoInputFragment<String, String, Out = (String, i64, u64)> {
    let minutes = TumblingEventTimeWindows::of(Duration::from_secs(60));
    minutes.map(|minutes| {
        (first.union(second))
            .key_by(|w: &String| w.clone())
            .window(minutes)
            .count()
            .map(|(w, window, n)| (w, window.start(), n))
    })
}

#[test]
fn each_input_has_its_own_watermark_and_the_combined_operators_see_the_lowest() -> Result<(), Error>
{
    let word = |w: &str| w.to_string();
    let mut own = TwoInputTestDriver::new(counts_per_input)?;
    let mut both = TwoInputTestDriver::new(counts_of_both)?;
    for driver in [&mut own, &mut both] {
        driver.push_first(word("a"), 1_000)?;
        driver.push_second(word("a"), 2_000)?;
        driver.push_second(word("b"), 3_000)?;
        driver.advance_watermark_first(59_999)?;
        assert_eq!(
            (driver.watermark_first(), driver.watermark()),
            (59_999, i64::MIN)
        );
    }
    // The first input's own window fires at its own watermark; the window after the
    // union waits for the second input's.
    assert_eq!(own.output(), [(word("a"), 0, 1)]);
    assert!(both.output().is_empty());
    for driver in [&mut own, &mut both] {
        driver.advance_watermark_second(59_999)?;
    }
    assert_eq!(own.output(), [(word("a"), 0, 1), (word("b"), 0, 1)]);
    assert_eq!(both.output(), [(word("a"), 0, 2), (word("b"), 0, 1)]);

    // An ended input no longer holds the other back.
    for driver in [&mut own, &mut both] {
        driver.push_first(word("c"), 70_000)?;
        driver.finish_second()?;
        assert_eq!(driver.watermark(), 59_999);
        driver.advance_watermark_first(119_999)?;
    }
    assert_eq!(own.output(), [(word("c"), 60_000, 1)]);
    assert_eq!(both.output(), [(word("c"), 60_000, 1)]);
    own.finish()?;
    both.finish()?;
    Ok(())
}

#[test]
fn on_the_memory_engine_each_inputs_own_operators_see_its_own_watermark() -> Result<(), Error> {
    let env = MemoryEnv::new();
    let words = |words: &[(&str, i64)]| {
        let words: Vec<(String, i64)> = (words.iter()).map(|(w, t)| (w.to_string(), *t)).collect();
        env.from_collection(words)
            .assign_timestamps_and_watermarks_with(|w: &(String, i64), _| w.1, AscendingTimestamps)
            .map(|w: (String, i64)| w.0)
    };
    let first = words(&[("a", 1_000), ("a", 61_000)]);
    let second = words(&[("b", 2_000), ("b", 62_000)]);
    let counts = first
        .transform_with(second, counts_per_input)
        .collect_vec()?;
    // The memory engine runs the first input to its end, then the second: the first's
    // windows fire as its own watermark passes them, before the second input starts.
    let count = |w: &str, minute: i64| (w.to_string(), minute * MINUTE, 1);
    assert_eq!(
        counts,
        [count("a", 0), count("a", 1), count("b", 0), count("b", 1)]
    );

    // As the same text written inline.
    let minutes = TumblingEventTimeWindows::of(Duration::from_secs(60))?;
    let per_minute = |input: Vec<(&str, i64)>| {
        words(&input)
            .key_by(|w: &String| w.clone())
            .window(minutes)
            .count()
            .map(|(w, window, n)| (w, window.start(), n))
    };
    let first = per_minute(vec![("a", 1_000), ("a", 61_000)]);
    let inline = first.union(per_minute(vec![("b", 2_000), ("b", 62_000)]));
    assert_eq!(inline.collect_vec()?, counts);
    Ok(())
}

/// Combines its inputs the wrong way round.
fn second_first(
    first: Input<String>,
    second: Input<String>,
) -> impl TwoInputFragment<String, String, Out = String> {
    second.union(first)
}

#[test]
fn misuse_is_an_error_naming_the_rule() -> Result<(), Error> {
    let union = |a: Input<String>, b: Input<String>| a.union(b);
    let mut driver = TwoInputTestDriver::new(union)?;
    driver.push_first("a".to_string(), 1)?;
    driver.finish_first()?;
    let ended = driver.push_first("b".to_string(), 2).unwrap_err();
    assert!(ended.to_string().contains("`finish_first`"), "{ended}");
    // The driver goes on with the other input.
    driver.push_second("c".to_string(), 3)?;
    assert_eq!(driver.output(), ["a", "c"]);
    driver.finish()?;
    let closed = driver.push_second("d".to_string(), 4).unwrap_err();
    assert!(closed.to_string().contains("closed"), "{closed}");

    let misordered = TwoInputTestDriver::new(second_first).unwrap_err();
    assert!(matches!(
        misordered,
        Error::InvalidConfig {
            field: "fragment",
            ..
        }
    ));
    let env = MemoryEnv::new();
    let run = env
        .from_timestamped_collection(vec![("x".to_string(), 1)])
        .transform_with(
            env.from_timestamped_collection(vec![("y".to_string(), 2)]),
            second_first,
        )
        .collect_vec();
    assert!(matches!(
        run,
        Err(Error::InvalidConfig {
            field: "fragment",
            ..
        })
    ));

    let same_ids = TwoInputTestDriver::builder()
        .source_ids("words", "words")
        .build(union)
        .unwrap_err();
    assert!(matches!(
        same_ids,
        Error::InvalidConfig {
            field: "source_id",
            ..
        }
    ));
    Ok(())
}

fn create(s: &EngineSetup, topic: &str, partitions: u32) {
    s.rt.block_on(s.mq().create_topic(topic, partitions))
        .unwrap();
}

/// Sends `messages` to `topic`, each to the partition its key picks, with its timestamp.
fn produce(s: &EngineSetup, topic: &str, messages: Vec<Message>) {
    let outgoing: Vec<OutgoingMessage> = (messages.into_iter())
        .map(|m| {
            OutgoingMessage::new(m.payload.to_vec())
                .key(m.key.as_deref().unwrap_or_default())
                .timestamp_ms(m.timestamp_ms)
        })
        .collect();
    s.rt.block_on(s.mq().producer().send_batch(topic, &outgoing))
        .unwrap();
}

fn env(s: &EngineSetup, job: &str) -> RedisEnv {
    env_with(s, job, Duration::from_secs(3_600))
}

/// A job whose watermarks trail each topic's latest timestamp by `out_of_orderness`.
fn env_with(s: &EngineSetup, job: &str, out_of_orderness: Duration) -> RedisEnv {
    let config = (s.config(job))
        .watermark_out_of_orderness(out_of_orderness)
        .build()
        .unwrap();
    RedisEnv::try_with_config(s.redis.url(), config).unwrap()
}

/// The inline pipeline keeps the customers; the same job then runs the fragment, which
/// finds them: its process operator has the inline one's id.
#[test]
fn on_redis_the_fragment_finds_the_state_of_the_inline_pipeline_and_enriches_alike() {
    let s = setup("fragment-enrich");
    create(&s, "customers", 2);
    create(&s, "orders", 2);
    produce(&s, "customers", customers());
    let redis = env(&s, "enrich");
    let inline_out = CollectSink::new();
    redis
        .from_mq_topic_with_options("customers", "enrich", earliest(10))
        .try_map(|m: Message| m.json::<Customer>())
        .connect(
            redis
                .from_mq_topic_with_options("orders", "enrich", earliest(10))
                .try_map(|m: Message| m.json::<Order>()),
        )
        .key_by(|c: &Customer| c.id.clone(), |o: &Order| o.customer.clone())
        .process(Enrich)
        .sink(inline_out.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    job.blocking_shutdown(Duration::MAX);
    assert!(inline_out.snapshot().is_empty());

    produce(&s, "orders", orders());
    let redis = env(&s, "enrich");
    let out = CollectSink::new();
    redis
        .from_mq_topic_with_options("customers", "enrich", earliest(10))
        .transform_with(
            redis.from_mq_topic_with_options("orders", "enrich", earliest(10)),
            enrich,
        )
        .sink(out.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    wait_until("the enriched orders", &job, || out.len() == 4);
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(sorted(out.snapshot()), enriched());
}

#[test]
fn on_redis_the_interval_join_fragment_pairs_orders_and_payments_like_the_driver() {
    let s = setup("fragment-paid");
    create(&s, "orders", 2);
    create(&s, "payments", 2);
    // Ada's order 11 (after 20 minutes, meeting none of her payments) takes the orders'
    // watermark ahead before any payment comes, so the payments' own watermark is the
    // join's: Ada's second payment of one millisecond comes at it, and is on time.
    let mut orders = join_orders();
    orders.push(order(11, "ada", 1, T0 + 20 * MINUTE));
    produce(&s, "orders", orders);
    // The default out-of-orderness: watermarks at the latest timestamps themselves.
    let redis = env_with(&s, "paid", Duration::ZERO);
    let out = CollectSink::new();
    redis
        .from_mq_topic_with_options("orders", "paid", earliest(2))
        .transform_with(
            redis.from_mq_topic_with_options("payments", "paid", earliest(2)),
            paid,
        )
        .sink(out.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    produce(&s, "payments", payments());
    wait_until("the paid orders", &job, || out.len() == 5);
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(sorted(out.snapshot()), paid_pairs());
}
