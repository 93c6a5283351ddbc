// Streams named with `let` on the Redis engine: an interval join of two topics, a keyed
// co-process function and a window join (registered, not started: no server needed).
use std::time::Duration;
use streaming::api::{Collector, KeyedContext, ValueStateDescriptor};
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::time::TumblingEventTimeWindows;
use streaming::{BoxError, KeyedCoProcessFunction};

/// (customer, amount) from a message `customer:amount`.
fn parse(m: &Message) -> (String, i64) {
    let text = m.text().unwrap_or_default();
    let (customer, amount) = text.split_once(':').unwrap_or((text, "0"));
    (customer.to_string(), amount.parse().unwrap_or(0))
}

const LAST: ValueStateDescriptor<i64> = ValueStateDescriptor::persistent("last", 0);

#[derive(Clone)]
struct Latest;
impl KeyedCoProcessFunction<String, (String, i64), (String, i64)> for Latest {
    type Out = String;
    fn process_element1(
        &mut self,
        price: (String, i64),
        ctx: &mut KeyedContext<'_, String>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.state(&LAST)?.update(price.1);
        Ok(())
    }
    fn process_element2(
        &mut self,
        order: (String, i64),
        ctx: &mut KeyedContext<'_, String>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        out.collect(format!("{} x {}", order.1, ctx.state(&LAST)?.value()));
        Ok(())
    }
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    pipeline! {
        let payments = env.from_mq_topic("payments", "billing").map(|m: Message| parse(&m));
        env.from_mq_topic("orders", "billing")
            .map(|m: Message| parse(&m))
            .key_by(|o: &(String, i64)| o.0.clone())
            .interval_join(payments.key_by(|p: &(String, i64)| p.0.clone()))
            .between(0, 600_000)
            .process(|o: &(String, i64), p: &(String, i64)| (o.0.clone(), p.1 - o.1))
            .sink(CollectSink::new())
    }?;
    pipeline! {
        let orders = env.from_mq_topic("shop-orders", "pricing").map(|m: Message| parse(&m));
        env.from_mq_topic("prices", "pricing")
            .map(|m: Message| parse(&m))
            .connect(orders)
            .key_by(|p: &(String, i64)| p.0.clone(), |o: &(String, i64)| o.0.clone())
            .process(Latest)
            .sink(CollectSink::new())
    }?;
    pipeline! {
        let views = env.from_mq_topic("views", "ads").map(|m: Message| parse(&m));
        env.from_mq_topic("clicks", "ads")
            .map(|m: Message| parse(&m))
            .connect(views)
            .key_by(|c: &(String, i64)| c.0.clone(), |v: &(String, i64)| v.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .join(|c: &(String, i64), v: &(String, i64)| (c.0.clone(), c.1 + v.1))
            .sink(CollectSink::new())
    }
}
