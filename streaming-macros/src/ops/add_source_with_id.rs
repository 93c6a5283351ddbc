//! The `add_source_with_id` operator.

use super::prelude::*;

/// The `add_source_with_id` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "add_source_with_id",
    role: Role::Source,
    args: &[arg("\"source-id\"", SourceId), arg("source: impl Source<T>", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Untimed,
    expansion: Expansion::Method,
    summary: "Like `add_source` (no timestamps), with an explicit source id (`[A-Za-z0-9_.-]+`, checked at compile time when it is a literal), which prefixes the operator ids.",
    example: r#"
struct One;
impl Source<u8> for One {
    fn run<C: SourceContext<u8>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        ctx.collect(0)
    }
}
// A failing record stops the run (by default it is dead-lettered).
env.on_record_error(streaming::memory::OnRecordError::StopRun);
let err = pipeline! { env.add_source_with_id("numbers", One).map(|x: u8| 1 / x).print() }.unwrap_err();
assert!(err.to_string().contains("numbers/1:map"));
"#,
};
