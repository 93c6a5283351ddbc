//! The PostgreSQL two-phase sink over TLS (feature `postgres-tls`), against a private
//! PostgreSQL cluster that takes TCP connections over TLS only, with certificates made at
//! test time: batches land once through a verified TLS connection; a wrong CA and a
//! plain-text connection fail, saying which.

mod support;

use streaming::mq::TlsOptions;
use streaming::redis::two_phase::{PostgresParams, PostgresSink, TwoPhaseCommitSink, TxnScope};
use support::postgres::TestPostgres;
use support::tls::Pki;

fn scope(sequence: u64) -> TxnScope {
    let mut s = TxnScope::new("eeee0005", "job", "g", "t", 0, "main");
    (s.fencing_token, s.sequence, s.offset) = (1, sequence, "1-0".into());
    s
}

fn sink(pg: &TestPostgres, tls: Option<TlsOptions>) -> PostgresSink<i64> {
    // `sslmode=require`: a sink that cannot use TLS fails instead of falling back.
    let params = format!("{} sslmode=require", pg.params());
    let sink = PostgresSink::per_batch(
        &params,
        "INSERT INTO r (v) SELECT * FROM UNNEST($1::bigint[])",
        |batch: &[i64]| -> PostgresParams { vec![Box::new(batch.to_vec())] },
    )
    .unwrap();
    match tls {
        Some(tls) => sink.tls(&tls).unwrap(),
        None => sink,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn batches_land_once_over_tls_and_a_wrong_ca_or_plain_text_fail_saying_which() {
    let pki = Pki::new();
    let cert = std::fs::read_to_string(pki.path("server.pem")).unwrap();
    let key = std::fs::read_to_string(pki.path("server.key")).unwrap();
    let postgres = TestPostgres::start_with_tls(&cert, &key);
    // The test's own client reads over the unix socket (plain, trusted).
    let (pg, conn) = tokio_postgres::connect(&postgres.socket_params(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    pg.batch_execute("CREATE TABLE r (v bigint NOT NULL)")
        .await
        .unwrap();

    let trusting = |ca: &str| TlsOptions::builder().ca_file(pki.path(ca)).build().unwrap();
    let mut rows = sink(&postgres, Some(trusting("ca.pem")));
    let h = rows.pre_commit(&scope(1), vec![4, 5, 6]).await.unwrap();
    rows.commit(&h).await.unwrap();
    let landed: Vec<i64> = (pg.query("SELECT v FROM r ORDER BY v", &[]).await.unwrap())
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(landed, [4, 5, 6]);
    // The sink's connection is TLS: the server says so.
    let ssl: i64 = pg
        .query_one("SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE s.ssl AND a.client_addr IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(ssl, 1, "one TLS connection: the sink's");

    let mut wrong = sink(&postgres, Some(trusting("other-ca.pem")));
    let e = wrong
        .pre_commit(&scope(2), vec![7])
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("UnknownIssuer"), "{e}");
    let mut plain = sink(&postgres, None);
    let e = plain
        .pre_commit(&scope(3), vec![8])
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("TLS") || e.contains("SSL"), "{e}");
    let landed: i64 = pg
        .query_one("SELECT count(*) FROM r", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(landed, 3, "nothing else landed");
}
