//! The sinks that write in a batch's commit: [`RedisListSink`] (`list`), the hash, stream
//! and idempotent list sinks (`more`), the job-to-job topic sink and its forwarder
//! (`topics`), and what their buffered writes become in the commit's transaction
//! (`commit_writes`).

/// `job_scoped` and `scope` for a sink struct with a `scope: SinkScope` field.
macro_rules! scoped_sink {
    ($sink:ident<$($g:ident),*>) => {
        impl<$($g),*> $sink<$($g),*> {
            /// Prefixes the sink's keys with the job name: `{job}:{name}:{T:n}` instead of
            /// `{name}:{T:n}` ([`SinkScope::Job`](crate::redis::SinkScope::Job)), so two
            /// jobs that use the same sink name write different keys. The default is
            /// shared keys ([`SinkScope::Shared`](crate::redis::SinkScope::Shared)): the
            /// sink's name is then the key other services read.
            #[must_use]
            pub fn job_scoped(mut self) -> Self {
                self.scope = crate::api::SinkScope::Job;
                self
            }

            /// Whose keys the sink writes.
            pub fn scope(&self) -> crate::api::SinkScope {
                self.scope
            }
        }
    };
}

pub(crate) mod commit_writes;
pub(crate) mod list;
pub(crate) mod more;
pub(crate) mod topics;

pub use list::{JsonList, RecordEncoding, RedisListSink, TextList};
pub use more::{RedisHashSink, RedisIdempotentListSink, RedisStreamSink};
