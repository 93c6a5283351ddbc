//! The console's access check: a token in `Authorization: Bearer …` or in the cookie the
//! login page sets; a change (POST) must also come from the console's own pages.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;

use super::html::page;
use super::Console;

/// The cookie the login page sets.
const COOKIE: &str = "streaming_console";

/// The token a request presents, if any.
fn presented(req: &Request) -> Option<&str> {
    let headers = req.headers();
    // The scheme is case-insensitive (RFC 9110).
    let bearer = (headers.get(header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    bearer.or_else(|| {
        (headers.get_all(header::COOKIE).iter())
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
    })
}

/// `a == b` in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether a POST comes from a page of this console: a browser names the page's origin;
/// one that names another site is refused (a client without an `Origin`, such as `curl`
/// with the bearer token, is let through). Behind a proxy that rewrites `Host`, the host
/// the browser used is the proxy's `X-Forwarded-Host`.
fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let hosts = [header::HOST.as_str(), "x-forwarded-host"];
    hosts
        .iter()
        .filter_map(|h| headers.get(*h)?.to_str().ok())
        .any(|h| {
            let h = h.split(',').next().unwrap_or("").trim();
            origin == format!("http://{h}") || origin == format!("https://{h}")
        })
}

/// Lets a request through when the console has no token or the request presents it;
/// otherwise a page goes to the login page and anything else gets 401.
pub(super) async fn require(State(c): State<Arc<Console>>, req: Request, next: Next) -> Response {
    if req.method() == Method::POST && !same_origin(req.headers()) {
        return (
            StatusCode::FORBIDDEN,
            "a change must come from the console's own pages",
        )
            .into_response();
    }
    let Some(token) = &c.token else {
        return next.run(req).await;
    };
    if presented(&req).is_some_and(|t| same(t, token)) {
        return next.run(req).await;
    }
    if req.method() == Method::GET {
        return Redirect::to("/login").into_response();
    }
    (StatusCode::UNAUTHORIZED, "this console needs its token").into_response()
}

/// The login page.
pub(super) async fn login_form(State(c): State<Arc<Console>>) -> Response {
    page(
        &c,
        "Log in",
        None,
        html! {
            form method="post" action="/login" {
                label { "Token " input type="password" name="token" id="token" autofocus; }
                " " button type="submit" id="login" { "Log in" }
            }
        },
    )
}

#[derive(Deserialize)]
pub(super) struct Login {
    token: String,
}

/// Checks the token; sets the cookie and goes to the jobs page, or refuses.
pub(super) async fn login(
    State(c): State<Arc<Console>>,
    headers: axum::http::HeaderMap,
    Form(login): Form<Login>,
) -> Response {
    if !same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "a login must come from the console's own page",
        )
            .into_response();
    }
    match &c.token {
        Some(token) if !same(&login.token, token) => {
            let body =
                html! { p.error id="refused" { "Wrong token." } a href="/login" { "Try again" } };
            (StatusCode::UNAUTHORIZED, page(&c, "Log in", None, body)).into_response()
        }
        _ => {
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                login.token
            );
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
    }
}

/// Forgets the token the browser keeps.
pub(super) async fn logout() -> Response {
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("s3cret", "s3cret"));
        assert!(!same("s3cret", "s3cres"));
        assert!(!same("s3cret", "s3cret2"));
        assert!(!same("", "x"));
    }
}
