//! The operator part of the DSL reference, generated from the operator table so the docs
//! cannot drift from what the macro accepts. Rendered into the `streaming` crate docs by
//! `#![doc = streaming_macros::__dsl_reference!()]`; every example is a doctest there.

use crate::ops::{IdKind, Role, Stage, TABLE};

const PRELUDE: &str = "\
# #![allow(unused_imports)]
# use std::time::Duration;
# use streaming::api::*;
# use streaming::time::*;
# use streaming::{pipeline, BoxError, Error, MemoryEnv};
# fn main() -> Result<(), Error> {
# let env = MemoryEnv::new();
";

const POSTLUDE: &str = "# Ok(())\n# }\n";

/// The reference of every operator, as Markdown.
pub(crate) fn markdown() -> String {
    let mut out = String::new();
    type Member = fn(&crate::ops::OpSpec) -> bool;
    let groups: [(&str, Member); 5] = [
        ("Sources", |o| o.role == Role::Source),
        ("Stream operators", |o| {
            o.role == Role::Transform && o.variants.iter().any(|v| v.applies == Stage::Stream)
        }),
        ("Keyed operators", |o| {
            o.role == Role::Transform
                && !o.variants.iter().any(|v| v.applies == Stage::Stream)
                && o.variants.iter().any(|v| {
                    matches!(
                        v.applies,
                        Stage::Keyed | Stage::KeyedState | Stage::Processed
                    )
                })
        }),
        ("Window operators", |o| {
            o.role == Role::Transform && o.variants.iter().all(|v| v.applies == Stage::Windowed)
        }),
        ("Sinks", |o| o.role == Role::Sink),
    ];
    out.push_str("\n| operator | takes → gives | id kind | engines |\n|---|---|---|---|\n");
    for op in TABLE {
        let stages: Vec<String> = op
            .variants
            .iter()
            .map(|v| format!("{} → {}", v.applies.noun(), v.produces.noun()))
            .collect();
        let mut ids: Vec<String> = Vec::new();
        for v in op.variants {
            let id = match v.id {
                IdKind::None => "—".to_string(),
                IdKind::Position => "(position)".to_string(),
                IdKind::Kind(k) => format!("`{k}`"),
            };
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let engines: Vec<_> = op.engines.iter().map(|e| e.name()).collect();
        out.push_str(&format!(
            "| [`{}`](#{}) | {} | {} | {} |\n",
            op.signature().replace('|', "\\|"),
            op.name,
            stages.join("; ").replace('`', "").replace('|', "\\|"),
            ids.join(", "),
            engines.join(", ")
        ));
    }
    for (title, member) in groups {
        out.push_str(&format!("\n## {title}\n"));
        for op in TABLE.iter().filter(|o| member(o)) {
            out.push_str(&format!(
                "\n### `{}`\n\n`{}`\n\n{}\n\n",
                op.name,
                op.signature(),
                op.summary
            ));
            let stages: Vec<String> = op
                .variants
                .iter()
                .map(|v| format!("{} → {}", v.applies.noun(), v.produces.noun()))
                .collect();
            let engines: Vec<_> = op.engines.iter().map(|e| e.name()).collect();
            out.push_str(&format!(
                "- **Stage:** {}\n- **Engines:** {}\n\n",
                stages.join("; "),
                engines.join(", ")
            ));
            if op.example.is_empty() {
                out.push_str("(No example: no engine of this release runs it.)\n");
            } else {
                out.push_str("```rust\n");
                out.push_str(PRELUDE);
                out.push_str(op.example);
                out.push('\n');
                out.push_str(POSTLUDE);
                out.push_str("```\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_operator_is_documented_once() {
        let md = super::markdown();
        for op in crate::ops::TABLE {
            assert_eq!(
                md.matches(&format!("\n### `{}`\n", op.name)).count(),
                1,
                "{}",
                op.name
            );
        }
    }
}
