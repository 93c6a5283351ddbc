// Broadcast state in `pipeline!` on the Redis engine: a rules topic (of one partition)
// broadcast to a keyed topic (registered, not started: no server needed).
use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, Collector, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext, ValueStateDescriptor,
};
use streaming::mq::Message;
use streaming::pipeline;
use streaming::redis::{CollectSink, RedisEnv};
use streaming::BoxError;

/// (name, value) from a message `name:value`.
fn parse(m: &Message) -> (String, u64) {
    let text = m.text().unwrap_or_default();
    let (name, value) = text.split_once(':').unwrap_or((text, "0"));
    (name.to_string(), value.parse().unwrap_or(0))
}

const LIMITS: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::persistent("limits");
const OVER: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("over", 0);

#[derive(Clone)]
struct OverLimit;
impl KeyedBroadcastProcessFunction<String, (String, u64), (String, u64), String, u64> for OverLimit {
    type Out = String;
    fn process_element(
        &mut self,
        (user, amount): (String, u64),
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let limit = ctx.broadcast_state()?.get(&"limit".to_string()).copied();
        if limit.is_some_and(|limit| amount > limit) {
            let n = ctx.state(&OVER)?.value() + 1;
            ctx.state(&OVER)?.update(n);
            out.collect(format!("{user}: {amount} ({n})"));
        }
        Ok(())
    }
    fn process_broadcast_element(
        &mut self,
        (name, limit): (String, u64),
        ctx: &mut BroadcastContext<'_, '_, String, String, u64>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.broadcast_state()?.put(name, limit);
        Ok(())
    }
}

fn main() -> Result<(), streaming::Error> {
    let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
    pipeline! {
        let limits = env
            .from_mq_topic("limits", "risk")
            .map(|m: Message| parse(&m))
            .broadcast(LIMITS);
        env.from_mq_topic("payments", "risk")
            .map(|m: Message| parse(&m))
            .key_by(|p: &(String, u64)| p.0.clone())
            .connect(limits)
            .process(OverLimit)
            .sink(CollectSink::new())
    }
}
