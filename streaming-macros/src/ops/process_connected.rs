//! The `process` operator of keyed connected streams.

use super::prelude::*;

/// The row of `process` on keyed connected streams.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process",
    role: Role::Transform,
    args: &[arg("function: impl KeyedCoProcessFunction<K, A, B>", Expr)],
    variants: &[on(
        Stage::KeyedConnected,
        Stage::Stream,
        IdKind::Kind("process"),
    )],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs a `KeyedCoProcessFunction` (Flink's): `process_element1` per element of the first input, `process_element2` per element of the second, `on_timer` per due timer; keyed state and timers belong to the key, whichever input the element came from. A function of other input or key types is a compile error at the function.",
    example: r#"
use streaming::KeyedCoProcessFunction;
// Each order with the latest name of its customer (a stream-table join).
const NAME: ValueStateDescriptor<String> = ValueStateDescriptor::persistent("name", String::new());
struct Enrich;
impl KeyedCoProcessFunction<u32, (u32, &'static str), (u32, u64)> for Enrich {
    type Out = String;
    fn process_element1(
        &mut self,
        customer: (u32, &'static str),
        ctx: &mut KeyedContext<'_, u32>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.state(&NAME)?.update(customer.1.to_string());
        Ok(())
    }
    fn process_element2(
        &mut self,
        order: (u32, u64),
        ctx: &mut KeyedContext<'_, u32>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        out.collect(format!("{}: {}", ctx.state(&NAME)?.value(), order.1));
        Ok(())
    }
}
let out = pipeline! {
    let orders = env.from_elements([(1u32, 30u64), (2, 5)]);
    env.from_elements([(1u32, "ada"), (2, "bob")])
        .connect(orders)
        .key_by(|c: &(u32, &str)| c.0, |o: &(u32, u64)| o.0)
        .process(Enrich)
        .collect_vec()
}?;
assert_eq!(out, ["ada: 30", "bob: 5"]);
"#,
};
