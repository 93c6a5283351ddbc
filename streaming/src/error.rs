//! The crate-wide error type.

/// A boxed error returned by user functions and sinks.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Every error the `streaming` crate returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is invalid; `field` names the offending setting.
    #[error("invalid configuration `{field}`: {reason}")]
    InvalidConfig {
        /// The name of the setting, e.g. `size` or `slide`.
        field: &'static str,
        /// Why the value was rejected.
        reason: String,
    },
}
