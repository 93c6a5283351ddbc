//! The operator part of the DSL reference, generated from the operator table so the docs
//! cannot drift from what the macro accepts. Rendered into the `streaming` crate docs by
//! `#![doc = streaming_macros::__dsl_reference!()]`; every example is a doctest there
//! (`cargo test -p streaming --doc`).

use crate::ops::{Engine, IdKind, OpSpec, Role, Stage, TABLE};

/// The hidden lines before an example on the memory engine.
const MEMORY_PRELUDE: &str = "\
# #![allow(unused_imports)]
# use std::time::Duration;
# use streaming::api::*;
# use streaming::time::*;
# use streaming::{pipeline, BoxError, Error, MemoryEnv};
# fn main() -> Result<(), Error> {
# let env = MemoryEnv::new();
";

/// The hidden lines before an example on the Redis engine.
const REDIS_PRELUDE: &str = "\
# #![allow(unused_imports)]
# use std::time::Duration;
# use streaming::mq::{Message, StartPolicy, SubscriptionOptions};
# use streaming::redis::{CollectSink, RedisEnv};
# use streaming::time::*;
# use streaming::{pipeline, Error};
# fn main() -> Result<(), Error> {
# let env = RedisEnv::try_new(\"redis://127.0.0.1:6379/\")?;
";

const POSTLUDE: &str = "# Ok(())\n# }\n";

type Member = fn(&OpSpec) -> bool;

/// The sections of the reference and the operators each lists.
const GROUPS: [(&str, Member); 6] = [
    ("Sources", |o| o.role == Role::Source),
    ("Stream operators", |o| {
        o.role == Role::Transform
            && !o.of_several_inputs()
            && o.variants.iter().any(|v| v.applies == Stage::Stream)
    }),
    ("Keyed operators", |o| {
        o.role == Role::Transform
            && !o.of_several_inputs()
            && !o.variants.iter().any(|v| v.applies == Stage::Stream)
            && o.variants.iter().any(|v| {
                matches!(
                    v.applies,
                    Stage::Keyed | Stage::KeyedState | Stage::Processed
                )
            })
    }),
    ("Window operators", |o| {
        o.role == Role::Transform
            && !o.of_several_inputs()
            && o.variants
                .iter()
                .all(|v| matches!(v.applies, Stage::Windowed | Stage::CoWindowed))
    }),
    ("Several inputs", |o| {
        o.role == Role::Transform && o.of_several_inputs()
    }),
    ("Sinks", |o| o.role == Role::Sink),
];

/// The reference of every operator, as Markdown.
pub(crate) fn markdown() -> String {
    let mut out = table();
    for (title, member) in GROUPS {
        out.push_str(&format!("\n## {title}\n"));
        for op in TABLE.iter().filter(|o| member(o)) {
            out.push_str(&section(op));
        }
    }
    out
}

/// The summary table: one row per operator.
fn table() -> String {
    let mut out =
        String::from("\n| operator | takes → gives | id kind | engines |\n|---|---|---|---|\n");
    for op in TABLE {
        let mut ids: Vec<String> = Vec::new();
        for v in op.variants {
            let id = match v.id {
                IdKind::None => "—".to_string(),
                IdKind::Position => "(position)".to_string(),
                IdKind::Positions(n) => format!("({n} positions)"),
                IdKind::Kind(k) => format!("`{k}`"),
                IdKind::Fragment => "(the fragment's)".to_string(),
            };
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        out.push_str(&format!(
            "| [`{}`](#{}) | {} | {} | {} |\n",
            op.signature().replace('|', "\\|"),
            anchor(op),
            stages(op).replace('`', "").replace('|', "\\|"),
            ids.join(", "),
            engines(op)
        ));
    }
    out
}

/// The section of one operator: signature, summary, stages, engines and its example.
fn section(op: &OpSpec) -> String {
    let redis_only = op.engines == [Engine::Redis];
    let (fence, prelude) = if redis_only {
        ("```rust,no_run\n", REDIS_PRELUDE)
    } else {
        ("```rust\n", MEMORY_PRELUDE)
    };
    format!(
        "\n### {}\n\n`{}`\n\n{}\n\n- **Stage:** {}\n- **Engines:** {}\n\n{fence}{prelude}{}\n{POSTLUDE}```\n",
        heading(op),
        op.signature(),
        op.summary,
        stages(op),
        engines(op),
        op.example.trim_matches('\n'),
    )
}

/// Whether `op` is the first row of its name (a later row is another meaning of it).
fn is_first_of_its_name(op: &OpSpec) -> bool {
    TABLE
        .iter()
        .find(|o| o.name == op.name)
        .is_some_and(|first| first.is(op))
}

/// The section heading: the name, and for a later row of a name the stage it applies to
/// ("`process` on keyed connected streams").
fn heading(op: &OpSpec) -> String {
    if is_first_of_its_name(op) {
        format!("`{}`", op.name)
    } else {
        format!("`{}` on {}", op.name, op.variants[0].applies.noun())
    }
}

/// The id rustdoc gives the heading: its text, lower-case, spaces as `-`.
fn anchor(op: &OpSpec) -> String {
    heading(op)
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| {
            if c == ' ' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// "a stream → a keyed stream; …"
fn stages(op: &OpSpec) -> String {
    op.variants
        .iter()
        .map(|v| format!("{} → {}", v.applies.noun(), v.produces.noun()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// "memory, redis"
fn engines(op: &OpSpec) -> String {
    op.engines
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_operator_is_documented_once_with_an_example() {
        let md = super::markdown();
        for op in crate::ops::TABLE {
            assert_eq!(
                md.matches(&format!("\n### {}\n", super::heading(op)))
                    .count(),
                1,
                "{}",
                op.name
            );
            assert!(
                md.contains(&format!("](#{})", super::anchor(op))),
                "{}",
                op.name
            );
            assert!(!op.example.trim().is_empty(), "{} has no example", op.name);
        }
    }
}
