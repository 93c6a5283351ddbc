//! The Redis engine's `metrics` series (one test binary: it installs the process-wide
//! recorder).

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
fn series_follow_the_diagnostics() {
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
    let job = env.blocking_start().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    let d = job.diagnostics();
    job.blocking_shutdown(Duration::MAX);

    // name → sum of counters over partitions; gauges by (name, partition); histogram
    // sample counts by name.
    let mut counters: BTreeMap<String, u64> = BTreeMap::new();
    let mut gauges: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut histograms: BTreeMap<String, usize> = BTreeMap::new();
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
        let name = k.name().to_string();
        match value {
            DebugValue::Counter(n) => *counters.entry(name).or_default() += n,
            DebugValue::Gauge(g) => {
                let at = format!("{}{}", label("partition"), label("operator"));
                gauges.insert((name, at), g.into_inner());
            }
            DebugValue::Histogram(h) => *histograms.entry(name).or_default() += h.len(),
        }
    }
    let sum = |f: fn(&streaming::redis::PartitionProgress) -> u64| -> u64 {
        d.partitions.iter().map(f).sum()
    };
    assert_eq!(counters["streaming_jobs_started_total"], 1);
    assert_eq!(counters["streaming_pipelines_started_total"], 1);
    assert_eq!(counters["streaming_jobs_cancelled_total"], 1);
    assert_eq!(counters["streaming_records_total"], 8);
    assert_eq!(counters["streaming_records_total"], sum(|p| p.records));
    assert_eq!(counters["streaming_records_failed_total"], 0);
    // Per key: [0,100) fires at 150 with 1 element, the 20 is late, [100,200) fires at
    // 250 and [200,300) at the flush.
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
    // Each key's batch fires [0,100) and [100,200) in memory (never written); its
    // [200,300) pane is written, then deleted by the flush that fires it.
    assert_eq!(counters["streaming_state_writes_total"], 2);
    assert_eq!(counters["streaming_state_deletes_total"], 2);
    assert_eq!(counters["streaming_state_reads_total"], 0);
    assert!(histograms["streaming_commit_seconds"] >= 1);
    assert!(histograms["streaming_handle_seconds"] >= 1);
    // Every partition that received data was flushed: its watermark gauge keeps the last
    // event-time watermark (250: each key's latest element, out-of-orderness 0) and its
    // flushed flag is 1; a partition that never committed a watermark has neither series.
    let with_data: Vec<String> = d
        .partitions
        .iter()
        .filter(|p| p.records > 0)
        .map(|p| p.partition.to_string())
        .collect();
    assert!(!with_data.is_empty());
    for p in ["0", "1"] {
        let w = gauges.get(&("streaming_watermark_ms".into(), p.into()));
        let flushed = gauges.get(&("streaming_watermark_flushed".into(), p.into()));
        if with_data.iter().any(|d| d == p) {
            assert_eq!(w, Some(&250.0), "partition {p}");
            assert_eq!(flushed, Some(&1.0), "partition {p}");
        } else {
            assert_eq!((w, flushed), (None, None), "partition {p}");
        }
    }
    // The registry's heartbeat sets each partition's stalled gauge: nothing stalled.
    for p in ["0", "1"] {
        let stalled = gauges.get(&("streaming_partition_stalled".into(), p.into()));
        assert_eq!(stalled, Some(&0.0), "partition {p}");
    }
    // The window operator's timer queue is empty once every window fired.
    let timers: Vec<f64> = gauges
        .iter()
        .filter(|((name, _), _)| name == "streaming_timer_queue_size")
        .map(|(_, v)| *v)
        .collect();
    assert!(!timers.is_empty());
    assert!(timers.iter().all(|t| *t == 0.0), "{timers:?}");

    two_inputs_have_a_lag_gauge_each(&snapshotter, redis.url(), &mq, &rt);
}

/// A job reading two topics samples each input's consumer lag under its own topic and
/// group: both reach 0 once everything is read.
fn two_inputs_have_a_lag_gauge_each(
    snapshotter: &metrics_util::debugging::Snapshotter,
    url: &str,
    mq: &Mq,
    rt: &tokio::runtime::Runtime,
) {
    rt.block_on(mq.create_topic("lag-a", 1)).unwrap();
    rt.block_on(mq.create_topic("lag-b", 1)).unwrap();
    let msgs: Vec<OutgoingMessage> = (0..5)
        .map(|i| OutgoingMessage::new(format!("{i}")))
        .collect();
    rt.block_on(mq.producer().send_batch("lag-b", &msgs))
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("metrics-two")
        .job_instance_id("test")
        .state_key_prefix(unique_prefix("metrics-two"))
        .mq_options(mq.options().clone())
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    env.from_mq_topic_with_options("lag-a", "ga", earliest(10))
        .union(env.from_mq_topic_with_options("lag-b", "gb", earliest(10)))
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    let lags = || {
        let mut lags = BTreeMap::new();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let k = key.key();
            let label =
                |name: &str| (k.labels().find(|l| l.key() == name)).map(|l| l.value().to_string());
            if k.name() == "streaming_consumer_lag"
                && label("job").as_deref() == Some("metrics-two")
            {
                if let DebugValue::Gauge(g) = value {
                    let at = (label("topic").unwrap(), label("group").unwrap());
                    lags.insert(at, g.into_inner());
                }
            }
        }
        lags
    };
    // Sampled at most every 2 s: the first sample may predate the reads.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let expected = BTreeMap::from([
        (("lag-a".to_string(), "ga".to_string()), 0.0),
        (("lag-b".to_string(), "gb".to_string()), 0.0),
    ]);
    while lags() != expected {
        assert!(std::time::Instant::now() < deadline, "{:?}", lags());
        std::thread::sleep(Duration::from_millis(100));
    }
    job.blocking_shutdown(Duration::MAX);
}
