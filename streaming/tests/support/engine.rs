//! Helpers shared by the Redis-engine tests (`redis_engine*.rs`, `redis_windows.rs`).

use std::time::Duration;

use streaming::mq::{StartPolicy, SubscriptionOptions};
use streaming::redis::JobClient;

/// A current-thread tokio runtime for the test's own async calls (producing, admin).
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Read from the beginning of each partition, `batch` entries per read.
pub fn earliest(batch: usize) -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(batch)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap()
}

/// Polls `check` every 20 ms until it is true; panics with the job's diagnostics after a
/// generous deadline (it bounds a failing test; it is not what the test asserts).
pub fn wait_until(what: &str, job: &JobClient, mut check: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {:#?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
