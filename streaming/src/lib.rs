//! # streaming
//!
//! Stream processing with Flink-style event time. One operator library, two engines:
//! the in-memory engine ([`MemoryEnv`]) and (in later releases) a Redis engine.
#![deny(missing_docs)]

mod error;
pub mod mq;

pub use error::{BoxError, Error};
