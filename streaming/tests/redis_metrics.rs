//! The Redis engine's `metrics` counters and gauges (one test binary: it installs the
//! process-wide recorder).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use streaming::mq::{Message, Mq, OutgoingMessage};
use streaming::redis::{CollectSink, RedisEnv, RedisRuntimeConfig};
use streaming::time::{BoundedOutOfOrderness, TumblingEventTimeWindows};
use support::engine::{earliest, rt};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

#[test]
fn counters_and_the_watermark_gauge_follow_the_diagnostics() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let redis = TestRedis::shared();
    let mq_opts = fast_options("metrics").build().unwrap();
    let rt = rt();
    let mq = rt
        .block_on(Mq::connect(redis.url(), mq_opts.clone()))
        .unwrap();
    rt.block_on(mq.create_topic("ev", 2)).unwrap();
    // Two keys; the 3rd element of each is late (lateness 0, out-of-orderness 0).
    let producer = mq.producer();
    let mut msgs = Vec::new();
    for key in ["a", "b"] {
        for ts in [10, 150, 20, 250] {
            msgs.push(
                OutgoingMessage::new(format!("{key},{ts}"))
                    .key(key)
                    .timestamp_ms(ts),
            );
        }
    }
    rt.block_on(producer.send_batch("ev", &msgs)).unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("metrics-job")
        .job_instance_id("test")
        .state_key_prefix(unique_prefix("metrics"))
        .mq_options(mq_opts)
        .watermark_idle_timeout(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url(), config).unwrap();
    env.from_mq_topic_with_options("ev", "g", earliest(10))
        .map(|m: Message| {
            let (k, ts) = m.text().unwrap().split_once(',').unwrap();
            (k.to_string(), ts.parse::<i64>().unwrap())
        })
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(Duration::ZERO).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .sink(CollectSink::new())
        .unwrap();
    let job = env.execute_async().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    let d = job.diagnostics();
    job.blocking_shutdown(Duration::MAX);

    // name → (sum of counters over partitions, gauges by partition)
    let mut counters: BTreeMap<String, u64> = BTreeMap::new();
    let mut watermarks: BTreeMap<String, f64> = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let k = key.key();
        let label = |name: &str| {
            k.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_string())
                .unwrap_or_default()
        };
        if label("job") != "metrics-job" {
            continue;
        }
        match value {
            DebugValue::Counter(n) => *counters.entry(k.name().to_string()).or_default() += n,
            DebugValue::Gauge(g) => {
                watermarks.insert(label("partition"), g.into_inner());
            }
            DebugValue::Histogram(_) => {}
        }
    }
    let sum = |f: fn(&streaming::redis::PartitionProgress) -> u64| -> u64 {
        d.partitions.iter().map(f).sum()
    };
    assert_eq!(counters["streaming_records_total"], 8);
    assert_eq!(counters["streaming_records_total"], sum(|p| p.records));
    assert_eq!(counters["streaming_records_failed_total"], 0);
    // Per key: [0,100) fires at 150 with 1 element, the 20 is late, [100,200) and
    // [200,300) fire at the flush.
    assert_eq!(counters["streaming_window_fired_total"], 6);
    assert_eq!(
        counters["streaming_window_fired_total"],
        sum(|p| p.window_fired)
    );
    assert_eq!(counters["streaming_window_late_dropped_total"], 2);
    assert_eq!(
        counters["streaming_idle_flushes_total"],
        sum(|p| p.idle_flushes)
    );
    assert!(counters["streaming_idle_flushes_total"] >= 1);
    // Every partition that received data was flushed: its watermark gauge is i64::MAX.
    assert!(!watermarks.is_empty());
    for (partition, w) in &watermarks {
        let p = d
            .partitions
            .iter()
            .find(|p| p.partition.to_string() == *partition)
            .unwrap();
        assert_eq!(*w, p.watermark.unwrap() as f64, "partition {partition}");
    }
}
