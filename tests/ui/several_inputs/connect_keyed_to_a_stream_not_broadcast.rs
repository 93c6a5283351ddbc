// A keyed stream connects to a broadcast stream, which `broadcast(descriptor)` makes; a
// stream that is not broadcast is refused at the argument (the builder's case is
// `broadcast_without_a_descriptor.rs`).
use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, Collector, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext,
};
use streaming::{pipeline, BoxError, MemoryEnv};

const RULES: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::new("rules");

struct Limits;

impl KeyedBroadcastProcessFunction<String, (String, u64), (String, u64), String, u64> for Limits {
    type Out = String;
    fn process_element(
        &mut self,
        _: (String, u64),
        _: &mut ReadOnlyBroadcastContext<'_, '_, String, String, u64>,
        _: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    fn process_broadcast_element(
        &mut self,
        (name, limit): (String, u64),
        ctx: &mut BroadcastContext<'_, '_, String, String, u64>,
        _: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.broadcast_state()?.put(name, limit);
        Ok(())
    }
}

fn main() {
    let env = MemoryEnv::new();
    let _ = RULES;
    let out = pipeline! {
        let rules = env.from_collection(vec![("limit".to_string(), 10u64)]);
        env.from_collection(vec![("ann".to_string(), 5u64)])
            .key_by(|a: &(String, u64)| a.0.clone())
            .connect(rules)
            .process(Limits)
            .collect_vec()
    };
    let _ = out;
}
