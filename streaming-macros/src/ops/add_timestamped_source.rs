//! The `add_timestamped_source` operator.

use super::prelude::*;

/// The `add_timestamped_source` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "add_timestamped_source",
    role: Role::Source,
    args: &[arg("source: impl Source<T>", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Timed,
    expansion: Expansion::Method,
    summary: "A stream fed by a user `Source` that gives every record its event time with `collect_with_timestamp` (`collect` fails the run); source id `source-{n}`.",
    example: r#"
struct Two;
impl Source<u8> for Two {
    fn run<C: SourceContext<u8>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        ctx.collect_with_timestamp(1, 100)?;
        ctx.collect_with_timestamp(2, 1_500)
    }
}
let out = pipeline! {
    env.add_timestamped_source(Two)
        .key_by(|_: &u8| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .count()
        .map(|(_, w, n): ((), TimeWindow, u64)| (w.start(), n))
        .collect_vec()
}?;
assert_eq!(out, [(0, 1), (1000, 1)]);
"#,
};
