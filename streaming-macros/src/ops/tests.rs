//! Tests of the operator table.

use super::*;

/// Rows of one name apply to different stages (the stage picks the row) and share
/// their role and their kind of arguments' parsing.
#[test]
fn rows_of_a_name_apply_to_different_stages_and_every_operator_applies_somewhere() {
    for (i, op) in TABLE.iter().enumerate() {
        assert!(!op.variants.is_empty(), "{}", op.name);
        assert!(!op.engines.is_empty(), "{}", op.name);
        for other in TABLE[i + 1..].iter().filter(|o| o.name == op.name) {
            // The one-input meaning, if the name has one, is the first row: its
            // reference section keeps the plain name.
            if !op.of_several_inputs() || !other.of_several_inputs() {
                assert!(!lookup(op.name).unwrap().of_several_inputs(), "{}", op.name);
            }
            assert_eq!(other.role, op.role, "{}", op.name);
            assert_eq!(
                other.args.iter().any(|a| a.kind == ArgKind::StateDecls),
                op.args.iter().any(|a| a.kind == ArgKind::StateDecls),
                "{}",
                op.name
            );
            for v in op.variants {
                assert!(
                    other.variant_at(v.applies).is_none(),
                    "two rows of `{}` apply to {}",
                    op.name,
                    v.applies
                );
            }
        }
    }
}

/// Every builder method (and every memory-engine source and terminal operation) is an operator (drift detector: a method
/// added to the core's builder fails this test until it joins the table).
#[test]
fn the_table_covers_the_memory_builder() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../streaming/src");
    let not_operators = [
        "new",
        "enable_checkpointing",
        "checkpoint_coordinator",
        "next_operator_id",
        "partitions",
        // The environment's failing-record policy, not an operator.
        "on_record_error",
        "record_error_policy",
        // Connected streams as one stream of `CoInput`s: the builder's way to use any
        // stream operator on both inputs, which `co_map` and `key_by` cover here.
        "tagged",
    ];
    let files = [
        "dataflow/stream.rs",
        "dataflow/keyed.rs",
        "dataflow/windowed.rs",
        "dataflow/union.rs",
        "dataflow/interval_join.rs",
        "dataflow/window_join.rs",
        "dataflow/broadcast.rs",
        "memory/env.rs",
        "memory/partition.rs",
        "memory/run.rs",
        "memory/timestamps.rs",
    ];
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub fn ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !not_operators.contains(&name.as_str()) {
                assert!(
                    lookup(&name).is_some(),
                    "builder method `{name}` ({file}) is not in the operator table"
                );
            }
        }
    }
}

#[test]
fn suggestions() {
    assert_eq!(did_you_mean("flatmap"), Some("flat_map"));
    assert_eq!(did_you_mean("keyby"), Some("key_by"));
    assert_eq!(did_you_mean("collect"), Some("collect_vec"));
    assert_eq!(did_you_mean("windw"), Some("window"));
    assert_eq!(did_you_mean("zzzzzz"), None);
}
