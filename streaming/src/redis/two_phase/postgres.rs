//! [`PostgresSink`]: rows into PostgreSQL with `PREPARE TRANSACTION` / `COMMIT PREPARED`.

use super::{TwoPhaseCommitSink, TxnScope};
use crate::{BoxError, Error};
use futures_util::future::{try_join, try_join_all};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage, Statement};

/// The parameters of one execution of the statement, in `$1, $2, …` order.
pub type PostgresParams = Vec<Box<dyn ToSql + Sync + Send>>;

/// The parameters of a record's execution.
type RecordParams<T> = Arc<dyn Fn(&T) -> PostgresParams + Send + Sync>;

/// The parameters of a batch's execution.
type BatchParams<T> = Arc<dyn Fn(&[T]) -> PostgresParams + Send + Sync>;

/// How a batch's records become executions of the statement.
enum Rows<T> {
    /// One execution per record, with `f(&record)`.
    PerRecord(RecordParams<T>),
    /// One execution per batch, with `f(&records)`.
    PerBatch(BatchParams<T>),
}

impl<T> Clone for Rows<T> {
    fn clone(&self) -> Self {
        match self {
            Rows::PerRecord(f) => Rows::PerRecord(Arc::clone(f)),
            Rows::PerBatch(f) => Rows::PerBatch(Arc::clone(f)),
        }
    }
}

/// PostgreSQL's limit on a prepared transaction's id (`GIDSIZE` − 1), bytes.
const MAX_GID: usize = 199;

/// A [`TwoPhaseCommitSink`] writing each record as one execution of a statement (an
/// `INSERT`, an upsert, …) with the parameters `params(&record)` — or each batch as one
/// execution of a multi-row statement ([`per_batch`](Self::per_batch)) — in one transaction per
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
///   TCP or Unix socket, without TLS unless [`tls`](Self::tls) gives certificates (feature
///   `postgres-tls`).
/// - Each partition's clone opens its own connection, on first use and again after an
///   error.
/// - Transaction ids are [`TxnScope::transaction_id`]:
///   `{namespace}/{job}/{group}/{topic}/{partition}/{sink}/{token}.{n}`, at most 199
///   bytes (a name too long fails the partition's take, naming the id). Recovery looks
///   them up in `pg_prepared_xacts` of the connection's database by that prefix and aborts
///   only earlier owners' (lower token); each owner also does so every 30 s, so a
///   transaction an earlier owner prepared after the take (it was paused) does not hold
///   its locks for long. The handle recorded in Redis is `{xid}:{transaction id}`: a
///   commit that finds the transaction gone checks `pg_xact_status` and fails if it was
///   rolled back (its rows are lost: someone ran `ROLLBACK PREPARED` by hand) instead of
///   succeeding silently. Needs PostgreSQL 13 or later (`pg_current_xact_id`).
/// - A batch costs three round trips to the server: `BEGIN` and the rows, sent
///   pipelined; `PREPARE TRANSACTION`; after the Redis commit, `COMMIT PREPARED` (the
///   last two each a durable write there). Every call waits at most `timeout` (default
///   10 s, [`timeout`](Self::timeout)). The statement is prepared only for writing rows:
///   recovery does not wait on the user's table (a migration holding its lock).
pub struct PostgresSink<T> {
    config: tokio_postgres::Config,
    statement: Arc<str>,
    rows: Rows<T>,
    timeout: Duration,
    conn: Option<Arc<Client>>,
    /// The statement prepared on `conn` (only `pre_commit` needs it: recovery must not
    /// wait on the user's table).
    prepared: Option<Statement>,
    /// When `pre_commit` last aborted earlier owners' leftovers (see [`SWEEP_EVERY`]).
    swept: Option<Instant>,
    /// TLS to the server ([`tls`](Self::tls)); `None`: plain TCP or a Unix socket.
    #[cfg(feature = "postgres-tls")]
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
}

/// How often an owner aborts earlier owners' prepared transactions of its partition
/// outside a take: one that finished preparing after the take's recovery (a paused
/// owner, or a `PREPARE` the server completed after its client gave up) is aborted
/// within this long.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

impl<T> Clone for PostgresSink<T> {
    fn clone(&self) -> Self {
        PostgresSink {
            config: self.config.clone(),
            statement: Arc::clone(&self.statement),
            rows: self.rows.clone(),
            timeout: self.timeout,
            conn: None,
            prepared: None,
            swept: None,
            #[cfg(feature = "postgres-tls")]
            tls: self.tls.clone(),
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
    /// `tokio_postgres::Config` parses them). For many records per batch,
    /// [`per_batch`](Self::per_batch) writes faster.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `connection` (does not parse) or `statement`
    /// (empty).
    pub fn new(
        connection: &str,
        statement: &str,
        params: impl Fn(&T) -> PostgresParams + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        Self::with_rows(connection, statement, Rows::PerRecord(Arc::new(params)))
    }

    /// A sink running `statement` once per batch with `params(&records)` (the batch's
    /// records in order, never empty), typically arrays of the columns for a multi-row
    /// statement, in the same prepared transaction as [`new`](Self::new)'s rows:
    ///
    /// ```no_run
    /// use streaming::redis::two_phase::{PostgresParams, PostgresSink};
    ///
    /// # fn main() -> Result<(), streaming::Error> {
    /// let rows = PostgresSink::per_batch(
    ///     "host=127.0.0.1 port=5432 user=app dbname=app",
    ///     "INSERT INTO word_counts (word, n) SELECT * FROM UNNEST($1::text[], $2::bigint[])",
    ///     |batch: &[(String, i64)]| -> PostgresParams {
    ///         let (words, ns): (Vec<String>, Vec<i64>) = batch.iter().cloned().unzip();
    ///         vec![Box::new(words), Box::new(ns)]
    ///     },
    /// )?;
    /// # let _ = rows; Ok(()) }
    /// ```
    ///
    /// One statement per batch instead of one per record: the server parses, plans and
    /// answers once per batch (at batches of 500, about 3× the rows per second of
    /// [`new`](Self::new) in the engine's sink benchmark).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn per_batch(
        connection: &str,
        statement: &str,
        params: impl Fn(&[T]) -> PostgresParams + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        Self::with_rows(connection, statement, Rows::PerBatch(Arc::new(params)))
    }

    fn with_rows(connection: &str, statement: &str, rows: Rows<T>) -> Result<Self, Error> {
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
            rows,
            timeout: Duration::from_secs(10),
            conn: None,
            prepared: None,
            swept: None,
            #[cfg(feature = "postgres-tls")]
            tls: None,
        })
    }

    /// Connects over TLS with the certificates of `tls` (feature `postgres-tls`): its CA
    /// file as the trusted roots (else the system's), its client certificate and key, or
    /// (tests only) no verification. The connection string's `sslmode` still applies:
    /// `require` fails unless the server accepts TLS, `prefer` (its default) falls back to
    /// plain text when the server refuses TLS, `disable` never uses it.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the option (`tls.ca_file`, …) whose file cannot be
    /// read or holds no usable certificate or key.
    #[cfg(feature = "postgres-tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres-tls")))]
    pub fn tls(mut self, tls: &crate::mq::TlsOptions) -> Result<Self, Error> {
        let config = super::postgres_tls::client_config(tls)?;
        self.tls = Some(tokio_postgres_rustls::MakeRustlsConnect::new(config));
        Ok(self)
    }

    /// The most each call to the server may take (connect, a batch's rows, a commit);
    /// default 10 s. A call that takes longer fails the batch (or the take) and is tried
    /// again on a new connection.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `timeout`) if `timeout` is zero.
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, Error> {
        if timeout.is_zero() {
            return Err(Error::InvalidConfig {
                field: "timeout",
                reason: "must be greater than 0".into(),
            });
        }
        self.timeout = timeout;
        Ok(self)
    }

    /// `f` within the timeout; a connection error or a timeout drops the connection.
    async fn bounded<R>(
        &mut self,
        what: &str,
        f: impl Future<Output = Result<R, tokio_postgres::Error>>,
    ) -> Result<R, BoxError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                if e.is_closed() || e.code().is_none() {
                    self.drop_connection();
                }
                Err(format!("PostgreSQL {what}: {}", describe(&e)).into())
            }
            Err(_) => {
                // The connection may still be busy with the call: start afresh.
                self.drop_connection();
                Err(format!("PostgreSQL {what}: no reply within {:?}", self.timeout).into())
            }
        }
    }

    fn drop_connection(&mut self) {
        self.conn = None;
        self.prepared = None;
    }

    /// The connection, connecting first when needed.
    async fn connection(&mut self) -> Result<Arc<Client>, BoxError> {
        if let Some(c) = &self.conn {
            if !c.is_closed() {
                return Ok(Arc::clone(c));
            }
        }
        self.drop_connection();
        let client = Arc::new(self.connect().await?);
        self.conn = Some(Arc::clone(&client));
        Ok(client)
    }

    /// A new connection (over TLS when [`tls`](Self::tls) was given), its I/O driven by a
    /// task of its own.
    async fn connect(&mut self) -> Result<Client, BoxError> {
        let config = self.config.clone();
        #[cfg(feature = "postgres-tls")]
        if let Some(tls) = self.tls.clone() {
            let (client, connection) = self.bounded("connect", config.connect(tls)).await?;
            tokio::spawn(drive(connection));
            return Ok(client);
        }
        let (client, connection) = self.bounded("connect", config.connect(NoTls)).await?;
        tokio::spawn(drive(connection));
        Ok(client)
    }

    /// The connection and the statement prepared on it.
    async fn statement(&mut self) -> Result<(Arc<Client>, Statement), BoxError> {
        let client = self.connection().await?;
        if let Some(s) = &self.prepared {
            return Ok((client, s.clone()));
        }
        let statement = Arc::clone(&self.statement);
        let s = self
            .bounded("prepare statement", client.prepare(&statement))
            .await?;
        self.prepared = Some(s.clone());
        Ok((client, s))
    }

    /// Runs `COMMIT PREPARED` / `ROLLBACK PREPARED` of the handle's transaction. One that
    /// is not prepared any more succeeds when it ended as asked (an earlier call, or a
    /// recovery, resolved it); a commit of one that was rolled back fails: its rows are
    /// lost.
    async fn finish(&mut self, verb: &str, handle: &str) -> Result<(), BoxError> {
        let (xid, gid) = parse_handle(handle);
        let client = self.connection().await?;
        let sql = format!("{verb} PREPARED {}", quote(gid));
        let what = format!("{verb} PREPARED");
        match tokio::time::timeout(self.timeout, client.batch_execute(&sql)).await {
            Ok(Err(e)) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) => {}
            Ok(r) => return self.bounded(&what, std::future::ready(r)).await,
            Err(_) => {
                self.drop_connection();
                return Err(
                    format!("PostgreSQL {what}: no reply within {:?}", self.timeout).into(),
                );
            }
        }
        let (Some(xid), "COMMIT") = (xid, verb) else {
            return Ok(());
        };
        let query = "SELECT pg_xact_status($1::text::xid8)";
        let row = self
            .bounded("transaction status", client.query_one(query, &[&xid]))
            .await?;
        match row.get::<_, Option<String>>(0).as_deref() {
            Some("committed") => Ok(()),
            None => {
                // Too old for the server to tell: long resolved (a recovery re-commits
                // the last recorded handle at every take).
                tracing::debug!(gid, xid, "a recorded transaction too old to look up");
                Ok(())
            }
            status => Err(format!(
                "prepared transaction `{gid}` (xid {xid}) was not committed but is {}: its rows are lost (was it rolled back by hand, or by a deployment sharing this job name and namespace?)",
                status.unwrap_or("unknown")
            )
            .into()),
        }
    }
}

/// A handle, `{xid}:{gid}`, as (xid, gid); a bare transaction id as (None, id).
fn parse_handle(handle: &str) -> (Option<&str>, &str) {
    match handle.split_once(':') {
        Some((xid, gid)) if !xid.is_empty() && xid.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(xid), gid)
        }
        _ => (None, handle),
    }
}

/// `s` as an SQL string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A PostgreSQL error with the server's message, detail and hint, or the client error
/// with its causes.
/// Drives a connection's I/O until it ends.
async fn drive<F: Future<Output = Result<(), tokio_postgres::Error>>>(connection: F) {
    if let Err(e) = connection.await {
        tracing::debug!("PostgreSQL connection of a PostgresSink ended: {e}");
    }
}

fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{} ({})", db.message(), db.code().code());
        for extra in [db.detail(), db.hint()].into_iter().flatten() {
            s.push_str("; ");
            s.push_str(extra);
        }
        return s;
    }
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

impl<T: Send + 'static> TwoPhaseCommitSink<T> for PostgresSink<T> {
    async fn pre_commit(&mut self, scope: &TxnScope, records: Vec<T>) -> Result<String, BoxError> {
        let gid = scope.transaction_id();
        check_length(&gid)?;
        if self.swept.is_none_or(|t| t.elapsed() >= SWEEP_EVERY) {
            self.recover_and_abort(scope).await?;
            self.swept = Some(Instant::now());
        }
        let (client, statement) = self.statement().await?;
        let rows = self.rows.clone();
        let write = write_prepared(&client, &statement, &rows, &records, &gid);
        let written = self.bounded("write rows", write).await;
        if written.is_err() {
            // Nothing may stay prepared: roll back what the session holds (a dropped
            // connection rolls back by itself).
            if let Some(c) = &self.conn {
                let _ = tokio::time::timeout(self.timeout, c.batch_execute("ROLLBACK")).await;
            }
        }
        // Without an xid (never seen) the bare id is the handle: its commit cannot tell
        // a rolled-back transaction from a committed one.
        written.map(|xid| xid.map_or_else(|| gid.clone(), |xid| format!("{xid}:{gid}")))
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
        // A name too long fails here, at the take, rather than at the first batch.
        check_length(&format!("{}{}.{}", scope.prefix(), u32::MAX, u32::MAX))?;
        let client = self.connection().await?;
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
            // A later owner's (this recovery stalled past its lease) is not ours to end.
            if scope
                .token_of(&gid)
                .is_some_and(|t| t < scope.fencing_token)
            {
                tracing::info!(
                    gid,
                    "aborting an earlier owner's prepared transaction no Redis commit recorded"
                );
                self.finish("ROLLBACK", &gid).await?;
            }
        }
        Ok(())
    }
}

/// Writes `records` in a new transaction and prepares it as `gid`; returns the
/// transaction's xid (`None` if the server sent none). `BEGIN`, the xid and the rows go out pipelined (the xid by the
/// simple protocol, so no statement is prepared in between); `PREPARE TRANSACTION` only
/// once every row succeeded, so a failure leaves at most an open transaction to roll back.
async fn write_prepared<T>(
    client: &Client,
    statement: &Statement,
    rows: &Rows<T>,
    records: &[T],
    gid: &str,
) -> Result<Option<String>, tokio_postgres::Error> {
    let begin = async {
        let replies = client
            .simple_query("BEGIN; SELECT pg_current_xact_id()::text")
            .await?;
        Ok(replies.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        }))
    };
    let execute = |p: PostgresParams| async move { client.execute_raw(statement, p).await };
    let writes: Vec<_> = match rows {
        Rows::PerRecord(params) => records.iter().map(|r| execute(params(r))).collect(),
        Rows::PerBatch(params) => vec![execute(params(records))],
    };
    let (xid, _) = try_join(begin, try_join_all(writes)).await?;
    client
        .batch_execute(&format!("PREPARE TRANSACTION {}", quote(gid)))
        .await?;
    Ok(xid)
}

/// Fails for a transaction id over PostgreSQL's limit.
fn check_length(gid: &str) -> Result<(), BoxError> {
    if gid.len() <= MAX_GID {
        return Ok(());
    }
    Err(format!(
        "transaction id `{gid}` is {} bytes, PostgreSQL allows {MAX_GID}: shorten the job, group or topic name",
        gid.len()
    )
    .into())
}
