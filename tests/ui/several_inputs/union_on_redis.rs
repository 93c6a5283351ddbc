// The Redis engine does not run pipelines with several inputs yet.
use streaming::redis::{CollectSink, RedisEnv};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let a = env.from_mq_topic("a", "g");
    let b = env.from_mq_topic("b", "g");
    a.union(b).sink(CollectSink::new())
}
