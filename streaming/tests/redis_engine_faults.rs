//! The Redis engine survives Redis being killed and restarted (AOF, fsync always) in the
//! middle of a job: it reconnects, resumes every partition from its last commit and ends
//! with exact state and exactly-once list-sink output (both ack modes).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, RedisEnv, RedisListSink, RedisRuntimeConfig};
use support::fast_options;
use support::redis_server::TestRedis;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

fn lists(rt: &tokio::runtime::Runtime, url: &str) -> Option<BTreeMap<String, Vec<u64>>> {
    let client = redis::Client::open(url).ok()?;
    rt.block_on(async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for p in 0..4 {
            let list: Vec<String> = conn
                .lrange(RedisListSink::<String>::key_for("out", "t", p), 0, -1)
                .await
                .ok()?;
            for line in list {
                let (w, n) = line.split_once('=')?;
                out.entry(w.to_string()).or_default().push(n.parse().ok()?);
            }
        }
        Some(out)
    })
}

fn survives_restart(mode: AckMode) {
    let mut redis = TestRedis::private();
    let url = redis.url().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq_opts = fast_options("eng-fault").build().unwrap();
    let mq = rt.block_on(Mq::connect(&url, mq_opts.clone())).unwrap();
    rt.block_on(mq.create_topic("t", 4)).unwrap();
    let words: Vec<String> = (0..3000).map(|i| format!("w{}", i % 13)).collect();
    let msgs: Vec<OutgoingMessage> = words
        .iter()
        .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
        .collect();
    for chunk in msgs.chunks(500) {
        rt.block_on(mq.producer().send_batch("t", chunk)).unwrap();
    }
    drop(mq);
    let config = RedisRuntimeConfig::builder()
        .job_name("faults")
        .job_instance_id("test")
        .mq_options(mq_opts)
        .ack_mode(mode)
        .pipeline_parallelism(2)
        .build()
        .unwrap();
    let env = RedisEnv::create_with_config(url.as_str(), config).unwrap();
    env.from_mq_topic_with_options(
        "t",
        "g",
        SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .batch_count(10)
            .poll_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    )
    .map(|m: Message| m.text().unwrap().to_string())
    .key_by(|w: &String| w.clone())
    .process(|w: String, ctx, out| {
        let mut c = ctx.state(&COUNT)?;
        let n = c.value() + 1;
        c.update(n);
        out.collect(format!("{w}={n}"));
        Ok(())
    })
    .sink(RedisListSink::<String>::text("out"))
    .unwrap();
    let job = env.execute_async().unwrap();
    let total = |l: &BTreeMap<String, Vec<u64>>| l.values().map(Vec::len).sum::<usize>();
    let deadline = Instant::now() + Duration::from_secs(90);
    while lists(&rt, &url).map_or(0, |l| total(&l)) < 300 {
        assert!(
            Instant::now() < deadline,
            "no progress: {:?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    redis.server().kill();
    std::thread::sleep(Duration::from_millis(300));
    redis.server().restart();
    let done = loop {
        if let Some(l) = lists(&rt, &url) {
            if total(&l) >= 3000 {
                break l;
            }
        }
        assert!(
            Instant::now() < deadline,
            "not finished: {:?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    job.cancel();
    assert!(
        !job.diagnostics().errors.is_empty(),
        "the outage was noticed and recovered from"
    );
    let done = lists(&rt, &url).unwrap_or(done);
    for (w, counts) in &done {
        let expected = words.iter().filter(|x| *x == w).count() as u64;
        assert_eq!(counts, &(1..=expected).collect::<Vec<_>>(), "{mode:?} {w}");
    }
    assert_eq!(total(&done), 3000);
}

#[test]
fn redis_restart_mid_run_xack() {
    survives_restart(AckMode::Xack);
}

#[test]
fn redis_restart_mid_run_offset() {
    survives_restart(AckMode::Offset);
}
