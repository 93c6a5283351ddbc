// One copy of a Redis pipeline runs per partition on its subtask's thread: user functions
// must be `Clone + Send + 'static` (an `Rc` capture is not `Send`).
use std::rc::Rc;
use streaming::mq::Message;
use streaming::redis::{CollectSink, RedisEnv};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let suffix = Rc::new(String::from("!"));
    env.from_mq_topic("orders", "billing")
        .map(move |m: Message| format!("{}{suffix}", m.id))
        .sink(CollectSink::new())?;
    Ok(())
}
