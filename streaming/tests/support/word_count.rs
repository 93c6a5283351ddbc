//! The word count many Redis-engine tests run: each message's text is a word, counted per
//! word in the keyed state `count` (a `ValueState<u64>`), every count sent to a
//! `CollectSink`. Self-contained, so the admin CLI's tests include it by path too.

use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, SubscriptionOptions};
use streaming::redis::{CollectSink, RedisEnv};

/// The keyed state holding a word's count.
pub const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// Registers the word count over topic `topic`, read as group `group` with `options`.
pub fn register_word_count(env: &RedisEnv, topic: &str, group: &str, options: SubscriptionOptions) {
    env.from_mq_topic_with_options(topic, group, options)
        .map(|m: Message| m.text().unwrap().to_owned())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(CollectSink::new())
        .unwrap();
}

/// The counts the word count stores for `words`: the word as JSON (the state's field) →
/// how often it occurs.
pub fn expected_counts(words: &[String]) -> std::collections::BTreeMap<String, u64> {
    let mut expected = std::collections::BTreeMap::new();
    for w in words {
        *expected.entry(format!("\"{w}\"")).or_insert(0u64) += 1;
    }
    expected
}

/// Ends a job that committed its input: a checkpoint completes, the job shuts down in
/// time, and it met no error on the way.
pub fn checkpoint_and_shut_down(job: &streaming::redis::JobClient) {
    job.blocking_trigger_checkpoint_now()
        .unwrap()
        .expect("a complete checkpoint");
    assert!(job.blocking_shutdown(std::time::Duration::from_secs(10)));
    let errors = job.diagnostics().errors;
    assert!(errors.is_empty(), "{errors:?}");
}
