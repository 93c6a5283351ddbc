//! Shared helpers of the workspace's integration tests and examples.
//!
//! - [`flights`]: the NYC flights 2013 data set and the jobs of the `flights` example.

pub mod flights;
