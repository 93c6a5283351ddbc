//! Test support shared by the integration tests: private Redis servers and clusters, a
//! private PostgreSQL cluster, engine and worker helpers.
#![allow(dead_code, unreachable_pub)]

pub mod engine;
pub mod postgres;
pub mod proxy;
pub mod redis_cluster;
pub mod redis_server;
pub mod tls;
pub mod word_count;
pub mod workers;

use std::future::Future;
use std::time::Duration;

use streaming::mq::{Mq, MqOptions, MqOptionsBuilder};

/// A unique key prefix per test, so tests can share one server (e.g. under `REDIS_URL`).
pub fn unique_prefix(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "t-{test}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Options fast enough for tests: short leases, claims and backoff.
pub fn fast_options(test: &str) -> MqOptionsBuilder {
    MqOptions::builder()
        .key_prefix(unique_prefix(test))
        .lease_ttl(Duration::from_millis(1500))
        .lease_renew_interval(Duration::from_millis(200))
        .claim_idle(Duration::from_millis(800))
        .retry_poll_interval(Duration::from_millis(50))
}

/// Connects an [`Mq`] with `opts` to `url`.
pub async fn connect(url: &str, opts: MqOptions) -> Mq {
    Mq::connect(url, opts).await.expect("connect to test redis")
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after `deadline` with
/// `what`. Deadlines are generous (a loaded 2-core machine); they bound a failing test,
/// they are not what the test asserts.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > end {
            panic!("timed out after {deadline:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The generous deadline used by `eventually` calls.
pub const DEADLINE: Duration = Duration::from_secs(30);
