//! Connections whose every wait is bounded, and connection errors in words.
//!
//! Every connection of the queue and the Redis engine fails a call that gets no reply
//! within the response timeout ([`MqOptions::response_timeout`](super::MqOptions)), fails
//! a connection attempt after the same time, and makes **one** attempt per reconnect: a
//! lost connection is opened again by the next call, so the caller's own loop decides
//! when to try again (with backoff) and never waits on a hidden retry schedule.
//!
//! Connecting proves the server: `PING` must answer `PONG` and `INFO server` must report
//! Redis ≥ [`MIN_REDIS_VERSION`]. Every connection error is an
//! [`Error::Connect`](crate::Error::Connect) naming the address it tried.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError};

use crate::Error;

/// The oldest Redis server this crate works with (`XAUTOCLAIM` reporting deleted entries,
/// `XINFO GROUPS` lag, exclusive `XRANGE` ranges).
pub const MIN_REDIS_VERSION: (u32, u32) = (7, 0);

/// A client for the server `info` names (a URL such as `redis://127.0.0.1:6379/`, or a
/// `redis::ConnectionInfo`); nothing is contacted yet.
///
/// # Errors
/// [`Error::InvalidConfig`] (field `url`) when `info` is not a Redis URL the client accepts.
pub(crate) fn open_client(info: impl redis::IntoConnectionInfo) -> Result<redis::Client, Error> {
    redis::Client::open(info).map_err(|e| Error::InvalidConfig {
        field: "url",
        reason: format!("{e}; expected a Redis URL such as `redis://127.0.0.1:6379/`"),
    })
}

/// The address `client` connects to, as `host:port` (or the socket path).
pub(crate) fn address(client: &redis::Client) -> String {
    client.get_connection_info().addr.to_string()
}

/// `e`, met while talking to `client`'s server, as an error that names the address and
/// says what is wrong in words.
pub(crate) fn connect_error(client: &redis::Client, e: RedisError, timeout: Duration) -> Error {
    let code = e.code().unwrap_or_default();
    let reason = if e.to_string().contains("without any password configured") {
        "the URL gives a password but the server has none set: remove it from the URL (or set `requirepass` on the server)"
            .to_string()
    } else if e.kind() == ErrorKind::AuthenticationFailed || code == "WRONGPASS" {
        "wrong password or user name (authentication failed); check the URL's credentials"
            .to_string()
    } else if code == "NOAUTH" {
        "the server requires a password: give it in the URL (`redis://:PASSWORD@host:port/`)"
            .to_string()
    } else if e.kind() == ErrorKind::ParseError {
        format!("not a Redis server (its reply is not the Redis protocol: {e})")
    } else if e.is_timeout() {
        format!("no reply within {timeout:?} (the response timeout): the server is frozen, overloaded or not a Redis server")
    } else if e.is_connection_refusal() {
        format!("connection refused ({e}): is redis-server running there?")
    } else {
        e.to_string()
    };
    Error::Connect {
        addr: address(client),
        reason,
        source: Some(e),
    }
}

/// A connection manager for `client`: calls fail after `response_timeout` (plus `block`,
/// the longest `BLOCK` time the connection's reads use), connection attempts after
/// `response_timeout`, one attempt per reconnect (see the module docs). Sends nothing
/// but the client's handshake; [`prove`] checks the server.
///
/// # Errors
/// [`Error::Connect`] when the first connection cannot be made.
pub(crate) async fn connection_manager(
    client: &redis::Client,
    response_timeout: Duration,
    block: Duration,
) -> Result<ConnectionManager, Error> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(response_timeout)
        .set_response_timeout(response_timeout.saturating_add(block))
        .set_number_of_retries(0);
    // The manager's own attempt is bounded by the connection timeout; this outer bound
    // only guards against a client that would not apply it.
    match tokio::time::timeout(
        response_timeout.saturating_mul(2),
        client.get_connection_manager_with_config(config),
    )
    .await
    {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(connect_error(client, e, response_timeout)),
        Err(_) => Err(Error::Connect {
            addr: address(client),
            reason: format!("no connection within {response_timeout:?} (the response timeout)"),
            source: Some(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no connection within the response timeout",
            ))),
        }),
    }
}

/// Proves that `conn` talks to a usable Redis: `PING` answers `PONG` (after the client's
/// `AUTH`/`HELLO`), and `INFO server` reports at least [`MIN_REDIS_VERSION`].
///
/// # Errors
/// [`Error::Connect`] saying what is wrong: wrong or missing password, not a Redis server,
/// no reply in time, or a Redis older than required.
pub(crate) async fn prove(
    client: &redis::Client,
    conn: &mut ConnectionManager,
    response_timeout: Duration,
) -> Result<(), Error> {
    let err = |reason: String| Error::Connect {
        addr: address(client),
        reason,
        source: None,
    };
    let pong: redis::Value = redis::cmd("PING")
        .query_async(conn)
        .await
        .map_err(|e| connect_error(client, e, response_timeout))?;
    check_pong(&pong).map_err(err)?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .map_err(|e| connect_error(client, e, response_timeout))?;
    check_version(&info).map_err(err)
}

/// A blocking connection to `client`'s server whose connect, reads and writes each fail
/// after `timeout`.
///
/// # Errors
/// [`Error::Connect`] naming the address.
pub(crate) fn blocking_connection(
    client: &redis::Client,
    timeout: Duration,
) -> Result<redis::Connection, Error> {
    let timeout = timeout.max(Duration::from_millis(10));
    let conn = client
        .get_connection_with_timeout(timeout)
        .and_then(|c| {
            c.set_read_timeout(Some(timeout))?;
            c.set_write_timeout(Some(timeout))?;
            Ok(c)
        })
        .map_err(|e| connect_error(client, e, timeout))?;
    Ok(conn)
}

/// [`prove`] over a blocking connection whose every wait is bounded by `timeout`.
///
/// # Errors
/// As [`prove`].
pub(crate) fn prove_blocking(client: &redis::Client, timeout: Duration) -> Result<(), Error> {
    let err = |reason: String| Error::Connect {
        addr: address(client),
        reason,
        source: None,
    };
    let mut conn = blocking_connection(client, timeout)?;
    let pong: redis::Value = redis::cmd("PING")
        .query(&mut conn)
        .map_err(|e| connect_error(client, e, timeout))?;
    check_pong(&pong).map_err(err)?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut conn)
        .map_err(|e| connect_error(client, e, timeout))?;
    check_version(&info).map_err(err)
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
