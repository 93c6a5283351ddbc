//! A test PKI made at test time (a CA, server certificates valid and expired, a client
//! certificate, a second CA) and a `redis-server` that speaks TLS only. Used by the
//! library's TLS tests and the admin CLI's (by path).

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use streaming::mq::TlsOptions;

/// PEM files of a test PKI in a temporary directory.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1 signed by it (valid, and one that expired
    /// in 2021), a client certificate signed by it, and a second CA nobody uses.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        let ca = |name: &str| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            (cert, key)
        };
        let (ca_cert, ca_key) = ca("streaming test CA");
        let (other_ca, _) = ca("another CA");
        write("ca.pem", ca_cert.pem());
        write("other-ca.pem", other_ca.pem());
        let leaf = |names: Vec<String>, expired: bool| {
            let mut params = CertificateParams::new(names).unwrap();
            if expired {
                params.not_before = rcgen::date_time_ymd(2020, 1, 1);
                params.not_after = rcgen::date_time_ymd(2021, 1, 1);
            }
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &ca_cert, &ca_key).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let server = || vec!["127.0.0.1".to_string(), "localhost".to_string()];
        let (cert, key) = leaf(server(), false);
        write("server.pem", cert);
        write("server.key", key);
        let (cert, key) = leaf(server(), true);
        write("expired.pem", cert);
        write("expired.key", key);
        let (cert, key) = leaf(vec!["streaming-client".to_string()], false);
        write("client.pem", cert);
        write("client.key", key);
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// `redis-cli` over TLS, trusting the test CA, presenting the client certificate.
    fn redis_cli(&self) -> Command {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["--tls", "--cacert", &self.path("ca.pem")])
            .args(["--cert", &self.path("client.pem")])
            .args(["--key", &self.path("client.key")]);
        cmd
    }

    /// TLS options trusting the test CA, presenting the client certificate.
    pub fn client(&self) -> TlsOptions {
        TlsOptions::builder()
            .ca_file(self.path("ca.pem"))
            .client_cert_file(self.path("client.pem"))
            .client_key_file(self.path("client.key"))
            .build()
            .unwrap()
    }
}

/// A `redis-server` listening with TLS only (`--port 0`), killed on drop.
pub struct TlsRedis {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    /// Serving certificate `cert` (`{cert}.pem`, `{cert}.key` of `pki`); clients must
    /// present a certificate of the test CA when `auth_clients` is `yes`.
    pub fn start(binary: &str, pki: &Pki, cert: &str, auth_clients: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(binary, pki, cert, auth_clients, port, &[])
    }

    /// [`start`](Self::start) on `port` with extra server arguments.
    fn start_on(
        binary: &str,
        pki: &Pki,
        cert: &str,
        auth_clients: &str,
        port: u16,
        extra: &[&str],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = |n: String| PathBuf::from(pki.path(&n));
        let child = Command::new(binary)
            .args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir.path())
            .arg("--tls-cert-file")
            .arg(file(format!("{cert}.pem")))
            .arg("--tls-key-file")
            .arg(file(format!("{cert}.key")))
            .arg("--tls-ca-cert-file")
            .arg(file("ca.pem".into()))
            .args(["--tls-auth-clients", auth_clients])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the TLS server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsRedis {
            port,
            child,
            _dir: dir,
        }
    }

    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis Cluster of three masters speaking TLS only, client and cluster bus alike,
/// made with `redis-cli --tls --cluster create`; the nodes ask for client certificates.
pub struct TlsCluster {
    pub nodes: Vec<TlsRedis>,
}

impl TlsCluster {
    pub fn start(binary: &str, pki: &Pki) -> Self {
        let nodes: Vec<TlsRedis> = (0..3)
            .map(|_| {
                // A cluster node also listens on port + 10000 (its bus).
                let port = loop {
                    let p = TcpListener::bind("127.0.0.1:0")
                        .unwrap()
                        .local_addr()
                        .unwrap()
                        .port();
                    if p <= 55535 && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
                        break p;
                    }
                };
                let extra = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--tls-cluster",
                    "yes",
                ];
                TlsRedis::start_on(binary, pki, "server", "yes", port, &extra)
            })
            .collect();
        let out = pki
            .redis_cli()
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = TlsCluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cluster.all_ok(pki) {
            assert!(
                Instant::now() < deadline,
                "the TLS cluster did not become ok"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        cluster
    }

    fn all_ok(&self, pki: &Pki) -> bool {
        self.nodes.iter().all(|n| {
            let out = pki
                .redis_cli()
                .args(["-p", &n.port.to_string(), "cluster", "info"])
                .output()
                .expect("run redis-cli");
            String::from_utf8_lossy(&out.stdout).contains("cluster_state:ok")
        })
    }

    /// `rediss+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("rediss+cluster://{}", seeds.join(","))
    }
}
