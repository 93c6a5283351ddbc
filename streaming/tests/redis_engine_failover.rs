//! The Redis engine through a failover of a private Redis Cluster (3 masters + 3 replicas,
//! `cluster-node-timeout` 1 s): a master holding partitions is killed (`SIGKILL`) while a
//! job runs, its replica is promoted and the job resumes by itself. With
//! `commit_replica_wait` every input is counted exactly once (the list output and the
//! stored state); without it the test prints what was lost or duplicated (asynchronous
//! replication may or may not lose a commit). On one server, `commit_replica_wait` refuses
//! to start without a replica, and a frozen replica makes commits fail to be confirmed
//! and be read again — still exactly once. Two worker processes on the cluster under a
//! `kill -9` chaos loop, with a master killed as well, stay exactly-once.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use streaming::mq::{Message, Mq, OutgoingMessage};
use streaming::redis::{AckMode, RedisEnv, RedisListSink, RedisRuntimeConfig, ReplicaWait};
use streaming::Error;
use support::redis_cluster::TestCluster;
use support::redis_server::RedisServer;
use support::workers::{
    check_exactly_once, output, word, Inputs, Worker, WorkerSpec, LIST, TOPIC, TOPIC2,
};

const PARTITIONS: u32 = 6;
const WAIT: Duration = Duration::from_millis(500);

/// The child side of every test here.
#[test]
fn worker() {
    support::workers::serve();
}

/// Creates the topic on `url` and sends `n` messages `m{i}` keyed by [`word`].
fn produce(url: &str, prefix: &str, n: usize) {
    produce_to(url, prefix, n, false);
}

/// [`produce`]; with `two_inputs` the odd messages go to [`TOPIC2`] (created with the same
/// partition count) for a worker counting the union of both.
fn produce_to(url: &str, prefix: &str, n: usize, two_inputs: bool) {
    let rt = support::engine::rt();
    let opts = support::fast_options("failover")
        .key_prefix(prefix)
        .build()
        .unwrap();
    rt.block_on(async {
        let mq = Mq::connect(url, opts).await.unwrap();
        mq.create_topic(TOPIC, PARTITIONS).await.unwrap();
        if two_inputs {
            mq.create_topic(TOPIC2, PARTITIONS).await.unwrap();
        }
        for topic in [TOPIC, TOPIC2] {
            let msgs: Vec<OutgoingMessage> = (0..n)
                .filter(|i| (two_inputs && i % 2 == 1) == (topic == TOPIC2))
                .map(|i| OutgoingMessage::new(format!("m{i}")).key(word(i)))
                .collect();
            for chunk in msgs.chunks(1000) {
                mq.producer().send_batch(topic, chunk).await.unwrap();
            }
        }
    });
}

fn spec(url: String, prefix: &str, replica_wait: Option<Duration>) -> WorkerSpec {
    WorkerSpec {
        url,
        prefix: prefix.to_string(),
        mode: AckMode::Offset,
        parallelism: 1,
        record_delay: Duration::from_millis(1),
        replica_wait,
        inputs: Inputs::One,
        checkpoints: None,
    }
}

/// A key with the hash tag of partition `p` (so in its slot).
fn tag_key(prefix: &str, p: u32) -> String {
    format!("{prefix}:{{{TOPIC}:{p}}}")
}

/// Output lines of partition `p`.
fn partition_len(conn: &mut impl redis::ConnectionLike, p: u32) -> usize {
    redis::cmd("LLEN")
        .arg(RedisListSink::<String>::key_for(LIST, TOPIC, p))
        .query(conn)
        .unwrap()
}

fn wait_output(conn: &mut impl redis::ConnectionLike, n: usize, deadline: Duration) {
    let end = Instant::now() + deadline;
    while output(conn, PARTITIONS).len() < n {
        assert!(
            Instant::now() < end,
            "fewer than {n} output lines after {deadline:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The keyed count's stored state on the cluster: word → count, over every partition's
/// count hash (found with `KEYS` on each master).
fn stored_counts(cluster: &TestCluster) -> BTreeMap<String, u64> {
    let mut conn = cluster.connection();
    let mut counts = BTreeMap::new();
    for (port, _) in cluster.masters() {
        for h in cluster.keys_on(port, ":process:count") {
            let fields: Vec<(String, u64)> =
                redis::cmd("HGETALL").arg(&h).query(&mut conn).unwrap();
            for (field, n) in fields {
                let word: String = serde_json::from_str(&field).unwrap();
                assert!(counts.insert(word, n).is_none(), "a word in two hashes");
            }
        }
    }
    counts
}

fn expected_counts(n: usize) -> BTreeMap<String, u64> {
    let mut expected = BTreeMap::new();
    for i in 0..n {
        *expected.entry(word(i)).or_default() += 1;
    }
    expected
}

/// What a run through a failover did: lines lost and duplicated, and how long the
/// killed master's partitions took to commit again.
struct Outcome {
    lost: usize,
    duplicated: usize,
    resumed_after: Duration,
    final_diagnostics: String,
}

/// One worker runs the count over `n` messages on a cluster; when about a fifth is
/// committed, the master holding partition 0 is killed. Waits for the failover (with the
/// wait, also restarts the killed node, which rejoins as a replica), waits until the job
/// caught up, and returns what was lost or duplicated.
fn through_a_failover(test: &str, n: usize, replica_wait: Option<Duration>) -> Outcome {
    let mut cluster = TestCluster::start();
    let prefix = support::unique_prefix(test);
    produce(&cluster.url(), &prefix, n);
    // The input itself is not what a failover may lose here.
    cluster.await_replicated(Duration::from_secs(30));
    let mut conn = cluster.connection();
    let mut w = Worker::spawn(&spec(cluster.url(), &prefix, replica_wait));
    wait_output(&mut conn, n / 5, Duration::from_secs(60));
    let slot = cluster.key_slot(&tag_key(&prefix, 0));
    let old = cluster.master_of_slot(slot);
    let victims: Vec<u32> = (0..PARTITIONS)
        .filter(|p| cluster.master_of_slot(cluster.key_slot(&tag_key(&prefix, *p))) == old)
        .collect();
    let before: Vec<usize> = victims
        .iter()
        .map(|p| partition_len(&mut conn, *p))
        .collect();
    let killed_at = Instant::now();
    cluster.kill_node(old);
    let new = cluster.await_failover(slot, old, Duration::from_secs(30));
    println!(
        "{test}: killed master {old} (partitions {victims:?}); replica {new} promoted after {:?}",
        killed_at.elapsed()
    );
    // The test's own blocking client does not look for the promoted master by itself.
    let mut conn = cluster.connection();
    if replica_wait.is_some() {
        // The promoted master has no replica: commits on its slots are not confirmed
        // until the killed node is back (as its replica).
        cluster.restart_node(old, Duration::from_secs(30));
        println!(
            "{test}: {old} rejoined as a replica after {:?}",
            killed_at.elapsed()
        );
    }
    let end = killed_at + Duration::from_secs(60);
    let resumed_after = loop {
        let now: Vec<usize> = victims
            .iter()
            .map(|p| partition_len(&mut conn, *p))
            .collect();
        if now.iter().zip(&before).all(|(a, b)| a > b) {
            break killed_at.elapsed();
        }
        assert!(
            Instant::now() < end,
            "partitions {victims:?} never committed again"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        w.await_caught_up(Duration::from_secs(90)),
        "never caught up"
    );
    let final_diagnostics = w.stop();
    let out = output(&mut conn, PARTITIONS);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for line in &out {
        *seen.entry(line.split('|').next().unwrap()).or_default() += 1;
    }
    let duplicated = seen.values().filter(|c| **c > 1).map(|c| c - 1).sum();
    let lost = (0..n)
        .filter(|i| !seen.contains_key(format!("m{i}").as_str()))
        .count();
    if replica_wait.is_some() {
        check_exactly_once(&out, n);
        assert_eq!(stored_counts(&cluster), expected_counts(n));
    }
    Outcome {
        lost,
        duplicated,
        resumed_after,
        final_diagnostics,
    }
}

#[test]
fn with_replica_wait_a_killed_master_loses_and_duplicates_nothing() {
    let o = through_a_failover("failover-wait", 4000, Some(WAIT));
    println!(
        "failover-wait: resumed {:?} after the kill; lost {} duplicated {}",
        o.resumed_after, o.lost, o.duplicated
    );
    assert_eq!((o.lost, o.duplicated), (0, 0));
    // Commits on the dead master's slots failed (connection, or not confirmed while the
    // promoted master had no replica) and were read again.
    assert!(
        o.final_diagnostics
            .contains("reading again from the last commit"),
        "{}",
        o.final_diagnostics
    );
}

/// Breaks the guarantee on purpose: without the wait, a commit the master acknowledged
/// but had not yet sent to its replica is gone after the promotion. Whether one was in
/// flight at the kill is luck, so the test reports the loss instead of asserting it; it
/// asserts that the job resumed by itself.
#[test]
fn without_replica_wait_a_killed_master_may_lose_commits_and_the_test_reports_them() {
    let o = through_a_failover("failover-nowait", 4000, None);
    println!(
        "failover-nowait: resumed {:?} after the kill; LOST {} DUPLICATED {} of 4000 input records (asynchronous replication)",
        o.resumed_after, o.lost, o.duplicated
    );
    assert!(o.resumed_after < Duration::from_secs(60));
}

/// A one-pipeline count job on `url` with `commit_replica_wait` set.
fn env_with_wait(url: &str, prefix: &str) -> RedisEnv {
    let config = RedisRuntimeConfig::builder()
        .job_name("wc")
        .mq_options(
            support::fast_options("wait")
                .key_prefix(prefix)
                .build()
                .unwrap(),
        )
        .commit_replica_wait(Some(ReplicaWait::new(1, WAIT)))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    env.from_mq_topic(TOPIC, "g")
        .map(|m: Message| m.text().unwrap().to_string())
        .sink(RedisListSink::<String>::text(LIST).unwrap())
        .unwrap();
    env
}

#[test]
fn replica_wait_on_a_server_without_replicas_fails_at_start_naming_the_option() {
    let server = RedisServer::start();
    let env = env_with_wait(&server.url(), &support::unique_prefix("no-replica"));
    match env.blocking_start() {
        Err(Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "commit_replica_wait");
            assert!(
                reason.contains("0 connected replica(s), fewer than 1"),
                "{reason}"
            );
        }
        Err(e) => panic!("expected InvalidConfig, got {e}"),
        Ok(_) => panic!("started a job whose commits no replica can confirm"),
    }
}

/// A master and its replica: while the replica is frozen (`SIGSTOP`), `WAIT` confirms no
/// commit, so batches fail to be confirmed and are read again (the master did apply
/// them); once it runs again the job catches up, and the output is exactly-once.
#[test]
fn commits_a_frozen_replica_does_not_confirm_are_read_again_exactly_once() {
    const N: usize = 2000;
    let master = RedisServer::start();
    let port = master.port().to_string();
    let mut replica = RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &port]);
    let client = redis::Client::open(master.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut conn)
            .unwrap();
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            break;
        }
        assert!(Instant::now() < end, "replica never online: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let prefix = support::unique_prefix("frozen-replica");
    produce(&master.url(), &prefix, N);
    let mut w = Worker::spawn(&spec(
        master.url(),
        &prefix,
        Some(Duration::from_millis(200)),
    ));
    wait_output(&mut conn, 300, Duration::from_secs(60));
    replica.freeze();
    std::thread::sleep(Duration::from_millis(1500));
    replica.thaw();
    assert!(
        w.await_caught_up(Duration::from_secs(60)),
        "never caught up"
    );
    let diagnostics = w.stop();
    check_exactly_once(&output(&mut conn, PARTITIONS), N);
    assert!(
        diagnostics.contains("fewer than the 1 `commit_replica_wait` asks"),
        "{diagnostics}"
    );
}

/// Chaos on the cluster: 2 worker processes (with `commit_replica_wait`) over 8,000
/// messages; every 0.5–1.5 s (seeded: `CHAOS_SEED` replays a run) a random worker is
/// killed (`SIGKILL`) or, when dead, started again, for 10 s; after 3 s the master of
/// partition 0 is killed as well (its replica is promoted; the killed node restarts as a
/// replica). Then both run to the end: the output is exactly-once with exact counts, and
/// so is the stored state.
#[test]
fn two_workers_on_a_cluster_under_kill_chaos_and_a_master_failover_are_exactly_once() {
    cluster_chaos("cluster-chaos", false);
}

/// The same with a job counting the union of two co-partitioned topics: the killed
/// master held the first topic's partitions and the other input's positions with them.
#[test]
fn a_two_input_job_on_a_cluster_under_kill_chaos_and_a_master_failover_is_exactly_once() {
    cluster_chaos("cluster-chaos-two", true);
}

fn cluster_chaos(test: &str, two_inputs: bool) {
    use rand::{Rng, SeedableRng};
    const N: usize = 8000;
    const CHAOS: Duration = Duration::from_secs(10);
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("{test}: CHAOS_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut cluster = TestCluster::start();
    let prefix = support::unique_prefix(test);
    produce_to(&cluster.url(), &prefix, N, two_inputs);
    cluster.await_replicated(Duration::from_secs(30));
    let spec = WorkerSpec {
        inputs: Inputs::union_if(two_inputs),
        ..spec(cluster.url(), &prefix, Some(WAIT))
    };
    let mut workers: Vec<Option<Worker>> = (0..2).map(|_| Some(Worker::spawn(&spec))).collect();
    let mut events = Vec::new();
    let start = Instant::now();
    let mut master_killed = false;
    // The failover's own time does not count as chaos time.
    let mut failover_took = Duration::ZERO;
    while start.elapsed() < CHAOS + failover_took {
        if !master_killed && start.elapsed() > Duration::from_secs(3) {
            let killed_at = Instant::now();
            let slot = cluster.key_slot(&tag_key(&prefix, 0));
            let old = cluster.master_of_slot(slot);
            cluster.kill_node(old);
            let new = cluster.await_failover(slot, old, Duration::from_secs(30));
            // A worker started meanwhile needs every master to have a replica.
            cluster.restart_node(old, Duration::from_secs(30));
            failover_took = killed_at.elapsed();
            events.push(format!("master {old} killed, {new} promoted"));
            master_killed = true;
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(500..=1500)));
        let i = rng.random_range(0..workers.len());
        workers[i] = match workers[i].take() {
            Some(w) => {
                events.push(format!("kill {i}"));
                w.kill();
                None
            }
            None => {
                events.push(format!("start {i}"));
                Some(Worker::spawn(&spec))
            }
        };
    }
    let mut conn = cluster.connection();
    println!(
        "{test}: events {events:?}; {} of {N} output lines when the chaos ended",
        output(&mut conn, PARTITIONS).len()
    );
    // A worker whose job could not start while the master failed over has exited: it is
    // started again like a killed one.
    let mut live: Vec<Worker> = workers
        .into_iter()
        .map(|w| match w {
            Some(mut w) => {
                if w.exited() {
                    Worker::spawn(&spec)
                } else {
                    w
                }
            }
            None => Worker::spawn(&spec),
        })
        .collect();
    assert!(master_killed);
    assert!(
        live[0].await_caught_up(Duration::from_secs(120)),
        "never caught up"
    );
    for w in live.drain(..) {
        w.stop();
    }
    check_exactly_once(&output(&mut conn, PARTITIONS), N);
    assert_eq!(stored_counts(&cluster), expected_counts(N));
}
