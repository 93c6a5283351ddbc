//! `flights delays` and `flights sessions` on the Redis engine (a private redis-server)
//! print the same lines, in the same order, as the memory engine with the same number of
//! partitions — for 1 partition (= the single-stream run) and for 4.

#[path = "../streaming/tests/support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

#[path = "../streaming/tests/support/redis_cluster.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_cluster;

use std::sync::OnceLock;
use streaming_suite::flights::{
    self, Dataset, DelaysOptions, EventTime, RedisWindowed, SessionsOptions,
};

/// Flights in the tests: the first 40,000 in replay order (of 328,521), so the debug build
/// runs the twelve jobs in about 20 s; `.ci/run` compares the engines on the full data
/// (release build). `skipped` in the summaries still counts the whole file's cancelled
/// flights (8,255; none of the departed flights lacks a tail number).
const FLIGHTS: usize = 40_000;

fn data() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut d = flights::load(&flights::default_data_path()).expect("flights data");
        d.flights.truncate(FLIGHTS);
        d
    })
}

fn redis(server: &redis_server::TestRedis, partitions: u32, test: &str) -> RedisWindowed {
    let mut r = RedisWindowed::new(server.url());
    r.partitions = partitions;
    r.mq_prefix = format!("{test}-mq");
    r.state_prefix = format!("{test}-state");
    r.idle_timeout = std::time::Duration::from_millis(300);
    r
}

/// The job's lines, then its summary line.
fn lines<S: std::fmt::Display, L: std::fmt::Display>(
    run: impl FnOnce(&mut dyn FnMut(&L) -> Result<(), std::io::Error>) -> S,
) -> Vec<String> {
    let mut out = Vec::new();
    let summary = run(&mut |l| {
        out.push(l.to_string());
        Ok(())
    });
    out.push(summary.to_string());
    out
}

/// Each test starts its own server (a `static` one would never be dropped, so never
/// killed).
fn delays_both(
    server: &redis_server::TestRedis,
    opts: &DelaysOptions,
    partitions: u32,
    test: &str,
) -> Vec<String> {
    let data = data();
    let memory = lines(|out| flights::delays_partitioned(data, opts, partitions, out).unwrap());
    let redis = lines(|out| {
        flights::delays_redis(data, opts, &redis(server, partitions, test), out).unwrap()
    });
    assert_eq!(redis.len(), memory.len(), "{test}: line counts");
    assert_eq!(redis, memory, "{test}: same lines in the same order");
    memory
}

fn sessions_both(
    server: &redis_server::TestRedis,
    opts: &SessionsOptions,
    partitions: u32,
    test: &str,
) -> Vec<String> {
    let data = data();
    let memory = lines(|out| flights::sessions_partitioned(data, opts, partitions, out).unwrap());
    let redis = lines(|out| {
        flights::sessions_redis(data, opts, &redis(server, partitions, test), out).unwrap()
    });
    assert_eq!(redis.len(), memory.len(), "{test}: line counts");
    assert_eq!(redis, memory, "{test}: same lines in the same order");
    memory
}

#[test]
fn delays_is_the_same_on_both_engines() {
    let server = redis_server::TestRedis::private();
    let opts = DelaysOptions::default();
    let one = delays_both(&server, &opts, 1, "delays-1");
    assert_eq!(one.len(), 7_754);
    assert_eq!(one.last().unwrap(), "# skipped=8255 late=0 windows=7753");
    // The single-stream memory job prints the same.
    let single = lines(|out| flights::delays(data(), &opts, out).unwrap());
    assert_eq!(single, one);
    let four = delays_both(&server, &opts, 4, "delays-4");
    assert_eq!(four.len(), one.len());
    assert_eq!(four.last(), one.last());
}

/// Out-of-order event time with lateness: the late counts and re-firings depend on the
/// partitioning, and the Redis engine matches the memory engine for each N.
#[test]
fn delays_with_lateness_is_the_same_on_both_engines() {
    let server = redis_server::TestRedis::private();
    let opts = DelaysOptions {
        event_time: EventTime::Actual,
        out_of_orderness_min: 30,
        lateness_min: 60,
    };
    let one = delays_both(&server, &opts, 1, "delays-late-1");
    assert_eq!(one.len(), 13_914);
    assert_eq!(
        one.last().unwrap(),
        "# skipped=8255 late=19883 windows=5382"
    );
    // On 4 partitions a carrier's flights are late only against its partition's watermark.
    let four = delays_both(&server, &opts, 4, "delays-late-4");
    assert_eq!(four.len(), 15_057);
    assert_eq!(
        four.last().unwrap(),
        "# skipped=8255 late=8755 windows=7154"
    );
}

#[test]
fn sessions_is_the_same_on_both_engines() {
    let server = redis_server::TestRedis::private();
    let opts = SessionsOptions::default();
    let one = sessions_both(&server, &opts, 1, "sessions-1");
    assert_eq!(one.len(), 21_215);
    assert_eq!(one.last().unwrap(), "# skipped=8255 sessions=21214");
    let single = lines(|out| flights::sessions(data(), &opts, out).unwrap());
    assert_eq!(single, one);
    // Fewer sessions on 4 partitions: touching sessions that another plane's flight at the
    // same scheduled time split in the single stream merge when that plane is elsewhere.
    let four = sessions_both(&server, &opts, 4, "sessions-4");
    assert_eq!(four.len(), 20_969);
    assert_eq!(four.last().unwrap(), "# skipped=8255 sessions=20968");
}

/// On a private Redis Cluster (3 masters + 3 replicas) the partitions spread over the
/// masters and both jobs still print the memory engine's lines: `delays` on 4 partitions,
/// `sessions` on 8.
#[test]
fn delays_and_sessions_on_a_cluster_are_the_same_as_on_memory() {
    let cluster = redis_cluster::TestCluster::start().into_test_redis();
    let four = delays_both(&cluster, &DelaysOptions::default(), 4, "delays-cluster-4");
    assert_eq!(four.len(), 7_754);
    assert_eq!(four.last().unwrap(), "# skipped=8255 late=0 windows=7753");
    let eight = sessions_both(
        &cluster,
        &SessionsOptions::default(),
        8,
        "sessions-cluster-8",
    );
    assert!(eight.len() > 20_000, "{}", eight.len());
    assert!(eight
        .last()
        .unwrap()
        .starts_with("# skipped=8255 sessions="));
}
