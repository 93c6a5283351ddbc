// The key function names a type that is not the element type: one error, at that type (no
// follow-on error at `window`).
use std::time::Duration;
use streaming::mq::Message;
use streaming::redis::{RedisEnv, RedisListSink};
use streaming::time::TumblingEventTimeWindows;
use streaming::pipeline;

#[derive(serde::Serialize, serde::Deserialize, Clone)]
struct OrderEvent {
    customer: String,
    cents: i64,
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:1/")?;
    pipeline! {
        env.from_mq_topic("orders", "totals")
            .key_by(|o: &OrderEvent| o.customer.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .count()
            .map(|(customer, _, n): (String, _, u64)| (customer, n))
            .sink(RedisListSink::new("totals"))
    }?;
    let _ = Message::new("");
    Ok(())
}
