// Windows run on the Redis engine too: the window's state (key, accumulator, trigger) is
// kept in Redis as JSON.
use std::time::Duration;
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::time::TumblingEventTimeWindows;

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    pipeline! {
        env.from_mq_topic("orders", "billing")
            .map(|m: Message| m.payload.len() as u64)
            .key_by(|n: &u64| *n % 4)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .allowed_lateness(Duration::from_secs(5))
            .count()
            .sink(CollectSink::new())
    }
}
