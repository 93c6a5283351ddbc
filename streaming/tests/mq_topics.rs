//! Topics, producer and message encoding against a real Redis.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use streaming::mq::{
    partition_for_key, HandleResult, Message, OutgoingMessage, StartPolicy, SubscriptionOptions,
};
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

/// One producer, shared by reference (no `mut`), sends concurrently; messages go by value or
/// by reference.
#[tokio::test]
async fn a_shared_producer_sends_by_reference() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        fast_options("shared-producer").build().unwrap(),
    )
    .await;
    mq.create_topic("t", 2).await.unwrap();
    let producer = mq.producer();
    let by_ref = OutgoingMessage::new("by-ref").partition(0);
    let (a, b, c) = tokio::join!(
        producer.send_message("t", OutgoingMessage::new("owned").partition(1)),
        producer.send_message("t", &by_ref),
        producer.send("t", None, "plain"),
    );
    assert_eq!(a.unwrap().0, 1);
    assert_eq!(b.unwrap().0, 0);
    assert!(c.unwrap().0 < 2);
    let info = mq.describe_topic("t").await.unwrap();
    let total: u64 = info.partition_info.iter().map(|p| p.length).sum();
    assert_eq!(total, 3);
}

#[tokio::test]
async fn admin_create_describe_list_delete() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("admin").build().unwrap()).await;
    assert!(mq.create_topic("orders", 3).await.unwrap());
    assert!(!mq.create_topic("orders", 3).await.unwrap());
    let err = mq.create_topic("orders", 4).await.unwrap_err();
    assert!(
        err.to_string().contains("exists with 3 partitions"),
        "{err}"
    );
    assert!(mq.create_topic("bad name", 1).await.is_err());
    mq.create_topic("audit", 1).await.unwrap();
    assert_eq!(mq.list_topics().await.unwrap(), vec!["audit", "orders"]);

    let producer = mq.producer();
    for i in 0..5u32 {
        let msg = OutgoingMessage::new(format!("m{i}")).partition(1);
        producer.send_message("orders", &msg).await.unwrap();
    }
    mq.ensure_group("orders", "g1", StartPolicy::Earliest)
        .await
        .unwrap();
    let info = mq.describe_topic("orders").await.unwrap();
    assert_eq!(info.partitions, 3);
    let lengths: Vec<u64> = info.partition_info.iter().map(|p| p.length).collect();
    assert_eq!(lengths, vec![0, 5, 0]);
    let g = &info.partition_info[1].groups[0];
    assert_eq!(g.name, "g1");
    assert_eq!(g.pending, 0);
    assert_eq!(g.lag, Some(5));
    assert_eq!(g.frontier.as_deref(), Some("0-0"));
    // A NOACK reader's dead letter leaves the group's `settled` set: deleted with the rest.
    let mut r = mq
        .exclusive_reader("orders", "g1", 1, "c1", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let b = r
        .read(1, std::time::Duration::from_millis(10))
        .await
        .unwrap();
    let fail = streaming::mq::Failure::new("test", "dead on purpose");
    r.dead_letter(&b.messages[0], &fail).await.unwrap();
    r.release().await.unwrap();
    let settled = mq.keys().settled("orders", 1, "g1");
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let n: u64 = redis::cmd("ZCARD")
        .arg(&settled)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(n, 1);

    assert!(mq.delete_topic("orders").await.unwrap());
    assert!(!mq.delete_topic("orders").await.unwrap());
    assert_eq!(mq.list_topics().await.unwrap(), vec!["audit"]);
    assert!(mq.describe_topic("orders").await.is_err());
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*orders*", mq.options().key_prefix))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, Vec::<String>::new());
}

#[tokio::test]
async fn keyed_sends_use_the_documented_hash_and_round_robin() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("hash").build().unwrap()).await;
    mq.create_topic("t", 8).await.unwrap();
    let producer = mq.producer();
    // Fixed vectors of FNV-1a 64 mod 8 (also unit-tested in producer.rs).
    for (key, want) in [("user-1", 4), ("user-2", 5), ("order:42", 1), ("ü", 2)] {
        assert_eq!(partition_for_key(key, 8), want);
        let (p, _) = producer.send("t", Some(key), "x").await.unwrap();
        assert_eq!(p, want, "key {key}");
    }
    let parts: Vec<u32> = {
        let mut v = Vec::new();
        for _ in 0..8 {
            v.push(producer.send("t", None, "x").await.unwrap().0);
        }
        v
    };
    let mut sorted = parts.clone();
    sorted.sort();
    assert_eq!(sorted, (0..8).collect::<Vec<_>>(), "round robin covers all");
    let err = producer
        .send_message("t", &OutgoingMessage::new("x").partition(8))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
    assert!(producer.send("missing", None, "x").await.is_err());
}

#[tokio::test]
async fn batch_send_keeps_order_and_fields_per_partition() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("order").build().unwrap()).await;
    mq.create_topic("t", 4).await.unwrap();
    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = (0..400i64)
        .map(|i| {
            OutgoingMessage::new(format!("{i}"))
                .key(format!("k{}", i % 10))
                .header("seq", i.to_string())
                .timestamp_ms(1_000 + i)
        })
        .collect();
    let sent = producer.send_batch("t", &msgs).await.unwrap();
    assert_eq!(sent.len(), 400);

    let got: Arc<Mutex<Vec<Message>>> = Arc::default();
    let sink = got.clone();
    let sub = mq
        .subscribe(
            "t",
            "g",
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(m);
                    HandleResult::Success
                }
            },
            SubscriptionOptions::builder()
                .start(StartPolicy::Earliest)
                .batch_count(37)
                .poll_timeout(std::time::Duration::from_millis(100))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    eventually("400 messages", DEADLINE, || async {
        (got.lock().unwrap().len() >= 400).then_some(())
    })
    .await;
    sub.stop().await.unwrap();
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 400, "each message exactly once");
    let mut per_partition: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    for m in &got {
        let i: i64 = m.text().unwrap().parse().unwrap();
        let key = format!("k{}", i % 10);
        assert_eq!(m.key.as_deref(), Some(key.as_str()));
        assert_eq!(m.partition, partition_for_key(&key, 4));
        assert_eq!(m.timestamp_ms, 1_000 + i);
        assert_eq!(m.headers.get("seq"), Some(&i.to_string()));
        assert_eq!(m.retry_count, 0);
        per_partition.entry(m.partition).or_default().push(i);
    }
    for (p, seq) in per_partition {
        let mut sorted = seq.clone();
        sorted.sort();
        assert_eq!(seq, sorted, "partition {p} delivered in order");
    }
    // Everything acknowledged: the frontier reached each stream's last entry.
    let info = mq.describe_topic("t").await.unwrap();
    for p in info.partition_info {
        let g = &p.groups[0];
        assert_eq!(g.pending, 0);
        assert_eq!(g.frontier.as_deref(), Some(g.last_delivered_id.as_str()));
    }
}

#[tokio::test]
async fn max_len_trims_approximately() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        fast_options("trim").max_len(Some(100)).build().unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = (0..2000)
        .map(|i| OutgoingMessage::new(format!("{i}")))
        .collect();
    producer.send_batch("t", &msgs).await.unwrap();
    let len = mq.describe_topic("t").await.unwrap().partition_info[0].length;
    // `MAXLEN ~` trims whole macro nodes (100 entries each by default), never below 100.
    assert!((100..=300).contains(&len), "length {len}");
}
