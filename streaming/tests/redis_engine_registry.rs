//! The job registry: a running instance's heartbeat key says what it owns (the same
//! offsets as its diagnostics, and the keyed states it opened with their types),
//! disappears when the job shuts down, and reports a
//! partition that fails every batch as stalled.

mod support;

use std::time::Duration;

use redis::Commands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{KeySpace, Message, OutgoingMessage};
use streaming::redis::{
    registered_instances, CollectSink, JobClient, RedisEnv, RegisteredInstance,
};
use support::engine::{earliest, setup, wait_until, EngineSetup};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// A keyed count over topic `t` (2 partitions, created here) as job `registry`.
fn start(s: &EngineSetup, stalled_after: Duration) -> JobClient {
    let mq = s.mq();
    s.rt.block_on(mq.create_topic("t", 2)).unwrap();
    let config = s
        .config("registry")
        .stalled_after(stalled_after)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    env.from_mq_topic_with_options("t", "g", earliest(10))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(CollectSink::new())
        .unwrap();
    env.blocking_start().unwrap()
}

fn send(s: &EngineSetup, partition: u32, words: &[&str]) {
    let mq = s.mq();
    let msgs: Vec<OutgoingMessage> = (words.iter())
        .map(|w| OutgoingMessage::new(w.to_string()).partition(partition))
        .collect();
    s.rt.block_on(mq.producer().send_batch("t", &msgs)).unwrap();
}

fn conn(s: &EngineSetup) -> redis::Connection {
    redis::Client::open(s.redis.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// The instance's record as a raw client reads it.
fn raw_record(s: &EngineSetup) -> Option<serde_json::Value> {
    let keys = KeySpace::new(s.mq_opts.key_prefix.clone());
    let text: Option<String> = conn(s).get(keys.job_instance("registry", "test")).unwrap();
    text.map(|t| serde_json::from_str(&t).unwrap())
}

fn listed(s: &EngineSetup) -> Vec<RegisteredInstance> {
    s.rt.block_on(registered_instances(&s.mq(), None)).unwrap()
}

#[test]
fn a_running_instance_registers_its_partitions_and_leaves_on_shutdown() {
    let s = setup("registry-heartbeat");
    let job = start(&s, Duration::from_secs(60));
    send(&s, 0, &["a", "b", "a"]);
    send(&s, 1, &["c", "c"]);
    let records = |job: &JobClient| {
        job.diagnostics()
            .partitions
            .iter()
            .map(|p| p.records)
            .sum::<u64>()
    };
    wait_until("5 records committed", &job, || records(&job) == 5);
    let committed: Vec<(u64, String)> = (job.diagnostics().partitions.iter())
        .map(|p| (u64::from(p.partition), p.last_committed_id.clone().unwrap()))
        .collect();
    // The heartbeat after the commits carries their offsets.
    let offsets = |r: &serde_json::Value| -> Vec<(u64, String)> {
        (r["partitions"].as_array().unwrap().iter())
            .filter_map(|p| Some((p["partition"].as_u64()?, p["offset"].as_str()?.to_string())))
            .collect()
    };
    wait_until("the registry to show the commits", &job, || {
        raw_record(&s).is_some_and(|r| offsets(&r) == committed)
    });
    let r = raw_record(&s).unwrap();
    assert_eq!(r["job"], "registry");
    assert_eq!(r["instance"], "test");
    assert_eq!(r["parallelism"], 1);
    assert_eq!(r["paused"], false);
    assert_eq!(
        r["heartbeat_interval_ms"].as_u64(),
        u64::try_from(s.mq_opts.lease_renew_interval.as_millis()).ok()
    );
    // Where its state and checkpoints live: what the admin tools read them with.
    assert_eq!(
        r["state_keys"],
        serde_json::json!({ "prefix": s.prefix, "shards": 1 })
    );
    assert!(r["checkpoint_key_prefix"].is_string(), "{r}");
    let pipelines = r["pipelines"].as_array().unwrap();
    assert_eq!(pipelines.len(), 1, "{pipelines:?}");
    assert_eq!(
        (&pipelines[0]["topic"], &pipelines[0]["group"]),
        (&"t".into(), &"g".into())
    );
    // The keyed states its partitions opened, with their types: what `state get` reads.
    let states: Vec<(String, String, String)> = (pipelines[0]["states"].as_array().unwrap())
        .iter()
        .map(|st| {
            let text = |f: &str| st[f].as_str().unwrap().to_string();
            (text("operator"), text("state"), text("schema"))
        })
        .collect();
    let count = states
        .iter()
        .find(|st| st.1 == "count")
        .expect("the count state");
    assert_eq!(count.2, "ValueState<u64> by String", "{states:?}");
    assert!(
        count.0.starts_with("t.g/") && count.0.ends_with(":process"),
        "{states:?}"
    );
    assert_eq!(
        states.len(),
        1,
        "the engine's own watermark is not listed: {states:?}"
    );
    for p in r["partitions"].as_array().unwrap() {
        assert_eq!((&p["topic"], &p["group"]), (&"t".into(), &"g".into()));
        assert_eq!(p["stalled"], false);
        assert!(p["last_commit_at_ms"].as_u64().is_some(), "{p}");
    }
    let mut keys = conn(&s);
    let prefix = &s.mq_opts.key_prefix;
    let jobs: Vec<String> = keys.smembers(format!("{prefix}:jobs")).unwrap();
    assert_eq!(jobs, ["registry"]);
    let listed = listed(&s);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].partitions.len(), 2);
    assert_eq!(
        listed[0].partitions[0].offset.as_deref(),
        Some(committed[0].1.as_str())
    );

    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    // Shutdown returns once the instance left the registry.
    assert_eq!(raw_record(&s), None);
    let jobs: Vec<String> = keys.smembers(format!("{prefix}:jobs")).unwrap();
    assert!(jobs.is_empty(), "{jobs:?}");
    assert!(self::listed(&s).is_empty());
}

#[test]
fn a_partition_failing_every_batch_is_reported_stalled() {
    let s = setup("registry-stalled");
    // Partition 1's state hash is a string: every batch of it fails with WRONGTYPE.
    let state = format!("{}:registry:{{t:1}}:g:t.g/3:process:count", s.prefix);
    let () = conn(&s).set(&state, "not a hash").unwrap();
    let job = start(&s, Duration::from_millis(300));
    send(&s, 0, &["a", "b"]);
    send(&s, 1, &["c"]);
    let stalled = |job: &JobClient, p: u32| {
        (job.diagnostics().partitions.iter()).any(|pr| pr.partition == p && pr.stalled)
    };
    wait_until("partition 1 stalled in the diagnostics", &job, || {
        stalled(&job, 1)
    });
    let d = job.diagnostics();
    let p1 = d.partitions.iter().find(|p| p.partition == 1).unwrap();
    assert!(
        p1.last_error.as_deref().unwrap_or("").contains("WRONGTYPE"),
        "{p1:?}"
    );
    assert_eq!(p1.records, 0);
    wait_until("partition 0 committed", &job, || {
        (job.diagnostics().partitions.iter()).any(|p| p.partition == 0 && p.records == 2)
    });
    assert!(!stalled(&job, 0));
    // A heartbeat written after partition 0's commit (an earlier one may predate it).
    wait_until("partition 1 stalled in the registry", &job, || {
        raw_record(&s).is_some_and(|r| {
            let parts = r["partitions"].as_array().unwrap();
            parts
                .iter()
                .any(|p| p["partition"] == 1 && p["stalled"] == true)
                && parts
                    .iter()
                    .any(|p| p["partition"] == 0 && p.get("offset").is_some())
        })
    });
    let r = raw_record(&s).unwrap();
    let p0 = (r["partitions"].as_array().unwrap().iter())
        .find(|p| p["partition"] == 0)
        .unwrap();
    assert_eq!(p0["stalled"], false);
    let p1 = (r["partitions"].as_array().unwrap().iter())
        .find(|p| p["partition"] == 1)
        .unwrap();
    assert!(
        p1["last_error"].as_str().unwrap().contains("WRONGTYPE"),
        "{p1}"
    );
    assert!(
        p1.get("offset").is_none() && p1.get("watermark").is_none(),
        "{p1}"
    );
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
}

/// An instance that died without leaving (its key expired) leaves its id in the job's set;
/// the next instance of the job to start removes it.
#[test]
fn a_starting_instance_removes_dead_instances_ids() {
    let s = setup("registry-prune");
    let keys = KeySpace::new(s.mq_opts.key_prefix.clone());
    let set = keys.job_instances("registry");
    let _: () = conn(&s).sadd(&set, "dead-1").unwrap();
    let job = start(&s, Duration::from_secs(60));
    let ids = || -> Vec<String> {
        let mut ids: Vec<String> = conn(&s).smembers(&set).unwrap();
        ids.sort();
        ids
    };
    wait_until("the dead id removed", &job, || ids() == ["test"]);
    job.blocking_shutdown(Duration::MAX);
    assert!(ids().is_empty(), "the last instance leaves: {:?}", ids());
}
