//! The topic forwarder's transactions against a real Redis: records new to a target
//! partition are appended by plain `XADD`s between a guard and a tail script; a read whose
//! records a partition partly has already changes nothing in that transaction (the
//! target stream, its consumer group and pending entries stay as they were, nothing is
//! left aside) and goes through the script, which appends only what is missing.

mod support;

use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::Mq;
use streaming::redis::{RedisTopicForwarder, TopicForwardStats};
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

const SOURCE: &str = "in";
const TARGET: &str = "fast";

type Conn = redis::aio::MultiplexedConnection;

/// Replaces source partition 0's outbox by one record per id (explicit entry ids).
async fn outbox(conn: &mut Conn, f: &RedisTopicForwarder, ids: &[&str]) {
    let key = f.outbox_key(0);
    let _: () = conn.del(&key).await.unwrap();
    for id in ids {
        let fields = [
            ("id", format!("job/{SOURCE}/0/{id}/0")),
            ("payload", format!("p{id}")),
            ("ts", "1700".to_string()),
        ];
        let _: String = conn.xadd(&key, *id, &fields).await.unwrap();
    }
}

/// Runs the forwarder until the outbox is empty; its counters.
async fn forward(conn: &Conn, f: &RedisTopicForwarder) -> TopicForwardStats {
    let running = f.start().await.unwrap();
    let key = f.outbox_key(0);
    eventually("outbox forwarded", DEADLINE, || {
        let (mut conn, key) = (conn.clone(), key.clone());
        async move { (conn.xlen::<_, usize>(&key).await.unwrap() == 0).then_some(()) }
    })
    .await;
    let stats = running.stats();
    running.stop().await;
    stats
}

/// The payloads of target partition 0, in order.
async fn payloads(conn: &mut Conn, mq: &Mq) -> Vec<String> {
    let reply: redis::streams::StreamRangeReply =
        conn.xrange_all(mq.keys().stream(TARGET, 0)).await.unwrap();
    reply
        .ids
        .iter()
        .map(|e| e.get::<String>("p").unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_partly_forwarded_changes_nothing_in_its_transaction_and_appends_the_rest() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("topics-fast").build().unwrap()).await;
    mq.create_topic(TARGET, 1).await.unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let f = RedisTopicForwarder::builder(&mq, SOURCE, TARGET)
        .partitions([0])
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    // The target stream exists with a consumer group holding one pending message.
    let stream = mq.keys().stream(TARGET, 0);
    let _: String = conn.xadd(&stream, "*", &[("p", "before")]).await.unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg("readers")
        .arg("0")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("readers")
        .arg("c")
        .arg("STREAMS")
        .arg(&stream)
        .arg(">")
        .query_async(&mut conn)
        .await
        .unwrap();

    outbox(&mut conn, &f, &["5-1", "5-2"]).await;
    let st = forward(&conn, &f).await;
    assert_eq!((st.appended, st.skipped, st.failed), (2, 0, 0));
    // Again with one record the mark has and one it has not.
    outbox(&mut conn, &f, &["5-2", "6-0"]).await;
    let st = forward(&conn, &f).await;
    assert_eq!((st.appended, st.skipped, st.failed), (1, 1, 0));
    // And once more with only records the mark has.
    outbox(&mut conn, &f, &["5-1", "5-2", "6-0"]).await;
    let st = forward(&conn, &f).await;
    assert_eq!((st.appended, st.skipped, st.failed), (0, 3, 0));

    assert_eq!(
        payloads(&mut conn, &mq).await,
        ["before", "p5-1", "p5-2", "p6-0"]
    );
    let mark: Option<String> = conn
        .hget(f.marks_key(0), format!("topic.{TARGET}/{SOURCE}/0"))
        .await
        .unwrap();
    assert_eq!(mark.as_deref(), Some("6-0/0"));
    let groups: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(&stream)
        .query_async(&mut conn)
        .await
        .unwrap();
    let text = format!("{groups:?}");
    assert!(text.contains("readers"), "the group stays: {text}");
    let pending: redis::Value = redis::cmd("XPENDING")
        .arg(&stream)
        .arg("readers")
        .query_async(&mut conn)
        .await
        .unwrap();
    let redis::Value::Array(summary) = pending else {
        panic!("{pending:?}")
    };
    assert_eq!(
        summary[0],
        redis::Value::Int(1),
        "the pending message stays"
    );
    // Nothing left aside by a refused transaction.
    let stash = format!("{stream}\0stash");
    let marker = format!("{}\0forward", f.marks_key(0));
    let left: usize = conn.exists(&[stash, marker]).await.unwrap();
    assert_eq!(left, 0);
}
