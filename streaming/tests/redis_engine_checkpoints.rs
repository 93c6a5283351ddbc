//! Checkpoints of the Redis engine against a private redis-server: a restore reproduces
//! exactly what an uninterrupted run produced after the checkpoint (keyed state, window
//! panes and watermarks, at another parallelism), periodic checkpoints and retention,
//! single flight, drain timeout, trimmed streams, a stale leader's checkpoint.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, OutgoingMessage};
use streaming::redis::{
    AckMode, CheckpointStatus, CollectSink, JobClient, RedisEnv, RedisRuntimeConfigBuilder,
};
use streaming::time::{TimeWindow, TumblingEventTimeWindows};
use support::engine::{earliest, setup, wait_until, EngineSetup as Setup};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
const PARTITIONS: u32 = 4;

type Counted = (String, u64);
type Windowed = (String, TimeWindow, u64);

/// The two pipelines of the job: a keyed running count of topic `c` and a 100 ms
/// tumbling event-time window count of topic `w` (event time = message timestamp).
struct Outputs {
    counts: CollectSink<Counted>,
    windows: CollectSink<Windowed>,
}

fn register(env: &RedisEnv, topics: (&str, &str)) -> Outputs {
    let out = Outputs {
        counts: CollectSink::new(),
        windows: CollectSink::new(),
    };
    env.from_mq_topic_with_options(topics.0, "g", earliest(7))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(out.counts.clone())
        .unwrap();
    env.from_mq_topic_with_options(topics.1, "g", earliest(5))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .sink(out.windows.clone())
        .unwrap();
    out
}

impl Setup {
    fn ck_config(&self, job: &str, mode: AckMode) -> RedisRuntimeConfigBuilder {
        self.config(job)
            .ack_mode(mode)
            .checkpoint_key_prefix(format!("{}:ck:", self.prefix))
    }

    /// `n` messages to each topic from message `from` on: keys `k0`..`k9`; the window
    /// topic's timestamps grow 7 ms per message.
    fn produce_both(&self, topics: (&str, &str), from: usize, n: usize) {
        let producer = self.mq().producer();
        let (mut c, mut w) = (Vec::new(), Vec::new());
        for i in from..from + n {
            let key = format!("k{}", i % 10);
            c.push(OutgoingMessage::new(key.clone()).key(key.clone()));
            w.push(
                OutgoingMessage::new(key.clone())
                    .key(key)
                    .timestamp_ms(1_000 + 7 * i as i64),
            );
        }
        self.rt.block_on(producer.send_batch(topics.0, &c)).unwrap();
        self.rt.block_on(producer.send_batch(topics.1, &w)).unwrap();
    }

    fn topics(&self, name: &str) -> (String, String) {
        let topics = (format!("{name}-c"), format!("{name}-w"));
        let mq = self.mq();
        for t in [&topics.0, &topics.1] {
            self.rt.block_on(mq.create_topic(t, PARTITIONS)).unwrap();
        }
        topics
    }

    fn conn(&self) -> redis::aio::MultiplexedConnection {
        self.rt
            .block_on(
                redis::Client::open(self.redis.url())
                    .unwrap()
                    .get_multiplexed_async_connection(),
            )
            .unwrap()
    }

    /// Every count state hash of the job (one per partition of the count topic).
    fn counts(&self, job: &str, topic: &str) -> Vec<HashMap<String, String>> {
        let mut conn = self.conn();
        (0..PARTITIONS)
            .map(|p| {
                let hash = format!(
                    "{}:{job}:{{{topic}:{p}}}:g:{topic}.g/3:process:count",
                    self.prefix
                );
                self.rt.block_on(conn.hgetall(&hash)).unwrap()
            })
            .collect()
    }
}

fn caught_up(job: &JobClient) {
    assert!(
        job.blocking_await_caught_up(Duration::from_secs(60))
            .unwrap(),
        "{:#?}",
        job.diagnostics()
    );
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn windows_sorted(v: Vec<Windowed>) -> Vec<(String, i64, i64, u64)> {
    sorted(
        v.into_iter()
            .map(|(k, w, n)| (k, w.start(), w.end(), n))
            .collect(),
    )
}

/// A restore at parallelism 3 of a checkpoint taken at 2 reproduces exactly the outputs
/// and state the uninterrupted run produced after the checkpoint, in both ack modes.
#[test]
fn a_restore_at_parallelism_3_replays_exactly_what_the_run_at_2_produced_after_the_checkpoint() {
    for mode in [AckMode::Offset, AckMode::Xack] {
        let s = setup(&format!("ck-restore-{mode:?}"));
        let job_name = "restore";
        let names = s.topics("r");
        let topics = (names.0.as_str(), names.1.as_str());
        s.produce_both(topics, 0, 300);
        let env = RedisEnv::try_with_config(
            s.redis.url(),
            s.ck_config(job_name, mode)
                .pipeline_parallelism(2)
                .build()
                .unwrap(),
        )
        .unwrap();
        let first = register(&env, topics);
        let job = env.execute_async().unwrap();
        caught_up(&job);
        let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
        assert_eq!(ck.status, CheckpointStatus::Complete, "{ck:?}");
        assert_eq!(ck.pipelines.len(), 2);
        assert_eq!(ck.parallelism, 2);
        assert_eq!(job.blocking_latest_checkpoint().unwrap(), Some(ck.clone()));
        assert_eq!(job.diagnostics().latest_checkpoint_id, Some(ck.id));
        let (counts_at_ck, windows_at_ck) = (first.counts.len(), first.windows.len());
        assert_eq!(counts_at_ck, 300);
        s.produce_both(topics, 300, 200);
        caught_up(&job);
        assert!(job.blocking_shutdown(Duration::from_secs(30)));
        let counts_after = first.counts.snapshot()[counts_at_ck..].to_vec();
        let windows_after = first.windows.snapshot()[windows_at_ck..].to_vec();
        assert_eq!(counts_after.len(), 200);
        assert!(!windows_after.is_empty(), "windows fired after the checkpoint");
        let state = s.counts(job_name, topics.0);

        let env = RedisEnv::try_with_config(
            s.redis.url(),
            s.ck_config(job_name, mode)
                .pipeline_parallelism(3)
                .build()
                .unwrap(),
        )
        .unwrap();
        let second = register(&env, topics);
        env.restore_from_checkpoint(ck.id).unwrap();
        let job = env.execute_async().unwrap();
        caught_up(&job);
        assert!(job.blocking_shutdown(Duration::from_secs(30)));
        assert_eq!(
            sorted(second.counts.snapshot()),
            sorted(counts_after),
            "{mode:?}"
        );
        assert_eq!(
            windows_sorted(second.windows.snapshot()),
            windows_sorted(windows_after),
            "{mode:?}"
        );
        assert_eq!(s.counts(job_name, topics.0), state, "{mode:?}");
    }
}
