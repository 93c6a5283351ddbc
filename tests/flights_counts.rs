//! The `counts` job of the `flights` example on both engines, on a slice of the real data:
//! the Redis engine (a private redis-server) prints the same lines as the memory engine,
//! and both agree with counts computed here by hand.

#[path = "../streaming/tests/support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

#[path = "../streaming/tests/support/redis_cluster.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_cluster;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use streaming_suite::flights::{self, Dataset, RedisCounts};

fn data() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| {
        let mut d = flights::load(&flights::default_data_path()).expect("flights data");
        // A slice keeps the debug-build test quick; every carrier still appears.
        d.flights.truncate(40_000);
        d
    })
}

fn lines(
    run: impl FnOnce(
        &mut dyn FnMut(&flights::CountLine) -> Result<(), std::io::Error>,
    ) -> flights::CountsSummary,
) -> Vec<String> {
    let mut out = Vec::new();
    let summary = run(&mut |l| {
        out.push(l.to_string());
        Ok(())
    });
    out.push(summary.to_string());
    out
}

#[test]
fn counts_is_the_same_on_both_engines_and_matches_a_hand_count() {
    let data = data();
    let mut by_hand: BTreeMap<&str, u64> = BTreeMap::new();
    for f in &data.flights {
        *by_hand.entry(&f.carrier).or_default() += 1;
    }
    let mut expected: Vec<String> = by_hand.iter().map(|(c, n)| format!("{c},{n}")).collect();
    expected.push(format!("# skipped={}", data.skipped_na_departure));

    let memory = lines(|out| flights::counts(data, out).unwrap());
    assert_eq!(memory, expected);

    let server = redis_server::TestRedis::private();
    let mut opts = RedisCounts::new(server.url());
    opts.mq_prefix = "counts-test".into();
    let redis = lines(|out| flights::counts_redis(data, &opts, out).unwrap());
    assert_eq!(redis, expected);
}

/// `counts --engine redis --redis-url redis+cluster://…` on a private cluster.
#[test]
fn counts_on_a_cluster_is_the_same_as_on_memory() {
    let data = data();
    let memory = lines(|out| flights::counts(data, out).unwrap());
    let cluster = redis_cluster::TestCluster::start();
    let mut opts = RedisCounts::new(cluster.url());
    opts.mq_prefix = "counts-cluster".into();
    let redis = lines(|out| flights::counts_redis(data, &opts, out).unwrap());
    assert_eq!(redis, memory);
    assert_eq!(
        redis.last().unwrap(),
        &format!("# skipped={}", data.skipped_na_departure)
    );
}
