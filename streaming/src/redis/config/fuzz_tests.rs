//! Hostile configuration files: any document, in TOML or JSON, either fails with an
//! [`Error::InvalidConfig`]-style deserialization error or gives a configuration that
//! holds every rule `build()` enforces — never a panic, never an unchecked value.

use super::*;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Option names of the engine, of its nested queue options and of the checkpoint group,
/// and a few that do not exist.
const NAMES: &[&str] = &[
    "job_name",
    "job_instance_id",
    "state_key_prefix",
    "state_ttl",
    "keyed_state_shard_count",
    "state_cache_max_entries",
    "hot_key_policy",
    "hot_key_throttle_max",
    "pipeline_parallelism",
    "timer_threads",
    "mdc_sample_rate",
    "ack_mode",
    "processing_error_result",
    "watermark_out_of_orderness",
    "watermark_idle_timeout",
    "window_max_fires_per_record",
    "event_time_timer_max_size",
    "commit_replica_wait",
    "stalled_after",
    "checkpoint_interval",
    "checkpoint_threads",
    "defer_ack_until_checkpoint",
    "leader_lease_ttl",
    "leader_renew_interval",
    "state_schema_mismatch_policy",
    "jobname",
    "",
];
const MQ_NAMES: &[&str] = &[
    "key_prefix",
    "lease_ttl",
    "lease_renew_interval",
    "claim_idle",
    "batch_count",
    "poll_timeout",
    "max_len",
    "response_timeout",
    "retry",
    "start",
    "worker_count",
    "leases",
];

/// A value of any shape, weighted towards the ones a field's parser must judge: durations
/// at and past their range, numbers at the edges of their types, enum names and near
/// misses.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![0.0, -0.5, 0.5, 1.0, 1.5, 1e300]).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![
            "0s",
            "1ms",
            "1ns",
            "5s",
            "-1s",
            "1e3s",
            "18446744073709551615s",
            "99999999999999999999d",
            "500000000000y",
            "1h 30m",
            "",
            " ",
            "offset",
            "xack",
            "Offset",
            "retry",
            "log_only",
            "fail",
            "earliest",
            "latest",
            "a b",
            "x{y}",
            "\u{0}",
            "é",
        ])
        .prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..3).prop_map(Value::from),
            btree_map(prop::sample::select(MQ_NAMES.to_vec()), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.into(), v)).collect())),
        ]
    })
}

/// A document: engine options, maybe a nested `mq_options` table.
fn document() -> impl Strategy<Value = Value> {
    (
        btree_map(prop::sample::select(NAMES.to_vec()), value(), 0..5),
        prop::option::of(btree_map(
            prop::sample::select(MQ_NAMES.to_vec()),
            value(),
            0..4,
        )),
    )
        .prop_map(|(top, mq)| {
            let mut doc: serde_json::Map<String, Value> =
                top.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(mq) = mq {
                let mq = mq.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                doc.insert("mq_options".into(), Value::Object(mq));
            }
            Value::Object(doc)
        })
}

/// What `build()` guarantees of every configuration it returns.
fn holds_the_rules(c: &RedisRuntimeConfig) -> Result<(), TestCaseError> {
    prop_assert!(c.pipeline_parallelism() >= 1);
    prop_assert!(c.keyed_state_shard_count() >= 1);
    prop_assert!(c.window_max_fires_per_record() >= 1);
    prop_assert_eq!(c.timer_threads(), 1);
    prop_assert!((0.0..=1.0).contains(&c.mdc_sample_rate()));
    prop_assert!(!c.job_name().is_empty());
    prop_assert!(c.mq_options().validate().is_ok());
    // A configuration read from a file is one `build()` accepts as it is.
    let again = finish(c.clone());
    prop_assert!(again.is_ok(), "{:?}", again.err());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn any_document_is_refused_or_valid(doc in document()) {
        let json_text = doc.to_string();
        if let Ok(c) = serde_json::from_str::<RedisRuntimeConfig>(&json_text) {
            holds_the_rules(&c)?;
        }
        // TOML has no null and wants tables last; what it cannot write is skipped.
        if let Ok(toml_text) = toml::to_string(&doc) {
            let from_toml = toml::from_str::<RedisRuntimeConfig>(&toml_text);
            if let Ok(c) = &from_toml {
                holds_the_rules(c)?;
            }
            // Both forms judge a document alike.
            prop_assert_eq!(
                from_toml.is_ok(),
                serde_json::from_str::<RedisRuntimeConfig>(&json_text).is_ok(),
                "{} vs {}", toml_text, json_text
            );
        }
    }

    #[test]
    fn any_text_is_refused_or_valid(text in "[ -~\n\t\u{e9}]{0,80}") {
        if let Ok(c) = toml::from_str::<RedisRuntimeConfig>(&text) {
            holds_the_rules(&c)?;
        }
        if let Ok(c) = serde_json::from_str::<RedisRuntimeConfig>(&text) {
            holds_the_rules(&c)?;
        }
    }
}

#[test]
fn the_generator_reaches_valid_documents() {
    // Not only refusals: a document of known options with good values is read.
    let doc =
        json!({"pipeline_parallelism": 3, "ack_mode": "xack", "mq_options": {"lease_ttl": "5s"}});
    let c: RedisRuntimeConfig = serde_json::from_str(&doc.to_string()).unwrap();
    assert_eq!(c.pipeline_parallelism(), 3);
    assert_eq!(c.mq_options().lease_ttl, Duration::from_secs(5));
}
