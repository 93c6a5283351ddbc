// `union` of two topics on the Redis engine (registered, not started: no server needed).
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let refunds = env.from_mq_topic("refunds", "billing");
    pipeline! {
        env.from_mq_topic("orders", "billing")
            .union(refunds)
            .map(|m: Message| m.payload.len())
            .sink(CollectSink::new())
    }
}
