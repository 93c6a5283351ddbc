// The inputs of one pipeline come from one engine: a Redis topic and a memory collection
// cannot be combined.
use streaming::mq::Message;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::MemoryEnv;

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let a = env.from_mq_topic("a", "g");
    let b = MemoryEnv::new().from_collection(Vec::<Message>::new());
    a.union(b).sink(CollectSink::new())
}
