// One copy of a Redis pipeline's sink runs per partition: it must be `Clone + Send + 'static`.
use streaming::api::Sink;
use streaming::mq::Message;
use streaming::redis::RedisEnv;
use streaming::BoxError;

struct Stdout;

impl Sink<String> for Stdout {
    fn invoke(&mut self, value: String) -> Result<(), BoxError> {
        println!("{value}");
        Ok(())
    }
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    env.from_mq_topic("orders", "billing")
        .map(|m: Message| m.id.to_string())
        .sink(Stdout)?;
    Ok(())
}
