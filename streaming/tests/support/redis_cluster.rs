//! A private Redis Cluster: 3 masters + 3 replicas on free loopback ports
//! (`cluster-node-timeout` 1000 ms, no AOF), made with `redis-cli --cluster create`; every node is
//! killed on drop.
//!
//! Test files include it next to `redis_server.rs` (it uses that file's `RedisServer`):
//! `#[path = ".../redis_server.rs"] mod redis_server;` and
//! `#[path = ".../redis_cluster.rs"] mod redis_cluster;` at the same level.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::redis_server::RedisServer;

/// The cluster's `cluster-node-timeout` (ms): short, so a failover takes about a second.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// A running cluster of six `redis-server` processes.
pub struct TestCluster {
    nodes: Vec<RedisServer>,
}

impl TestCluster {
    /// Starts 3 masters and 3 replicas and waits (bounded) until every node reports
    /// `cluster_state:ok` and knows all six nodes.
    pub fn start() -> Self {
        let timeout = NODE_TIMEOUT_MS.to_string();
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_with_args(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &timeout,
                    // Replicas hold the copies; no fsync per write on a loaded machine.
                    "--appendonly",
                    "no",
                ])
            })
            .collect();
        let cluster = Self { nodes };
        let addrs: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create (is redis-cli installed?)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_ok(Duration::from_secs(60));
        cluster
    }

    fn wait_ok(&self, deadline: Duration) {
        let end = Instant::now() + deadline;
        loop {
            let ready = self.nodes.iter().all(|n| {
                let info = command(n.port(), &["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:6")
            }) && self.masters().len() == 3;
            if ready {
                return;
            }
            assert!(
                Instant::now() < end,
                "cluster not ok after {deadline:?}: {}",
                command(self.nodes[0].port(), &["CLUSTER", "NODES"])
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The cluster as a [`TestRedis`](super::redis_server::TestRedis) whose URL is
    /// [`url`](Self::url); the nodes stop when it is dropped.
    pub fn into_test_redis(self) -> super::redis_server::TestRedis {
        let url = self.url();
        super::redis_server::TestRedis::kept(url, Box::new(self))
    }

    /// `redis+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}/", nodes.join(","))
    }

    /// `redis://` URLs of the nodes (each one a node, not the cluster).
    pub fn node_urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The masters and their slot ranges, from `CLUSTER NODES`: `(port, [(first,
    /// last)])`, by port.
    pub fn masters(&self) -> Vec<(u16, Vec<(u16, u16)>)> {
        let nodes = command(self.nodes[0].port(), &["CLUSTER", "NODES"]);
        let mut masters: Vec<(u16, Vec<(u16, u16)>)> = nodes
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                if f.len() < 8 || !f[2].contains("master") || f[2].contains("fail") {
                    return None;
                }
                let port = f[1].split(['@', ':']).nth(1)?.parse().ok()?;
                let ranges = f[8..]
                    .iter()
                    .filter(|r| !r.starts_with('['))
                    .filter_map(|r| {
                        let (a, b) = r.split_once('-').unwrap_or((r, r));
                        Some((a.parse().ok()?, b.parse().ok()?))
                    })
                    .collect();
                Some((port, ranges))
            })
            .collect();
        masters.sort();
        masters
    }

    /// The port of the master serving `slot`.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        self.masters()
            .into_iter()
            .find(|(_, ranges)| ranges.iter().any(|&(a, b)| a <= slot && slot <= b))
            .map(|(port, _)| port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// `CLUSTER KEYSLOT key`, as the server computes it.
    pub fn key_slot(&self, key: &str) -> u16 {
        command(self.nodes[0].port(), &["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("CLUSTER KEYSLOT reply")
    }

    /// The keys stored on the node on `port` whose names contain `pattern`
    /// (`KEYS *pattern*`), sorted.
    pub fn keys_on(&self, port: u16, pattern: &str) -> Vec<String> {
        let reply = command(port, &["KEYS", &format!("*{pattern}*")]);
        let mut keys: Vec<String> = reply
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        keys.sort();
        keys
    }
}

/// Sends `args` to the node on `port` (a plain connection, bounded by 5 s) and returns
/// its reply as text: a string reply as is, an array one element a line; "" when the
/// node does not answer.
fn command(port: u16, args: &[&str]) -> String {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return String::new();
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(5)) else {
        return String::new();
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(&mut conn) {
        Ok(redis::Value::Array(items)) => items
            .iter()
            .filter_map(|v| redis::from_redis_value::<String>(v).ok())
            .collect::<Vec<_>>()
            .join("\n"),
        Ok(redis::Value::Int(i)) => i.to_string(),
        Ok(v) => redis::from_redis_value::<String>(&v).unwrap_or_default(),
        Err(_) => String::new(),
    }
}
