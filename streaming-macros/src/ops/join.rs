//! The `join` operator: the window join.

use super::prelude::*;

/// The `join` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "join",
    role: Role::Transform,
    args: &[arg("|&first, &second| -> output", Expr)],
    variants: &[on(
        Stage::CoWindowed,
        Stage::Stream,
        IdKind::Kind("window-apply"),
    )],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Emits the function's result for every pair of a first-input and a second-input element in the same window of the same key, per firing (an inner join: Flink `join(..).where(..).equalTo(..).window(..).apply(..)`).",
    example: r#"
let out = pipeline! {
    let payments = env.from_timestamped_collection([((7u32, 30u64), 400), ((8, 5), 1_200)]);
    env.from_timestamped_collection([((7u32, "ada"), 100), ((8, "bob"), 900)])
        .connect(payments)
        .key_by(|o: &(u32, &str)| o.0, |p: &(u32, u64)| p.0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .join(|o: &(u32, &str), p: &(u32, u64)| (o.1, p.1))
        .collect_vec()
}?;
assert_eq!(out, [("ada", 30)]); // bob's payment is in the next second
"#,
};
