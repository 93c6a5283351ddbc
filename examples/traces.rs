//! The Redis engine's tracing spans exported with OpenTelemetry: a keyed count over a
//! topic, its `take`, `batch`, `commit` and `checkpoint` spans (each with `job`, `topic`,
//! `group`, `partition`) sent through `tracing-opentelemetry` to the OpenTelemetry SDK,
//! here with the stdout exporter (each span printed as text: name, ids, times, attributes).
//!
//! ```text
//! cargo run --example traces -- [--redis-url URL] [--messages N]
//! ```
//! Defaults: `--redis-url` from `REDIS_URL`, else `redis://127.0.0.1:6379` (nothing is
//! started for you), `--messages 20`. The topic (`traces`, 2 partitions) and the job's keys
//! live under a key prefix of their own (`traces-<pid>`); the example deletes them at the end.
//!
//! For a collector (Jaeger, Tempo, an OpenTelemetry Collector) put the
//! `opentelemetry-otlp` crate's `SpanExporter` where this example builds
//! `opentelemetry_stdout::SpanExporter`, and a batch span processor
//! (`with_batch_exporter`) in place of the simple one. Only the engine's spans are
//! exported (filter `streaming=info`); the engine creates none when no subscriber wants
//! them.

use std::time::{Duration, Instant};

use clap::Parser;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, MqOptions, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{CollectSink, RedisEnv, RedisRuntimeConfig};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

#[derive(Parser, Debug)]
#[command(about = "The Redis engine's spans exported with OpenTelemetry (stdout exporter)")]
struct Args {
    /// The Redis server (default: the `REDIS_URL` environment variable, else the local one).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    redis_url: String,
    /// Messages to count.
    #[arg(long, default_value_t = 20)]
    messages: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // The OpenTelemetry pipeline: spans → the stdout exporter, each as it ends.
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .with_resource(
            Resource::builder()
                .with_service_name("streaming-traces-example")
                .build(),
        )
        .build();
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("streaming"));
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("streaming=info"))
        .with(otel)
        .init();

    let prefix = format!("traces-{}", std::process::id());
    let mq_options = MqOptions::builder().key_prefix(prefix.as_str()).build()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mq = rt.block_on(Mq::connect(args.redis_url.as_str(), mq_options.clone()))?;
    rt.block_on(mq.create_topic("traces", 2))?;
    let messages: Vec<OutgoingMessage> = (0..args.messages)
        .map(|i| OutgoingMessage::new(format!("m{i}")).key(format!("k{}", i % 4)))
        .collect();
    rt.block_on(mq.producer().send_batch("traces", &messages))?;

    let config = RedisRuntimeConfig::builder()
        .job_name("traces")
        .state_key_prefix(format!("{prefix}:state"))
        .checkpoint_key_prefix(format!("{prefix}:ck:"))
        .mq_options(mq_options)
        .build()?;
    let env = RedisEnv::try_with_config(args.redis_url.as_str(), config)?;
    let counted = CollectSink::new();
    let earliest = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .build()?;
    env.from_mq_topic_with_options("traces", "counter", earliest)
        .map(|m: Message| m.key.map(|k| k.to_string()).unwrap_or_default())
        .key_by(|k: &String| k.clone())
        .process(|k: String, ctx, out| {
            let mut n = ctx.state(&COUNT)?;
            let c = n.value() + 1;
            n.update(c);
            out.collect((k, c));
            Ok(())
        })
        .sink(counted.clone())?;
    let job = env.blocking_start()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while counted.len() < args.messages {
        if Instant::now() > deadline {
            return Err("the job did not count every message within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    job.blocking_trigger_checkpoint_now()?;
    job.blocking_shutdown(Duration::from_secs(10));
    rt.block_on(mq.delete_topic("traces"))?;
    // The job's state and checkpoint keys (one server: SCAN finds them all).
    let mut conn = redis::Client::open(args.redis_url.as_str())?.get_connection()?;
    let keys: Vec<String> = redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("MATCH")
        .arg(format!("{prefix}:*"))
        .clone()
        .iter(&mut conn)?
        .collect();
    for key in keys {
        redis::cmd("DEL").arg(key).query::<()>(&mut conn)?;
    }
    // Sends what is still buffered.
    provider.shutdown()?;
    eprintln!("traces: counted {} messages", counted.len());
    Ok(())
}
