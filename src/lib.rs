//! Shared helpers of the workspace's integration tests and examples.
