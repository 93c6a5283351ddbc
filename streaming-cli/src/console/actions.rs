//! The console's changes: replaying a dead letter (its payload as edited) and deleting
//! one. Each needs its confirmation box ticked; a read-only console refuses them.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;

use super::html::page;
use super::pages::failed;
use super::Console;
use crate::Failure;

#[derive(Deserialize)]
pub(super) struct Change {
    /// The payload as edited (absent for a payload that is not text).
    payload: Option<String>,
    /// `yes` when the confirmation box is ticked.
    confirm: Option<String>,
}

/// Why a change is refused before it runs: read-only, or not confirmed.
fn refused(c: &Console, title: &str, change: &Change) -> Option<Response> {
    if c.read_only {
        let e = Failure("this console is read-only: nothing was changed".to_owned());
        return Some(failed(c, title, StatusCode::FORBIDDEN, e));
    }
    if change.confirm.as_deref() != Some("yes") {
        let e = Failure("tick the confirmation box: nothing was changed".to_owned());
        return Some(failed(c, title, StatusCode::BAD_REQUEST, e));
    }
    None
}

/// Replays the dead letter, with the submitted payload when it differs from its own.
pub(super) async fn replay(
    State(c): State<Arc<Console>>,
    Path((topic, partition, id)): Path<(String, u32, String)>,
    Form(change): Form<Change>,
) -> Response {
    let title = format!("Replay {id}");
    if let Some(r) = refused(&c, &title, &change) {
        return r;
    }
    let current = match c.mq.dead_letter(&topic, partition, &id).await {
        Ok(d) => d,
        Err(e) => return failed(&c, &title, StatusCode::BAD_REQUEST, e.into()),
    };
    // Browsers send a textarea's line ends as CRLF: an unedited payload is compared as the
    // browser would send it.
    let edited = match (&change.payload, &current) {
        (Some(p), Some(d)) => {
            let own = String::from_utf8_lossy(&d.payload).replace("\r\n", "\n");
            (p.replace("\r\n", "\n") != own).then(|| p.replace("\r\n", "\n"))
        }
        _ => None,
    };
    let replayed = match &edited {
        Some(p) => {
            c.mq.replay_dead_letter_with_payload(&topic, partition, &id, p.as_bytes())
                .await
        }
        None => c.mq.replay_dead_letter(&topic, partition, &id).await,
    };
    let new_id = match replayed {
        Ok(Some(new_id)) => new_id,
        Ok(None) => {
            let e = Failure(format!(
                "no dead letter `{id}` any more (replayed or deleted meanwhile)"
            ));
            return failed(&c, &title, StatusCode::NOT_FOUND, e);
        }
        Err(e) => return failed(&c, &title, StatusCode::BAD_REQUEST, e.into()),
    };
    let body = html! {
        p #done {
            "Replayed to partition " (partition) " of " (topic) " as " code { (new_id) }
            @if edited.is_some() { " with the edited payload" } "."
        }
        p { a href=(format!("/dlq/{topic}")) { "Back to the dead letters of " (topic) } }
    };
    page(&c, &title, None, body)
}

/// Deletes the dead letter.
pub(super) async fn delete(
    State(c): State<Arc<Console>>,
    Path((topic, partition, id)): Path<(String, u32, String)>,
    Form(change): Form<Change>,
) -> Response {
    let title = format!("Delete {id}");
    if let Some(r) = refused(&c, &title, &change) {
        return r;
    }
    match c.mq.delete_dead_letter(&topic, partition, &id).await {
        Ok(existed) => {
            let body = html! {
                p #done { @if existed { "Deleted " code { (id) } "." } @else { "It was already gone." } }
                p { a href=(format!("/dlq/{topic}")) { "Back to the dead letters of " (topic) } }
            };
            page(&c, &title, None, body)
        }
        Err(e) => failed(&c, &title, StatusCode::BAD_REQUEST, e.into()),
    }
}

/// Deletes every dead letter of the topic.
pub(super) async fn purge(
    State(c): State<Arc<Console>>,
    Path(topic): Path<String>,
    Form(change): Form<Change>,
) -> Response {
    let title = format!("Purge the dead letters of {topic}");
    if let Some(r) = refused(&c, &title, &change) {
        return r;
    }
    match c.mq.purge_dead_letters(&topic).await {
        Ok(n) => {
            let body = html! {
                p #done { "Deleted " (n) " dead letters of " (topic) "." }
                p { a href=(format!("/dlq/{topic}")) { "Back to the dead letters of " (topic) } }
            };
            page(&c, &title, None, body)
        }
        Err(e) => failed(&c, &title, StatusCode::BAD_REQUEST, e.into()),
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.0).into_response()
    }
}
