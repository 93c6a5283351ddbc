//! One declaration per options struct: [`options!`] turns a table of fields into the
//! struct, its defaults, its builder, its getters, each field's own check and its
//! configuration-file form.
//!
//! A table starts with a header, each line after its docs (and the struct's derives):
//!
//! ```text
//! pub struct Name;               the options struct, `#[non_exhaustive]`, with `Default`
//! pub struct NameBuilder;        its builder, from `Name::builder()`
//! fn build = finish;             `finish: fn(Name) -> Result<Name, Error>`, run by `build`
//!                                and by the file form
//! impl Deserialize via NameFile; the file form (`NameFile` holds each option, optional)
//! ```
//!
//! then one row per option, in braces:
//!
//! ```text
//! /// Docs of the option (on the field, and on its getter when it has one).
//! vis name: Type = default [, get(kind)] [, set(kind)] [, check(f)] [, note("…")];
//! ```
//!
//! - `get(value)` returns the field by value (a `Copy` type), `get(str)` a `String` as
//!   `&str`, `get(ref)` anything else by reference; no `get` for a public field. A getter
//!   never clones.
//! - The builder's setter has the option's name. It takes the type itself; `set(into)`
//!   takes `impl Into<Type>`; `set(|v: Arg| expr)` takes `Arg` and stores `expr`.
//! - `check(f)` is the field's own rule: `f(name, &value) -> Result<(), Error>`, called
//!   with the option's name (so the error names it) by the generated `check_fields`, in
//!   table order. Rules between fields, and normalising (zero read as off), live in the
//!   struct's finishing function, which `build` and the file form both call and which
//!   calls `check_fields` first.
//! - `note("…")` adds a remark to the setter's doc line ("Sets \[`T::name`\] (…).").
//!
//! The file form reads every option by its name, each optional (the default otherwise),
//! rejects unknown names, and reads each value as its type's [`FileValue`] says
//! (durations as `humantime` strings, nested options as partial tables). A `group` at
//! the end of the table declares a crate-internal struct whose options are stored in one
//! field but read, set and written in the file like the others (the Redis engine's
//! checkpoint options).

mod checks;
mod file;

pub(crate) use checks::{at_least_1ms, at_least_one, invalid, key_part, nested, positive};
pub(crate) use file::{deserialize, deserialize_by_name, FileValue};

/// Declares an options struct from one table; see the [module docs](self).
macro_rules! options {
    (
        $(#[$attr:meta])*
        pub struct $Name:ident;
        $(#[$battr:meta])*
        pub struct $Builder:ident;
        $(#[$build_doc:meta])*
        fn build = $finish:expr;
        $(#[$file_doc:meta])*
        impl Deserialize via $File:ident;
        {
            $(
                $(#[$doc:meta])*
                $fvis:vis $field:ident: $ty:ty = $default:expr
                $(, get($get:ident))?
                $(, set($($set:tt)+))?
                $(, check($check:expr))?
                $(, note($note:literal))?
                ;
            )*
        }
        $(
            group $g:ident:
            $(#[$gattr:meta])*
            $gvis:vis struct $G:ident {
                $(
                    $(#[$gdoc:meta])*
                    $gfvis:vis $gfield:ident: $gty:ty = $gdefault:expr
                    $(, get($gget:ident))?
                    $(, set($($gset:tt)+))?
                    $(, check($gcheck:expr))?
                    $(, note($gnote:literal))?
                    ;
                )*
            }
        )?
    ) => {
        $(#[$attr])*
        #[non_exhaustive]
        pub struct $Name {
            $( $(#[$doc])* $fvis $field: $ty, )*
            $( $g: $G, )?
        }

        impl Default for $Name {
            fn default() -> Self {
                Self {
                    $( $field: $default, )*
                    $( $g: $G::default(), )?
                }
            }
        }

        impl $Name {
            /// A builder starting from the defaults (each option's documentation names
            /// its default).
            pub fn builder() -> $Builder {
                $Builder { inner: Self::default() }
            }

            $( $crate::options::getter!([$($get)?] via() $(#[$doc])* $field: $ty); )*
            $($( $crate::options::getter!([$($gget)?] via($g) $(#[$gdoc])* $gfield: $gty); )*)?

            /// Checks each option's own rule, in table order.
            fn check_fields(&self) -> Result<(), $crate::Error> {
                $($( ($check)(stringify!($field), &self.$field)?; )?)*
                Ok(())
            }
        }

        $(#[$battr])*
        #[derive(Clone, Debug)]
        #[must_use]
        pub struct $Builder {
            inner: $Name,
        }

        impl $Builder {
            $( $crate::options::setter!([$($($set)+)?] $Name via() $field: $ty $(, $note)?); )*
            $($( $crate::options::setter!([$($($gset)+)?] $Name via($g) $gfield: $gty $(, $gnote)?); )*)?

            $(#[$build_doc])*
            pub fn build(self) -> Result<$Name, $crate::Error> {
                ($finish)(self.inner)
            }
        }

        /// The options as written in a configuration file: each one optional.
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $File {
            $( #[serde(default)] $field: Option<<$ty as $crate::options::FileValue>::File>, )*
            $($( #[serde(default)] $gfield: Option<<$gty as $crate::options::FileValue>::File>, )*)?
        }

        impl $crate::options::FileValue for $Name {
            type File = $File;
            fn merge(&mut self, file: $File) {
                $(
                    if let Some(v) = file.$field {
                        $crate::options::FileValue::merge(&mut self.$field, v);
                    }
                )*
                $($(
                    if let Some(v) = file.$gfield {
                        $crate::options::FileValue::merge(&mut self.$g.$gfield, v);
                    }
                )*)?
            }
        }

        $(#[$file_doc])*
        impl<'de> serde::Deserialize<'de> for $Name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::options::deserialize(d, $finish)
            }
        }

        $(
            $(#[$gattr])*
            $gvis struct $G {
                $( $(#[$gdoc])* $gfvis $gfield: $gty, )*
            }

            impl Default for $G {
                fn default() -> Self {
                    Self { $( $gfield: $gdefault, )* }
                }
            }

            impl $G {
                /// Checks each option's own rule, in table order.
                fn check_fields(&self) -> Result<(), $crate::Error> {
                    $($( ($gcheck)(stringify!($gfield), &self.$gfield)?; )?)*
                    Ok(())
                }
            }
        )?
    };
}
pub(crate) use options;

/// One getter of [`options!`]: `[kind] via(group?) docs name: Type`.
macro_rules! getter {
    ([] $($rest:tt)*) => {};
    ([value] via($($g:ident)?) $(#[$doc:meta])* $field:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $field(&self) -> $ty {
            self $(.$g)? .$field
        }
    };
    ([str] via($($g:ident)?) $(#[$doc:meta])* $field:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $field(&self) -> &str {
            &self $(.$g)? .$field
        }
    };
    ([ref] via($($g:ident)?) $(#[$doc:meta])* $field:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $field(&self) -> &$ty {
            &self $(.$g)? .$field
        }
    };
}
pub(crate) use getter;

/// One builder setter of [`options!`]: `[kind] Struct via(group?) name: Type, note?`.
macro_rules! setter {
    ([] $Name:ident via($($g:ident)?) $field:ident: $ty:ty $(, $note:literal)?) => {
        #[doc = $crate::options::set_doc!($Name $field $(, $note)?)]
        pub fn $field(mut self, value: $ty) -> Self {
            self.inner $(.$g)? .$field = value;
            self
        }
    };
    ([into] $Name:ident via($($g:ident)?) $field:ident: $ty:ty $(, $note:literal)?) => {
        #[doc = $crate::options::set_doc!($Name $field $(, $note)?)]
        pub fn $field(mut self, value: impl Into<$ty>) -> Self {
            self.inner $(.$g)? .$field = value.into();
            self
        }
    };
    ([|$v:ident: $arg:ty| $conv:expr] $Name:ident via($($g:ident)?) $field:ident: $ty:ty $(, $note:literal)?) => {
        #[doc = $crate::options::set_doc!($Name $field $(, $note)?)]
        pub fn $field(mut self, $v: $arg) -> Self {
            self.inner $(.$g)? .$field = $conv;
            self
        }
    };
}
pub(crate) use setter;

/// A setter's doc line: "Sets \[`Struct::name`\] (note)."
macro_rules! set_doc {
    ($Name:ident $field:ident $(, $note:literal)?) => {
        concat!("Sets [`", stringify!($Name), "::", stringify!($field), "`]", $(" (", $note, ")",)? ".")
    };
}
pub(crate) use set_doc;

#[cfg(test)]
mod tests;
