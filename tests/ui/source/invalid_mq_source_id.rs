#![allow(unused_imports)]
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    pipeline! {
        env.from_mq_topic_with_id("orders/v1", "orders", "billing")
            .map(|m: Message| m.payload.len())
            .sink(CollectSink::new())
    }
}
