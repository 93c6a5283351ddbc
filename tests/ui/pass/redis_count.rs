//! A keyed count on the Redis engine: `.state(..)` gives a descriptor the engine can keep,
//! the macro's value is the registration's result.
use std::time::Duration;
use streaming::mq::{Message, StartPolicy, SubscriptionOptions};
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    let out = CollectSink::new();
    let registered: Result<(), streaming::Error> = pipeline! {
        env.from_mq_topic("words", "counter")
            .map(|m: Message| m.text().unwrap_or_default().to_string())
            .filter(|w: &String| !w.is_empty())
            .key_by(|w: &String| w.clone())
            .state(count: ValueState<u64> = 0)
            .process(|w: String, ctx, out| {
                let mut count = ctx.state(count)?;
                let n = count.value() + 1;
                count.update(n);
                out.collect((w, n));
                Ok(())
            })
            .sink(out.clone())
    };
    registered?;
    let options = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .poll_timeout(Duration::from_millis(20))
        .build()?;
    pipeline! {
        env.from_mq_topic_with_options("words", "lengths", options)
            .map(|m: Message| m.payload.len() as u64)
            .key_by(|n: &u64| n % 2)
            .sum()
            .print_with_prefix("len")
    }?;
    Ok(())
}
