//! Event time is chosen, never invented: the three orders three minutes apart give the same
//! one-minute window sums on the memory engine (each order with its event time) and on the
//! Redis engine (each message with that timestamp), one window per order.

mod support;

use std::time::Duration;

use streaming::mq::{Message, Mq, OutgoingMessage};
use streaming::redis::{AckMode, CollectSink, RedisEnv, RedisRuntimeConfig};
use streaming::time::{TimeWindow, TumblingEventTimeWindows};
use streaming::MemoryEnv;
use support::engine::{earliest, rt};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

/// `(customer, amount, placed at ms)`: three minutes apart.
const ORDERS: [(&str, u64, i64); 3] = [("ann", 10, 0), ("ann", 20, 180_000), ("ann", 30, 360_000)];

/// The window pipeline on `(customer, amount)` with event time: `(customer, start, sum)`.
macro_rules! minute_sums {
    ($stream:expr) => {
        $stream
            .key_by(|o: &(String, u64)| o.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)).unwrap())
            .sum_by(|o: &(String, u64)| o.1)
            .map(|(c, w, sum): (String, TimeWindow, u64)| (c, w.start(), sum))
    };
}

fn parse(m: &Message) -> (String, u64) {
    let (customer, amount) = m.text().unwrap().split_once(',').unwrap();
    (customer.to_string(), amount.parse().unwrap())
}

#[test]
fn three_orders_three_minutes_apart_sum_per_minute_on_both_engines() {
    let memory = minute_sums!(MemoryEnv::new()
        .from_timestamped_collection(ORDERS.map(|(c, a, t)| ((c.to_string(), a), t))))
    .collect_vec()
    .unwrap();
    let expected = [("ann", 0, 10), ("ann", 180_000, 20), ("ann", 360_000, 30)]
        .map(|(c, start, sum)| (c.to_string(), start, sum));
    assert_eq!(memory, expected);

    let redis = TestRedis::shared();
    let test = "event_time_orders";
    let mq_opts = fast_options(test).build().unwrap();
    let rt = rt();
    let mq = rt
        .block_on(Mq::connect(redis.url(), mq_opts.clone()))
        .unwrap();
    let topic = format!("{}-orders", unique_prefix(test));
    rt.block_on(mq.create_topic(&topic, 1)).unwrap();
    let messages: Vec<OutgoingMessage> = ORDERS
        .iter()
        .map(|(c, a, t)| {
            OutgoingMessage::new(format!("{c},{a}"))
                .key(c.to_string())
                .timestamp_ms(*t)
        })
        .collect();
    rt.block_on(mq.producer().send_batch(&topic, &messages))
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name(test)
        .job_instance_id("test")
        .state_key_prefix(unique_prefix(test))
        .mq_options(mq_opts)
        .ack_mode(AckMode::Offset)
        .watermark_idle_timeout(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url(), config).unwrap();
    let out = CollectSink::new();
    minute_sums!(env
        .from_mq_topic_with_options(&topic, "g", earliest(10))
        .map(|m: Message| parse(&m)))
    .sink(out.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    let mut on_redis = out.snapshot();
    on_redis.sort();
    assert_eq!(on_redis, memory);
}
