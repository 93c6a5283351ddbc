//! `pipeline!` on the Redis engine: the same pipeline text (one `macro_rules!` body) on
//! `MemoryEnv` and `RedisEnv` gives the same output, with keyed `ValueState` declared by
//! `.state(..)`.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use streaming::{pipeline, MemoryEnv};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

/// One pipeline text for both engines: `$env.$source(..)` and the operators that turn its
/// elements into words are the engine's; the counting and the sink follow.
macro_rules! word_count {
    ($env:ident . $source:ident ( $($sa:tt)* ) $( . $op:ident ( $($oa:tt)* ) )* => $sink:ident ( $($ka:tt)* )) => {
        pipeline! {
            $env.$source($($sa)*)
                $( .$op($($oa)*) )*
                .key_by(|w: &String| w.clone())
                .state(count: ValueState<u64> = 0)
                .process(|w: String, ctx, out| {
                    let mut count = ctx.state(count)?;
                    let n = count.value() + 1;
                    count.update(n);
                    out.collect((w, n));
                    Ok(())
                })
                .$sink($($ka)*)
        }
    };
}

fn words(n: usize, keys: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("w{}", (i * 7 + i / 3) % keys))
        .collect()
}

/// Per key, the sequence of its counts in order.
fn by_key(out: &[(String, u64)]) -> BTreeMap<String, Vec<u64>> {
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (k, v) in out {
        m.entry(k.clone()).or_default().push(*v);
    }
    m
}

fn committed_records(job: &JobClient) -> u64 {
    job.diagnostics()
        .partitions
        .iter()
        .map(|p| p.records + p.failed)
        .sum()
}

#[test]
fn the_same_pipeline_text_counts_the_same_on_both_engines() {
    let redis = TestRedis::shared();
    let mq_opts = fast_options("pipe-count").build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(redis.url(), mq_opts.clone()))
        .unwrap();
    rt.block_on(mq.create_topic("words", 4)).unwrap();
    let input = words(400, 12);

    let env = MemoryEnv::new();
    let mut memory = Vec::new();
    word_count!(env.from_collection(input.clone()) => for_each(|p| memory.push(p))).unwrap();
    let expected = by_key(&memory);
    assert_eq!(expected.len(), 12);
    assert_eq!(expected.values().map(Vec::len).sum::<usize>(), 400);
    assert!(expected
        .values()
        .all(|v| v.iter().copied().eq(1..=v.len() as u64)));

    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = input
        .iter()
        .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
        .collect();
    rt.block_on(producer.send_batch("words", &msgs)).unwrap();

    for mode in [AckMode::Xack, AckMode::Offset] {
        let prefix = unique_prefix("pipe-count");
        let config = RedisRuntimeConfig::builder()
            .job_name(format!("pipe-{mode:?}"))
            .job_instance_id("test")
            .state_key_prefix(&prefix)
            .mq_options(mq_opts.clone())
            .ack_mode(mode)
            .pipeline_parallelism(2)
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(redis.url(), config).unwrap();
        let options = SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .batch_count(50)
            .poll_timeout(Duration::from_millis(50))
            .build()
            .unwrap();
        let group = format!("g-{mode:?}");
        let out = CollectSink::new();
        let registered: Result<(), streaming::Error> = word_count!(env
            .from_mq_topic_with_options("words", &group, options)
            .map(|m: Message| m.text().unwrap().to_string())
            => sink(out.clone()));
        registered.unwrap();
        let job = env.blocking_start().unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(60);
        while committed_records(&job) < 400 {
            assert!(std::time::Instant::now() < end, "{:?}", job.diagnostics());
            std::thread::sleep(Duration::from_millis(20));
        }
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        assert_eq!(by_key(&out.snapshot()), expected, "{mode:?}");
        // The state is kept under the operator id the macro gives the `process`.
        let ids = streaming::__private::pipeline_ids!(env
            .from_mq_topic_with_options("words", "g-Xack", options)
            .map(|m: Message| m.text().unwrap().to_string())
            .key_by(|w: &String| w.clone())
            .state(count: ValueState<u64> = 0)
            .process(|w: String, ctx, out| Ok(()))
            .sink(s));
        let process_id = ids[1].replace("g-Xack", &group);
        assert_eq!(process_id, format!("words.{group}/3:process"));
        let mut conn = redis::Client::open(redis.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut conn)
            .unwrap();
        let state_keys = keys
            .iter()
            .filter(|k| k.ends_with(&format!(":{process_id}:count")))
            .count();
        assert_eq!(state_keys, 4, "{keys:?}");
    }
}

#[test]
fn pipeline_ids_of_a_redis_pipeline_are_the_builders() {
    let ids = streaming::__private::pipeline_ids!(env
        .from_mq_topic_with_id("words-v1", "words", "g")
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .state(count: ValueState<u64> = 0)
        .process(|w: String, ctx, out| Ok(()))
        .sink(s));
    assert_eq!(
        ids,
        ["words-v1/1:map", "words-v1/3:process", "words-v1/4:sink"]
    );
}
