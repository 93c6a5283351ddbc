// A keyed co-process function takes the connected streams' key and element types, in
// order: `Enrich` takes `String` names, the second input has `u64` amounts. The error is
// at the function.
use streaming::api::{Collector, KeyedContext};
use streaming::{pipeline, BoxError, KeyedCoProcessFunction, MemoryEnv};

struct Enrich;

impl KeyedCoProcessFunction<u32, u32, String> for Enrich {
    type Out = String;
    fn process_element1(
        &mut self,
        _: u32,
        _: &mut KeyedContext<'_, u32>,
        _: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        Ok(())
    }
    fn process_element2(
        &mut self,
        _: String,
        _: &mut KeyedContext<'_, u32>,
        _: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        Ok(())
    }
}

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let amounts = env.from_collection(vec![5u64]);
        env.from_collection(vec![1u32])
            .connect(amounts)
            .key_by(|id: &u32| *id, |a: &u64| *a as u32)
            .process(Enrich)
            .collect_vec()
    };
    let _ = out;
}
