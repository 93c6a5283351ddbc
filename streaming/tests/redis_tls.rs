//! TLS to Redis (feature `tls`) against private `redis-server`s that speak TLS only, with
//! certificates made at test time: a job runs exactly once over TLS with a private CA and
//! a client certificate; a wrong CA, an expired server certificate, a plain-text URL and
//! TLS options on a plain URL each fail at connect, saying which.

mod support;

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, MqOptions, TlsOptions};
use streaming::redis::{CollectSink, RedisEnv, RedisRuntimeConfig};
use support::engine::{earliest, rt, wait_until};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// PEM files of a test PKI in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1 signed by it (valid, and one that expired
    /// in 2021), a client certificate signed by it, and a second CA nobody uses.
    fn new() -> Self {
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

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// TLS options trusting the test CA, presenting the client certificate.
    fn client(&self) -> TlsOptions {
        TlsOptions::builder()
            .ca_file(self.path("ca.pem"))
            .client_cert_file(self.path("client.pem"))
            .client_key_file(self.path("client.key"))
            .build()
            .unwrap()
    }
}

/// A `redis-server` listening with TLS only (`--port 0`), killed on drop.
struct TlsRedis {
    port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    /// Serving certificate `cert` (`{cert}.pem`, `{cert}.key` of `pki`); clients must
    /// present a certificate of the test CA when `auth_clients` is `yes`.
    fn start(pki: &Pki, cert: &str, auth_clients: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let file = |n: String| PathBuf::from(pki.path(&n));
        let child = Command::new(support::redis_server::server_binary())
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

    fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn opts(tls: TlsOptions) -> MqOptions {
    MqOptions::builder()
        .tls(tls)
        .response_timeout(Duration::from_secs(2))
        .lease_ttl(Duration::from_millis(1500))
        .lease_renew_interval(Duration::from_millis(200))
        .build()
        .unwrap()
}

/// The reason of a connect error, or a panic.
fn connect_reason(r: Result<Mq, streaming::Error>) -> String {
    match r {
        Err(streaming::Error::Connect { reason, .. }) => reason,
        Err(other) => panic!("expected a connect error, got {other:?}"),
        Ok(_) => panic!("connected"),
    }
}

#[test]
fn a_job_runs_exactly_once_over_tls_with_a_private_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let server = TlsRedis::start(&pki, "server", "yes");
    let rt = rt();
    let mq = rt
        .block_on(Mq::connect(&server.url(), opts(pki.client())))
        .unwrap();
    rt.block_on(mq.create_topic("words", 2)).unwrap();
    let words: Vec<String> = (0..200).map(|i| format!("w{}", i % 9)).collect();
    for w in &words {
        rt.block_on(mq.producer().send("words", Some(w), w.clone()))
            .unwrap();
    }
    let config = RedisRuntimeConfig::builder()
        .job_name("tls-count")
        .mq_options(opts(pki.client()))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(server.url().as_str(), config).unwrap();
    env.from_mq_topic_with_options("words", "counts", earliest(50))
        .map(|m: Message| m.text().unwrap().to_owned())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("every record committed", &job, || {
        job.diagnostics()
            .partitions
            .iter()
            .map(|p| p.records)
            .sum::<u64>()
            == 200
    });
    job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    assert!(job.blocking_shutdown(Duration::from_secs(10)));
    assert!(
        job.diagnostics().errors.is_empty(),
        "{:?}",
        job.diagnostics().errors
    );

    // The stored counts, read over TLS with redis-rs directly.
    let certs = redis::TlsCertificates {
        client_tls: Some(redis::ClientTlsConfig {
            client_cert: std::fs::read(pki.path("client.pem")).unwrap(),
            client_key: std::fs::read(pki.path("client.key")).unwrap(),
        }),
        root_cert: Some(std::fs::read(pki.path("ca.pem")).unwrap()),
    };
    let mut conn = redis::Client::build_with_tls(server.url(), certs)
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*tls-count*:count")
        .query(&mut conn)
        .unwrap();
    let mut stored = BTreeMap::new();
    for key in keys {
        let fields: BTreeMap<String, u64> =
            redis::cmd("HGETALL").arg(&key).query(&mut conn).unwrap();
        stored.extend(fields);
    }
    let mut expected = BTreeMap::new();
    for w in &words {
        *expected.entry(format!("\"{w}\"")).or_insert(0u64) += 1;
    }
    assert_eq!(stored, expected);
}

#[test]
fn a_wrong_ca_an_expired_certificate_and_a_plain_url_fail_at_connect_saying_which() {
    let pki = Pki::new();
    let rt = rt();
    let server = TlsRedis::start(&pki, "server", "no");
    let trusting = |ca: &str| TlsOptions::builder().ca_file(pki.path(ca)).build().unwrap();

    // Trusting the right CA, without a client certificate (not asked for here): connects.
    rt.block_on(Mq::connect(&server.url(), opts(trusting("ca.pem"))))
        .unwrap();

    let reason =
        connect_reason(rt.block_on(Mq::connect(&server.url(), opts(trusting("other-ca.pem")))));
    assert!(
        reason.contains("certificate") && reason.contains("not signed by a CA"),
        "{reason}"
    );

    let expired = TlsRedis::start(&pki, "expired", "no");
    let reason = connect_reason(rt.block_on(Mq::connect(&expired.url(), opts(trusting("ca.pem")))));
    assert!(reason.contains("expired"), "{reason}");

    let plain = server.url().replacen("rediss://", "redis://", 1);
    let reason = connect_reason(rt.block_on(Mq::connect(&plain, opts(TlsOptions::default()))));
    assert!(reason.contains("rediss://"), "{reason}");

    // TLS options for a URL without TLS: refused, naming the option.
    match rt.block_on(Mq::connect(&plain, opts(trusting("ca.pem")))) {
        Err(streaming::Error::InvalidConfig {
            field: "tls",
            reason,
        }) => {
            assert!(reason.contains("rediss://"), "{reason}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // A CA file that does not exist: named.
    let missing = TlsOptions::builder()
        .ca_file("/nonexistent/ca.pem")
        .build()
        .unwrap();
    match rt.block_on(Mq::connect(&server.url(), opts(missing))) {
        Err(streaming::Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "tls.ca_file");
            assert!(reason.contains("/nonexistent/ca.pem"), "{reason}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}
