// A keyed co-process function must take the connected streams' element types, in order.
use streaming::api::{Collector, KeyedContext};
use streaming::{BoxError, KeyedCoProcessFunction, MemoryEnv};

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
    let ids = env.from_collection(vec![1u32]);
    let amounts = env.from_collection(vec![5u64]);
    let _ = ids
        .connect(amounts)
        .key_by(|id: &u32| *id, |a: &u64| *a as u32)
        .process(Enrich)
        .collect_vec();
}
