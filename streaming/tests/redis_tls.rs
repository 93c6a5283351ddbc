//! TLS to Redis (feature `tls`) against private `redis-server`s that speak TLS only, with
//! certificates made at test time: a job runs exactly once over TLS with a private CA and
//! a client certificate; a wrong CA, an expired server certificate, a plain-text URL and
//! TLS options on a plain URL each fail at connect, saying which.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::mq::{Mq, MqOptions, TlsOptions};
use streaming::redis::{RedisEnv, RedisRuntimeConfig};
use support::engine::{earliest, rt, wait_until};
use support::tls::{Pki, TlsCluster, TlsRedis};
use support::word_count::{checkpoint_and_shut_down, expected_counts, register_word_count};

fn opts(tls: TlsOptions) -> MqOptions {
    MqOptions::builder()
        .tls(tls)
        .response_timeout(Duration::from_secs(2))
        .lease_ttl(Duration::from_millis(1500))
        .lease_renew_interval(Duration::from_millis(200))
        .build()
        .unwrap()
}

/// The reason of a connect error, or a panic.
fn connect_reason(r: Result<Mq, streaming::Error>) -> String {
    match r {
        Err(streaming::Error::Connect { reason, .. }) => reason,
        Err(other) => panic!("expected a connect error, got {other:?}"),
        Ok(_) => panic!("connected"),
    }
}

#[test]
fn a_job_runs_exactly_once_over_tls_with_a_private_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let server = TlsRedis::start(
        &support::redis_server::server_binary(),
        &pki,
        "server",
        "yes",
    );
    let stored = count_words_exactly_once(&pki, &server.url(), &[server.port]);
    assert_eq!(stored.values().sum::<u64>(), 200);
}

#[test]
fn a_job_runs_exactly_once_on_a_redis_cluster_over_tls() {
    let pki = Pki::new();
    let cluster = TlsCluster::start(&support::redis_server::server_binary(), &pki);
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    let stored = count_words_exactly_once(&pki, &cluster.url(), &ports);
    assert_eq!(stored.values().sum::<u64>(), 200);
}

/// Sends 200 words to a 2-partition topic at `url`, counts them with a job over TLS to the
/// end and a checkpoint, and checks the counts stored on the servers `nodes` (ports)
/// against the input: the counts.
fn count_words_exactly_once(pki: &Pki, url: &str, nodes: &[u16]) -> BTreeMap<String, u64> {
    let rt = rt();
    let mq = rt.block_on(Mq::connect(url, opts(pki.client()))).unwrap();
    rt.block_on(mq.create_topic("words", 2)).unwrap();
    let words: Vec<String> = (0..200).map(|i| format!("w{}", i % 9)).collect();
    for w in &words {
        rt.block_on(mq.producer().send("words", Some(w), w.clone()))
            .unwrap();
    }
    let config = RedisRuntimeConfig::builder()
        .job_name("tls-count")
        .mq_options(opts(pki.client()))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    register_word_count(&env, "words", "counts", earliest(50));
    let job = env.blocking_start().unwrap();
    wait_until("every record committed", &job, || {
        job.diagnostics()
            .partitions
            .iter()
            .map(|p| p.records)
            .sum::<u64>()
            == 200
    });
    checkpoint_and_shut_down(&job);

    // The stored counts, read over TLS from each server with redis-rs directly.
    let mut stored = BTreeMap::new();
    for port in nodes {
        let url = format!("rediss://127.0.0.1:{port}/");
        let mut conn = redis::Client::build_with_tls(url, pki.client().certificates().unwrap())
            .unwrap()
            .get_connection()
            .unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*tls-count*:count")
            .query(&mut conn)
            .unwrap();
        for key in keys {
            let fields: BTreeMap<String, u64> =
                redis::cmd("HGETALL").arg(&key).query(&mut conn).unwrap();
            stored.extend(fields);
        }
    }
    let expected = expected_counts(&words);
    assert_eq!(stored, expected);
    stored
}

#[test]
fn a_wrong_ca_an_expired_certificate_and_a_plain_url_fail_at_connect_saying_which() {
    let pki = Pki::new();
    let rt = rt();
    let server = TlsRedis::start(
        &support::redis_server::server_binary(),
        &pki,
        "server",
        "no",
    );
    let trusting = |ca: &str| TlsOptions::builder().ca_file(pki.path(ca)).build().unwrap();

    // Trusting the right CA, without a client certificate (not asked for here): connects.
    rt.block_on(Mq::connect(&server.url(), opts(trusting("ca.pem"))))
        .unwrap();

    let reason =
        connect_reason(rt.block_on(Mq::connect(&server.url(), opts(trusting("other-ca.pem")))));
    assert!(
        reason.contains("certificate") && reason.contains("not signed by a CA"),
        "{reason}"
    );

    let expired = TlsRedis::start(
        &support::redis_server::server_binary(),
        &pki,
        "expired",
        "no",
    );
    let reason = connect_reason(rt.block_on(Mq::connect(&expired.url(), opts(trusting("ca.pem")))));
    assert!(reason.contains("expired"), "{reason}");

    let plain = server.url().replacen("rediss://", "redis://", 1);
    let reason = connect_reason(rt.block_on(Mq::connect(&plain, opts(TlsOptions::default()))));
    assert!(reason.contains("rediss://"), "{reason}");

    // TLS options for a URL without TLS: refused, naming the option.
    match rt.block_on(Mq::connect(&plain, opts(trusting("ca.pem")))) {
        Err(streaming::Error::InvalidConfig {
            field: "tls",
            reason,
        }) => {
            assert!(reason.contains("rediss://"), "{reason}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // A CA file that does not exist: named.
    let missing = TlsOptions::builder()
        .ca_file("/nonexistent/ca.pem")
        .build()
        .unwrap();
    match rt.block_on(Mq::connect(&server.url(), opts(missing))) {
        Err(streaming::Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "tls.ca_file");
            assert!(reason.contains("/nonexistent/ca.pem"), "{reason}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}
