//! # streaming
//!
//! Stream processing with Flink-style event time. One operator library, two engines:
//! the in-memory engine ([`MemoryEnv`]) and (in later releases) a Redis engine.
#![deny(missing_docs)]

mod error;

pub use error::{BoxError, Error};

pub mod api;
pub mod memory;
pub mod ops;
pub mod time;

pub use memory::{DataStream, KeyedStream, MemoryEnv, WindowedStream};

/// The README's examples run as doctests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
