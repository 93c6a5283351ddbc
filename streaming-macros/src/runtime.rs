//! The path of the runtime crate in the code the macro emits.

use proc_macro2::{Ident, Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote_spanned;

/// The name of the runtime crate's package.
const PACKAGE: &str = "streaming";

/// The runtime crate as the crate being compiled names it.
pub(crate) struct CratePath {
    name: String,
}

impl CratePath {
    /// `streaming`, or the name the manifest of the crate being compiled gives it
    /// (`name = { package = "streaming", .. }`).
    pub(crate) fn find() -> CratePath {
        let name = match crate_name(PACKAGE) {
            Ok(FoundCrate::Name(name)) => name,
            // The `streaming` package itself: its doctests, tests and examples are crates
            // of their own that reach it by its name (the library does not use the macro).
            Ok(FoundCrate::Itself) => PACKAGE.to_string(),
            // No manifest, or no such dependency (e.g. the macro's own tests): the usual
            // name, so a missing dependency is rustc's "cannot find `streaming`".
            Err(_) => PACKAGE.to_string(),
        };
        CratePath { name }
    }

    /// A path of this name, for the macro's own tests.
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> CratePath {
        CratePath { name: name.into() }
    }

    /// `::name`, spanned at `span` like the code around it.
    pub(crate) fn at(&self, span: Span) -> TokenStream {
        let name = Ident::new(&self.name, span);
        quote_spanned!(span=> ::#name)
    }
}
