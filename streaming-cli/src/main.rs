//! `streaming-admin`: the topics, consumer lag, dead letters, running jobs and keyed state of the
//! `streaming` library's Redis Streams queue and Redis engine, from a shell.
//!
//! Every command prints a human table, or with `--json` one JSON document on stdout; a
//! failure prints one line on stderr (`error: …`) and exits with status 1 (2 for a usage
//! error, from clap).

mod checkpoints;
mod console;
mod data;
mod dlq;
mod jobs;
mod lag;
mod output;
mod panes;
mod sink_tail;
mod state;
mod topics;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use streaming::mq::{Mq, MqOptions, TlsOptions};

use output::Output;

/// The Redis URL when neither `--redis-url` nor `REDIS_URL` gives one.
const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Inspect and repair the topics, dead letters and keyed state that the `streaming`
/// library keeps in Redis.
#[derive(Debug, Parser)]
#[command(name = "streaming-admin", version)]
struct Cli {
    /// Redis to connect to (`redis://host:port/db`, or `redis+cluster://host:port,…`). A
    /// URL with a password is better given by `REDIS_URL` or `--redis-url-file` than on
    /// the command line, where other users of the host see it; output shows it as `***`.
    #[arg(long, env = "REDIS_URL", hide_env_values = true, default_value = DEFAULT_REDIS_URL, global = true)]
    redis_url: String,
    /// A file holding the Redis URL (its first line; e.g. a mounted secret). Replaces
    /// `--redis-url` and `REDIS_URL`.
    #[arg(long, value_name = "PATH", global = true)]
    redis_url_file: Option<std::path::PathBuf>,
    /// With a `rediss://` URL: a PEM file of the CA to trust (default: the system's roots).
    #[arg(long, value_name = "PATH", global = true)]
    tls_ca_file: Option<String>,
    /// With a `rediss://` URL: a PEM file of the client certificate to present.
    #[arg(long, value_name = "PATH", global = true, requires = "tls_key_file")]
    tls_cert_file: Option<String>,
    /// With a `rediss://` URL: a PEM file of the client certificate's key.
    #[arg(long, value_name = "PATH", global = true, requires = "tls_cert_file")]
    tls_key_file: Option<String>,
    /// With a `rediss://` URL, for tests only: accept any server certificate unchecked.
    #[arg(long, global = true)]
    tls_insecure_skip_verify_for_tests: bool,
    /// Prefix of the message queue's keys (`MqOptions::key_prefix`).
    #[arg(long, default_value_t = MqOptions::default().key_prefix, global = true)]
    key_prefix: String,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List, describe, create and delete topics.
    #[command(subcommand)]
    Topics(topics::TopicsCommand),
    /// Lag and pending entries per topic, consumer group and partition.
    Lag(lag::LagArgs),
    /// Sends messages to a topic: a payload, stdin's lines, or a JSON-lines file.
    Produce(data::ProduceArgs),
    /// Follows a topic: prints each message (partition, id, key, event time, payload) as
    /// it arrives, without a consumer group (no consumer's position changes). With
    /// `--sink NAME`, follows a job's list or stream sink on the topic's partitions
    /// instead (partition, index or id, value).
    Tail(data::TailArgs),
    /// List, show, replay and purge dead letters.
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
    /// The Redis engine's running jobs, from the job registry.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// Read the Redis engine's keyed state.
    #[command(subcommand)]
    State(state::StateCommand),
    /// A Redis engine job's checkpoints.
    #[command(subcommand)]
    Checkpoints(checkpoints::CheckpointsCommand),
    /// Serves a web console: jobs and their partitions, topics, dead letters (edit,
    /// replay, delete) and keyed state; refreshes by itself.
    Serve(console::ServeArgs),
    /// Prints a shell completion script, e.g.
    /// `streaming-admin completions bash > /etc/bash_completion.d/streaming-admin`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// A command's failure: the one line printed after `error: `.
#[derive(Debug)]
struct Failure(String);

impl From<streaming::Error> for Failure {
    fn from(e: streaming::Error) -> Self {
        Failure(e.to_string())
    }
}

type Result<T> = std::result::Result<T, Failure>;

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    if let Command::Completions { shell } = cli.command {
        // Needs no Redis.
        use clap::CommandFactory;
        clap_complete::generate(
            shell,
            &mut Cli::command(),
            "streaming-admin",
            &mut std::io::stdout(),
        );
        return ExitCode::SUCCESS;
    }
    if let Some(path) = &cli.redis_url_file {
        match read_url_file(path) {
            Ok(url) => cli.redis_url = url,
            Err(Failure(message)) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        }
    }
    let secrets = Secrets::of(&cli.redis_url);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(&cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("error: {}", secrets.scrub(&message));
            ExitCode::FAILURE
        }
    }
}

/// The first line of the file at `path`, trimmed: the Redis URL.
fn read_url_file(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure(format!(
            "cannot read the Redis URL from `{}`: {e}",
            path.display()
        ))
    })?;
    match text.lines().next().map(str::trim) {
        Some(url) if !url.is_empty() => Ok(url.to_string()),
        _ => Err(Failure(format!(
            "`{}` holds no Redis URL (its first line is empty)",
            path.display()
        ))),
    }
}

/// What of the URL must never be printed: the URL itself (shown redacted instead) and its
/// password, as written and percent-decoded (an error of the client may quote either).
struct Secrets {
    url: String,
    shown: String,
    passwords: Vec<String>,
}

impl Secrets {
    fn of(url: &str) -> Self {
        let shown = streaming::mq::redact_url(url);
        let mut passwords = Vec::new();
        // The password is what redaction replaced: the user information after its `:`.
        if let Some((_, rest)) = url.split_once("://") {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            if let Some((user, _)) = authority.rsplit_once('@') {
                if let Some((_, password)) = user.split_once(':') {
                    passwords.push(password.to_string());
                }
            }
            let query = rest.split_once('?').map_or("", |(_, q)| q);
            for param in query.split('&') {
                if let Some((k, v)) = param.split_once('=') {
                    if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") {
                        passwords.push(v.to_string());
                    }
                }
            }
        }
        let decoded: Vec<String> = (passwords.iter())
            .filter_map(|p| {
                let d = percent_encoding::percent_decode_str(p).decode_utf8().ok()?;
                (d != p.as_str()).then(|| d.into_owned())
            })
            .collect();
        passwords.extend(decoded);
        passwords.retain(|p| !p.is_empty());
        // Longest first, so a password holding another is replaced whole.
        passwords.sort_by_key(|p| std::cmp::Reverse(p.len()));
        Secrets {
            url: url.to_string(),
            shown,
            passwords,
        }
    }

    /// `text` with the URL redacted and every form of its password replaced by `***`.
    fn scrub(&self, text: &str) -> String {
        let mut out = text.replace(&self.url, &self.shown);
        for p in &self.passwords {
            out = out.replace(p.as_str(), "***");
        }
        out
    }
}

/// Where the CLI connects: the URL and its TLS options.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) tls: TlsOptions,
}

impl Cli {
    fn target(&self) -> Result<Target> {
        let tls = TlsOptions::builder()
            .insecure_skip_verify_for_tests(self.tls_insecure_skip_verify_for_tests);
        let tls = match &self.tls_ca_file {
            Some(p) => tls.ca_file(p.as_str()),
            None => tls,
        };
        let tls = match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(c), Some(k)) => tls.client_cert_file(c.as_str()).client_key_file(k.as_str()),
            _ => tls,
        };
        Ok(Target {
            url: self.redis_url.clone(),
            tls: tls.build()?,
        })
    }
}

async fn run(cli: &Cli) -> Result<()> {
    let out = Output { json: cli.json };
    let target = cli.target()?;
    let prefix = cli.key_prefix.as_str();
    match &cli.command {
        Command::Topics(cmd) => topics::run(&connect(&target, prefix).await?, cmd, &out).await,
        Command::Lag(args) => lag::run(&connect(&target, prefix).await?, args, &out).await,
        Command::Produce(args) => data::produce(&connect(&target, prefix).await?, args, &out).await,
        Command::Tail(args) => match &args.sink {
            Some(sink) => {
                let mq = connect(&target, prefix).await?;
                sink_tail::tail(&mq, &target, args, sink, &out).await
            }
            None => data::tail(&connect(&target, prefix).await?, args, &out).await,
        },
        Command::Dlq(cmd) => dlq::run(&connect(&target, prefix).await?, cmd, &out).await,
        Command::Jobs(cmd) => jobs::run(&connect(&target, prefix).await?, cmd, &out).await,
        // Engine state is not the queue's: a plain connection reads it.
        Command::State(cmd) => state::run(&target, prefix, cmd, &out).await,
        Command::Checkpoints(cmd) => checkpoints::run(&target, cmd, &out).await,
        Command::Serve(args) => {
            console::serve(connect(&target, prefix).await?, &target, prefix, args).await
        }
        Command::Completions { .. } => unreachable!("handled before connecting"),
    }
}

/// A queue handle on `target` with key prefix `prefix`; a failure names the URL.
async fn connect(target: &Target, prefix: &str) -> Result<Mq> {
    let url = target.url.as_str();
    let opts = MqOptions::builder()
        .key_prefix(prefix)
        .tls(target.tls.clone())
        .build()?;
    Mq::connect(url, opts).await.map_err(|e| {
        Failure(format!(
            "cannot connect to Redis at `{}`: {e}",
            streaming::mq::redact_url(url)
        ))
    })
}
