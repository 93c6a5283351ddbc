//! Several OS processes of one job against one Redis: partition ownership is fenced (a
//! stalled process that lost its partitions writes nothing when it wakes up), processes on
//! one host with the default config share the partitions, and the output stays
//! exactly-once with exact keyed counts.

mod support;

use std::time::{Duration, Instant};

use streaming::mq::{Mq, OutgoingMessage};
use streaming::redis::AckMode;
use support::redis_server::TestRedis;
use support::workers::{
    check_exactly_once, distinct, lease_owners, output, sum_of, word, Worker, WorkerSpec, TOPIC,
};

const PARTITIONS: u32 = 4;

/// The child side of every test here.
#[test]
fn worker() {
    support::workers::serve();
}

struct Fixture {
    _redis: TestRedis,
    spec: WorkerSpec,
    conn: redis::Connection,
}

fn fixture(test: &str, mode: AckMode, messages: usize) -> Fixture {
    let redis = TestRedis::private();
    let prefix = support::unique_prefix(test);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = support::fast_options(test)
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    rt.block_on(async {
        let mq = Mq::connect(redis.url(), opts).await.unwrap();
        mq.create_topic(TOPIC, PARTITIONS).await.unwrap();
        let msgs: Vec<OutgoingMessage> = (0..messages)
            .map(|i| OutgoingMessage::new(format!("m{i}")).key(word(i)))
            .collect();
        for chunk in msgs.chunks(1000) {
            mq.producer().send_batch(TOPIC, chunk).await.unwrap();
        }
    });
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    Fixture {
        spec: WorkerSpec {
            url: redis.url().to_string(),
            prefix,
            mode,
            parallelism: 1,
            record_delay: Duration::from_millis(2),
        },
        _redis: redis,
        conn,
    }
}

impl Fixture {
    fn output_len(&mut self) -> usize {
        output(&mut self.conn, PARTITIONS).len()
    }

    fn wait_output(&mut self, what: &str, n: usize, deadline: Duration) {
        let end = Instant::now() + deadline;
        while self.output_len() < n {
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}: {} < {n}",
                self.output_len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the output has `n` lines and has not grown for a while (a duplicate
    /// would come after that).
    fn wait_done(&mut self, n: usize) {
        self.wait_output("all messages", n, Duration::from_secs(120));
        let mut last = self.output_len();
        let mut still = Instant::now();
        while still.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(100));
            let now = self.output_len();
            if now != last {
                last = now;
                still = Instant::now();
            }
        }
    }
}

/// A process `SIGSTOP`ped past `lease_ttl` loses its partitions to another process; when
/// it is `SIGCONT`ed, the batch it had in flight is fenced: nothing of it is written.
fn zombie(mode: AckMode, test: &str) {
    const N: usize = 2500;
    let mut f = fixture(test, mode, N);
    let a = Worker::spawn(&f.spec);
    f.wait_output("A's first commits", 100, Duration::from_secs(60));
    a.signal("STOP");
    let stopped_at = Instant::now();
    let frozen = f.output_len();
    let b = Worker::spawn(&f.spec);
    // B takes A's partitions once their leases expired and commits.
    f.wait_output("B's commits", frozen + 200, Duration::from_secs(60));
    let b_took_over_after = stopped_at.elapsed();
    a.signal("CONT");
    f.wait_done(N);
    let (da, db) = (a.stop(), b.stop());
    check_exactly_once(&output(&mut f.conn, PARTITIONS), N);
    // Not before A's leases expired (lease_ttl 1.5 s): A held them all.
    assert!(
        b_took_over_after > Duration::from_millis(1500),
        "{b_took_over_after:?}"
    );
    assert!(
        sum_of(&da, "fenced") >= 1,
        "A's in-flight batch was not fenced: {da}"
    );
    assert_eq!(sum_of(&db, "fenced"), 0, "{db}");
}

#[test]
fn a_stalled_process_is_fenced_when_it_wakes_up_offset_mode() {
    zombie(AckMode::Offset, "zombie-offset");
}

#[test]
fn a_stalled_process_is_fenced_when_it_wakes_up_xack_mode() {
    zombie(AckMode::Xack, "zombie-xack");
}

/// Two processes with the default config on one host: every lease has one owner at every
/// sample, both own partitions (two each once settled), and the output is exactly-once.
#[test]
fn processes_on_one_host_share_partitions() {
    const N: usize = 3000;
    let mut f = fixture("same-host", AckMode::Offset, N);
    let a = Worker::spawn(&f.spec);
    let b = Worker::spawn(&f.spec);
    let instances = [a.instance.clone(), b.instance.clone()];
    let prefix = f.spec.prefix.clone();
    let end = Instant::now() + Duration::from_secs(120);
    let mut balanced = 0;
    while f.output_len() < N {
        assert!(Instant::now() < end, "timed out");
        let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
        for o in owners.iter().flatten() {
            assert!(instances.contains(o), "lease held by an unknown owner: {o}");
        }
        let per = |i: &String| owners.iter().flatten().filter(|o| *o == i).count();
        if per(&instances[0]) == 2 && per(&instances[1]) == 2 {
            balanced += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f.wait_done(N);
    let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
    let (da, db) = (a.stop(), b.stop());
    check_exactly_once(&output(&mut f.conn, PARTITIONS), N);
    assert_ne!(instances[0], instances[1]);
    assert_eq!(distinct(&owners).len(), 2, "{owners:?}");
    assert!(balanced > 0, "never two partitions each");
    assert!(
        sum_of(&da, "records") > 0 && sum_of(&db, "records") > 0,
        "{da}\n{db}"
    );
}
