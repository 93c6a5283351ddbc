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
