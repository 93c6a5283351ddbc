//! A small service on the Redis engine: JSON events from a topic, each user's spend per
//! minute, and the engine's metrics on a Prometheus endpoint.
//!
//! ```text
//! cargo run --example service -- [--redis-url URL] [--listen ADDR] [--topic NAME] [--partitions N]
//! ```
//! Defaults: `--redis-url` from `REDIS_URL`, else `redis://127.0.0.1:6379` (nothing is
//! started for you),
//! `--listen 127.0.0.1:9898`, `--topic events`, `--partitions 2` (the topic is created
//! when missing).
//!
//! Events are messages whose payload is JSON `{"user": "ann", "amount": 12}`; event time
//! is the message timestamp. The job (name `service`, consumer group `service`) sums
//! `amount` per user in one-minute tumbling event-time windows and appends each window's
//! `[user, {"start": ms, "end": ms}, total]` as JSON to the Redis list sink `totals` (one
//! list per partition: `totals:{events:N}` with the default topic). A
//! partition without input for one second flushes its watermark, which fires its open
//! windows. An event that is not such JSON is dead-lettered (bad input is never retried).
//!
//! `GET http://ADDR/metrics` serves every `streaming_*` series in the Prometheus text
//! format (`streaming::guide`, "Redis engine metrics", lists them); latency histograms
//! have buckets from 0.5 ms to 2.5 s. Ctrl-C or SIGTERM shuts the job down gracefully
//! (every subtask commits or drops its batch and hands its partitions over, at most 10 s)
//! and the process exits 0 (1 when the job did not stop in time).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use serde::Deserialize;
use streaming::fragment::{Fragment, Input};
use streaming::mq::{Message, Mq, MqOptions};
use streaming::pipeline;
use streaming::redis::{JobClient, RedisEnv, RedisListSink, RedisRuntimeConfig};
use streaming::time::{TimeWindow, TumblingEventTimeWindows};

/// Bucket bounds (seconds) of the `_seconds` histograms.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// How long a shutdown waits for the subtasks.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Parser, Debug)]
#[command(about = "Per-user spend per minute from JSON events, with a Prometheus endpoint")]
struct Args {
    /// The Redis server (default: the `REDIS_URL` environment variable, else the local one).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis_url: String,
    /// Where `/metrics` is served.
    #[arg(long, default_value = "127.0.0.1:9898")]
    listen: SocketAddr,
    /// The topic of the events.
    #[arg(long, default_value = "events")]
    topic: String,
    /// Partitions of the topic when it is created.
    #[arg(long, default_value_t = 2)]
    partitions: u32,
}

/// One event.
#[derive(Deserialize, Clone, Debug)]
struct Event {
    user: String,
    amount: i64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // The recorder goes in before the job starts: the partitions register their series
    // when they are set up.
    PrometheusBuilder::new()
        .with_http_listener(args.listen)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .install()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mq_options = MqOptions::default();
    rt.block_on(async {
        let mq = Mq::connect(args.redis_url.as_str(), mq_options.clone()).await?;
        mq.create_topic(&args.topic, args.partitions).await
    })?;
    let job = rt.block_on(start(&args, mq_options))?;
    eprintln!(
        "service: job running, metrics on http://{}/metrics",
        args.listen
    );
    let stopped = rt.block_on(async {
        wait_for_signal().await?;
        eprintln!("service: shutting down");
        Ok::<_, std::io::Error>(job.shutdown(SHUTDOWN_TIMEOUT).await)
    })?;
    if !stopped {
        eprintln!("service: the job did not stop within {SHUTDOWN_TIMEOUT:?}");
        std::process::exit(1);
    }
    eprintln!("service: stopped");
    Ok(())
}

/// The business logic, written once: each user's spend per minute of event time (the
/// message timestamp) as `(user, window, total)`. The service splices it behind its topic;
/// the tests below run it under the test driver.
fn spend_per_minute(
    events: Input<Message>,
) -> impl Fragment<Message, Out = (String, TimeWindow, i64)> {
    pipeline! {
        events
            .try_map(|m: Message| m.json::<Event>())
            .key_by(|e: &Event| e.user.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .sum_by(|e: &Event| e.amount)
    }
}

/// Registers the pipeline and starts the job.
async fn start(args: &Args, mq_options: MqOptions) -> Result<JobClient, streaming::Error> {
    let config = RedisRuntimeConfig::builder()
        .job_name("service")
        .mq_options(mq_options)
        .watermark_idle_timeout(Some(Duration::from_secs(1)))
        .build()?;
    let env = RedisEnv::try_with_config(args.redis_url.as_str(), config)?;
    pipeline! {
        env.from_mq_topic(&args.topic, "service")
            .transform(spend_per_minute)
            .sink(RedisListSink::new("totals"))
    }?;
    env.start().await
}

/// Returns at the first Ctrl-C or SIGTERM.
async fn wait_for_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use streaming::testing::TestDriver;

    fn event(user: &str, amount: i64, at_ms: i64) -> Message {
        Message::new(format!(r#"{{"user":"{user}","amount":{amount}}}"#))
            .with_key(user)
            .with_timestamp_ms(at_ms)
    }

    #[test]
    fn spend_is_summed_per_user_and_minute_of_event_time() -> Result<(), streaming::Error> {
        let mut driver = TestDriver::new(spend_per_minute)?;
        for e in [
            event("ann", 12, 1_000),
            event("bob", 5, 30_000),
            event("ann", 3, 59_999),
        ] {
            driver.push_message(e)?;
        }
        // The topic's watermark passes the end of the first minute.
        driver.advance_watermark(59_999)?;
        let totals: Vec<(String, i64, i64)> = driver
            .output()
            .into_iter()
            .map(|(user, w, total)| (user, w.start(), total))
            .collect();
        assert_eq!(totals, [("ann".into(), 0, 15), ("bob".into(), 0, 5)]);
        driver.push_message(event("ann", 7, 61_000))?;
        driver.finish()?;
        let (user, window, total) = driver.output().remove(0);
        assert_eq!(
            (user.as_str(), window.start(), window.end(), total),
            ("ann", 60_000, 120_000, 7)
        );
        Ok(())
    }

    #[test]
    fn an_event_that_is_not_json_is_dead_lettered_and_the_rest_is_summed(
    ) -> Result<(), streaming::Error> {
        let mut driver = TestDriver::new(spend_per_minute)?;
        driver.push_message(event("ann", 12, 1_000))?;
        driver.push_message(
            Message::new("not json")
                .with_key("ann")
                .with_timestamp_ms(2_000),
        )?;
        driver.finish()?;
        let totals: Vec<(String, i64)> = driver
            .output()
            .into_iter()
            .map(|(u, _, t)| (u, t))
            .collect();
        assert_eq!(totals, [("ann".to_string(), 12)]);
        let dead = driver.dead_letters();
        assert_eq!(dead.len(), 1);
        // Bad input is never retried: one attempt.
        assert_eq!((dead[0].error_type, dead[0].attempts), ("decode", 1));
        assert_eq!(&dead[0].record.payload[..], b"not json");
        Ok(())
    }
}
