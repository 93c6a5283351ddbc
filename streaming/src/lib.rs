//! # streaming
//!
//! Stream processing with Flink-style event time. One operator library, two engines:
//! the in-memory engine ([`MemoryEnv`]) and (in later releases) a Redis engine.
#![deny(missing_docs)]

mod error;

pub use error::{BoxError, Error};

pub mod api;
pub mod ops;
pub mod time;
pub mod memory;

pub use memory::{DataStream, KeyedStream, MemoryEnv, WindowedStream};

pub use streaming_macros::pipeline;

mod dsl;
/// Helpers of the `pipeline!` expansion; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::dsl::*;
}
