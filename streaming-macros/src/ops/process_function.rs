//! The `process_function` operator.

use super::prelude::*;

/// The `process_function` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process_function",
    role: Role::Transform,
    args: &[arg("function: impl KeyedProcessFunction<K, T>", Expr)],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("process"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs a `KeyedProcessFunction` (with `on_timer`).",
    example: r#"
struct Echo;
impl KeyedProcessFunction<i32, i32> for Echo {
    type Out = i32;
    fn process_element(&mut self, v: i32, _: &mut KeyedContext<'_, i32>, out: &mut Collector<'_, i32>) -> Result<(), BoxError> {
        out.collect(v);
        Ok(())
    }
}
let out = pipeline! { env.from_elements([7]).key_by(|x: &i32| *x).process_function(Echo).collect_vec() }?;
assert_eq!(out, [7]);
"#,
};
