//! Building a [`Message`] by hand, as a consumer would receive it: for tests of pipelines
//! that read a topic (the test driver's `push_message`).

use super::message::Message;
use crate::Error;
use arcstr::ArcStr;
use bytes::Bytes;
use std::collections::BTreeMap;

impl Message {
    /// A message as a consumer would receive it, for tests (e.g. with
    /// [`TestDriver::push_message`](crate::testing::TestDriver::push_message)): payload
    /// `payload`, topic `test`, partition 0, entry id `0-1`, timestamp 0, no key, no
    /// headers, first delivery. Set the rest with the `with_*` methods:
    ///
    /// ```
    /// use streaming::mq::Message;
    /// let m = Message::new(r#"{"customer":"ann","cents":300}"#)
    ///     .with_key("ann")
    ///     .with_timestamp_ms(60_000)
    ///     .with_header("source", "web");
    /// assert_eq!((m.key.as_deref(), m.timestamp_ms, m.id.as_str()), (Some("ann"), 60_000, "60000-1"));
    /// ```
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Message {
            id: "0-1".into(),
            topic: "test".into(),
            partition: 0,
            key: None,
            payload: payload.into(),
            headers: BTreeMap::new(),
            timestamp_ms: 0,
            retry_count: 0,
            max_retries: None,
            retry_group: None,
        }
    }

    /// The JSON of `value` as the payload; otherwise as [`new`](Self::new).
    ///
    /// # Errors
    /// [`Error::MqDecode`] when `value` does not serialize.
    pub fn new_json<T: serde::Serialize>(value: &T) -> Result<Self, Error> {
        let payload = serde_json::to_vec(value).map_err(|e| Error::MqDecode {
            what: "payload",
            reason: e.to_string(),
        })?;
        Ok(Self::new(payload))
    }

    /// With key `key`.
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(ArcStr::from(key.into()));
        self
    }

    /// With event time `timestamp_ms` (epoch ms); the entry id becomes
    /// `{timestamp_ms}-1`, as Redis would give an entry added then.
    #[must_use]
    pub fn with_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = timestamp_ms;
        self.id = arcstr::format!("{}-1", timestamp_ms.max(0));
        self
    }

    /// With header `name` = `value` (replacing one of that name).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// From topic `topic`, partition `partition`.
    #[must_use]
    pub fn with_topic(mut self, topic: impl Into<String>, partition: u32) -> Self {
        self.topic = ArcStr::from(topic.into());
        self.partition = partition;
        self
    }

    /// With entry id `id` (`<ms>-<seq>`).
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = ArcStr::from(id.into());
        self
    }
}
