// The broadcast map is read beside the keyed stream's state and timers: a broadcast
// stream connects only to a keyed stream (the builder has no unkeyed broadcast process).
// The error is at `connect`.
use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, Collector, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext, ValueStateDescriptor,
};
use streaming::{pipeline, BoxError, MemoryEnv};

const RULES: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::new("rules");
const OVER: ValueStateDescriptor<u64> = ValueStateDescriptor::new("over", 0);

struct Limits;

impl KeyedBroadcastProcessFunction<String, (String, u64), (String, u64), String, u64> for Limits {
    type Out = u64;
    fn process_element(
        &mut self,
        _: (String, u64),
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, u64>,
    ) -> Result<(), BoxError> {
        let n = ctx.state(&OVER)?.value() + 1;
        ctx.state(&OVER)?.update(n);
        out.collect(n);
        Ok(())
    }
    fn process_broadcast_element(
        &mut self,
        (name, limit): (String, u64),
        ctx: &mut BroadcastContext<'_, '_, String, String, u64>,
        _: &mut Collector<'_, u64>,
    ) -> Result<(), BoxError> {
        ctx.broadcast_state()?.put(name, limit);
        Ok(())
    }
}

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let rules = env.from_collection(vec![("limit".to_string(), 10u64)]).broadcast(RULES);
        env.from_collection(vec![("ann".to_string(), 5u64)])
            .connect(rules)
            .process(Limits)
            .collect_vec()
    };
    let _ = out;
}
