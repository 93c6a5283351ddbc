//! The sinks that write in a batch's commit: [`RedisListSink`] (`list`), the hash, stream
//! and idempotent list sinks (`more`), the job-to-job topic sink and its forwarder
//! (`topics`), and what their buffered writes become in the commit's transaction
//! (`commit_writes`).

pub(crate) mod commit_writes;
pub(crate) mod list;
pub(crate) mod more;
pub(crate) mod topics;

pub use list::{JsonList, RecordEncoding, RedisListSink, TextList};
pub use more::{RedisHashSink, RedisIdempotentListSink, RedisStreamSink};
