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
    /// Indexes of the nodes killed by [`kill_node`](Self::kill_node).
    killed: Vec<usize>,
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
        let cluster = Self {
            nodes,
            killed: Vec::new(),
        };
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

    /// The ports of the nodes still running (not killed by [`kill_node`](Self::kill_node)).
    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.killed.contains(i))
            .map(|(_, n)| n.port())
            .collect()
    }

    /// `CLUSTER NODES` as the first live node that answers sees it.
    fn cluster_nodes(&self) -> String {
        self.live_ports()
            .into_iter()
            .map(|p| command(p, &["CLUSTER", "NODES"]))
            .find(|r| !r.is_empty())
            .unwrap_or_default()
    }

    /// The masters and their slot ranges, from `CLUSTER NODES`: `(port, [(first,
    /// last)])`, by port.
    pub fn masters(&self) -> Vec<(u16, Vec<(u16, u16)>)> {
        let nodes = self.cluster_nodes();
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
        command(self.live_ports()[0], &["CLUSTER", "KEYSLOT", key])
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

    /// Kills the node on `port` at once (`SIGKILL`); the cluster fails it over after
    /// `cluster-node-timeout` when it was a master.
    pub fn kill_node(&mut self, port: u16) {
        let i = self
            .nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"));
        self.nodes[i].kill();
        self.killed.push(i);
    }

    /// Starts the node on `port` again (same port and directory, so it rejoins from its
    /// `nodes.conf`, as a replica of whoever took its slots) and waits (bounded by
    /// `deadline`) until its link to its master is up.
    pub fn restart_node(&mut self, port: u16, deadline: Duration) {
        let i = self
            .nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"));
        self.nodes[i].restart();
        self.killed.retain(|k| *k != i);
        let end = Instant::now() + deadline;
        loop {
            let info = command(port, &["INFO", "replication"]);
            if info.contains("role:slave") && info.contains("master_link_status:up") {
                return;
            }
            assert!(
                Instant::now() < end,
                "node {port} not a replica within {deadline:?}: {info}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded by `deadline`) until a live master other than `old` serves `slot`
    /// and every live node reports `cluster_state:ok`; returns the new master's port.
    pub fn await_failover(&self, slot: u16, old: u16, deadline: Duration) -> u16 {
        let end = Instant::now() + deadline;
        loop {
            let master = self
                .masters()
                .into_iter()
                .find(|(_, ranges)| ranges.iter().any(|&(a, b)| a <= slot && slot <= b))
                .map(|(port, _)| port);
            let ok = self
                .live_ports()
                .into_iter()
                .all(|p| command(p, &["CLUSTER", "INFO"]).contains("cluster_state:ok"));
            if let Some(m) = master.filter(|m| *m != old && ok) {
                return m;
            }
            assert!(
                Instant::now() < end,
                "no failover of slot {slot} from {old} within {deadline:?}: {}",
                self.cluster_nodes()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded by `deadline`) until every live master's replicas have
    /// acknowledged all it holds (`INFO replication`: each replica's `offset` equals the
    /// master's `master_repl_offset`).
    pub fn await_replicated(&self, deadline: Duration) {
        let end = Instant::now() + deadline;
        let masters: Vec<u16> = self.masters().into_iter().map(|(p, _)| p).collect();
        for m in masters {
            loop {
                let info = command(m, &["INFO", "replication"]);
                let field = |name: &str| {
                    info.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim().to_string())
                };
                let offset = field("master_repl_offset:");
                let replica = field("slave0:").and_then(|v| {
                    v.split(',')
                        .find_map(|kv| kv.strip_prefix("offset="))
                        .map(str::to_string)
                });
                if offset.is_some() && offset == replica {
                    break;
                }
                assert!(
                    Instant::now() < end,
                    "master {m} not replicated within {deadline:?}: {info}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// A blocking cluster connection for the test's own reads (the client's default
    /// retries, so it follows a failover).
    pub fn connection(&self) -> redis::cluster::ClusterConnection {
        let nodes: Vec<String> = self
            .live_ports()
            .into_iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect();
        redis::cluster::ClusterClient::builder(nodes)
            .connection_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_secs(5))
            .build()
            .and_then(|c| c.get_connection())
            .expect("connect to the test cluster")
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
