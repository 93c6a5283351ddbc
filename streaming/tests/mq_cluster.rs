//! The queue on a private Redis Cluster (3 masters + 3 replicas): partitions spread over
//! the masters, produce / consume / admin work across nodes, and a URL of the wrong kind
//! fails with a clear error.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use streaming::mq::{
    Endpoint, Failure, HandleResult, Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions,
};
use streaming::Error;
use support::redis_cluster::TestCluster;
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

/// Partition `p` of topic `t` → the port of the master whose slot holds its stream; also
/// checks that the stream key is really stored there (and on no other master).
fn placement(cluster: &TestCluster, mq: &Mq, topic: &str, partitions: u32) -> Vec<u16> {
    let masters: Vec<u16> = cluster.masters().iter().map(|(p, _)| *p).collect();
    (0..partitions)
        .map(|p| {
            let key = mq.keys().stream(topic, p);
            let slot = cluster.key_slot(&key);
            let port = cluster.master_of_slot(slot);
            println!("partition {p}: {key} -> slot {slot} -> master 127.0.0.1:{port}");
            for m in &masters {
                let here = cluster.keys_on(*m, &key).contains(&key);
                assert_eq!(here, *m == port, "{key} on master {m}");
            }
            port
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_one_topic_land_on_different_masters() {
    let cluster = TestCluster::start();
    println!("slot map (master port → slot ranges):");
    for (port, ranges) in cluster.masters() {
        println!("  127.0.0.1:{port} {ranges:?}");
    }
    let mq = connect(&cluster.url(), fast_options("spread").build().unwrap()).await;
    assert!(mq.endpoint().is_cluster());
    mq.create_topic("orders", 8).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..8u32)
        .map(|p| OutgoingMessage::new(format!("m{p}")).partition(p))
        .collect();
    let sent = mq.producer().send_batch("orders", &msgs).await.unwrap();
    let parts: Vec<u32> = sent.iter().map(|(p, _)| *p).collect();
    assert_eq!(parts, (0..8).collect::<Vec<u32>>());
    let by_partition = placement(&cluster, &mq, "orders", 8);
    let masters: BTreeSet<u16> = by_partition.iter().copied().collect();
    assert_eq!(
        masters.len(),
        3,
        "8 partitions over the 3 masters: {by_partition:?}"
    );
    let info = mq.describe_topic("orders").await.unwrap();
    let lengths: Vec<u64> = info.partition_info.iter().map(|p| p.length).collect();
    assert_eq!(lengths, vec![1; 8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_and_admin_work_across_nodes() {
    let cluster = TestCluster::start();
    let opts = fast_options("basics").build().unwrap();
    let mq = Mq::connect_to(Endpoint::parse(&cluster.url()).unwrap(), opts)
        .await
        .unwrap();
    mq.create_topic("events", 6).await.unwrap();
    mq.create_topic("audit", 1).await.unwrap();
    assert_eq!(mq.list_topics().await.unwrap(), vec!["audit", "events"]);
    let msgs: Vec<OutgoingMessage> = (0..300)
        .map(|i| OutgoingMessage::new(format!("m{i}")).key(format!("k{}", i % 17)))
        .collect();
    let sent = mq.producer().send_batch("events", &msgs).await.unwrap();
    let mut sent_by_partition: BTreeMap<u32, u64> = BTreeMap::new();
    for (p, _) in &sent {
        *sent_by_partition.entry(*p).or_default() += 1;
    }
    assert!(sent_by_partition.len() > 1, "{sent_by_partition:?}");
    let seen = Arc::new(Mutex::new(Vec::<(u32, String)>::new()));
    let sink = Arc::clone(&seen);
    let sub = mq
        .subscribe(
            "events",
            "g",
            move |m: Message| {
                let sink = Arc::clone(&sink);
                async move {
                    let text = m.text().unwrap().to_string();
                    let dead = text.trim_start_matches('m').parse::<u32>().unwrap() % 50 == 0;
                    sink.lock().unwrap().push((m.partition, text));
                    if dead {
                        HandleResult::DeadLetter(Failure::new("test", "every 50th"))
                    } else {
                        HandleResult::Success
                    }
                }
            },
            SubscriptionOptions::builder()
                .start(StartPolicy::Earliest)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    eventually("every message consumed", DEADLINE, || {
        let n = seen.lock().unwrap().len();
        async move { (n >= 300).then_some(()) }
    })
    .await;
    sub.stop().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let texts: BTreeSet<String> = seen.iter().map(|(_, t)| t.clone()).collect();
    let expected: BTreeSet<String> = (0..300).map(|i| format!("m{i}")).collect();
    assert_eq!(seen.len(), 300, "each message once");
    assert_eq!(texts, expected);
    let info = mq.describe_topic("events").await.unwrap();
    for p in &info.partition_info {
        let sent = sent_by_partition.get(&p.partition).copied().unwrap_or(0);
        assert_eq!(p.length, sent, "partition {}", p.partition);
        let g = p.groups.iter().find(|g| g.name == "g");
        assert_eq!(g.map(|g| g.pending), (sent > 0).then_some(0));
    }
    // The dead letters of every partition, wherever its master is.
    let dead = mq.dead_letters("events", 100).await.unwrap();
    let mut dead_texts: Vec<String> = dead
        .iter()
        .map(|d| String::from_utf8(d.payload.to_vec()).unwrap())
        .collect();
    dead_texts.sort();
    assert_eq!(dead_texts, ["m0", "m100", "m150", "m200", "m250", "m50"]);
    let dead_parts: BTreeSet<u32> = dead.iter().map(|d| d.partition).collect();
    assert!(dead_parts.len() > 1, "{dead_parts:?}");
    let first = &dead[0];
    let replayed = mq
        .replay_dead_letter("events", first.partition, &first.dlq_id)
        .await
        .unwrap();
    assert!(replayed.is_some());
    assert_eq!(mq.purge_dead_letters("events").await.unwrap(), 5);
    assert!(mq.delete_topic("events").await.unwrap());
    assert_eq!(mq.list_topics().await.unwrap(), vec!["audit"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_of_the_wrong_kind_fails_with_a_clear_error() {
    let cluster = TestCluster::start();
    let opts = fast_options("wrong-kind").build().unwrap();
    let node = cluster.node_urls()[0].clone();
    let e = Mq::connect(&node, opts.clone()).await.unwrap_err();
    match &e {
        Error::Connect { addr, reason, .. } => {
            assert_eq!(format!("redis://{addr}/"), node);
            assert!(reason.contains("redis+cluster://"), "{reason}");
        }
        other => panic!("not a connect error: {other}"),
    }
    // The engine proves the server the same way when a job starts.
    let env = streaming::redis::RedisEnv::try_new(node.as_str()).unwrap();
    env.from_mq_topic("t", "g")
        .map(|m: Message| m.text().unwrap_or_default().to_string())
        .sink(streaming::redis::CollectSink::new())
        .unwrap();
    match env.blocking_start().map(|_| ()).unwrap_err() {
        Error::Connect { reason, .. } => assert!(reason.contains("redis+cluster://"), "{reason}"),
        other => panic!("not a connect error: {other}"),
    }
    let single = TestRedis::private();
    let url = single.url().replace("redis://", "redis+cluster://");
    let e = Mq::connect(&url, opts).await.unwrap_err();
    match &e {
        Error::Connect { reason, .. } => {
            assert!(reason.contains("not a Redis Cluster node"), "{reason}");
        }
        other => panic!("not a connect error: {other}"),
    }
}

/// Seed nodes that refuse or never answer fail within the response timeout, with an
/// error naming the seeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_seed_nodes_fail_in_bounded_time_naming_the_seeds() {
    let silent = support::redis_server::SilentPort::start();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let silent_addr = silent
        .url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_string();
    let timeout = std::time::Duration::from_millis(500);
    for (seeds, words) in [
        (format!("127.0.0.1:{refused}"), "refused"),
        (silent_addr.clone(), "no reply"),
    ] {
        let opts = fast_options("unreachable")
            .response_timeout(timeout)
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let e = Mq::connect(&format!("redis+cluster://{seeds}"), opts)
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(3),
            "{seeds}: took {took:?}"
        );
        match &e {
            Error::Connect { addr, reason, .. } => {
                assert_eq!(addr, &seeds);
                assert!(reason.contains(words), "{seeds}: {reason}");
            }
            other => panic!("not a connect error: {other}"),
        }
    }
}
