//! Field checks shared by the options' validation.

use crate::Error;

/// The error of an invalid field.
pub(super) fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

/// A name used inside Redis keys: non-empty, and no `{`/`}` (they would break the
/// partition's hash tag) or whitespace.
pub(super) fn key_part(field: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if let Some(c) = value
        .chars()
        .find(|c| matches!(c, '{' | '}') || c.is_whitespace())
    {
        return Err(invalid(
            field,
            format!("{value:?} contains {c:?}; braces and whitespace are not allowed in key names"),
        ));
    }
    Ok(())
}
