//! The job's partition assignment in Redis deals no partition to a subtask whose
//! membership heartbeat is late: a killed process is skipped at once, not when its
//! membership expires.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::{Message, Mq};
use streaming::redis::{AckMode, CollectSink, RedisEnv, RedisRuntimeConfig};
use support::engine::{earliest, rt, wait_until};
use support::redis_server::TestRedis;
use support::unique_prefix;

/// A member that last heartbeat 3 s ago (10 s membership, 1 s heartbeats: late, not
/// expired for another 7 s) is in the assignment when a job starts. The job's subtask
/// is dealt every partition; before, the dead member was dealt half of them and they
/// waited until it expired.
#[test]
fn a_member_with_a_late_heartbeat_is_dealt_no_partition() {
    let redis = TestRedis::private();
    let test = "assignment-late";
    let opts = support::fast_options(test)
        .lease_ttl(Duration::from_secs(10))
        .lease_renew_interval(Duration::from_secs(1))
        .build()
        .unwrap();
    let rt = rt();
    let mq = rt.block_on(Mq::connect(redis.url(), opts.clone())).unwrap();
    rt.block_on(mq.create_topic("t", 4)).unwrap();
    let assignment = mq.keys().assignment("t", "g");
    let mut conn = rt
        .block_on(
            redis::Client::open(redis.url())
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // "0…" sorts before every consumer name of the job: first in line for partitions.
    let _: () = rt
        .block_on(conn.hset(&assignment, "m:0-dead", now_ms - 3_000 + 10_000))
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("late")
        .job_instance_id("live")
        .state_key_prefix(unique_prefix(test))
        .mq_options(opts)
        .ack_mode(AckMode::Offset)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url(), config).unwrap();
    env.from_mq_topic_with_options("t", "g", earliest(16))
        .map(|m: Message| m.text().unwrap_or_default().to_string())
        .sink(CollectSink::<String>::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("the job holds a partition", &job, || {
        job.diagnostics().partitions.iter().any(|p| p.owned)
    });
    let fields: HashMap<String, String> = rt.block_on(conn.hgetall(&assignment)).unwrap();
    let mut owners: Vec<(&str, &str)> = (fields.iter())
        .filter(|(f, _)| f.starts_with("p:"))
        .map(|(f, o)| (f.as_str(), o.as_str()))
        .collect();
    owners.sort_unstable();
    assert_eq!(owners.len(), 4, "{fields:?}");
    assert!(
        owners.iter().all(|(_, o)| o.starts_with("late-live-")),
        "{owners:?}"
    );
    // The late member is still a member (it keeps what it would own) until it expires.
    assert!(fields.contains_key("m:0-dead"), "{fields:?}");
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
}
