//! The commit frontier: a contiguous acknowledged prefix, not "max acked".

mod support;

use redis::Value;
use streaming::mq::{OutgoingMessage, StartPolicy};
use support::redis_server::TestRedis;
use support::{connect, fast_options};

fn ids(v: &Value) -> Vec<String> {
    // [[stream, [[id, fields], ...]]]
    let Value::Array(streams) = v else {
        panic!("{v:?}")
    };
    let Value::Array(pair) = &streams[0] else {
        panic!()
    };
    let Value::Array(entries) = &pair[1] else {
        panic!()
    };
    entries
        .iter()
        .map(|e| match e {
            Value::Array(parts) => match &parts[0] {
                Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn frontier_is_the_contiguous_acknowledged_prefix_under_out_of_order_acks() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("frontier").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..6)
        .map(|i| OutgoingMessage::new(format!("{i}")))
        .collect();
    mq.producer().send_batch("t", &msgs).await.unwrap();
    mq.ensure_group("t", "g", StartPolicy::Earliest)
        .await
        .unwrap();
    assert_eq!(
        mq.commit_frontier("t", "g", 0).await.unwrap().as_deref(),
        Some("0-0")
    );

    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let v: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("c")
        .arg("COUNT")
        .arg(6)
        .arg("STREAMS")
        .arg(mq.keys().stream("t", 0))
        .arg(">")
        .query_async(&mut conn)
        .await
        .unwrap();
    let id = ids(&v);
    assert_eq!(id.len(), 6);
    let ack = |i: &[usize]| i.iter().map(|&i| id[i].clone()).collect::<Vec<_>>();
    let frontier = || async { mq.commit_frontier("t", "g", 0).await.unwrap().unwrap() };

    // Ack #2 first: "max acked" would say id[2]; the frontier stays before #0.
    assert_eq!(mq.acknowledge("t", "g", 0, &ack(&[2])).await.unwrap(), 1);
    assert_eq!(frontier().await, "0-0");
    assert_eq!(mq.acknowledge("t", "g", 0, &ack(&[0])).await.unwrap(), 1);
    assert_eq!(frontier().await, id[0]);
    // #1 closes the gap: the frontier jumps over the already acknowledged #2.
    assert_eq!(mq.acknowledge("t", "g", 0, &ack(&[1])).await.unwrap(), 1);
    assert_eq!(frontier().await, id[2]);
    assert_eq!(mq.acknowledge("t", "g", 0, &ack(&[5, 4])).await.unwrap(), 2);
    assert_eq!(frontier().await, id[2]);
    // A repeated ack changes nothing.
    assert_eq!(mq.acknowledge("t", "g", 0, &ack(&[4])).await.unwrap(), 0);
    assert_eq!(frontier().await, id[2]);
    assert_eq!(mq.acknowledge("t", "g", 0, &ack(&[3])).await.unwrap(), 1);
    assert_eq!(frontier().await, id[5]);
    // The parking set is empty again once the frontier passed everything.
    let parked: Vec<String> = redis::cmd("SMEMBERS")
        .arg(mq.keys().acked("t", 0, "g"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(parked, Vec::<String>::new());
}

#[tokio::test]
async fn frontier_skips_entries_trimmed_out_of_the_stream() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("trimmed").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..3)
        .map(|i| OutgoingMessage::new(format!("{i}")))
        .collect();
    let sent = mq.producer().send_batch("t", &msgs).await.unwrap();
    mq.ensure_group("t", "g", StartPolicy::Earliest)
        .await
        .unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("g")
        .arg("c")
        .arg("STREAMS")
        .arg(mq.keys().stream("t", 0))
        .arg(">")
        .query_async(&mut conn)
        .await
        .unwrap();
    // Entry #1 is deleted from the stream (e.g. trimmed); acking #0 and #2 closes the prefix.
    let _: i64 = redis::cmd("XDEL")
        .arg(mq.keys().stream("t", 0))
        .arg(&sent[1].1)
        .query_async(&mut conn)
        .await
        .unwrap();
    mq.acknowledge("t", "g", 0, &[sent[2].1.clone(), sent[0].1.clone()])
        .await
        .unwrap();
    assert_eq!(
        mq.commit_frontier("t", "g", 0).await.unwrap(),
        Some(sent[2].1.clone())
    );
}
