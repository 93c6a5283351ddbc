//! How an option is written in a configuration file ([`FileValue`]), and the one loader
//! every options struct's `Deserialize` goes through ([`deserialize`]).

use std::time::Duration;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};

use crate::Error;

/// An option's value as a configuration file writes it ([`File`](Self::File)), and how
/// that value lands on the option ([`merge`](Self::merge)).
pub(crate) trait FileValue {
    /// What the file holds for the option.
    type File: DeserializeOwned;
    /// Sets the option from the file's value: replaces a plain value, fills an optional
    /// one, and sets a nested options struct's named fields only.
    fn merge(&mut self, file: Self::File);
}

/// Reads `T` from a file: the defaults, with every option the file names set, then
/// `finish` (the struct's validation; its error is the deserializer's custom error, so it
/// names the option).
///
/// # Errors
/// The deserializer's error for an unknown option or a value of the wrong shape, or
/// `finish`'s [`Error`] as the deserializer's message.
pub(crate) fn deserialize<'de, T, D>(
    d: D,
    finish: impl FnOnce(T) -> Result<T, Error>,
) -> Result<T, D::Error>
where
    T: FileValue + Default,
    D: Deserializer<'de>,
{
    let file = T::File::deserialize(d)?;
    let mut value = T::default();
    value.merge(file);
    finish(value).map_err(D::Error::custom)
}

/// Types a file writes as themselves.
macro_rules! as_written {
    ($($ty:ty),+ $(,)?) => {
        $(impl FileValue for $ty {
            type File = $ty;
            fn merge(&mut self, file: $ty) {
                *self = file;
            }
        })+
    };
}

as_written!(String, bool, u32, u64, usize, f64);

/// A duration is a `humantime` string: `"1500ms"`, `"2s"`, `"1m 30s"`.
impl FileValue for Duration {
    type File = humantime_serde::Serde<Duration>;
    fn merge(&mut self, file: Self::File) {
        *self = file.into_inner();
    }
}

/// An optional value is written as the value itself (the option is then set).
macro_rules! optional {
    ($($ty:ty),+ $(,)?) => {
        $(impl FileValue for Option<$ty> {
            type File = <$ty as FileValue>::File;
            fn merge(&mut self, file: Self::File) {
                let mut value = <$ty>::default();
                value.merge(file);
                *self = Some(value);
            }
        })+
    };
}

optional!(Duration, String, usize);

/// `impl Deserialize` and [`FileValue`] for an enum of unit variants, each read by its
/// snake-case name (`FrontierOrLatest` is `"frontier_or_latest"`); another name is the
/// deserializer's error.
macro_rules! deserialize_by_name {
    ($(#[$doc:meta])* $ty:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        ///
        /// # Errors
        /// The deserializer's error for another name.
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(serde::Deserialize)]
                #[serde(rename_all = "snake_case")]
                enum Name {
                    $($variant),+
                }
                Ok(match Name::deserialize(d)? {
                    $(Name::$variant => $ty::$variant),+
                })
            }
        }

        impl $crate::options::FileValue for $ty {
            type File = $ty;
            fn merge(&mut self, file: $ty) {
                *self = file;
            }
        }
    };
}
pub(crate) use deserialize_by_name;
