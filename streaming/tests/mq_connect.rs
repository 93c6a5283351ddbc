//! Connecting proves the server: it fails promptly, naming the address, with what is wrong
//! in words — refused, silent, wrong or missing password, not a Redis server, too old.
//! The Redis engine's `blocking_start` proves it the same way. A partition owner's reads,
//! which use connections of their own on one server, log in like the shared connection
//! (password, database, unix socket) and replace a connection the server closed.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use streaming::mq::{Mq, MqOptions, OutgoingMessage, StartPolicy};
use streaming::redis::{CollectSink, RedisEnv, RedisRuntimeConfig};
use support::redis_server::{http_port, RedisServer, SilentPort};

fn opts(response_timeout: Duration) -> MqOptions {
    MqOptions::builder()
        .response_timeout(response_timeout)
        .build()
        .unwrap()
}

/// The `Error::Connect` of `r`, as (address, reason); panics on anything else.
fn connect_error<T>(r: Result<T, streaming::Error>) -> (String, String) {
    match r {
        Err(streaming::Error::Connect { addr, reason, .. }) => (addr, reason),
        Err(other) => panic!("expected a connect error, got {other}"),
        Ok(_) => panic!("connected?"),
    }
}

#[tokio::test]
async fn connect_to_a_closed_port_is_an_error() {
    // Nothing listens on port 1 of the loopback address: the connection is refused.
    let r = Mq::connect("redis://127.0.0.1:1/", MqOptions::default()).await;
    match &r {
        Err(streaming::Error::Connect {
            source: Some(e), ..
        }) => assert!(e.is_connection_refusal(), "{e}"),
        other => panic!("expected a refused connection, got {other:?}"),
    }
    let (addr, reason) = connect_error(r);
    assert_eq!(addr, "127.0.0.1:1");
    assert!(reason.contains("refused"), "{reason}");
}

#[tokio::test]
async fn a_silent_port_fails_within_the_response_timeout() {
    let silent = SilentPort::start();
    let t = Instant::now();
    let (addr, reason) =
        connect_error(Mq::connect(&silent.url(), opts(Duration::from_millis(500))).await);
    let took = t.elapsed();
    assert!(took <= Duration::from_secs(1), "took {took:?}");
    assert!(silent.url().contains(&addr), "{addr}");
    assert!(reason.contains("no reply within"), "{reason}");
}

#[tokio::test]
async fn an_http_server_is_not_a_redis_server() {
    let port = http_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let (addr, reason) = connect_error(Mq::connect(&url, opts(Duration::from_secs(2))).await);
    assert_eq!(addr, format!("127.0.0.1:{port}"));
    assert!(reason.contains("not a Redis server"), "{reason}");
}

#[tokio::test]
async fn wrong_and_missing_passwords_are_named() {
    let server = RedisServer::start_with_args(&["--requirepass", "s3cret"]);
    let port = server.port();
    let wrong = format!("redis://:nope@127.0.0.1:{port}/");
    let (addr, reason) = connect_error(Mq::connect(&wrong, MqOptions::default()).await);
    assert_eq!(addr, format!("127.0.0.1:{port}"));
    assert!(reason.contains("wrong password"), "{reason}");
    let (_, reason) = connect_error(Mq::connect(&server.url(), MqOptions::default()).await);
    assert!(reason.contains("requires a password"), "{reason}");
    let right = format!("redis://:s3cret@127.0.0.1:{port}/");
    Mq::connect(&right, MqOptions::default()).await.unwrap();
}

/// A fake server speaking just enough of the protocol: `PING` → `PONG`, `INFO` → an old
/// `redis_version`, anything else → `OK`.
fn old_redis_port(version: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let mut line = String::new();
                loop {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let n: usize = line.trim()[1..].parse().unwrap_or(0);
                    let mut args = Vec::new();
                    for _ in 0..n {
                        line.clear();
                        r.read_line(&mut line).unwrap();
                        let len: usize = line.trim()[1..].parse().unwrap();
                        let mut buf = vec![0; len + 2];
                        r.read_exact(&mut buf).unwrap();
                        args.push(String::from_utf8_lossy(&buf[..len]).to_uppercase());
                    }
                    let reply = match args.first().map(String::as_str) {
                        Some("PING") => "+PONG\r\n".to_string(),
                        Some("INFO") => {
                            let body = format!("# Server\r\nredis_version:{version}\r\n");
                            format!("${}\r\n{body}\r\n", body.len())
                        }
                        _ => "+OK\r\n".to_string(),
                    };
                    if w.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn an_old_redis_is_named() {
    let port = old_redis_port("6.2.14");
    let url = format!("redis://127.0.0.1:{port}/");
    let (_, reason) = connect_error(Mq::connect(&url, opts(Duration::from_secs(2))).await);
    assert!(
        reason.contains("6.2.14") && reason.contains("older"),
        "{reason}"
    );
}

/// The engine decides at start: an unreachable Redis fails `blocking_start` (naming the
/// address) instead of starting a job whose subtasks are dead.
#[test]
fn blocking_start_on_an_unreachable_redis_fails_naming_the_address() {
    for url in [
        "redis://127.0.0.1:1/".to_string(),
        SilentPort::start().url(),
    ] {
        let config = RedisRuntimeConfig::builder()
            .mq_options(opts(Duration::from_millis(500)))
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(url.as_str(), config).unwrap();
        env.from_mq_topic("t", "g")
            .map(|m| m.id.clone())
            .sink(CollectSink::new())
            .unwrap();
        let t = Instant::now();
        let (addr, _) = connect_error(env.blocking_start());
        assert!(t.elapsed() <= Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(url.contains(&addr), "{url} vs {addr}");
    }
}

#[tokio::test]
async fn a_bad_url_is_a_configuration_error_naming_the_url() {
    for url in ["not a url", "redis://host:notaport"] {
        let from_env = RedisEnv::try_new(url).map(drop);
        let from_mq = Mq::connect(url, MqOptions::default()).await.map(drop);
        for r in [from_env, from_mq] {
            let e = r.expect_err(url);
            assert_eq!(e.kind(), streaming::ErrorKind::Config, "{url}: {e}");
            assert!(!e.is_retryable(), "{url}: {e}");
            match e {
                streaming::Error::InvalidConfig { field, .. } => assert_eq!(field, "url"),
                other => panic!("{url}: expected InvalidConfig, got {other:?}"),
            }
        }
    }
}

/// Sends `n` messages to partition 0 of a new 1-partition topic `t` and reads them with a
/// partition owner's reader, in reads of at most 3; returns their payloads.
async fn owner_reads(mq: &Mq, n: usize) -> Vec<String> {
    mq.create_topic("t", 1).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..n)
        .map(|i| OutgoingMessage::new(i.to_string()))
        .collect();
    mq.producer().send_batch("t", &msgs).await.unwrap();
    let mut r = mq
        .exclusive_reader("t", "g", 0, "owner", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let mut read = Vec::new();
    while read.len() < n {
        let b = r.read(3, Duration::from_millis(10)).await.unwrap();
        assert!(!b.messages.is_empty(), "read {read:?} of {n}");
        read.extend(b.messages.iter().map(|m| m.text().unwrap().to_owned()));
    }
    r.release().await.unwrap();
    read
}

fn numbers(n: usize) -> Vec<String> {
    (0..n).map(|i| i.to_string()).collect()
}

#[tokio::test]
async fn an_owners_reads_log_in_with_the_urls_password_and_database() {
    let server = RedisServer::start_with_args(&["--requirepass", "s3cret"]);
    let url = format!("redis://:s3cret@127.0.0.1:{}/3", server.port());
    let mq = Mq::connect(&url, MqOptions::default()).await.unwrap();
    assert_eq!(owner_reads(&mq, 7).await, numbers(7));
    let client = redis::Client::open(url.replace("/3", "/0")).unwrap();
    let mut db0 = client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut db0).unwrap();
    assert!(keys.is_empty(), "database 0 holds {keys:?}");
}

#[cfg(unix)]
#[tokio::test]
async fn an_owners_reads_go_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("redis.sock");
    let socket = socket.to_str().unwrap();
    let _server =
        RedisServer::start_with_args(&["--unixsocket", socket, "--unixsocketperm", "700"]);
    let mq = Mq::connect(&format!("unix://{socket}"), MqOptions::default())
        .await
        .unwrap();
    assert_eq!(owner_reads(&mq, 5).await, numbers(5));
}

#[tokio::test]
async fn an_owners_read_connection_closed_by_the_server_is_replaced() {
    let server = RedisServer::start();
    let mq = Mq::connect(&server.url(), MqOptions::default())
        .await
        .unwrap();
    mq.create_topic("t", 1).await.unwrap();
    let msgs: Vec<OutgoingMessage> = (0..4)
        .map(|i| OutgoingMessage::new(i.to_string()))
        .collect();
    mq.producer().send_batch("t", &msgs).await.unwrap();
    let mut r = mq
        .exclusive_reader("t", "g", 0, "owner", None, StartPolicy::Earliest)
        .await
        .unwrap();
    let first = r.read(2, Duration::from_millis(10)).await.unwrap();
    assert_eq!(first.messages.len(), 2);
    // The read connection is the client whose last command was the read's `EXEC`.
    let mut admin = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    let ids: Vec<&str> = clients
        .lines()
        .filter(|l| l.contains(" cmd=exec "))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .collect();
    assert_eq!(ids.len(), 1, "{clients}");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(ids[0])
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rest = r.read(10, Duration::from_millis(10)).await.unwrap();
    let texts: Vec<&str> = rest.messages.iter().map(|m| m.text().unwrap()).collect();
    assert_eq!(texts, ["2", "3"]);
}

/// The private servers of every test are the binary `STREAMING_TEST_REDIS_SERVER` names
/// (CI runs the core tests again against Valkey and Redis Stack): a Valkey binary answers
/// as Valkey, Redis Stack's `redis-stack-server` with its modules, Debian's Redis as plain
/// Redis, so a run cannot pass against the wrong server by accident.
#[test]
fn private_servers_are_the_binary_the_run_names() {
    let binary = support::redis_server::server_binary();
    let mut server = RedisServer::start();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).unwrap();
    let is_valkey = info.lines().any(|l| l == "server_name:valkey");
    let named_valkey = std::path::Path::new(&binary)
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("valkey"));
    assert_eq!(
        is_valkey, named_valkey,
        "{binary} answered INFO server with:\n{info}"
    );
    // Redis Stack's server (a binary named `redis-stack-server`) runs with its modules.
    let modules: redis::Value = redis::cmd("MODULE").arg("LIST").query(&mut conn).unwrap();
    let has_json = format!("{modules:?}").contains("ReJSON");
    assert_eq!(
        has_json,
        binary.contains("redis-stack"),
        "{binary}'s modules: {modules:?}"
    );
    assert!(
        info.lines().any(|l| l.starts_with("redis_version:")),
        "the version the connect check reads: {info}"
    );
    server.kill();
}
