//! Connections whose every wait is bounded, and connection errors in words.
//!
//! Every connection of the queue and the Redis engine fails a call that gets no reply
//! within the response timeout ([`MqOptions::response_timeout`](super::MqOptions)), fails
//! a connection attempt after the same time, and makes **one** attempt per reconnect: a
//! lost connection is opened again by the next call, so the caller's own loop decides
//! when to try again (with backoff) and never waits on a hidden retry schedule.
//!
//! The endpoint is one server or a Redis Cluster ([`Endpoint`]); on a cluster the
//! timeouts apply per call as on one server, and a call is not retried after a redirect
//! either.
//!
//! Connecting proves the server: `PING` must answer `PONG` and `INFO server` must report
//! Redis ≥ [`MIN_REDIS_VERSION`] (every master of a cluster), and a `redis://` URL must
//! not name a cluster node. Every connection error is an
//! [`Error::Connect`](crate::Error::Connect) naming the address it tried (a cluster's
//! seed nodes).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterConfig;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};

use super::endpoint::{Endpoint, Kind};
use super::reader::ReadConnections;
use super::slot;
use crate::Error;

/// The oldest Redis server this crate works with (`XAUTOCLAIM` reporting deleted entries,
/// `XINFO GROUPS` lag, exclusive `XRANGE` ranges).
pub const MIN_REDIS_VERSION: (u32, u32) = (7, 0);

/// One connection of the queue or the engine, to one server or to a cluster; commands go
/// to the server, or to the master of their keys' slot, by a `match` (no `dyn`).
///
/// In debug builds every script and every `MULTI` transaction is checked to touch keys of
/// one hash slot (on a single server too, so the single-server tests keep the code
/// cluster-safe), and on a cluster every `XREAD`/`XREADGROUP` and every pipeline as well.
///
/// On one server (not over TLS) the clones of a connection also share the partition
/// readers' own connections for fenced reads, which read their replies as bytes
/// ([`Connection::read_connections`]).
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager, Option<Arc<ReadConnections>>),
    Cluster(ClusterConnection),
}

impl Connection {
    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }

    /// The connections of fenced reads that parse their replies from bytes: on one server
    /// reached over TCP or a unix socket; `None` on a cluster or over TLS.
    pub(crate) fn read_connections(&self) -> Option<&ReadConnections> {
        match self {
            Connection::Single(_, reads) => reads.as_deref(),
            Connection::Cluster(_) => None,
        }
    }
}

/// Panics (debug builds) when `cmds` — one call: a script, a transaction, or on a cluster
/// any command or pipeline that must run on one node — name keys of two slots.
pub(crate) fn debug_check_slots<'a>(cmds: impl IntoIterator<Item = &'a Cmd>) {
    if let Err(e) = slot::one_slot(cmds) {
        panic!("cluster-unsafe Redis call: {e}");
    }
}

/// Whether `pipe` sends its own `MULTI` first (a transaction with commands after its
/// `EXEC`, such as the batch commit's `WAIT`).
fn opens_transaction(pipe: &Pipeline) -> bool {
    pipe.cmd_iter().next().is_some_and(|c| {
        matches!(c.args_iter().next(), Some(redis::Arg::Simple(n)) if n.eq_ignore_ascii_case(b"MULTI"))
    })
}

/// [`debug_check_slots`] for one command: a script always, any command on a cluster —
/// but for the multi-key commands the cluster client splits by slot itself.
fn debug_check_command(cmd: &Cmd, cluster: bool) {
    if !(slot::is_script(cmd) || cluster) {
        return;
    }
    let split_by_client = matches!(
        cmd.args_iter().next(),
        Some(redis::Arg::Simple(n)) if [&b"DEL"[..], b"UNLINK", b"EXISTS", b"MGET", b"TOUCH"]
            .iter()
            .any(|m| n.eq_ignore_ascii_case(m))
    );
    if !split_by_client {
        debug_check_slots([cmd]);
    }
}

impl redis::aio::ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        if cfg!(debug_assertions) {
            debug_check_command(cmd, self.is_cluster());
        }
        match self {
            Connection::Single(c, _) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        if cfg!(debug_assertions)
            && (cmd.is_transaction() || opens_transaction(cmd) || self.is_cluster())
        {
            debug_check_slots(cmd.cmd_iter());
        }
        match self {
            Connection::Single(c, _) => c.req_packed_commands(cmd, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c, _) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A blocking connection to one server or a cluster (for the engine's checks that run
/// outside a runtime); its commands are checked like [`Connection`]'s (pipelines are
/// not: a blocking cluster connection has none).
pub(crate) enum BlockingConnection {
    Single(redis::Connection),
    // Boxed: much larger than a single connection, and made once per check.
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl BlockingConnection {
    /// Bounds every read by `t` (`None`: unbounded).
    ///
    /// # Errors
    /// The client's error.
    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> redis::RedisResult<()> {
        match self {
            BlockingConnection::Single(c) => c.set_read_timeout(t),
            BlockingConnection::Cluster(c) => c.set_read_timeout(t),
        }
    }

    /// Bounds every write by `t` (`None`: unbounded).
    ///
    /// # Errors
    /// The client's error.
    pub(crate) fn set_write_timeout(&self, t: Option<Duration>) -> redis::RedisResult<()> {
        match self {
            BlockingConnection::Single(c) => c.set_write_timeout(t),
            BlockingConnection::Cluster(c) => c.set_write_timeout(t),
        }
    }
}

impl redis::ConnectionLike for BlockingConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<Value> {
        match self {
            BlockingConnection::Single(c) => c.req_packed_command(cmd),
            BlockingConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        match self {
            BlockingConnection::Single(c) => c.req_packed_commands(cmd, offset, count),
            BlockingConnection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> redis::RedisResult<Value> {
        if cfg!(debug_assertions) {
            debug_check_command(cmd, matches!(self, BlockingConnection::Cluster(_)));
        }
        match self {
            BlockingConnection::Single(c) => c.req_command(cmd),
            BlockingConnection::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            BlockingConnection::Single(c) => c.get_db(),
            BlockingConnection::Cluster(c) => c.get_db(),
        }
    }

    fn supports_pipelining(&self) -> bool {
        match self {
            BlockingConnection::Single(c) => c.supports_pipelining(),
            BlockingConnection::Cluster(c) => c.supports_pipelining(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            BlockingConnection::Single(c) => c.check_connection(),
            BlockingConnection::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            BlockingConnection::Single(c) => c.is_open(),
            BlockingConnection::Cluster(c) => c.is_open(),
        }
    }
}

/// `e`, met while talking to `endpoint`, as an error that names the address and says
/// what is wrong in words.
pub(crate) fn connect_error(endpoint: &Endpoint, e: RedisError, timeout: Duration) -> Error {
    let text = e.to_string();
    let dropped = ["reset by peer", "Broken pipe", "closed", "unexpected end"];
    let reason = if !endpoint.is_tls() && dropped.iter().any(|d| text.contains(d)) {
        // A TLS-only port drops a plain-text client at its first bytes.
        format!("the server dropped the connection at once ({text}): if it speaks TLS only, write `rediss://`")
    } else {
        reason_in_words(&e, timeout)
    };
    Error::Connect {
        addr: endpoint.address(),
        reason,
        source: Some(e),
    }
}

/// What `e` means for a connection, in words. A cluster client reports a failed first
/// connection as an I/O error whose detail is the node's error as text, so the text is
/// read as well as the kind.
fn reason_in_words(e: &RedisError, timeout: Duration) -> String {
    let code = e.code().unwrap_or_default();
    let text = e.to_string();
    let has = |s: &str| text.contains(s);
    if has("without any password configured") {
        "the URL gives a password but the server has none set: remove it from the URL (or set `requirepass` on the server)"
            .to_string()
    } else if e.kind() == ErrorKind::AuthenticationFailed
        || code == "WRONGPASS"
        || has("WRONGPASS")
        || has("AuthenticationFailed")
    {
        "wrong password or user name (authentication failed); check the URL's credentials"
            .to_string()
    } else if code == "NOAUTH" || has("NOAUTH") {
        "the server requires a password: give it in the URL (`redis://:PASSWORD@host:port/`)"
            .to_string()
    } else if let Some(tls) = tls_reason(&text) {
        tls
    } else if has("cluster support disabled") {
        "not a Redis Cluster node (`cluster-enabled no`): use a `redis://` URL for a single server"
            .to_string()
    } else if e.kind() == ErrorKind::ParseError {
        format!("not a Redis server (its reply is not the Redis protocol: {e})")
    } else if e.is_timeout() || has("timed out") {
        format!("no reply within {timeout:?} (the response timeout): the server is frozen, overloaded or not a Redis server")
    } else if e.is_connection_refusal() || has("onnection refused") {
        format!("connection refused ({e}): is redis-server running there?")
    } else {
        text
    }
}

/// What a TLS handshake's failure `text` (rustls's words) means, if it is one.
fn tls_reason(text: &str) -> Option<String> {
    let has = |s: &str| text.contains(s);
    let reason = if has("UnknownIssuer") {
        "the server's TLS certificate is not signed by a CA this client trusts (UnknownIssuer): set `tls.ca_file` to the CA that signed it"
    } else if has("Expired") {
        "the server's TLS certificate has expired (or is not valid yet): renew it on the server"
    } else if has("NotValidForName") {
        "the server's TLS certificate does not name this host: connect by a name or address it lists"
    } else if has("CertificateRequired") || has("certificate required") {
        "the server requires a client certificate: set `tls.client_cert_file` and `tls.client_key_file`"
    } else if has("invalid peer certificate") || has("AlertReceived") {
        return Some(format!("the TLS handshake failed: {text}"));
    } else {
        return None;
    };
    Some(format!("{reason} ({text})"))
}

/// A connection to `endpoint`: calls fail after `response_timeout` (plus `block`, the
/// longest `BLOCK` time the connection's reads use), connection attempts after
/// `response_timeout`, one attempt per reconnect and per call (see the module docs).
/// Sends nothing but the client's handshake (on a cluster, also `CLUSTER SLOTS`);
/// [`prove`] checks the server.
///
/// # Errors
/// [`Error::Connect`] when the first connection cannot be made.
pub(crate) async fn connect(
    endpoint: &Endpoint,
    response_timeout: Duration,
    block: Duration,
) -> Result<Connection, Error> {
    let call_timeout = response_timeout.saturating_add(block);
    let attempt = async {
        match endpoint.kind() {
            Kind::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(response_timeout)
                    .set_response_timeout(call_timeout)
                    .set_number_of_retries(0);
                let reads = ReadConnections::new(client.get_connection_info(), response_timeout);
                client
                    .get_connection_manager_with_config(config)
                    .await
                    .map(|c| Connection::Single(c, reads.map(Arc::new)))
            }
            Kind::Cluster { client, .. } => {
                let config = ClusterConfig::new()
                    .set_connection_timeout(response_timeout)
                    .set_response_timeout(call_timeout);
                client
                    .get_async_connection_with_config(config)
                    .await
                    .map(Connection::Cluster)
            }
        }
    };
    // The client's own attempt is bounded by the connection timeout (per node on a
    // cluster, which also asks a node for the slot map); this outer bound only guards
    // against a client that would not apply it.
    let outer = if endpoint.is_cluster() { 3 } else { 2 };
    match tokio::time::timeout(response_timeout.saturating_mul(outer), attempt).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(connect_error(endpoint, e, response_timeout)),
        Err(_) => Err(Error::Connect {
            addr: endpoint.address(),
            reason: format!("no connection within {response_timeout:?} (the response timeout)"),
            source: Some(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no connection within the response timeout",
            ))),
        }),
    }
}

/// Proves that `conn` talks to a usable Redis: `PING` answers `PONG` (after the client's
/// `AUTH`/`HELLO`), `INFO server` reports at least [`MIN_REDIS_VERSION`] (on a cluster:
/// every master), and a single-server endpoint is not a cluster node.
///
/// # Errors
/// [`Error::Connect`] saying what is wrong: wrong or missing password, not a Redis server,
/// no reply in time, a Redis older than required, or a cluster node behind a `redis://` URL.
pub(crate) async fn prove(
    endpoint: &Endpoint,
    conn: &mut Connection,
    response_timeout: Duration,
) -> Result<(), Error> {
    let err = |reason: String| Error::Connect {
        addr: endpoint.address(),
        reason,
        source: None,
    };
    let mut ask = async |cmd: &redis::Cmd| -> Result<Value, Error> {
        (cmd.query_async(&mut *conn).await).map_err(|e| connect_error(endpoint, e, response_timeout))
    };
    check_pong(&ask(&redis::cmd("PING")).await?).map_err(err)?;
    let info = ask(redis::cmd("INFO").arg("server")).await?;
    for_each_info(&info, check_version).map_err(err)?;
    if !endpoint.is_cluster() {
        let info = ask(redis::cmd("INFO").arg("cluster")).await?;
        for_each_info(&info, check_not_cluster).map_err(err)?;
    }
    Ok(())
}

/// A blocking connection to `endpoint` whose connect, reads and writes each fail after
/// `timeout`.
///
/// # Errors
/// [`Error::Connect`] naming the address.
pub(crate) fn blocking_connection(
    endpoint: &Endpoint,
    timeout: Duration,
) -> Result<BlockingConnection, Error> {
    let timeout = timeout.max(Duration::from_millis(10));
    let conn = match endpoint.kind() {
        Kind::Single(client) => client
            .get_connection_with_timeout(timeout)
            .map(BlockingConnection::Single),
        Kind::Cluster { client, .. } => client
            .get_connection_with_config(
                ClusterConfig::new()
                    .set_connection_timeout(timeout)
                    .set_response_timeout(timeout),
            )
            .map(|c| BlockingConnection::Cluster(Box::new(c))),
    }
    .and_then(|c| {
        c.set_read_timeout(Some(timeout))?;
        c.set_write_timeout(Some(timeout))?;
        Ok(c)
    })
    .map_err(|e| connect_error(endpoint, e, timeout))?;
    Ok(conn)
}

/// [`prove`] over a blocking connection whose every wait is bounded by `timeout`.
///
/// # Errors
/// As [`prove`].
pub(crate) fn prove_blocking(endpoint: &Endpoint, timeout: Duration) -> Result<(), Error> {
    let err = |reason: String| Error::Connect {
        addr: endpoint.address(),
        reason,
        source: None,
    };
    let redis_err = |e| connect_error(endpoint, e, timeout);
    let mut conn = blocking_connection(endpoint, timeout)?;
    let pong: Value = redis::cmd("PING").query(&mut conn).map_err(redis_err)?;
    check_pong(&pong).map_err(err)?;
    let info: Value = redis::cmd("INFO")
        .arg("server")
        .query(&mut conn)
        .map_err(redis_err)?;
    for_each_info(&info, check_version).map_err(err)?;
    if !endpoint.is_cluster() {
        let info: Value = redis::cmd("INFO")
            .arg("cluster")
            .query(&mut conn)
            .map_err(redis_err)?;
        for_each_info(&info, check_not_cluster).map_err(err)?;
    }
    Ok(())
}

/// Runs `check` on the text of an `INFO` reply: one text from a server, or one per
/// node (a map node → text) from a cluster, where the first failure names its node.
pub(crate) fn for_each_info(
    info: &Value,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<(), String> {
    let text = |v: &Value| redis::from_redis_value::<String>(v).unwrap_or_default();
    match info {
        Value::Map(nodes) => nodes.iter().try_for_each(|(node, v)| {
            check(&text(v)).map_err(|e| format!("node {}: {e}", text(node)))
        }),
        other => check(&text(other)),
    }
}

/// Fails for an `INFO cluster` reply of a cluster node (`cluster_enabled:1`).
fn check_not_cluster(info: &str) -> Result<(), String> {
    let enabled = info
        .lines()
        .find_map(|l| l.strip_prefix("cluster_enabled:"))
        .is_some_and(|v| v.trim() == "1");
    if enabled {
        Err(format!(
            "the server is a Redis Cluster node: use a `{}host:port` URL (or `Endpoint::cluster`)",
            super::endpoint::CLUSTER_SCHEME
        ))
    } else {
        Ok(())
    }
}

fn check_pong(pong: &redis::Value) -> Result<(), String> {
    let is_pong = match pong {
        redis::Value::SimpleString(s) => s == "PONG",
        redis::Value::BulkString(b) => b == b"PONG",
        _ => false,
    };
    if is_pong {
        Ok(())
    } else {
        Err(format!(
            "not a Redis server: `PING` answered {pong:?}, not `PONG`"
        ))
    }
}

/// Checks `redis_version` of an `INFO server` reply against [`MIN_REDIS_VERSION`].
fn check_version(info: &str) -> Result<(), String> {
    let Some(version) = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(str::trim)
    else {
        // Servers that speak the protocol but hide their version (some proxies): trust them.
        return Ok(());
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < MIN_REDIS_VERSION {
        let (major, minor) = MIN_REDIS_VERSION;
        return Err(format!(
            "Redis {version} is older than the required {major}.{minor}: upgrade the server"
        ));
    }
    Ok(())
}

/// A bounded, jittered exponential backoff for reconnect and re-take loops: the delay
/// doubles from `initial` up to `max`, each drawn from `[d/2, d]`; it never gives up (the
/// loop does, when its job stops). [`reset`](Self::reset) after a success.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            current: initial,
        }
    }

    /// The next delay (and doubles the one after it).
    pub(crate) fn next_delay(&mut self) -> Duration {
        use rand::Rng;
        let d = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = d / 2;
        half + d.saturating_sub(half).mul_f64(rand::rng().random::<f64>())
    }

    /// Back to the initial delay.
    pub(crate) fn reset(&mut self) {
        self.current = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(check_version("# Server\r\nredis_version:7.2.4\r\n").is_ok());
        assert!(check_version("redis_version:10.0.0\r\n").is_ok());
        let e = check_version("redis_version:6.2.14\r\n").unwrap_err();
        assert!(e.contains("6.2.14") && e.contains("7.0"), "{e}");
        assert!(check_version("no version here").is_ok());
    }

    #[test]
    #[should_panic(expected = "cluster-unsafe Redis call: keys of two hash slots")]
    fn a_script_across_two_slots_fails_the_debug_check_on_any_deployment() {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg("abc").arg(2).arg("mq:{t:1}:s").arg("mq:{t:2}:s");
        debug_check_command(&eval, false);
    }

    #[test]
    fn the_debug_check_passes_one_slot_and_what_the_cluster_client_splits() {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg("abc")
            .arg(2)
            .arg("mq:{t:1}:s")
            .arg("st:j:{t:1}:g:index");
        debug_check_command(&eval, true);
        let mut del = redis::cmd("DEL");
        del.arg("a{t:1}").arg("b{t:2}");
        debug_check_command(&del, true);
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP").arg("g").arg("c").arg("STREAMS");
        read.arg("a{t:1}").arg("b{t:2}").arg(">").arg(">");
        debug_check_command(&read, false);
        assert!(std::panic::catch_unwind(|| debug_check_command(&read, true)).is_err());
    }

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let delays: Vec<Duration> = (0..10).map(|_| b.next_delay()).collect();
        assert!(delays[0] >= Duration::from_millis(50) && delays[0] <= Duration::from_millis(100));
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(2)));
        assert!(delays[9] >= Duration::from_secs(1));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
