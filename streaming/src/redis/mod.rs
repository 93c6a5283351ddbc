//! The Redis engine (seed `runtime.md` §2): Redis Streams consumer groups as the source,
//! keyed state and checkpoints in Redis.
//!
//! Work in progress: this release has the runtime configuration ([`RedisRuntimeConfig`]);
//! the environment, job client and batch runner follow (see the project's issues).

mod config;

pub use config::{
    AckMode, HotKeyPolicy, ProcessingErrorResult, RedisRuntimeConfig, RedisRuntimeConfigBuilder,
    SchemaMismatchPolicy,
};
