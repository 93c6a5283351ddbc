use streaming::mq::Message;
use streaming::redis::{RedisEnv, RedisListSink};
use streaming::pipeline;

#[derive(serde::Serialize, Clone)]
struct OrderEvent {
    cents: i64,
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:1/")?;
    pipeline! {
        env.from_mq_topic("orders", "totals")
            .map(|m: Message| m.timestamp_ms)
            .sink(RedisListSink::<OrderEvent>::new("totals"))
    }?;
    Ok(())
}
