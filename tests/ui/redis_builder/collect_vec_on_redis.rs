// `collect_vec` runs a bounded pipeline at once: memory engine only.
use streaming::mq::Message;
use streaming::redis::RedisEnv;

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let ids = env.from_mq_topic("orders", "billing").map(|m: Message| m.id).collect_vec()?;
    let _ = ids;
    Ok(())
}
