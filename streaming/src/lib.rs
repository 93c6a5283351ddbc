//! # streaming
//!
//! Stream processing with Flink's event-time semantics. One operator library, two engines:
//! the in-memory engine ([`MemoryEnv`]: bounded input, single thread, deterministic) and a
//! Redis Streams engine (in progress).
//!
//! ```
//! use std::time::Duration;
//! use streaming::time::TumblingEventTimeWindows;
//! use streaming::MemoryEnv;
//!
//! let env = MemoryEnv::new();
//! let counts = env
//!     .from_elements(["to be", "or not", "to be"])     // timestamps 0, 1, 2
//!     .flat_map(|line| line.split(' '))
//!     .key_by(|word| *word)
//!     .window(TumblingEventTimeWindows::of(Duration::from_millis(2))?)
//!     .count()
//!     .map(|(word, window, n)| (window.start(), word, n))
//!     .collect_vec()?;
//! assert_eq!(counts, [(0, "to", 1), (0, "be", 1), (0, "or", 1), (0, "not", 1), (2, "to", 1), (2, "be", 1)]);
//! # Ok::<(), streaming::Error>(())
//! ```
//!
//! Modules:
//! - [`memory`]: the in-memory engine and its builder API ([`DataStream`], [`KeyedStream`],
//!   [`WindowedStream`]);
//! - [`time`]: windows, assigners, triggers and watermark generators, shared by both engines;
//! - [`api`]: user function traits, sources, sinks and keyed state;
//! - [`ops`]: the fused operators pipelines compile to;
//! - [`mq`]: the Redis Streams message queue (topics, consumer groups, retry, dead letters)
//!   the Redis engine reads from;
//! - [`redis`]: the Redis engine (in progress: its configuration).
//!
//! Every fallible call returns [`Error`], which names the failing operator or setting.
#![deny(missing_docs)]

mod error;
pub mod mq;
pub mod redis;

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
