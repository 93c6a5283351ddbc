//! The console's page frame: title, navigation, refresh and style (maud escapes every
//! value it writes).

use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use super::Console;

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2733; }
header { background: #1d2733; color: #fff; padding: 8px 16px; display: flex; gap: 18px; align-items: baseline; }
header a { color: #cfe3ff; text-decoration: none; } header strong { margin-right: 12px; }
main { padding: 12px 16px; }
table { border-collapse: collapse; margin: 8px 0 18px; }
th, td { border-bottom: 1px solid #dde3ea; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f3f6f9; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fff1f0; } .error { color: #b3261e; } .muted { color: #6b7785; }
pre { background: #f3f6f9; padding: 8px; overflow: auto; max-width: 100ch; }
textarea { width: 80ch; height: 8em; font-family: monospace; }
.badge { background: #ffd54f; color: #1d2733; padding: 1px 6px; border-radius: 3px; }
form.inline { display: inline-block; margin-right: 16px; }
";

/// A whole page: `title`, `body`, reloading every `refresh` seconds when set.
pub(super) fn page(c: &Console, title: &str, refresh: Option<u32>, body: Markup) -> Response {
    let refresh = refresh.filter(|s| *s > 0);
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    @if let Some(s) = refresh { meta http-equiv="refresh" content=(s); }
                    title { (title) " · streaming console" }
                    style { (maud::PreEscaped(STYLE)) }
                }
                body {
                    header {
                        strong { "streaming" }
                        a href="/" { "Jobs" }
                        a href="/topics" { "Topics" }
                        a href="/state" { "Keyed state" }
                        @if c.read_only { span.badge id="read-only" { "read-only" } }
                        @if c.token.is_some() { a href="/logout" id="logout" { "Log out" } }
                    }
                    main { h1 { (title) } (body) }
                }
            }
        }
        .into_string(),
    )
    .into_response()
}

/// `value`, or a muted dash.
pub(super) fn or_dash(value: Option<String>) -> Markup {
    match value {
        Some(v) => html! { (v) },
        None => html! { span.muted { "–" } },
    }
}
