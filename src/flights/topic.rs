//! The fresh topic each Redis run of the flights jobs produces into.

use streaming::mq::{Mq, MqOptions};
use streaming::BoxError;

/// Connects to `url` (queue key prefix `mq_prefix`), creates the topic
/// `flights-{tag}-{pid}-{nanos}` with `partitions` partitions, runs `body` with the runtime,
/// the queue, its options and the topic name, then deletes the topic whatever `body`
/// returned (a failed delete is logged).
///
/// # Errors
/// Redis unreachable, the topic not created, or `body`'s error.
pub(crate) fn with_fresh_topic<R>(
    url: &str,
    mq_prefix: &str,
    tag: &str,
    partitions: u32,
    body: impl FnOnce(&tokio::runtime::Runtime, &Mq, MqOptions, &str) -> Result<R, BoxError>,
) -> Result<R, BoxError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let topic = format!("flights-{tag}-{}-{nanos}", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mq_opts = MqOptions::builder().key_prefix(mq_prefix).build()?;
    let mq = rt.block_on(Mq::connect(url, mq_opts.clone()))?;
    rt.block_on(mq.create_topic(&topic, partitions))?;
    let result = body(&rt, &mq, mq_opts, &topic);
    if let Err(e) = rt.block_on(mq.delete_topic(&topic)) {
        tracing::warn!(%topic, "could not delete the topic: {e}");
    }
    result
}
