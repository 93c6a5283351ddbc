//! The `add_source` operator.

use super::prelude::*;

/// The `add_source` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "add_source",
    role: Role::Source,
    args: &[arg("source: impl Source<T>", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Untimed,
    expansion: Expansion::Method,
    summary: "A stream fed by a user `Source` that emits without timestamps (`collect`): its event time is never chosen (see `add_timestamped_source`); source id `source-{n}`.",
    example: r#"
struct Two;
impl Source<u8> for Two {
    fn run<C: SourceContext<u8>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        ctx.collect(1)?;
        ctx.collect(2)
    }
}
let out = pipeline! { env.add_source(Two).collect_vec() }?;
assert_eq!(out, [1, 2]);
"#,
};
