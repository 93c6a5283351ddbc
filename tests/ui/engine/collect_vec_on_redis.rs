#![allow(unused_imports)]
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::RedisEnv;

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let out: Vec<usize> = pipeline! {
        env.from_mq_topic_with_id("orders-v1", "orders", "billing")
            .map(|m: Message| m.payload.len())
            .collect_vec()
    }?;
    assert!(out.is_empty());
    Ok(())
}
