//! `streaming-admin serve`: a web console over what the other commands read and repair —
//! running jobs and their partitions, topics, dead letters (edit, replay, delete) and
//! keyed state — served by this binary (HTML rendered here, no JavaScript toolchain).
//!
//! Access: bound to a loopback address the console may run without a token; on any
//! other address it needs one (`--token`, `--token-file` or `STREAMING_ADMIN_TOKEN`),
//! presented as `Authorization: Bearer TOKEN` or through the login page (an `HttpOnly`,
//! `SameSite=Strict` cookie). `--read-only` refuses every change.

mod actions;
mod auth;
mod history;
mod html;
mod pages;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use clap::Args;
use streaming::mq::Mq;

use crate::{Failure, Result, Target};

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to serve on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Show only: replaying, editing and deleting dead letters are refused.
    #[arg(long)]
    read_only: bool,
    /// The token a browser or client must present (required off loopback). Better given by
    /// `STREAMING_ADMIN_TOKEN` or `--token-file` than on the command line.
    #[arg(long, env = "STREAMING_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the token (its first line).
    #[arg(long, value_name = "PATH", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// Seconds between refreshes of the jobs and topics pages (0: never).
    #[arg(long, default_value_t = 5)]
    refresh: u32,
}

/// What every request handler shares.
pub(crate) struct Console {
    mq: Mq,
    target: Target,
    /// The queue key prefix (`--key-prefix`), for the state lookups' partition counts.
    prefix: String,
    read_only: bool,
    token: Option<String>,
    refresh: u32,
    /// The topics' recent entries and lag (the topics page's sparklines).
    history: history::History,
}

/// The token `args` give, from `--token` (or its environment variable) or the file.
fn token(args: &ServeArgs) -> Result<Option<String>> {
    let token = match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Failure(format!(
                    "cannot read the token from `{}`: {e}",
                    path.display()
                ))
            })?;
            Some(text.lines().next().unwrap_or("").trim().to_owned())
        }
        None => args.token.clone(),
    };
    match token {
        Some(t) if t.is_empty() => Err(Failure("the console token is empty".to_owned())),
        // It travels in a cookie and a header: printable ASCII without `;` or `,`.
        Some(t)
            if !t
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b';' && b != b',') =>
        {
            Err(Failure(
                "the console token must be printable ASCII without spaces, `;` or `,`".to_owned(),
            ))
        }
        t => Ok(t),
    }
}

/// The console's routes: pages behind the token check, the login page before it.
fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(pages::jobs))
        .route("/topics", get(pages::topics))
        .route("/topics/{topic}", get(pages::topic))
        .route("/dlq/{topic}", get(pages::dead_letters))
        .route("/dlq/{topic}/purge", post(actions::purge))
        .route("/dlq/{topic}/{partition}/{id}", get(pages::dead_letter))
        .route(
            "/dlq/{topic}/{partition}/{id}/replay",
            post(actions::replay),
        )
        .route(
            "/dlq/{topic}/{partition}/{id}/delete",
            post(actions::delete),
        )
        .route("/state", get(pages::state))
        .route("/checkpoints/{job}", get(pages::checkpoints))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&console),
            auth::require,
        ))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", get(auth::logout))
        .with_state(console)
}

/// Serves the console until Ctrl-C or SIGTERM.
pub(crate) async fn serve(mq: Mq, target: &Target, prefix: &str, args: &ServeArgs) -> Result<()> {
    let token = token(args)?;
    if token.is_none() && !args.listen.ip().is_loopback() {
        return Err(Failure(format!(
            "serving on {} (not a loopback address) needs a token: pass --token-file, --token or STREAMING_ADMIN_TOKEN",
            args.listen
        )));
    }
    let console = Arc::new(Console {
        mq,
        target: target.clone(),
        prefix: prefix.to_owned(),
        read_only: args.read_only,
        token,
        refresh: args.refresh,
        history: history::History::default(),
    });
    // Samples for the sparklines: every refresh interval (every 5 s when pages do not
    // refresh).
    let every =
        std::time::Duration::from_secs(u64::from(if args.refresh == 0 { 5 } else { args.refresh }));
    let sampled = Arc::clone(&console);
    tokio::spawn(async move { sampled.history.run(sampled.mq.clone(), every).await });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure(format!("cannot listen on {}: {e}", args.listen)))?;
    let at = listener
        .local_addr()
        .map_err(|e| Failure(format!("cannot listen on {}: {e}", args.listen)))?;
    let mode = if args.read_only { " (read-only)" } else { "" };
    eprintln!("serving the console on http://{at}/{mode}");
    axum::serve(listener, router(console))
        .with_graceful_shutdown(stopped())
        .await
        .map_err(|e| Failure(format!("the console stopped: {e}")))
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn token_of(args: &[&str]) -> Result<Option<String>> {
        let cli = Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| Failure(e.to_string()))?;
        token(&cli.serve)
    }

    #[test]
    fn a_token_must_be_cookie_safe_and_not_empty() {
        assert_eq!(
            token_of(&["--token", "s3cret"]).unwrap().as_deref(),
            Some("s3cret")
        );
        for bad in ["", "a b", "a;b", "a,b", "é"] {
            assert!(token_of(&["--token", bad]).is_err(), "{bad:?}");
        }
    }
}
