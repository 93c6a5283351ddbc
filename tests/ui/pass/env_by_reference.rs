//! `pipeline!` takes its environment by value or by reference: a helper function that is
//! given `&RedisEnv` or `&MemoryEnv` registers and runs pipelines on it.
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::MemoryEnv;

fn register_lengths(env: &RedisEnv, out: &CollectSink<usize>) -> Result<(), streaming::Error> {
    pipeline! {
        env.from_mq_topic("words", "lengths")
            .map(|m: Message| m.payload.len())
            .sink(out.clone())
    }
}

fn register_with_id(env: &&RedisEnv) -> Result<(), streaming::Error> {
    pipeline! {
        env.from_mq_topic_with_id("src", "words", "ids")
            .map(|m: Message| m.id.clone())
            .print()
    }
}

fn doubled(env: &MemoryEnv) -> Result<Vec<i32>, streaming::Error> {
    pipeline! {
        env.from_collection(vec![1, 2, 3])
            .map(|x: i32| x * 2)
            .collect_vec()
    }
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let out = CollectSink::new();
    register_lengths(&env, &out)?;
    register_with_id(&&env)?;
    assert_eq!(doubled(&MemoryEnv::new())?, [2, 4, 6]);
    Ok(())
}
