//! Procedural macros of the `streaming` crate.
//!
//! The `pipeline!` macro (parse → check → expand) lands here; see the `streaming` crate docs.
#![deny(missing_docs)]
