// A keyed broadcast process function takes the keyed stream's key and element types, the
// broadcast stream's element type and the descriptor's map types, in order: `Limits`
// reads a map of `u32` limits, the descriptor's map holds `u64`. The error is at the
// function.
use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, Collector, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext,
};
use streaming::{pipeline, BoxError, MemoryEnv};

const RULES: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::new("rules");

struct Limits;

impl KeyedBroadcastProcessFunction<String, (String, u64), (String, u64), String, u32> for Limits {
    type Out = String;
    fn process_element(
        &mut self,
        _: (String, u64),
        _: &mut ReadOnlyBroadcastContext<'_, '_, String, String, u32>,
        _: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    fn process_broadcast_element(
        &mut self,
        _: (String, u64),
        _: &mut BroadcastContext<'_, '_, String, String, u32>,
        _: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        Ok(())
    }
}

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let rules = env.from_collection(vec![("limit".to_string(), 10u64)]).broadcast(RULES);
        env.from_collection(vec![("ann".to_string(), 5u64)])
            .key_by(|a: &(String, u64)| a.0.clone())
            .connect(rules)
            .process(Limits)
            .collect_vec()
    };
    let _ = out;
}
