//! `examples/service.rs` against a private redis-server: its `/metrics` endpoint lists the
//! engine's series and they move with the events produced; SIGTERM stops it with exit 0.

#[path = "../streaming/tests/support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use streaming::mq::{Mq, MqOptions, OutgoingMessage};

const TOPIC: &str = "events";
/// Good events produced (8 users, amounts 1..=GOOD).
const GOOD: u64 = 40;

/// The example's binary, built with the same cargo (a no-op when it is up to date).
fn service_binary() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", "service"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build --example service");
    assert!(status.success());
    // This test runs from <target>/<profile>/deps/.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    profile_dir.join("examples").join("service")
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The service's process, killed if the test fails before it stops it.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Service {
    /// Sends SIGTERM and waits (at most 30 s) for the exit.
    fn terminate(&mut self) -> ExitStatus {
        let pid = self.0.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "service did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `GET /metrics`: the body, or `None` while nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req =
        format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// The samples of series `name` of job `service`: (labels, value).
fn samples<'a>(text: &'a str, name: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let labels = series.strip_prefix(name)?;
            let labels = labels.strip_prefix('{')?.strip_suffix('}')?;
            labels
                .contains("job=\"service\"")
                .then(|| (labels, value.parse().ok()))
                .and_then(|(l, v)| Some((l, v?)))
        })
        .collect()
}

fn sum(text: &str, name: &str) -> f64 {
    samples(text, name).iter().map(|(_, v)| v).sum()
}

/// Scrapes until `done` holds for the body (at most `within`); the last body.
fn scrape_until(port: u16, within: Duration, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some(body) = scrape(port) {
            if done(&body) {
                return body;
            }
            last = body;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("/metrics never got there; last scrape:\n{last}");
}

fn produce(url: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mq = Mq::connect(url, MqOptions::default()).await.unwrap();
        let mut msgs: Vec<OutgoingMessage> = (1..=GOOD)
            .map(|i| {
                let user = format!("user{}", i % 8);
                let payload = format!(r#"{{"user":"{user}","amount":{i}}}"#);
                OutgoingMessage::new(payload).key(user)
            })
            .collect();
        msgs.push(OutgoingMessage::new("not json").key("user0"));
        mq.producer().send_batch(TOPIC, &msgs).await.unwrap();
    });
}

/// Every series of the docs table but `streaming_records_retried_total`: the run's bad
/// event does not decode, and bad input is dead-lettered at once, never retried (the
/// series appears with a record's first retry). The run lasts past a heartbeat of the job
/// registry, which sets `streaming_partition_stalled`.
const EXPECTED: &[&str] = &[
    "streaming_jobs_started_total",
    "streaming_jobs_cancelled_total",
    "streaming_job_start_failed_total",
    "streaming_pipelines_started_total",
    "streaming_pipeline_start_failed_total",
    "streaming_partition_stalled",
    "streaming_dead_letters_total",
    "streaming_records_total",
    "streaming_records_failed_total",
    "streaming_records_skipped_total",
    "streaming_handle_seconds_count",
    "streaming_commit_seconds_count",
    "streaming_state_fetch_seconds_count",
    "streaming_state_reads_total",
    "streaming_state_writes_total",
    "streaming_state_deletes_total",
    "streaming_state_size_fields",
    "streaming_state_hot_key_total",
    "streaming_window_fired_total",
    "streaming_window_late_dropped_total",
    "streaming_watermark_ms",
    "streaming_watermark_flushed",
    "streaming_idle_flushes_total",
    "streaming_timer_queue_size",
    "streaming_consumer_lag",
];

#[test]
fn service_metrics_move_and_sigterm_stops_it() {
    let redis = redis_server::TestRedis::private();
    let port = free_port();
    let bin = service_binary();
    let mut service = Service(
        Command::new(bin)
            .args(["--redis-url", redis.url(), "--topic", TOPIC])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .spawn()
            .expect("start the service"),
    );
    scrape_until(port, Duration::from_secs(60), |m| {
        sum(m, "streaming_jobs_started_total") == 1.0
            && samples(m, "streaming_records_total").len() == 2
    });
    produce(redis.url());
    // Every good event is processed, both partitions were flushed (windows fired), the
    // bad event was dead-lettered, the registry's heartbeat set the stalled gauges, and
    // the lag sampled after that is 0.
    let m = scrape_until(port, Duration::from_secs(60), |m| {
        let lag = samples(m, "streaming_consumer_lag");
        sum(m, "streaming_records_total") == GOOD as f64
            && sum(m, "streaming_records_failed_total") >= 1.0
            && sum(m, "streaming_dead_letters_total") == 1.0
            && !samples(m, "streaming_partition_stalled").is_empty()
            && samples(m, "streaming_watermark_flushed").len() == 2
            && sum(m, "streaming_watermark_flushed") == 2.0
            && lag.len() == 2
            && lag.iter().all(|(_, v)| *v == 0.0)
    });
    for name in EXPECTED {
        assert!(!samples(&m, name).is_empty(), "{name} missing:\n{m}");
    }
    // 8 users, one window each (all events within a minute or two of each other).
    assert!(sum(&m, "streaming_window_fired_total") >= 8.0, "{m}");
    assert!(sum(&m, "streaming_commit_seconds_count") >= 2.0);
    assert!(sum(&m, "streaming_handle_seconds_count") >= 2.0);
    assert!(sum(&m, "streaming_state_writes_total") >= 8.0);
    assert_eq!(sum(&m, "streaming_partition_stalled"), 0.0, "{m}");
    for (labels, w) in samples(&m, "streaming_watermark_ms") {
        assert!(w > 1.0e12 && w < 1.0e14, "{labels}: {w}");
    }
    let status = service.terminate();
    assert!(status.success(), "{status:?}");
}
