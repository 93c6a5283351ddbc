//! `PostgresSink::per_batch` (one statement per batch) and the pipelined write of a
//! batch, against a private PostgreSQL cluster: a batch's rows are invisible until
//! `COMMIT PREPARED`, land once after it, and a batch that fails in the middle leaves
//! neither rows nor a prepared transaction, and the sink's next batch succeeds.

mod support;

use streaming::redis::two_phase::{PostgresParams, PostgresSink, TwoPhaseCommitSink, TxnScope};
use support::postgres::TestPostgres;

fn scope(sequence: u64) -> TxnScope {
    let mut s = TxnScope::new("dddd0004", "job", "g", "t", 2, "main");
    (s.fencing_token, s.sequence, s.offset) = (1, sequence, "1-0".into());
    s
}

async fn values(pg: &tokio_postgres::Client) -> Vec<i64> {
    pg.query("SELECT v FROM r ORDER BY v", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

async fn prepared(pg: &tokio_postgres::Client) -> i64 {
    pg.query_one("SELECT count(*) FROM pg_prepared_xacts", &[])
        .await
        .unwrap()
        .get(0)
}

/// Runs batches through `rows`: one committed, one failing on its middle row (a `CHECK`
/// violation), one after the failure, one aborted.
async fn batches_land_once(mut rows: PostgresSink<i64>, pg: &tokio_postgres::Client) {
    let h1 = rows.pre_commit(&scope(1), vec![1, 2, 3]).await.unwrap();
    assert!(h1.ends_with(":dddd0004/job/g/t/2/main/1.1"), "{h1}");
    assert!(
        values(pg).await.is_empty(),
        "invisible before COMMIT PREPARED"
    );
    assert_eq!(prepared(pg).await, 1);
    rows.commit(&h1).await.unwrap();
    assert_eq!(values(pg).await, [1, 2, 3]);

    let err = rows
        .pre_commit(&scope(2), vec![4, -1, 5])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("r_v_check"), "{err}");
    assert_eq!(
        prepared(pg).await,
        0,
        "a failed batch leaves nothing prepared"
    );
    assert_eq!(values(pg).await, [1, 2, 3]);

    let h3 = rows.pre_commit(&scope(3), vec![6, 7]).await.unwrap();
    rows.commit(&h3).await.unwrap();
    let h4 = rows.pre_commit(&scope(4), vec![8]).await.unwrap();
    rows.abort(&h4).await.unwrap();
    assert_eq!(values(pg).await, [1, 2, 3, 6, 7]);
    assert_eq!(prepared(pg).await, 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_batch_statement_writes_each_batch_once_and_a_failed_batch_not_at_all() {
    let postgres = TestPostgres::start();
    let pg = postgres.connect().await;
    pg.batch_execute("CREATE TABLE r (v bigint NOT NULL CHECK (v > 0))")
        .await
        .unwrap();
    let rows = PostgresSink::per_batch(
        &postgres.params(),
        "INSERT INTO r (v) SELECT * FROM UNNEST($1::bigint[])",
        |batch: &[i64]| -> PostgresParams { vec![Box::new(batch.to_vec())] },
    )
    .unwrap();
    batches_land_once(rows, &pg).await;
}

#[tokio::test(flavor = "current_thread")]
async fn pipelined_rows_write_each_batch_once_and_a_failed_batch_not_at_all() {
    let postgres = TestPostgres::start();
    let pg = postgres.connect().await;
    pg.batch_execute("CREATE TABLE r (v bigint NOT NULL CHECK (v > 0))")
        .await
        .unwrap();
    let rows = PostgresSink::new(
        &postgres.params(),
        "INSERT INTO r (v) VALUES ($1)",
        |v: &i64| -> PostgresParams { vec![Box::new(*v)] },
    )
    .unwrap();
    batches_land_once(rows, &pg).await;
}

/// A batch statement that does not fit the records (its parameters do not encode) fails
/// the batch before anything is prepared.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_whose_parameters_do_not_encode_fails_and_prepares_nothing() {
    let postgres = TestPostgres::start();
    let pg = postgres.connect().await;
    pg.batch_execute("CREATE TABLE r (v bigint NOT NULL CHECK (v > 0))")
        .await
        .unwrap();
    let mut rows = PostgresSink::per_batch(
        &postgres.params(),
        "INSERT INTO r (v) SELECT * FROM UNNEST($1::bigint[])",
        // Text where the statement takes bigint.
        |batch: &[i64]| -> PostgresParams {
            vec![Box::new(
                batch.iter().map(i64::to_string).collect::<Vec<_>>(),
            )]
        },
    )
    .unwrap();
    assert!(rows.pre_commit(&scope(1), vec![1, 2]).await.is_err());
    assert_eq!(prepared(&pg).await, 0);
    assert!(values(&pg).await.is_empty());
}
