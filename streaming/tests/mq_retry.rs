//! Retry with backoff, dead letters (handler verdicts, exhausted retries, malformed
//! entries, panics), dead-letter admin, and retry atomicity across a Redis restart.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::{
    Failure, HandleResult, Message, OutgoingMessage, RetryPolicy, StartPolicy, SubscriptionOptions,
    HEADER_ORIGINAL_ID,
};
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

type Seen = Arc<Mutex<Vec<Message>>>;

fn sub_opts() -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(10)
        .poll_timeout(Duration::from_millis(100))
        .build()
        .unwrap()
}

fn policy(max_retries: u32, initial_ms: u64) -> RetryPolicy {
    RetryPolicy::builder()
        .max_retries(max_retries)
        .initial_backoff(Duration::from_millis(initial_ms))
        .multiplier(2.0)
        .max_backoff(Duration::from_millis(initial_ms * 4))
        .jitter(0.0)
        .build()
        .unwrap()
}

async fn raw_conn(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_keep_the_message_then_dead_letter_with_headers_and_replay() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        fast_options("retry").retry(policy(2, 50)).build().unwrap(),
    )
    .await;
    mq.create_topic("t", 3).await.unwrap();
    let seen: Seen = Arc::default();
    let succeed = Arc::new(AtomicBool::new(false));
    let (sink, ok) = (seen.clone(), succeed.clone());
    let sub = mq
        .subscribe(
            "t",
            "g",
            move |m: Message| {
                let (sink, ok) = (sink.clone(), ok.clone());
                async move {
                    sink.lock().unwrap().push(m);
                    if ok.load(Ordering::SeqCst) {
                        HandleResult::Success
                    } else {
                        HandleResult::Retry(Failure::new("timeout", "downstream slow"))
                    }
                }
            },
            sub_opts(),
        )
        .await
        .unwrap();
    let msg = OutgoingMessage::new(&b"\x00payload\xff"[..])
        .key("order-9")
        .header("h1", "v1")
        .timestamp_ms(12_345);
    let (partition, first_id) = mq.producer().send_message("t", &msg).await.unwrap();
    let dead = eventually("dead-lettered", DEADLINE, || async {
        let d = mq.dead_letters("t", 10).await.unwrap();
        (!d.is_empty()).then_some(d)
    })
    .await;
    let deliveries = seen.lock().unwrap().clone();
    assert_eq!(deliveries.len(), 3, "first delivery + 2 retries");
    for (i, m) in deliveries.iter().enumerate() {
        assert_eq!(m.retry_count, i as u32);
        assert_eq!(m.key.as_deref(), Some("order-9"));
        assert_eq!(&m.payload[..], b"\x00payload\xff");
        assert_eq!(m.timestamp_ms, 12_345);
        assert_eq!(m.partition, partition);
        assert_eq!(m.headers.get("h1").map(String::as_str), Some("v1"));
        assert_eq!(m.original_id(), first_id);
        if i > 0 {
            assert_eq!(m.headers.get(HEADER_ORIGINAL_ID), Some(&first_id));
            assert_eq!(
                m.headers.get("x-error-type").map(String::as_str),
                Some("timeout")
            );
            assert_eq!(
                m.headers.get("x-error-message").map(String::as_str),
                Some("downstream slow")
            );
            assert_ne!(m.id, deliveries[i - 1].id, "a retry is a new entry");
        }
    }
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(d.topic, "t");
    assert_eq!(d.partition, partition);
    assert_eq!(d.id, deliveries[2].id);
    assert_eq!(d.original_id, first_id);
    assert_eq!(d.group, "g");
    assert_eq!(d.attempts, 3);
    assert_eq!(d.error_type, "retries_exhausted:timeout");
    assert_eq!(d.error, "downstream slow");
    assert_eq!(d.key.as_deref(), Some("order-9"));
    assert_eq!(&d.payload[..], b"\x00payload\xff");
    assert_eq!(d.timestamp_ms, Some(12_345));
    assert_eq!(d.headers.get("h1").map(String::as_str), Some("v1"));
    assert!(d.failed_ms > 0);

    // Everything was acknowledged; nothing waits for a retry.
    let info = mq.describe_topic("t").await.unwrap();
    let p = &info.partition_info[partition as usize];
    assert_eq!((p.length, p.retry_scheduled, p.dead_letters), (3, 0, 1));
    assert_eq!(p.groups[0].pending, 0);
    assert_eq!(
        p.groups[0].frontier.as_deref(),
        Some(deliveries[2].id.as_str())
    );

    // Replay to the original partition: retry count 0, original id kept.
    succeed.store(true, Ordering::SeqCst);
    let new_id = mq
        .replay_dead_letter("t", partition, &d.dlq_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        mq.replay_dead_letter("t", partition, &d.dlq_id)
            .await
            .unwrap(),
        None,
        "a dead letter replays once"
    );
    let replayed = eventually("replayed delivery", DEADLINE, || async {
        seen.lock()
            .unwrap()
            .iter()
            .find(|m| m.id == new_id)
            .cloned()
    })
    .await;
    assert_eq!(replayed.retry_count, 0);
    assert_eq!(replayed.partition, partition);
    assert_eq!(replayed.original_id(), first_id);
    assert_eq!(&replayed.payload[..], b"\x00payload\xff");
    assert!(mq.dead_letters("t", 10).await.unwrap().is_empty());
    sub.stop().await.unwrap();
}

/// A dead letter replayed with a corrected payload goes back once with that payload and
/// the original key, headers, timestamp and id; the handler then accepts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_replays_with_a_corrected_payload() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("replay-edit").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let sub = mq
        .subscribe(
            "t",
            "g",
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    let good = m.payload.starts_with(b"{");
                    sink.lock().unwrap().push(m);
                    if good {
                        HandleResult::Success
                    } else {
                        HandleResult::DeadLetter(Failure::new("decode", "not JSON"))
                    }
                }
            },
            sub_opts(),
        )
        .await
        .unwrap();
    let bad = OutgoingMessage::new("n=1")
        .key("k")
        .header("h1", "v1")
        .timestamp_ms(777);
    let (_, first_id) = mq.producer().send_message("t", &bad).await.unwrap();
    let dead = eventually("dead-lettered", DEADLINE, || async {
        let d = mq.dead_letters("t", 10).await.unwrap();
        (!d.is_empty()).then_some(d)
    })
    .await;
    let fixed = mq
        .replay_dead_letter_with_payload("t", 0, &dead[0].dlq_id, b"{\"n\": 1}")
        .await
        .unwrap()
        .expect("replayed");
    assert_eq!(
        mq.replay_dead_letter_with_payload("t", 0, &dead[0].dlq_id, b"{}")
            .await
            .unwrap(),
        None,
        "a dead letter replays once"
    );
    let replayed = eventually("the corrected delivery", DEADLINE, || async {
        (seen.lock().unwrap().iter())
            .find(|m| m.id == fixed)
            .cloned()
    })
    .await;
    assert_eq!(&replayed.payload[..], b"{\"n\": 1}");
    assert_eq!(replayed.key.as_deref(), Some("k"));
    assert_eq!(replayed.headers.get("h1").map(String::as_str), Some("v1"));
    assert_eq!(replayed.timestamp_ms, 777);
    assert_eq!(replayed.original_id(), first_id);
    assert!(
        mq.dead_letters("t", 10).await.unwrap().is_empty(),
        "accepted this time"
    );
    assert_eq!(seen.lock().unwrap().len(), 2);
    sub.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_waits_for_its_backoff_in_the_schedule() {
    let redis = TestRedis::shared();
    let hour = RetryPolicy::builder()
        .max_retries(3)
        .initial_backoff(Duration::from_secs(3600))
        .multiplier(2.0)
        .max_backoff(Duration::from_secs(7200))
        .jitter(0.0)
        .build()
        .unwrap();
    let mq = connect(
        redis.url(),
        fast_options("backoff").retry(hour).build().unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let sub = mq
        .subscribe(
            "t",
            "g",
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(m);
                    HandleResult::Retry(Failure::new("busy", "later"))
                }
            },
            sub_opts(),
        )
        .await
        .unwrap();
    let (_, id) = mq.producer().send("t", None, "x").await.unwrap();
    eventually("retry scheduled", DEADLINE, || async {
        let info = mq.describe_topic("t").await.unwrap();
        (info.partition_info[0].retry_scheduled == 1).then_some(())
    })
    .await;
    let mut conn = raw_conn(redis.url()).await;
    let token = streaming::mq::retry_token("g", &id);
    let due: f64 = conn
        .zscore(mq.keys().retry_due("t", 0), &token)
        .await
        .unwrap();
    let (secs, _micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let wait_ms = due as i64 - secs * 1000;
    assert!(
        (3_598_000..=3_601_000).contains(&wait_ms),
        "due in {wait_ms} ms"
    );
    sub.stop().await.unwrap();
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "not redelivered before the backoff"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_entries_are_dead_lettered_and_the_consumer_continues() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("malformed").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let stream = mq.keys().stream("t", 0);
    let mut conn = raw_conn(redis.url()).await;
    let bad: Vec<Vec<(&str, Vec<u8>)>> = vec![
        vec![("ts", b"1".to_vec())],
        vec![
            ("p", b"x".to_vec()),
            ("ts", b"1".to_vec()),
            ("h", b"{not json".to_vec()),
        ],
        vec![
            ("p", b"x".to_vec()),
            ("ts", b"1".to_vec()),
            ("k", b"\xff\xfe".to_vec()),
        ],
        vec![("p", b"x".to_vec()), ("ts", b"yesterday".to_vec())],
    ];
    for fields in &bad {
        let _: String = conn.xadd(&stream, "*", fields).await.unwrap();
    }
    mq.producer().send("t", Some("good"), "fine").await.unwrap();
    let seen: Seen = Arc::default();
    let sink = seen.clone();
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
            sub_opts(),
        )
        .await
        .unwrap();
    eventually("good message", DEADLINE, || async {
        (!seen.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let dead = mq.dead_letters("t", 10).await.unwrap();
    let reasons: Vec<(&str, &str)> = dead
        .iter()
        .map(|d| (d.error_type.as_str(), d.error.as_str()))
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(reasons.iter().all(|(t, _)| *t == "malformed"));
    assert!(
        reasons[0].1.contains("missing field `p`"),
        "{}",
        reasons[0].1
    );
    assert!(reasons[1].1.contains("`h` (headers)"), "{}", reasons[1].1);
    assert!(reasons[2].1.contains("not UTF-8"), "{}", reasons[2].1);
    assert!(
        reasons[3].1.contains("`ts` is not a number"),
        "{}",
        reasons[3].1
    );
    // The raw fields are kept.
    let key_field = dead[2]
        .fields
        .iter()
        .find(|(f, _)| f == b"k")
        .map(|(_, v)| v.clone());
    assert_eq!(key_field, Some(b"\xff\xfe".to_vec()));
    sub.stop().await.unwrap();
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].text().unwrap(), "fine");
    let info = mq.describe_topic("t").await.unwrap();
    let g = &info.partition_info[0].groups[0];
    assert_eq!(g.pending, 0);
    assert_eq!(g.frontier.as_deref(), Some(got[0].id.as_str()));
    assert_eq!(mq.purge_dead_letters("t").await.unwrap(), 4);
    assert!(mq.dead_letters("t", 10).await.unwrap().is_empty());
}

/// The fields of a malformed entry with 1005 fields (`mr` is not a number): a binary
/// payload longer than 255 bytes, a key, headers, an event time and 1000 more fields.
fn wide_entry() -> Vec<(Vec<u8>, Vec<u8>)> {
    let payload: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
    let mut fields = vec![
        (b"p".to_vec(), payload),
        (b"ts".to_vec(), b"-42".to_vec()),
        (b"k".to_vec(), "clé-7".as_bytes().to_vec()),
        (b"h".to_vec(), br#"{"a":"1","x-trace":"t-9"}"#.to_vec()),
        (b"mr".to_vec(), b"many".to_vec()),
    ];
    fields.extend((0..1000).map(|i| (format!("x{i}").into_bytes(), format!("v{i}").into_bytes())));
    fields
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_of_a_very_wide_entry_keeps_its_payload_and_headers() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("wide").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let fields = wide_entry();
    let mut conn = raw_conn(redis.url()).await;
    let id: String = conn
        .xadd(mq.keys().stream("t", 0), "*", &fields)
        .await
        .unwrap();
    let mut reader = mq
        .exclusive_reader("t", "g", 0, "wide", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let batch = reader.read(10, Duration::from_millis(100)).await.unwrap();
    assert_eq!((batch.messages.len(), batch.malformed), (0, 1));
    // Stored packed: one `dlq.fields` value and the nine `dlq.*` fields.
    let stored: redis::streams::StreamRangeReply =
        conn.xrange_all(mq.keys().dlq("t", 0)).await.unwrap();
    let mut names: Vec<&str> = stored.ids[0].map.keys().map(String::as_str).collect();
    names.sort_unstable();
    let packed = [
        "dlq.attempts",
        "dlq.error",
        "dlq.error_type",
        "dlq.failed_ms",
        "dlq.fields",
        "dlq.group",
        "dlq.id",
        "dlq.original_id",
        "dlq.partition",
        "dlq.topic",
    ];
    assert_eq!(names, packed);

    let dead = mq.dead_letters("t", 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(
        (d.id.as_str(), d.error_type.as_str()),
        (id.as_str(), "malformed")
    );
    assert!(d.error.contains("`mr` is not a number"), "{}", d.error);
    assert_eq!(&d.payload[..], &fields[0].1[..]);
    let headers = [("a", "1"), ("x-trace", "t-9")].map(|(k, v)| (k.to_owned(), v.to_owned()));
    assert_eq!(d.headers, headers.into_iter().collect());
    assert_eq!(d.key.as_deref(), Some("clé-7"));
    assert_eq!(d.timestamp_ms, Some(-42));
    // `fields`: the entry's own fields as produced, then the `dlq.*` fields.
    assert_eq!(d.fields[..fields.len()], fields[..]);
    assert_eq!(d.fields.len(), fields.len() + 9);
    assert!(d.fields[fields.len()..]
        .iter()
        .all(|(f, _)| f.starts_with(b"dlq.")));
    assert_eq!(
        mq.dead_letter("t", 0, &d.dlq_id).await.unwrap().as_ref(),
        Some(d)
    );

    // Replay still refuses it, and the dead letter stays.
    let err = mq.replay_dead_letter("t", 0, &d.dlq_id).await.unwrap_err();
    assert!(err.to_string().contains("has 1005 fields"), "{err}");
    assert_eq!(mq.dead_letters("t", 10).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verdicts_panics_and_per_message_limits() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        fast_options("verdicts")
            .retry(policy(5, 20))
            .build()
            .unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let sub = mq
        .subscribe(
            "t",
            "g",
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(m.clone());
                    match (m.text().unwrap(), m.retry_count) {
                        ("dead", _) => HandleResult::DeadLetter(Failure::new("invalid", "no")),
                        ("fail", _) => HandleResult::Fail(Failure::new("bug", "broken")),
                        ("panic", 0) => panic!("boom"),
                        ("limit", _) => HandleResult::Retry(Failure::new("t", "again")),
                        _ => HandleResult::Success,
                    }
                }
            },
            sub_opts(),
        )
        .await
        .unwrap();
    let p = mq.producer();
    for text in ["dead", "fail", "panic"] {
        p.send("t", None, text).await.unwrap();
    }
    p.send_message("t", &OutgoingMessage::new("limit").max_retries(1))
        .await
        .unwrap();
    let dead = eventually("3 dead letters", DEADLINE, || async {
        let d = mq.dead_letters("t", 10).await.unwrap();
        (d.len() >= 3).then_some(d)
    })
    .await;
    let panic_retried = eventually("panic retried", DEADLINE, || async {
        seen.lock()
            .unwrap()
            .iter()
            .find(|m| m.text().unwrap() == "panic" && m.retry_count == 1)
            .cloned()
    })
    .await;
    assert_eq!(
        panic_retried
            .headers
            .get("x-error-type")
            .map(String::as_str),
        Some("panic")
    );
    assert_eq!(
        panic_retried
            .headers
            .get("x-error-message")
            .map(String::as_str),
        Some("boom")
    );
    sub.stop().await.unwrap();
    let mut kinds: Vec<(String, u32)> = dead
        .iter()
        .map(|d| (d.error_type.clone(), d.attempts))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            ("fail:bug".to_owned(), 1),
            ("invalid".to_owned(), 1),
            ("retries_exhausted:t".to_owned(), 2),
        ]
    );
}

/// The message is scheduled for retry, Redis is killed (SIGKILL) and restarted from its
/// AOF while the retry waits; the retry is delivered exactly once afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_survives_a_redis_restart_between_attempts_exactly_once() {
    let mut redis = TestRedis::private();
    let url = redis.url().to_owned();
    let mq = connect(
        &url,
        fast_options("restart")
            .retry(policy(3, 1500))
            .build()
            .unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let sub = mq
        .subscribe(
            "t",
            "g",
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(m.clone());
                    if m.retry_count == 0 {
                        HandleResult::Retry(Failure::new("flaky", "first try fails"))
                    } else {
                        HandleResult::Success
                    }
                }
            },
            sub_opts(),
        )
        .await
        .unwrap();
    let (_, first_id) = mq
        .producer()
        .send("t", Some("k"), "survivor")
        .await
        .unwrap();
    eventually("retry scheduled", DEADLINE, || async {
        let info = mq.describe_topic("t").await.ok()?;
        (info.partition_info[0].retry_scheduled == 1).then_some(())
    })
    .await;
    redis.server().restart();
    let retried = eventually("retry delivered after restart", DEADLINE, || async {
        seen.lock()
            .unwrap()
            .iter()
            .find(|m| m.retry_count == 1)
            .cloned()
    })
    .await;
    assert_eq!(retried.original_id(), first_id);
    assert_eq!(retried.text().unwrap(), "survivor");
    let info = eventually("retry acknowledged", DEADLINE, || async {
        let info = mq.describe_topic("t").await.ok()?;
        (info.partition_info[0].groups[0].pending == 0).then_some(info)
    })
    .await;
    sub.stop().await.unwrap();
    let deliveries = seen.lock().unwrap().clone();
    assert_eq!(deliveries.len(), 2, "first attempt + exactly one retry");
    let p = &info.partition_info[0];
    assert_eq!((p.length, p.retry_scheduled, p.dead_letters), (2, 0, 0));
}

/// The id of the last entry of `stream` (`XREVRANGE + - COUNT 1`), if any.
async fn last_entry_id(url: &str, stream: &str) -> Option<String> {
    let mut conn = raw_conn(url).await;
    let v: redis::Value = redis::cmd("XREVRANGE")
        .arg(stream)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    match v {
        redis::Value::Array(entries) => match entries.first() {
            Some(redis::Value::Array(entry)) => {
                Some(redis::from_redis_value::<String>(&entry[0]).unwrap())
            }
            _ => None,
        },
        _ => None,
    }
}

/// Subscribes `group` to topic `t`; every delivery is recorded in the returned list and
/// answered with `verdict`.
async fn recording_subscription(
    mq: &streaming::mq::Mq,
    group: &str,
    verdict: fn() -> HandleResult,
) -> (streaming::mq::Subscription, Seen) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let sub = mq
        .subscribe(
            "t",
            group,
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(m);
                    verdict()
                }
            },
            sub_opts(),
        )
        .await
        .unwrap();
    (sub, seen)
}

/// Waits until `dead` dead letters exist, no retry is scheduled, and every group of
/// partition 0 has acknowledged (and moved its commit frontier to) the stream's last entry:
/// nothing more can be delivered to anyone.
async fn wait_settled(mq: &streaming::mq::Mq, url: &str, dead: usize) {
    eventually(
        "all dead letters written and every group settled",
        DEADLINE,
        || async {
            let letters = mq.dead_letters("t", 1000).await.unwrap().len();
            let info = mq.describe_topic("t").await.unwrap();
            let p = &info.partition_info[0];
            let last = last_entry_id(url, &mq.keys().stream("t", 0)).await;
            let settled = letters >= dead
                && p.retry_scheduled == 0
                && !p.groups.is_empty()
                && p.groups
                    .iter()
                    .all(|g| g.pending == 0 && g.lag == Some(0) && g.frontier == last);
            settled.then_some(())
        },
    )
    .await;
}

/// Issue #4: a group's retry is delivered to that group only. Group `good` succeeds, group
/// `bad` always asks for a retry: `good` handles each message exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_is_delivered_only_to_the_group_that_failed() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        fast_options("retry-own-group")
            .retry(policy(2, 20))
            .build()
            .unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let (good, good_seen) = recording_subscription(&mq, "good", || HandleResult::Success).await;
    let (bad, bad_seen) = recording_subscription(&mq, "bad", || {
        HandleResult::Retry(Failure::new("nope", "bad always fails"))
    })
    .await;
    let producer = mq.producer();
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, id) = producer.send("t", None, format!("m{i}")).await.unwrap();
        ids.push(id);
    }
    wait_settled(&mq, redis.url(), 5).await;
    good.stop().await.unwrap();
    bad.stop().await.unwrap();

    let good_seen = good_seen.lock().unwrap().clone();
    let good_ids: Vec<&str> = good_seen.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        good_ids, ids,
        "good handles each original once, no retry copy"
    );
    assert!(good_seen
        .iter()
        .all(|m| m.retry_count == 0 && m.retry_group.is_none()));

    // bad: 5 originals + 2 retries each, all addressed to it.
    let bad_seen = bad_seen.lock().unwrap().clone();
    assert_eq!(bad_seen.len(), 15);
    for id in &ids {
        let mut counts: Vec<u32> = bad_seen
            .iter()
            .filter(|m| m.original_id() == id)
            .map(|m| m.retry_count)
            .collect();
        counts.sort_unstable();
        assert_eq!(counts, [0, 1, 2], "deliveries of {id} to bad");
    }
    for m in &bad_seen {
        let expected = (m.retry_count > 0).then_some("bad");
        assert_eq!(m.retry_group.as_deref(), expected, "{m:?}");
    }

    let mut letters = mq.dead_letters("t", 100).await.unwrap();
    assert_eq!(letters.len(), 5);
    letters.sort_by(|a, b| a.original_id.cmp(&b.original_id));
    let originals: Vec<&str> = letters.iter().map(|d| d.original_id.as_str()).collect();
    assert_eq!(originals, ids);
    for d in &letters {
        assert_eq!(d.group, "bad");
        assert_eq!(d.attempts, 3);
        assert_eq!(d.error_type, "retries_exhausted:nope");
    }
    // The stream holds the originals and bad's two retries of each.
    let info = mq.describe_topic("t").await.unwrap();
    assert_eq!(info.partition_info[0].length, 15);

    // A replayed dead letter is addressed to the group that dead-lettered it.
    let new_id = mq
        .replay_dead_letter("t", 0, &letters[0].dlq_id)
        .await
        .unwrap()
        .expect("replayed");
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let v: redis::Value = redis::cmd("XRANGE")
        .arg(mq.keys().stream("t", 0))
        .arg(&new_id)
        .arg(&new_id)
        .query_async(&mut conn)
        .await
        .unwrap();
    let fields: Vec<Vec<Vec<u8>>> = match v {
        redis::Value::Array(entries) => entries
            .into_iter()
            .map(|e| {
                let (_, fields): (String, Vec<Vec<u8>>) = redis::from_redis_value(&e).unwrap();
                fields
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    let rg: Vec<&[u8]> = fields[0]
        .chunks(2)
        .filter(|p| p[0] == b"rg")
        .map(|p| p[1].as_slice())
        .collect();
    assert_eq!(rg, [b"bad".as_slice()]);
}

/// Issue #4: two failing groups each get their own retry of the same entry (the retry
/// schedule is per group; neither overwrites the other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_failing_groups_each_retry_their_own_copy() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        fast_options("retry-two-groups")
            .retry(policy(1, 20))
            .build()
            .unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let fail = || HandleResult::Retry(Failure::new("nope", "always fails"));
    let (a, a_seen) = recording_subscription(&mq, "a", fail).await;
    let (b, b_seen) = recording_subscription(&mq, "b", fail).await;
    let producer = mq.producer();
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, id) = producer.send("t", None, format!("m{i}")).await.unwrap();
        ids.push(id);
    }
    wait_settled(&mq, redis.url(), 10).await;
    a.stop().await.unwrap();
    b.stop().await.unwrap();

    for (group, seen) in [("a", a_seen), ("b", b_seen)] {
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 10, "group {group}: 5 originals + 5 own retries");
        for id in &ids {
            let mut counts: Vec<u32> = seen
                .iter()
                .filter(|m| m.original_id() == id)
                .map(|m| m.retry_count)
                .collect();
            counts.sort_unstable();
            assert_eq!(counts, [0, 1], "deliveries of {id} to group {group}");
        }
        for m in &seen {
            let expected = (m.retry_count > 0).then_some(group);
            assert_eq!(m.retry_group.as_deref(), expected, "{m:?}");
        }
    }
    let letters = mq.dead_letters("t", 100).await.unwrap();
    assert_eq!(letters.len(), 10);
    for group in ["a", "b"] {
        let mut originals: Vec<&str> = letters
            .iter()
            .filter(|d| d.group == group)
            .map(|d| d.original_id.as_str())
            .collect();
        originals.sort_unstable();
        assert_eq!(originals, ids, "dead letters of group {group}");
    }
    assert!(letters.iter().all(|d| d.attempts == 2));
    // Each group dead-lettered its own retry entry: ten distinct retry entries.
    let mut failed: Vec<&str> = letters.iter().map(|d| d.id.as_str()).collect();
    failed.sort_unstable();
    failed.dedup();
    assert_eq!(failed.len(), 10);
    assert!(failed.iter().all(|id| !ids.iter().any(|o| o == id)));
    let info = mq.describe_topic("t").await.unwrap();
    assert_eq!(info.partition_info[0].length, 15);
}

/// Issue #4, `NOACK` readers: two groups failing the same entries both get a retry
/// scheduled, and each reader gets only its own retries (the other group's are skipped
/// while the offset still moves past them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_readers_of_two_groups_retry_independently() {
    let redis = TestRedis::shared();
    let mq = connect(
        redis.url(),
        // Retries due after 500 ms: none is due (and promoted by the other group's read)
        // before both groups scheduled theirs, however slow the machine.
        fast_options("retry-exclusive")
            .retry(policy(2, 500))
            .build()
            .unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let producer = mq.producer();
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, id) = producer.send("t", None, format!("m{i}")).await.unwrap();
        ids.push(id);
    }
    let mut readers = Vec::new();
    for group in ["a", "b"] {
        let r = mq
            .exclusive_reader("t", group, 0, "c1", None, StartPolicy::Earliest)
            .await
            .unwrap();
        readers.push(r);
    }
    let failure = Failure::new("nope", "always fails");
    for r in &mut readers {
        let batch = r.read(10, Duration::from_millis(10)).await.unwrap();
        let got: Vec<&str> = batch.messages.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(got, ids);
        for m in &batch.messages {
            let outcome = r.retry_or_dead_letter(m, &failure).await.unwrap();
            assert!(
                matches!(outcome, streaming::mq::RetryOutcome::Scheduled { .. }),
                "{outcome:?}"
            );
        }
    }
    let info = mq.describe_topic("t").await.unwrap();
    assert_eq!(info.partition_info[0].retry_scheduled, 10);
    // Both readers promote; each sees exactly its own five retries and moves past the
    // other group's.
    let stream = mq.keys().stream("t", 0);
    for (group, r) in ["a", "b"].into_iter().zip(&mut readers) {
        let mut got: Vec<Message> = Vec::new();
        let mut skipped = 0;
        let mut last = None;
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let done = last.is_some() && last == last_entry_id(redis.url(), &stream).await;
            let scheduled = mq.describe_topic("t").await.unwrap().partition_info[0].retry_scheduled;
            if done && scheduled == 0 && got.len() >= 5 {
                break;
            }
            assert!(tokio::time::Instant::now() < end, "timed out: {got:?}");
            let batch = r.read(10, Duration::from_millis(20)).await.unwrap();
            if batch.last_id.is_some() {
                last = batch.last_id;
            }
            skipped += batch.skipped;
            got.extend(batch.messages);
        }
        assert_eq!(got.len(), 5, "{got:?}");
        let mut originals: Vec<&str> = got.iter().map(|m| m.original_id()).collect();
        originals.sort_unstable();
        assert_eq!(originals, ids);
        assert!(got.iter().all(|m| m.retry_count == 1));
        assert!(got.iter().all(|m| m.retry_group.as_deref() == Some(group)));
        assert_eq!(skipped, 5, "group {group} skips the other group's retries");
    }
    let info = mq.describe_topic("t").await.unwrap();
    assert_eq!(info.partition_info[0].length, 15);
    for r in readers {
        r.release().await.unwrap();
    }
}
