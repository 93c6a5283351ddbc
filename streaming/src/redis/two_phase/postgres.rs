//! [`PostgresSink`]: rows into PostgreSQL with `PREPARE TRANSACTION` / `COMMIT PREPARED`.

use super::{TwoPhaseCommitSink, TxnScope};
use crate::{BoxError, Error};
use futures_util::future::try_join_all;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

/// The parameters of one row's statement, in `$1, $2, …` order.
pub type PostgresParams = Vec<Box<dyn ToSql + Sync + Send>>;

/// PostgreSQL's limit on a prepared transaction's id (`GIDSIZE` − 1), bytes.
const MAX_GID: usize = 199;

/// A [`TwoPhaseCommitSink`] writing each record as one execution of a statement (an
/// `INSERT`, an upsert, …) with the parameters `params(&record)`, in one transaction per
/// batch and partition that the batch commit prepares (`PREPARE TRANSACTION`) before its
/// Redis commit and commits (`COMMIT PREPARED`) after it: each input's rows land exactly
/// once, also across `kill -9` and takeovers. Use it as a pipeline's sink through
/// [`TwoPhaseSink`](super::TwoPhaseSink):
///
/// ```no_run
/// use streaming::redis::two_phase::{PostgresParams, PostgresSink, TwoPhaseSink};
///
/// # fn main() -> Result<(), streaming::Error> {
/// let rows = PostgresSink::new(
///     "host=127.0.0.1 port=5432 user=app dbname=app",
///     "INSERT INTO word_counts (word, n) VALUES ($1, $2)",
///     |(word, n): &(String, i64)| -> PostgresParams { vec![Box::new(word.clone()), Box::new(*n)] },
/// )?;
/// // `.sink(sink)` of a Redis pipeline whose records are `(String, i64)`.
/// let sink: TwoPhaseSink<_, (String, i64)> = TwoPhaseSink::new(rows);
/// # let _ = sink; Ok(()) }
/// ```
///
/// - The server needs `max_prepared_transactions` > 0 (the default 0 refuses `PREPARE
///   TRANSACTION`; the batch then fails with PostgreSQL's error). Connections are plain
///   TCP or Unix socket, without TLS (`tokio_postgres::NoTls`).
/// - Each partition's clone opens its own connection, on first use and again after an
///   error.
/// - Transaction ids are [`TxnScope::transaction_id`]:
///   `{job}/{group}/{topic}/{partition}/{sink}/{token}.{n}`, at most 199 bytes (a longer
///   one fails the batch, naming it). Recovery looks them up in `pg_prepared_xacts` of the
///   connection's database by that prefix.
/// - Rows of a batch are sent pipelined; every call waits at most `timeout` (default
///   30 s, [`timeout`](Self::timeout)).
pub struct PostgresSink<T> {
    config: tokio_postgres::Config,
    statement: Arc<str>,
    params: Arc<dyn Fn(&T) -> PostgresParams + Send + Sync>,
    timeout: Duration,
    conn: Option<Arc<(Client, Statement)>>,
}

impl<T> Clone for PostgresSink<T> {
    fn clone(&self) -> Self {
        PostgresSink {
            config: self.config.clone(),
            statement: Arc::clone(&self.statement),
            params: Arc::clone(&self.params),
            timeout: self.timeout,
            conn: None,
        }
    }
}

impl<T> std::fmt::Debug for PostgresSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSink")
            .field("statement", &self.statement)
            .field("timeout", &self.timeout)
            .field("connected", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> PostgresSink<T> {
    /// A sink running `statement` once per record with `params(&record)`, on the server
    /// `connection` names (a libpq key/value string or a `postgresql://` URL, as
    /// `tokio_postgres::Config` parses them).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `connection` (does not parse) or `statement`
    /// (empty).
    pub fn new(
        connection: &str,
        statement: &str,
        params: impl Fn(&T) -> PostgresParams + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        let config =
            connection
                .parse::<tokio_postgres::Config>()
                .map_err(|e| Error::InvalidConfig {
                    field: "connection",
                    reason: e.to_string(),
                })?;
        if statement.trim().is_empty() {
            return Err(Error::InvalidConfig {
                field: "statement",
                reason: "must not be empty".into(),
            });
        }
        Ok(PostgresSink {
            config,
            statement: statement.into(),
            params: Arc::new(params),
            timeout: Duration::from_secs(30),
            conn: None,
        })
    }

    /// The most each call to the server may take (connect, a batch's rows, a commit);
    /// default 30 s.
    ///
    /// # Panics
    /// If `timeout` is zero.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        assert!(!timeout.is_zero(), "PostgresSink timeout must be > 0");
        self.timeout = timeout;
        self
    }

    async fn bounded<R>(
        &mut self,
        what: &str,
        f: impl Future<Output = Result<R, tokio_postgres::Error>>,
    ) -> Result<R, BoxError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                if e.is_closed() || e.code().is_none() {
                    self.conn = None;
                }
                Err(format!("PostgreSQL {what}: {}", describe(&e)).into())
            }
            Err(_) => {
                // The connection may still be busy with the call: start afresh.
                self.conn = None;
                Err(format!("PostgreSQL {what}: no reply within {:?}", self.timeout).into())
            }
        }
    }

    /// The connection and prepared statement, connecting first when needed.
    async fn connection(&mut self) -> Result<Arc<(Client, Statement)>, BoxError> {
        if let Some(c) = &self.conn {
            if !c.0.is_closed() {
                return Ok(Arc::clone(c));
            }
        }
        let config = self.config.clone();
        let (client, connection) = self.bounded("connect", config.connect(NoTls)).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection of a PostgresSink ended: {e}");
            }
        });
        let statement = Arc::clone(&self.statement);
        let prepared = self
            .bounded("prepare statement", client.prepare(&statement))
            .await?;
        let conn = Arc::new((client, prepared));
        self.conn = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Runs a `COMMIT PREPARED` / `ROLLBACK PREPARED` of `gid`; one that names no prepared
    /// transaction succeeds (an earlier call, or recovery, resolved it).
    async fn finish(&mut self, verb: &str, gid: &str) -> Result<(), BoxError> {
        let conn = self.connection().await?;
        let sql = format!("{verb} PREPARED {}", quote(gid));
        let r = tokio::time::timeout(self.timeout, conn.0.batch_execute(&sql)).await;
        match r {
            Ok(Err(e)) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) => Ok(()),
            Ok(r) => {
                let what = format!("{verb} PREPARED");
                self.bounded(&what, std::future::ready(r)).await
            }
            Err(_) => {
                self.conn = None;
                Err(format!(
                    "PostgreSQL {verb} PREPARED: no reply within {:?}",
                    self.timeout
                )
                .into())
            }
        }
    }
}

/// `s` as an SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A PostgreSQL error with the server's message when there is one.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

impl<T: Send + 'static> TwoPhaseCommitSink<T> for PostgresSink<T> {
    async fn pre_commit(&mut self, scope: &TxnScope, records: Vec<T>) -> Result<String, BoxError> {
        let gid = scope.transaction_id();
        if gid.len() > MAX_GID {
            return Err(format!(
                "transaction id `{gid}` is {} bytes, PostgreSQL allows {MAX_GID}: shorten the job, group or topic name",
                gid.len()
            )
            .into());
        }
        let conn = self.connection().await?;
        let (client, statement) = (&conn.0, &conn.1);
        let params = Arc::clone(&self.params);
        let write = async {
            client.batch_execute("BEGIN").await?;
            let rows = records.iter().map(|r| {
                let p = params(r);
                async move { client.execute_raw(statement, p).await }
            });
            try_join_all(rows).await?;
            client
                .batch_execute(&format!("PREPARE TRANSACTION {}", quote(&gid)))
                .await
        };
        let written = self.bounded("write rows", write).await;
        if written.is_err() {
            // Nothing may stay prepared: roll back what the session holds (a dropped
            // connection rolls back by itself).
            if let Some(c) = &self.conn {
                let _ = tokio::time::timeout(self.timeout, c.0.batch_execute("ROLLBACK")).await;
            }
        }
        written.map(|()| gid)
    }

    async fn commit(&mut self, handle: &str) -> Result<(), BoxError> {
        self.finish("COMMIT", handle).await
    }

    async fn abort(&mut self, handle: &str) -> Result<(), BoxError> {
        self.finish("ROLLBACK", handle).await
    }

    async fn recover_and_commit(&mut self, handle: &str) -> Result<(), BoxError> {
        self.finish("COMMIT", handle).await
    }

    async fn recover_and_abort(&mut self, scope: &TxnScope) -> Result<(), BoxError> {
        let conn = self.connection().await?;
        let client = &conn.0;
        let prefix = scope.prefix();
        let query = "SELECT gid FROM pg_prepared_xacts \
                     WHERE database = current_database() AND left(gid, $1) = $2";
        let n = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
        let rows = self
            .bounded(
                "list prepared transactions",
                client.query(query, &[&n, &prefix]),
            )
            .await?;
        for row in rows {
            let gid: String = row.get(0);
            tracing::info!(
                gid,
                "aborting a prepared transaction no Redis commit recorded"
            );
            self.finish("ROLLBACK", &gid).await?;
        }
        Ok(())
    }
}
