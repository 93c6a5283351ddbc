// The inputs of one pipeline come from one engine: a topic and a memory collection cannot
// be combined.
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::MemoryEnv;

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let memory = MemoryEnv::new();
    pipeline! {
        let backfill = memory.from_collection(Vec::<Message>::new());
        env.from_mq_topic("orders", "billing").union(backfill).sink(CollectSink::new())
    }
}
