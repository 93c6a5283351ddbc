//! `JobClient::scale_parallelism` on a running job: new subtasks take their share, removed
//! ones hand theirs over, and the output stays exactly-once with exact keyed counts.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use streaming::mq::{Mq, OutgoingMessage};
use streaming::redis::AckMode;
use support::redis_server::TestRedis;
use support::workers::{
    check_exactly_once, lease_values, output, word, Inputs, Worker, WorkerSpec, TOPIC, TOPIC2,
};

const PARTITIONS: u32 = 4;

/// The child side of the test.
#[test]
fn worker() {
    support::workers::serve();
}

/// The consumer names holding the partitions' leases now.
fn holders(conn: &mut redis::Connection, prefix: &str) -> BTreeSet<String> {
    lease_values(conn, prefix, PARTITIONS)
        .into_iter()
        .flatten()
        .filter_map(|v| v.split_once(' ').map(|(_, c)| c.to_string()))
        .collect()
}

fn wait_for(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rescale(mode: AckMode, test: &str) {
    rescale_of(mode, test, false);
}

fn rescale_of(mode: AckMode, test: &str, two_inputs: bool) {
    const N: usize = 3000;
    let redis = TestRedis::private();
    let prefix = support::unique_prefix(test);
    let opts = support::fast_options(test)
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let rt = support::engine::rt();
    rt.block_on(async {
        let mq = Mq::connect(redis.url(), opts).await.unwrap();
        mq.create_topic(TOPIC, PARTITIONS).await.unwrap();
        mq.create_topic(TOPIC2, PARTITIONS).await.unwrap();
        // With two inputs, the odd messages are the second topic's.
        for topic in [TOPIC, TOPIC2] {
            let msgs: Vec<OutgoingMessage> = (0..N)
                .filter(|i| (two_inputs && i % 2 == 1) == (topic == TOPIC2))
                .map(|i| OutgoingMessage::new(format!("m{i}")).key(word(i)))
                .collect();
            if !msgs.is_empty() {
                mq.producer().send_batch(topic, &msgs).await.unwrap();
            }
        }
    });
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let spec = WorkerSpec {
        url: redis.url().to_string(),
        prefix: prefix.clone(),
        mode,
        parallelism: 1,
        record_delay: Duration::from_millis(2),
        replica_wait: None,
        inputs: Inputs::union_if(two_inputs),
        checkpoints: None,
    };
    let mut w = Worker::spawn(&spec);
    let name = |seq: u32| format!("wc-{}-{seq}", w.instance);
    let (c0, c1, c2) = (name(0), name(1), name(2));
    let deadline = Duration::from_secs(60);
    wait_for("first commits", deadline, || {
        output(&mut conn, PARTITIONS).len() >= 100
    });
    assert_eq!(holders(&mut conn, &prefix), BTreeSet::from([c0.clone()]));
    w.scale(3);
    wait_for("three subtasks owning partitions", deadline, || {
        holders(&mut conn, &prefix) == BTreeSet::from([c0.clone(), c1.clone(), c2.clone()])
    });
    let at3 = output(&mut conn, PARTITIONS).len();
    assert!(at3 < N, "the input ran out before the scale-down: raise N");
    w.scale(2);
    wait_for("two subtasks owning partitions", deadline, || {
        holders(&mut conn, &prefix) == BTreeSet::from([c0.clone(), c1.clone()])
    });
    wait_for("all messages", Duration::from_secs(120), || {
        output(&mut conn, PARTITIONS).len() >= N
    });
    std::thread::sleep(Duration::from_secs(1));
    let last = w.stop();
    check_exactly_once(&output(&mut conn, PARTITIONS), N);
    assert!(last.contains("live_parallelism: 2"), "{last}");
}

/// A job counting the union of two co-partitioned topics rescales the same way: each
/// subtask takes a partition of both inputs.
#[test]
fn scale_1_3_2_of_a_two_input_job() {
    rescale_of(AckMode::Offset, "rescale-two-inputs", true);
}

#[test]
fn scale_1_3_2_offset_mode() {
    rescale(AckMode::Offset, "rescale-offset");
}

#[test]
fn scale_1_3_2_xack_mode() {
    rescale(AckMode::Xack, "rescale-xack");
}
