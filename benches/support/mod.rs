//! Code shared by the benchmarks.

pub(crate) mod workloads;
