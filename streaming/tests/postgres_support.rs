//! The private PostgreSQL cluster of `tests/support/postgres.rs`: it starts, takes
//! connections, keeps a prepared transaction across `kill -9` of the postmaster and a
//! restart, commits it, and leaves nothing behind when dropped.

mod support;

use std::path::PathBuf;

use support::postgres::TestPostgres;

async fn prepared_gids(client: &tokio_postgres::Client) -> Vec<String> {
    client
        .query("SELECT gid FROM pg_prepared_xacts ORDER BY gid", &[])
        .await
        .expect("read pg_prepared_xacts")
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_transaction_survives_kill_9_and_commits_after_restart() {
    let mut pg = TestPostgres::start();
    let port = pg.port();
    let data_dir: PathBuf = pg.data_dir();
    let client = pg.connect().await;

    let settings = client
        .query_one("SHOW max_prepared_transactions", &[])
        .await
        .expect("show");
    assert_eq!(settings.get::<_, String>(0), "20");
    client
        .batch_execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        .await
        .expect("create table");
    client
        .batch_execute(
            "BEGIN;
             INSERT INTO t VALUES (1, 'one'), (2, 'two');
             PREPARE TRANSACTION 'x';",
        )
        .await
        .expect("prepare transaction x");
    assert_eq!(prepared_gids(&client).await, vec!["x".to_owned()]);
    // Prepared, not committed: the rows are invisible.
    let n: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 0);

    let old_pid = pg.postmaster_pid().expect("postmaster running");
    pg.restart();
    let new_pid = pg.postmaster_pid().expect("postmaster running again");
    assert_ne!(old_pid, new_pid, "restart started a new postmaster");
    assert_eq!(pg.port(), port, "restart keeps the port");
    // The old connection died with the server.
    assert!(client.query_one("SELECT 1", &[]).await.is_err());

    let client = pg.connect().await;
    assert_eq!(prepared_gids(&client).await, vec!["x".to_owned()]);
    client
        .batch_execute("COMMIT PREPARED 'x'")
        .await
        .expect("commit prepared x");
    assert!(prepared_gids(&client).await.is_empty());
    let rows: Vec<(i32, String)> = client
        .query("SELECT id, v FROM t ORDER BY id", &[])
        .await
        .expect("select")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows, vec![(1, "one".to_owned()), (2, "two".to_owned())]);
    drop(client);

    let pid = pg.postmaster_pid().expect("running before drop");
    drop(pg);
    assert!(!data_dir.exists(), "drop deletes {}", data_dir.display());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))),
        "drop stops postmaster {pid}"
    );
    // Nothing listens on the port any more.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_run_side_by_side_on_their_own_ports() {
    let a = TestPostgres::start();
    let b = TestPostgres::start();
    assert_ne!(a.port(), b.port());
    let (ca, cb) = (a.connect().await, b.connect().await);
    ca.batch_execute("CREATE TABLE only_in_a (x int)")
        .await
        .expect("create in a");
    let in_b: i64 = cb
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'",
            &[],
        )
        .await
        .expect("query b")
        .get(0);
    assert_eq!(in_b, 0);
    let url_port: u16 = a
        .url()
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
        .expect("port in url");
    assert_eq!(url_port, a.port());
    assert!(a
        .socket_dir()
        .join(format!(".s.PGSQL.{}", a.port()))
        .exists());
}
