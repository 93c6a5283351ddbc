//! The `connect` operator.

use super::prelude::*;

/// The `connect` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "connect",
    role: Role::Transform,
    args: &[arg("other: a stream", Stream(Stage::Stream))],
    variants: &[on(Stage::Stream, Stage::Connected, IdKind::Position)],
    engines: BOTH,
    time: Time::Agrees,
    expansion: Expansion::Method,
    summary: "Pairs this stream with another one, of any element type (Flink `connect`), for a function per input: `co_map`, `co_flat_map`, or `key_by` with a key function per input. `other` is given as to `union`; both carry event time or neither does, and the watermark after it is the lowest of both inputs'.",
    example: r#"
let out = pipeline! {
    let words = env.from_elements(["ab", "c"]);
    env.from_elements([3u32, 4])
        .connect(words)
        .co_map(|n: u32| format!("count {n}"), |w: &str| format!("word {w}"))
        .collect_vec()
}?;
assert_eq!(out, ["count 3", "count 4", "word ab", "word c"]);
"#,
};
