// Fails to compile at `.sink(..)`: the Redis source registers a pipeline only when every
// stage builds on the Redis runtime, and a window's state is not `Persist` (issue #6).
use std::time::Duration;
use streaming::mq::Message;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::time::{TimeWindow, TumblingEventTimeWindows};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::create("redis://127.0.0.1:6379/")?;
    env.from_mq_topic("orders", "billing")
        .map(|m: Message| m.payload.len() as u64)
        .key_by(|n: &u64| *n % 4)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60))?)
        .count()
        .sink(CollectSink::<(u64, TimeWindow, u64)>::new())?;
    Ok(())
}
