//! The rules a single option is checked against (`check(..)` in an [`options!`](super::options)
//! table): each takes the option's name, so its error names it.

use std::time::Duration;

use crate::Error;

/// The error of an invalid option.
pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

/// A name used inside Redis keys: non-empty, and no `{`/`}` (they would break the
/// partition's hash tag) or whitespace.
pub(crate) fn key_part(field: &'static str, value: &str) -> Result<(), Error> {
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

/// A count of at least 1.
pub(crate) fn at_least_one<T: Default + PartialEq>(
    field: &'static str,
    value: &T,
) -> Result<(), Error> {
    if *value == T::default() {
        return Err(invalid(field, "must be at least 1"));
    }
    Ok(())
}

/// A duration above zero.
pub(crate) fn positive(field: &'static str, value: &Duration) -> Result<(), Error> {
    if value.is_zero() {
        return Err(invalid(field, "must be > 0"));
    }
    Ok(())
}

/// A duration of at least 1 ms (Redis counts whole milliseconds).
pub(crate) fn at_least_1ms(field: &'static str, value: &Duration) -> Result<(), Error> {
    if *value < Duration::from_millis(1) {
        return Err(invalid(field, "must be at least 1 ms"));
    }
    Ok(())
}

/// A nested options struct checked by `validate`: its error is this option's, the inner
/// option named first in the reason (`mq_options`: "lease_renew_interval: must be …").
pub(crate) fn nested<T>(
    validate: impl Fn(&T) -> Result<(), Error>,
) -> impl Fn(&'static str, &T) -> Result<(), Error> {
    move |field, value| {
        validate(value).map_err(|e| match e {
            Error::InvalidConfig {
                field: inner,
                reason,
            } => invalid(field, format!("{inner}: {reason}")),
            other => other,
        })
    }
}
