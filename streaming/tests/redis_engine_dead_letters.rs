//! A record that fails does the same on both engines: the same pipeline text on the same
//! input, with bad records of every kind, gives the same outputs, the same state and the
//! same dead letters (error type, dead-letter type, message, attempts, record) on the
//! memory engine as on the Redis engine. A failure the memory engine cannot undo (after the
//! record changed state or produced output) stops the memory run instead.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::api::ValueStateDescriptor;
use streaming::memory::{DeadLetter, OnRecordError};
use streaming::mq::{DeadLetter as MqDeadLetter, Message, OutgoingMessage, RetryPolicy};
use streaming::redis::{
    CollectSink, RedisEnv, HEADER_RUNTIME_ERROR_MESSAGE, HEADER_RUNTIME_ERROR_TYPE,
};
use streaming::{BoxError, Error, MemoryEnv};
use support::engine::{earliest, setup, wait_until, EngineSetup};

const TOTAL: ValueStateDescriptor<i64> = ValueStateDescriptor::persistent("total", 0);

/// The records: `(key, payload)`. Good records are `{"w": key, "n": number}`.
fn input() -> Vec<(&'static str, &'static str)> {
    vec![
        ("a", r#"{"w": "a", "n": 1}"#),
        ("b", r#"{"w": "b", "n": 2}"#),
        // Not JSON: the decode error of `m.json()`.
        ("a", "not json"),
        ("a", r#"{"w": "a", "n": 3}"#),
        // No number: `try_map` returns `Err`.
        ("b", r#"{"w": "b", "n": "x"}"#),
        // 13 panics in `map`.
        ("a", r#"{"w": "a", "n": 13}"#),
        ("b", r#"{"w": "b", "n": 4}"#),
        // The process function refuses it before it touches state.
        ("a", r#"{"w": "a", "n": -1}"#),
        ("a", r#"{"w": "a", "n": 5}"#),
        ("b", r#"{"w": "b", "n": 6}"#),
    ]
}

/// The same pipeline on both engines: decode, validate, a map that panics on 13, and a
/// running total per key in keyed state.
macro_rules! totals {
    ($stream:expr) => {
        $stream
            .try_map(|m: Message| m.json::<serde_json::Value>())
            .try_map(|v: serde_json::Value| -> Result<(String, i64), BoxError> {
                let w = v["w"].as_str().ok_or("no word")?.to_string();
                let n = v["n"].as_i64().ok_or_else(|| format!("no number in {v}"))?;
                Ok((w, n))
            })
            .map(|(w, n): (String, i64)| {
                assert!(n != 13, "13 is unlucky");
                (w, n)
            })
            .key_by(|p: &(String, i64)| p.0.clone())
            .process(|(w, n): (String, i64), ctx, out| {
                if n < 0 {
                    return Err::<(), BoxError>(
                        Error::permanent(format!("{n} is negative")).into(),
                    );
                }
                let mut total = ctx.state(&TOTAL)?;
                let t = total.value() + n;
                total.update(t);
                out.collect((w, t));
                Ok(())
            })
    };
}

/// `records` as the Redis source hands them to the pipeline (topic `topic`, partition 0).
fn messages(topic: &str, records: &[(&str, &str)]) -> Vec<Message> {
    records
        .iter()
        .enumerate()
        .map(|(i, (key, payload))| Message {
            id: format!("1000-{i}").into(),
            topic: topic.into(),
            partition: 0,
            key: Some((*key).into()),
            payload: payload.as_bytes().to_vec().into(),
            headers: BTreeMap::new(),
            timestamp_ms: 1000 + i as i64,
            retry_count: 0,
            max_retries: None,
            retry_group: None,
        })
        .collect()
}

/// A dead letter as both engines describe it: payload, error type, dead-letter type,
/// message, attempts.
type Letter = (String, String, String, String, u32);

fn memory_letter(d: &DeadLetter<Message>) -> Letter {
    (
        String::from_utf8(d.record.payload.to_vec()).unwrap(),
        d.error_type.to_string(),
        d.dead_letter_type.clone(),
        d.message.clone(),
        d.attempts,
    )
}

fn redis_letter(d: &MqDeadLetter) -> Letter {
    (
        String::from_utf8(d.payload.to_vec()).unwrap(),
        d.headers[HEADER_RUNTIME_ERROR_TYPE].clone(),
        d.error_type.clone(),
        d.headers[HEADER_RUNTIME_ERROR_MESSAGE].clone(),
        d.attempts,
    )
}

/// The Redis engine with one retry after 20 ms (`max_retries` 1).
fn redis_env(s: &EngineSetup, job: &str) -> RedisEnv {
    let mq_options = support::fast_options(job)
        .key_prefix(s.mq_opts.key_prefix.clone())
        .retry(
            RetryPolicy::builder()
                .max_retries(1)
                .initial_backoff(Duration::from_millis(20))
                .multiplier(1.0)
                .max_backoff(Duration::from_millis(20))
                .jitter(0.0)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let config = s.config(job).mq_options(mq_options).build().unwrap();
    RedisEnv::try_with_config(s.redis.url(), config).unwrap()
}

/// Sends `records` to a new one-partition topic `topic`, in order.
fn produce(s: &EngineSetup, topic: &str, records: &[(&str, &str)]) {
    let mq = s.mq();
    s.rt.block_on(mq.create_topic(topic, 1)).unwrap();
    let msgs: Vec<OutgoingMessage> = records
        .iter()
        .map(|(k, p)| OutgoingMessage::new(p.to_string()).key(k.to_string()))
        .collect();
    s.rt.block_on(mq.producer().send_batch(topic, &msgs))
        .unwrap();
}

#[test]
fn bad_records_of_every_kind_give_the_same_outputs_state_and_dead_letters() {
    let input = input();
    // Memory: the source id is the Redis source's (`{topic}.{group}`), so messages that
    // name an operator are the same.
    let env = MemoryEnv::new();
    env.on_record_error(OnRecordError::Retry { max_retries: 1 });
    let mut dead = Vec::new();
    let mut memory = Vec::new();
    let summary = totals!(env
        .from_collection_with_id("dl.g", messages("dl", &input))
        .side_output_dead_letters(|d| dead.push(d)))
    .for_each(|p| memory.push(p))
    .unwrap();
    // The failed records changed nothing: each key's total counts its good records only.
    let expected: Vec<(String, i64)> =
        [("a", 1), ("b", 2), ("a", 4), ("b", 6), ("a", 9), ("b", 12)]
            .into_iter()
            .map(|(w, t)| (w.to_string(), t))
            .collect();
    assert_eq!(memory, expected);
    assert_eq!(summary.dead_letters, 4);
    let memory_letters: Vec<Letter> = dead.iter().map(memory_letter).collect();
    let kinds: Vec<(&str, &str, u32)> = memory_letters
        .iter()
        .map(|l| (l.1.as_str(), l.2.as_str(), l.4))
        .collect();
    assert_eq!(
        kinds,
        [
            ("decode", "decode", 1),
            ("user_function", "retries_exhausted:user_function", 2),
            ("panic", "retries_exhausted:panic", 2),
            ("user_function", "user_function", 1),
        ]
    );
    let operators: Vec<Option<String>> = dead
        .iter()
        .map(|d| d.operator.as_ref().map(ToString::to_string))
        .collect();
    assert_eq!(
        operators,
        [
            None,
            Some("dl.g/2:try_map".into()),
            Some("dl.g/3:map".into()),
            Some("dl.g/5:process".into()),
        ]
    );
    assert_eq!(dead[0].record.key.as_deref(), Some("a"));

    let s = setup("dlq-every-kind");
    produce(&s, "dl", &input);
    let redis = redis_env(&s, "dlq-every-kind");
    let out = CollectSink::new();
    totals!(redis.from_mq_topic_with_options("dl", "g", earliest(4)))
        .sink(out.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    let mq = s.mq();
    let letters = || s.rt.block_on(mq.dead_letters("dl", 100)).unwrap();
    wait_until("the dead letters", &job, || letters().len() == 4);
    wait_until("the outputs", &job, || out.len() == expected.len());
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(out.snapshot(), expected);
    let mut redis_letters: Vec<Letter> = letters().iter().map(redis_letter).collect();
    // The Redis engine dead-letters a retried record when its retry fails, after the
    // records read meanwhile: compare in input order.
    let position = |l: &Letter| input.iter().position(|(_, p)| *p == l.0).unwrap();
    redis_letters.sort_by_key(position);
    assert_eq!(redis_letters, memory_letters);
}

/// A keyed process function that changes state and emits a record, then fails (on 7).
macro_rules! fails_after_writing {
    ($stream:expr) => {
        $stream
            .try_map(|m: Message| m.json::<serde_json::Value>())
            .map(|v: serde_json::Value| {
                (
                    v["w"].as_str().unwrap().to_string(),
                    v["n"].as_i64().unwrap(),
                )
            })
            .key_by(|p: &(String, i64)| p.0.clone())
            .process(|(w, n): (String, i64), ctx, out| {
                let mut total = ctx.state(&TOTAL)?;
                let t = total.value() + n;
                total.update(t);
                out.collect((w, t));
                if n == 7 {
                    return Err::<(), BoxError>("seven after writing".into());
                }
                Ok(())
            })
    };
}

/// A flat map whose second output fails further down (on 7).
macro_rules! second_output_fails {
    ($stream:expr) => {
        $stream
            .try_map(|m: Message| m.json::<serde_json::Value>())
            .flat_map(|v: serde_json::Value| {
                let n = v["n"].as_i64().unwrap();
                vec![n, -n]
            })
            .map(|n: i64| {
                assert!(n != -7, "second output of 7");
                n
            })
    };
}

/// What the memory engine cannot undo stops its run with `Error::RecordNotUndone`; the
/// Redis engine rolls the batch back and dead-letters the record, and its outputs and state
/// show nothing of it. Both pipelines run on both engines; the memory engine's error names
/// the record's.
#[test]
fn a_failure_after_state_changes_or_output_stops_the_memory_run() {
    let input = [
        ("a", r#"{"w": "a", "n": 1}"#),
        ("a", r#"{"w": "a", "n": 7}"#),
        ("a", r#"{"w": "a", "n": 2}"#),
    ];
    let env = MemoryEnv::new();
    let mut memory = Vec::new();
    let err = fails_after_writing!(env.from_collection_with_id("w.g", messages("w", &input)))
        .for_each(|p| memory.push(p))
        .unwrap_err();
    match &err {
        Error::RecordNotUndone { timestamp, source } => {
            assert_eq!(*timestamp, 1);
            assert!(
                source.to_string().contains("seven after writing"),
                "{source}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(memory, [("a".to_string(), 1)]);
    let mut memory = Vec::new();
    let err = second_output_fails!(env.from_collection_with_id("f.g", messages("f", &input)))
        .for_each(|n| memory.push(n))
        .unwrap_err();
    assert!(
        matches!(&err, Error::RecordNotUndone { source, .. } if matches!(**source, Error::Panic { .. })),
        "{err:?}"
    );
    // The first output of the failed record had reached the sink.
    assert_eq!(memory, [1, -1, 7]);

    let s = setup("dlq-not-undone");
    produce(&s, "w", &input);
    produce(&s, "f", &input);
    let redis = redis_env(&s, "dlq-not-undone");
    let (totals, numbers) = (CollectSink::new(), CollectSink::new());
    fails_after_writing!(redis.from_mq_topic_with_options("w", "g", earliest(4)))
        .sink(totals.clone())
        .unwrap();
    second_output_fails!(redis.from_mq_topic_with_options("f", "g", earliest(4)))
        .sink(numbers.clone())
        .unwrap();
    let job = redis.blocking_start().unwrap();
    let mq = s.mq();
    let letters = |topic: &str| s.rt.block_on(mq.dead_letters(topic, 100)).unwrap();
    wait_until("the dead letters", &job, || {
        letters("w").len() == 1 && letters("f").len() == 1
    });
    wait_until("the outputs", &job, || {
        totals.len() == 2 && numbers.len() == 4
    });
    job.blocking_shutdown(Duration::MAX);
    // The state the failed record wrote was rolled back: 1, then 1 + 2.
    assert_eq!(
        totals.snapshot(),
        [("a".to_string(), 1), ("a".to_string(), 3)]
    );
    assert_eq!(numbers.snapshot(), [1, -1, 2, -2]);
    for (topic, kind) in [("w", "user_function"), ("f", "panic")] {
        let l = redis_letter(&letters(topic)[0]);
        assert_eq!((l.1.as_str(), l.4), (kind, 2), "{l:?}");
        assert_eq!(l.2, format!("retries_exhausted:{kind}"));
    }
}
