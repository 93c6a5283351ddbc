#![allow(unused_imports)]
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    pipeline! {
        env.from_collection(vec![1u64, 2, 3])
            .map(|n: u64| n + 1)
            .sink(CollectSink::new())
    }
}
