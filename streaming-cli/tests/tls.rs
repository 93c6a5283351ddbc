//! The admin CLI over TLS: `rediss://` with the `--tls-*` options reads topics, dead
//! letters and keyed state; without the private CA it fails at connect saying so.

mod support;

#[path = "../../streaming/tests/support/tls.rs"]
#[allow(unreachable_pub, dead_code)]
mod tls;

use tls::{Pki, TlsRedis};

/// `streaming-admin` against `server` with `args`: stdout and stderr, and success.
fn admin(server: &TlsRedis, tls_args: &[String], args: &[&str]) -> (String, bool) {
    let out = assert_cmd::Command::cargo_bin("streaming-admin")
        .unwrap()
        .env_remove("REDIS_URL")
        .args(["--redis-url", &server.url()])
        .args(tls_args)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (text, out.status.success())
}

#[test]
fn the_cli_reads_over_tls_with_a_private_ca_and_a_client_certificate() {
    let pki = Pki::new();
    let server = TlsRedis::start("redis-server", &pki, "server", "yes");
    let rt = support::rt();
    let mq = rt
        .block_on(streaming::mq::Mq::connect(
            &server.url(),
            streaming::mq::MqOptions::builder()
                .tls(pki.client())
                .build()
                .unwrap(),
        ))
        .unwrap();
    rt.block_on(mq.create_topic("secure-orders", 3)).unwrap();

    let with_cert = [
        "--tls-ca-file".to_string(),
        pki.path("ca.pem"),
        "--tls-cert-file".into(),
        pki.path("client.pem"),
        "--tls-key-file".into(),
        pki.path("client.key"),
    ];
    let (out, ok) = admin(&server, &with_cert, &["topics", "list"]);
    assert!(ok && out.contains("secure-orders"), "{out}");
    let (out, ok) = admin(
        &server,
        &with_cert,
        &["topics", "describe", "secure-orders", "--json"],
    );
    assert!(ok && out.contains("\"partitions\""), "{out}");
    let (out, ok) = admin(&server, &with_cert, &["dlq", "list", "secure-orders"]);
    assert!(ok, "{out}");

    // Without the private CA: the server's certificate is not trusted, and the error says so.
    let (out, ok) = admin(&server, &[], &["topics", "list"]);
    assert!(!ok && out.contains("not signed by a CA"), "{out}");
    // A certificate without its key: a usage error naming the missing option.
    let (out, ok) = admin(&server, &with_cert[..4], &["topics", "list"]);
    assert!(!ok && out.contains("--tls-key-file"), "{out}");
}
