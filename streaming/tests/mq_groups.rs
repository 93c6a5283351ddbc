//! Consumer groups: partition split and rebalance, claims after a crash, pause/resume,
//! assignment filters, start policies, and the NOACK exclusive reader.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streaming::mq::{
    Assignment, HandleResult, Message, Mq, OutgoingMessage, StartPolicy, Subscription,
    SubscriptionOptions,
};
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

type Seen = Arc<Mutex<Vec<Message>>>;

fn opts(start: StartPolicy) -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(start)
        .batch_count(20)
        .poll_timeout(Duration::from_millis(100))
        .build()
        .unwrap()
}

async fn collecting(
    mq: &Mq,
    topic: &str,
    group: &str,
    sub: SubscriptionOptions,
) -> (Subscription, Seen) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let s = mq
        .subscribe(
            topic,
            group,
            move |m: Message| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(m);
                    HandleResult::Success
                }
            },
            sub,
        )
        .await
        .unwrap();
    (s, seen)
}

async fn produce(mq: &Mq, topic: &str, from: u32, to: u32) {
    let msgs: Vec<OutgoingMessage> = (from..to)
        .map(|i| OutgoingMessage::new(i.to_string()).key(format!("k{i}")))
        .collect();
    mq.producer().send_batch(topic, &msgs).await.unwrap();
}

fn payloads(seen: &Seen) -> Vec<u32> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|m| m.text().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_consumers_split_partitions_and_rebalance_when_one_stops() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("split").build().unwrap()).await;
    mq.create_topic("t", 4).await.unwrap();
    let (a, seen_a) = collecting(&mq, "t", "g", opts(StartPolicy::Earliest)).await;
    eventually("a owns all 4", DEADLINE, || async {
        (a.owned_partitions() == vec![0, 1, 2, 3]).then_some(())
    })
    .await;
    let (b, seen_b) = collecting(&mq, "t", "g", opts(StartPolicy::Earliest)).await;
    let (owned_a, owned_b) = eventually("a and b own 2 each", DEADLINE, || async {
        let (oa, ob) = (a.owned_partitions(), b.owned_partitions());
        (oa.len() == 2 && ob.len() == 2).then_some((oa, ob))
    })
    .await;
    let all: BTreeSet<u32> = owned_a.iter().chain(&owned_b).copied().collect();
    assert_eq!(all, BTreeSet::from([0, 1, 2, 3]), "disjoint split");

    produce(&mq, "t", 0, 200).await;
    eventually("200 consumed", DEADLINE, || async {
        (seen_a.lock().unwrap().len() + seen_b.lock().unwrap().len() >= 200).then_some(())
    })
    .await;
    for m in seen_a.lock().unwrap().iter() {
        assert!(
            owned_a.contains(&m.partition),
            "a got partition {}",
            m.partition
        );
    }
    for m in seen_b.lock().unwrap().iter() {
        assert!(
            owned_b.contains(&m.partition),
            "b got partition {}",
            m.partition
        );
    }

    b.stop().await.unwrap();
    eventually("a owns all 4 again", DEADLINE, || async {
        (a.owned_partitions() == vec![0, 1, 2, 3]).then_some(())
    })
    .await;
    produce(&mq, "t", 200, 300).await;
    eventually("300 consumed", DEADLINE, || async {
        (seen_a.lock().unwrap().len() + seen_b.lock().unwrap().len() >= 300).then_some(())
    })
    .await;
    a.stop().await.unwrap();
    let mut got = payloads(&seen_a);
    got.extend(payloads(&seen_b));
    got.sort();
    assert_eq!(
        got,
        (0..300).collect::<Vec<_>>(),
        "each message exactly once"
    );
    // Stopped subscriptions released their leases.
    let info = mq.describe_topic("t").await.unwrap();
    for p in &info.partition_info {
        assert_eq!(p.groups[0].pending, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_consumer_pending_entries_are_claimed_by_the_new_owner() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("claim").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    // A reads a batch of 10 and hangs on the first message: the batch stays pending.
    let a = mq
        .subscribe(
            "t",
            "g",
            move |_m: Message| {
                let flag = flag.clone();
                async move {
                    flag.store(true, Ordering::SeqCst);
                    std::future::pending::<HandleResult>().await
                }
            },
            SubscriptionOptions::builder()
                .start(StartPolicy::Earliest)
                .batch_count(10)
                .poll_timeout(Duration::from_millis(100))
                .consumer_name("a")
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    produce(&mq, "t", 0, 10).await;
    eventually("a is handling", DEADLINE, || async {
        started.load(Ordering::SeqCst).then_some(())
    })
    .await;
    assert_eq!(a.in_flight(), 10);
    let mut named = opts(StartPolicy::Earliest);
    named.consumer_name = Some("b".into());
    let (b, seen_b) = collecting(&mq, "t", "g", named).await;
    a.abort(); // a crash: no ack, no lease release
    eventually("b claimed and handled all 10", DEADLINE, || async {
        (seen_b.lock().unwrap().len() >= 10).then_some(())
    })
    .await;
    assert_eq!(b.owned_partitions(), vec![0]);
    b.stop().await.unwrap();
    let mut got = payloads(&seen_b);
    got.sort();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert!(seen_b.lock().unwrap().iter().all(|m| m.partition == 0));
    let info = mq.describe_topic("t").await.unwrap();
    let g = &info.partition_info[0].groups[0];
    assert_eq!(g.pending, 0);
    assert_eq!(g.frontier.as_deref(), Some(g.last_delivered_id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_reading_and_resume_continues() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("pause").build().unwrap()).await;
    mq.create_topic("t", 2).await.unwrap();
    let (s, seen) = collecting(&mq, "t", "g", opts(StartPolicy::Earliest)).await;
    produce(&mq, "t", 0, 10).await;
    eventually("10 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 10 && s.owned_partitions().len() == 2).then_some(())
    })
    .await;
    s.pause();
    assert!(s.is_paused());
    eventually("every worker parked", DEADLINE, || async {
        s.is_parked().then_some(())
    })
    .await;
    produce(&mq, "t", 10, 20).await;
    // Parked workers read nothing: the new entries wait in the streams.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(seen.lock().unwrap().len(), 10);
    assert_eq!(s.in_flight(), 0);
    let info = mq.describe_topic("t").await.unwrap();
    let lag: u64 = info
        .partition_info
        .iter()
        .map(|p| p.groups[0].lag.unwrap())
        .sum();
    assert_eq!(lag, 10);
    s.resume();
    assert!(!s.is_paused());
    eventually("20 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 20).then_some(())
    })
    .await;
    s.stop().await.unwrap();
    let mut got = payloads(&seen);
    got.sort();
    assert_eq!(got, (0..20).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assignment_filter_pins_partitions_and_can_change() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("assign").build().unwrap()).await;
    mq.create_topic("t", 5).await.unwrap();
    let mut o0 = opts(StartPolicy::Earliest);
    o0.assignment = Some(Assignment::try_new(0, 2).unwrap());
    let mut o1 = opts(StartPolicy::Earliest);
    o1.assignment = Some(Assignment::try_new(1, 2).unwrap());
    let (s0, seen0) = collecting(&mq, "t", "g", o0).await;
    let (s1, seen1) = collecting(&mq, "t", "g", o1).await;
    eventually("pinned", DEADLINE, || async {
        (s0.owned_partitions() == vec![0, 2, 4] && s1.owned_partitions() == vec![1, 3])
            .then_some(())
    })
    .await;
    produce(&mq, "t", 0, 50).await;
    eventually("50 consumed", DEADLINE, || async {
        (seen0.lock().unwrap().len() + seen1.lock().unwrap().len() >= 50).then_some(())
    })
    .await;
    assert!(seen0.lock().unwrap().iter().all(|m| m.partition % 2 == 0));
    assert!(seen1.lock().unwrap().iter().all(|m| m.partition % 2 == 1));
    // Scale down to one subtask: s1 lets go, s0 takes everything.
    s1.stop().await.unwrap();
    s0.set_assignment(Some(Assignment::try_new(0, 1).unwrap()));
    eventually("s0 owns all", DEADLINE, || async {
        (s0.owned_partitions() == vec![0, 1, 2, 3, 4]).then_some(())
    })
    .await;
    s0.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_start_does_not_replay_and_frontier_rebuilds_a_lost_group() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("start").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    produce(&mq, "t", 0, 5).await;
    let (s, seen) = collecting(&mq, "t", "g", opts(StartPolicy::Latest)).await;
    eventually("owned", DEADLINE, || async {
        (!s.owned_partitions().is_empty()).then_some(())
    })
    .await;
    produce(&mq, "t", 5, 8).await;
    eventually("3 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 3).then_some(())
    })
    .await;
    s.stop().await.unwrap();
    assert_eq!(payloads(&seen), vec![5, 6, 7]);

    // The group is lost (e.g. a wiped server restored without it); the frontier is not.
    let frontier = mq.commit_frontier("t", "g", 0).await.unwrap().unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg("DESTROY")
        .arg(mq.keys().stream("t", 0))
        .arg("g")
        .query_async(&mut conn)
        .await
        .unwrap();
    produce(&mq, "t", 8, 10).await;
    let (s, seen) = collecting(&mq, "t", "g", opts(StartPolicy::FrontierOrEarliest)).await;
    eventually("2 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 2).then_some(())
    })
    .await;
    s.stop().await.unwrap();
    assert_eq!(
        payloads(&seen),
        vec![8, 9],
        "restarted after frontier {frontier}"
    );
}

#[tokio::test]
async fn exclusive_reader_reads_noack_and_restarts_from_the_committed_offset() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("noack").build().unwrap()).await;
    mq.create_topic("t", 2).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..10)
        .map(|i| OutgoingMessage::new(i.to_string()).partition(1))
        .collect();
    mq.producer().send_batch("t", &msgs).await.unwrap();

    let mut r = mq
        .exclusive_reader("t", "engine", 1, "owner-a", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let other = mq
        .exclusive_reader("t", "engine", 1, "owner-b", None, StartPolicy::Earliest)
        .await
        .unwrap_err();
    assert!(other.to_string().contains("leased by another"), "{other}");
    let b1 = r.read(4, Duration::from_millis(10)).await.unwrap();
    let texts: Vec<&str> = b1.messages.iter().map(|m| m.text().unwrap()).collect();
    assert_eq!(texts, ["0", "1", "2", "3"]);
    let committed = b1.last_id.clone().unwrap();
    // Read more but "crash" before committing it.
    let b2 = r.read(3, Duration::from_millis(10)).await.unwrap();
    assert_eq!(b2.messages.len(), 3);
    let info = mq.describe_topic("t").await.unwrap();
    let g = &info.partition_info[1].groups[0];
    assert_eq!(
        (g.pending, g.lag),
        (0, Some(3)),
        "NOACK: no pending list, lag visible"
    );
    assert!(r.renew().await.unwrap());
    r.release().await.unwrap();

    let mut r = mq
        .exclusive_reader(
            "t",
            "engine",
            1,
            "owner-b",
            Some(&committed),
            StartPolicy::Latest,
        )
        .await
        .unwrap();
    let b = r.read(100, Duration::from_millis(10)).await.unwrap();
    let texts: Vec<&str> = b.messages.iter().map(|m| m.text().unwrap()).collect();
    assert_eq!(
        texts,
        ["4", "5", "6", "7", "8", "9"],
        "resumed after the committed offset"
    );
    let empty = r.read(100, Duration::from_millis(10)).await.unwrap();
    assert_eq!(empty.last_id, None);
    r.release().await.unwrap();
}

#[tokio::test]
async fn exclusive_reader_retries_then_dead_letters() {
    let redis = TestRedis::shared();
    let policy = streaming::mq::RetryPolicy::builder()
        .max_retries(1)
        .initial_backoff(Duration::from_millis(50))
        .multiplier(2.0)
        .max_backoff(Duration::from_millis(100))
        .jitter(0.0)
        .build()
        .unwrap();
    let mq = connect(
        redis.url(),
        fast_options("noack-retry").retry(policy).build().unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let (_, first_id) = mq.producer().send("t", Some("k"), "job").await.unwrap();
    let mut r = mq
        .exclusive_reader("t", "engine", 0, "owner", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let b = r.read(10, Duration::from_millis(10)).await.unwrap();
    assert_eq!(b.messages.len(), 1);
    let fail = streaming::mq::Failure::new("io", "disk full");
    let outcome = r.retry_or_dead_letter(&b.messages[0], &fail).await.unwrap();
    assert_eq!(
        outcome,
        streaming::mq::RetryOutcome::Scheduled {
            delay: Duration::from_millis(50)
        }
    );
    assert_eq!(
        r.retry_or_dead_letter(&b.messages[0], &fail).await.unwrap(),
        streaming::mq::RetryOutcome::AlreadyScheduled
    );
    let mut retried = None;
    for _ in 0..600 {
        let b = r.read(10, Duration::from_millis(50)).await.unwrap();
        if let Some(m) = b.messages.into_iter().next() {
            retried = Some(m);
            break;
        }
    }
    let retried = retried.expect("retry delivered");
    assert_eq!(retried.retry_count, 1);
    assert_eq!(retried.original_id(), first_id);
    assert_eq!(retried.key.as_deref(), Some("k"));
    // The first entry read again (a crash before the offset commit): its retry was
    // delivered already and is not scheduled again.
    assert_eq!(
        r.retry_or_dead_letter(&b.messages[0], &fail).await.unwrap(),
        streaming::mq::RetryOutcome::AlreadyScheduled
    );
    assert_eq!(
        r.retry_or_dead_letter(&retried, &fail).await.unwrap(),
        streaming::mq::RetryOutcome::DeadLettered
    );
    // Read again, the retry is not dead-lettered twice.
    r.dead_letter(&retried, &fail).await.unwrap();
    let dead = mq.dead_letters("t", 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].error_type, "retries_exhausted:io");
    assert_eq!(dead[0].attempts, 2);
    assert_eq!(dead[0].original_id, first_id);
    assert_eq!(dead[0].group, "engine");
    r.release().await.unwrap();
}

/// A reader whose lease expired and was taken by another owner (a new fencing token)
/// writes nothing: its dead letter, retry, promotion and read are refused in the script, and
/// the new owner reads every entry once.
#[tokio::test]
async fn a_stale_exclusive_reader_is_fenced_and_writes_nothing() {
    let redis = TestRedis::shared();
    let policy = streaming::mq::RetryPolicy::builder()
        .max_retries(3)
        .initial_backoff(Duration::from_millis(10))
        .multiplier(1.0)
        .max_backoff(Duration::from_millis(10))
        .jitter(0.0)
        .build()
        .unwrap();
    let opts = fast_options("noack-fenced")
        .lease_ttl(Duration::from_millis(300))
        .lease_renew_interval(Duration::from_millis(100))
        .retry(policy)
        .build()
        .unwrap();
    let mq = connect(redis.url(), opts).await;
    mq.create_topic("t", 1).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..6)
        .map(|i| OutgoingMessage::new(i.to_string()))
        .collect();
    mq.producer().send_batch("t", &msgs).await.unwrap();
    let mut a = mq
        .exclusive_reader("t", "engine", 0, "owner-a", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let first = a.read(2, Duration::from_millis(10)).await.unwrap();
    let failed = first.messages[0].clone();
    let committed = first.last_id.clone().unwrap();
    // A stalls past its lease; B takes the partition under a larger token.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let mut b = mq
        .exclusive_reader(
            "t",
            "engine",
            0,
            "owner-b",
            Some(&committed),
            StartPolicy::Latest,
        )
        .await
        .unwrap();
    assert!(b.fencing_token() > a.fencing_token());

    let fail = streaming::mq::Failure::new("io", "disk full");
    let e = a.dead_letter(&failed, &fail).await.unwrap_err();
    assert!(e.is_fenced(), "{e}");
    let e = a.retry_or_dead_letter(&failed, &fail).await.unwrap_err();
    assert!(e.is_fenced(), "{e}");
    let e = a.read(10, Duration::from_millis(10)).await.unwrap_err();
    assert!(e.is_fenced(), "a stale read moves nothing: {e}");
    assert!(!a.renew().await.unwrap());

    assert!(mq.dead_letters("t", 10).await.unwrap().is_empty());
    let mut texts = Vec::new();
    let end = tokio::time::Instant::now() + Duration::from_millis(500);
    while tokio::time::Instant::now() < end {
        let batch = b.read(10, Duration::from_millis(20)).await.unwrap();
        texts.extend(batch.messages.iter().map(|m| m.text().unwrap().to_owned()));
    }
    assert_eq!(
        texts,
        ["2", "3", "4", "5"],
        "the new owner reads every entry after the commit once, and no retry was scheduled"
    );
    b.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_the_partition_and_a_free_one_is_taken_back() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("lease").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let (s, seen) = collecting(&mq, "t", "g", opts(StartPolicy::Earliest)).await;
    eventually("owned", DEADLINE, || async {
        (s.owned_partitions() == vec![0]).then_some(())
    })
    .await;
    let lease = mq.keys().lease("t", 0, "g");
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let holder: String = redis::cmd("GET")
        .arg(&lease)
        .query_async(&mut conn)
        .await
        .unwrap();
    // The lease holds "{fencing token} {owner}".
    let (token, owner) = holder.split_once(' ').unwrap();
    assert!(token.parse::<u64>().unwrap() >= 1, "{holder}");
    assert_eq!(owner, s.consumer_name());
    // Someone else takes the lease (as if ours had expired during a long pause).
    let _: () = redis::cmd("SET")
        .arg(&lease)
        .arg("intruder")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    eventually("partition given up", DEADLINE, || async {
        s.owned_partitions().is_empty().then_some(())
    })
    .await;
    let _: () = redis::cmd("DEL")
        .arg(&lease)
        .query_async(&mut conn)
        .await
        .unwrap();
    eventually("partition taken back", DEADLINE, || async {
        (s.owned_partitions() == vec![0]).then_some(())
    })
    .await;
    produce(&mq, "t", 0, 5).await;
    eventually("5 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 5).then_some(())
    })
    .await;
    s.stop().await.unwrap();
    let left: Option<String> = redis::cmd("GET")
        .arg(&lease)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, None, "stop released the lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_deleted_while_running_is_rebuilt_from_the_frontier() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("regroup").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let (s, seen) = collecting(&mq, "t", "g", opts(StartPolicy::FrontierOrEarliest)).await;
    produce(&mq, "t", 0, 5).await;
    eventually("5 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 5).then_some(())
    })
    .await;
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let destroyed: i64 = redis::cmd("XGROUP")
        .arg("DESTROY")
        .arg(mq.keys().stream("t", 0))
        .arg("g")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(destroyed, 1);
    eventually("group re-created", DEADLINE, || async {
        let info = mq.describe_topic("t").await.ok()?;
        (!info.partition_info[0].groups.is_empty()).then_some(())
    })
    .await;
    produce(&mq, "t", 5, 8).await;
    eventually("8 consumed", DEADLINE, || async {
        (seen.lock().unwrap().len() >= 8).then_some(())
    })
    .await;
    s.stop().await.unwrap();
    assert_eq!(
        payloads(&seen),
        (0..8).collect::<Vec<_>>(),
        "nothing replayed"
    );
}

/// A message whose consumers keep dying on it is dead-lettered once its delivery count
/// passes the retry limit, without calling the handler again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_that_keeps_killing_consumers_is_dead_lettered() {
    let redis = TestRedis::shared();
    let policy = streaming::mq::RetryPolicy::builder()
        .max_retries(1)
        .build()
        .unwrap();
    let mq = connect(
        redis.url(),
        fast_options("poison").retry(policy).build().unwrap(),
    )
    .await;
    mq.create_topic("t", 1).await.unwrap();
    let (_, id) = mq.producer().send("t", None, "poison").await.unwrap();
    // Two consumers in turn take the message and die on it (deliveries 1 and 2).
    for name in ["a", "b"] {
        let started = Arc::new(AtomicBool::new(false));
        let flag = started.clone();
        let mut o = opts(StartPolicy::Earliest);
        o.consumer_name = Some(name.into());
        let s = mq
            .subscribe(
                "t",
                "g",
                move |_m: Message| {
                    let flag = flag.clone();
                    async move {
                        flag.store(true, Ordering::SeqCst);
                        std::future::pending::<HandleResult>().await
                    }
                },
                o,
            )
            .await
            .unwrap();
        eventually("handler entered", DEADLINE, || async {
            started.load(Ordering::SeqCst).then_some(())
        })
        .await;
        s.abort();
    }
    // The third owner claims it (delivery 3 > max_retries + 1) and dead-letters it.
    let mut o = opts(StartPolicy::Earliest);
    o.consumer_name = Some("c".into());
    let (c, seen) = collecting(&mq, "t", "g", o).await;
    let dead = eventually("dead-lettered", DEADLINE, || async {
        let d = mq.dead_letters("t", 10).await.unwrap();
        (!d.is_empty()).then_some(d)
    })
    .await;
    c.stop().await.unwrap();
    assert!(seen.lock().unwrap().is_empty(), "handler not called again");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].error_type, "redeliveries_exhausted");
    assert!(
        dead[0].error.contains("delivered 3 times"),
        "{}",
        dead[0].error
    );
    let info = mq.describe_topic("t").await.unwrap();
    assert_eq!(info.partition_info[0].groups[0].pending, 0);
}

/// An acquisition whose reply was lost (Redis applied it, then restarted from its AOF, or
/// the connection reset) leaves a lease naming the owner under a token the owner never
/// learnt. The owner's next take recognises it as its own and moves it to a new token at
/// once; another owner is still refused.
#[tokio::test]
async fn a_lease_left_by_a_lost_reply_is_taken_back_by_its_owner() {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options("lost-reply").build().unwrap()).await;
    mq.create_topic("t", 1).await.unwrap();
    let (lease, fence) = (mq.keys().lease("t", 0, "g"), mq.keys().fence("t", 0, "g"));
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // What an acquisition by `owner-a` leaves: the counter drawn, the lease set.
    let _: () = redis::pipe()
        .cmd("SET")
        .arg(&fence)
        .arg(41)
        .ignore()
        .cmd("SET")
        .arg(&lease)
        .arg("41 owner-a")
        .arg("PX")
        .arg(60_000)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    let other = mq
        .exclusive_reader("t", "g", 0, "owner-b", None, StartPolicy::Earliest)
        .await
        .unwrap_err();
    assert!(other.to_string().contains("leased by another"), "{other}");
    let mut r = mq
        .exclusive_reader("t", "g", 0, "owner-a", None, StartPolicy::Earliest)
        .await
        .expect("its own lease is taken back");
    let held: String = redis::cmd("GET")
        .arg(&lease)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(held, "42 owner-a", "moved to a new fencing token");
    assert!(r.renew().await.unwrap());
    r.release().await.unwrap();
}
