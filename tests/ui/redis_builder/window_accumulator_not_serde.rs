// Fails to compile at `.sink(..)`: on the Redis engine a window's accumulator is kept in
// Redis as JSON, and `Acc` here is not serde `Serialize + DeserializeOwned`.
use std::time::Duration;
use streaming::api::AggregateFunction;
use streaming::mq::Message;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::time::TumblingEventTimeWindows;

#[derive(Clone, Default)]
struct Acc {
    total: u64,
}

#[derive(Clone)]
struct Total;

impl AggregateFunction<u64> for Total {
    type Acc = Acc;
    type Out = u64;
    fn create_accumulator(&self) -> Acc {
        Acc::default()
    }
    fn add(&self, acc: &mut Acc, value: u64) {
        acc.total += value;
    }
    fn get_result(&self, acc: &Acc) -> u64 {
        acc.total
    }
    fn merge(&self, a: Acc, b: Acc) -> Acc {
        Acc {
            total: a.total + b.total,
        }
    }
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    env.from_mq_topic("orders", "billing")
        .map(|m: Message| m.payload.len() as u64)
        .key_by(|n: &u64| *n % 4)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60))?)
        .aggregate(Total)
        .sink(CollectSink::<u64>::new())?;
    Ok(())
}
