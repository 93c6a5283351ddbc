//! Command-line arguments of the `flights` example (`clap`).

use super::jobs::{DelaysOptions, EventTime, SessionsOptions};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The engine a job runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// The in-memory engine.
    #[default]
    Memory,
    /// The Redis engine: produces the flights into a fresh topic (counts: 4 partitions;
    /// delays, sessions: --partitions N), runs the job there until it has processed every
    /// flight (delays, sessions: and every partition has flushed its last windows after a
    /// 500 ms idle timeout), prints the memory engine's lines and deletes the topic.
    Redis,
}

/// The job to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `delays`.
    Delays(DelaysOptions),
    /// `sessions`.
    Sessions(SessionsOptions),
    /// `counts`.
    Counts,
}

/// Parsed arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// The job.
    pub command: Command,
    /// The engine (`--engine`).
    pub engine: Engine,
    /// `--data PATH`, if given.
    pub data: Option<PathBuf>,
    /// `--redis-url URL`, if given.
    pub redis_url: Option<String>,
    /// `--partitions N` of `delays` and `sessions` (default 1; always 1 for the others).
    pub partitions: u32,
}

/// The Redis server `--engine redis` uses without `--redis-url`.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Largest value in minutes whose milliseconds fit in `i64`.
const MAX_MINUTES: u64 = (i64::MAX / 60_000) as u64;

/// Event-time windows on every flight that left New York City in 2013.
#[derive(Parser, Debug)]
#[command(name = "flights")]
struct Cli {
    #[command(subcommand)]
    job: Job,
}

#[derive(Subcommand, Debug)]
enum Job {
    /// Per carrier, 1-hour tumbling event-time windows: count and sum of dep_delay; prints
    /// `carrier,window_start,flights,sum_dep_delay` per window firing, then
    /// `# skipped=N late=N windows=N`.
    Delays {
        /// Event time: scheduled or actual departure.
        #[arg(long, value_enum, value_name = "sched|actual", default_value = "sched")]
        event_time: EventTime,
        /// Watermark out-of-orderness in minutes.
        #[arg(long, value_name = "MIN", default_value_t = 0, value_parser = minutes(0))]
        ooo: u64,
        /// Allowed lateness of the windows in minutes.
        #[arg(long, value_name = "MIN", default_value_t = 0, value_parser = minutes(0))]
        lateness: u64,
        /// Replay the flights as N partitions keyed by carrier, each with its own windows
        /// and watermark; lines come partition by partition. With --engine redis: the
        /// topic's partitions, same lines in the same order.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = partitions())]
        partitions: u32,
        #[command(flatten)]
        common: Common,
    },
    /// Per tail number, event-time session windows over scheduled departures; prints
    /// `tailnum,session_start,session_end,flights` per session, then `# skipped=N sessions=N`.
    Sessions {
        /// Session gap in minutes, at least 1.
        #[arg(long, value_name = "MIN", default_value_t = 1440, value_parser = minutes(1))]
        gap: u64,
        /// As for delays, keyed by tail number.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = partitions())]
        partitions: u32,
        #[command(flatten)]
        common: Common,
    },
    /// Per carrier, a running count of departed flights in keyed ValueState; prints
    /// `carrier,flights` per carrier (final count, by carrier), then `# skipped=N`.
    Counts {
        #[command(flatten)]
        common: Common,
    },
}

/// The flags every job takes.
#[derive(clap::Args, Debug)]
struct Common {
    /// The engine.
    #[arg(long, value_enum, default_value = "memory")]
    engine: Engine,
    /// The Redis server of --engine redis (default: the REDIS_URL environment variable,
    /// else redis://127.0.0.1:6379), or a Redis Cluster:
    /// redis+cluster://host:port[,host:port...].
    #[arg(long, value_name = "URL", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    redis_url: Option<String>,
    /// The data file (default $STREAMING_DATA_DIR/flights.csv.zip, or
    /// ../shared/data/flights.csv.zip from the repo root when unset).
    #[arg(long, value_name = "PATH", value_parser = non_empty_path)]
    data: Option<PathBuf>,
}

fn non_empty_path(value: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err("needs a path".into());
    }
    Ok(PathBuf::from(value))
}

fn minutes(min: u64) -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(min..=MAX_MINUTES)
}

fn partitions() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..)
}

/// Parses the command line, program name first (`std::env::args()`).
///
/// # Errors
/// clap's error, which names the offending flag or subcommand, for a missing or unknown
/// subcommand, an unknown or repeated flag, a flag of another subcommand, a missing or
/// malformed value, or `--redis-url` without `--engine redis`; also for `--help`, whose
/// error prints the help (`clap::Error::exit` prints it and exits with 0 for help, 2 for
/// bad arguments).
pub fn parse_args<I, S>(args: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args)?;
    let (command, partitions, common) = match cli.job {
        Job::Delays {
            event_time,
            ooo,
            lateness,
            partitions,
            common,
        } => {
            let opts = DelaysOptions {
                event_time,
                out_of_orderness_min: ooo,
                lateness_min: lateness,
            };
            (Command::Delays(opts), partitions, common)
        }
        Job::Sessions {
            gap,
            partitions,
            common,
        } => (
            Command::Sessions(SessionsOptions { gap_min: gap }),
            partitions,
            common,
        ),
        Job::Counts { common } => (Command::Counts, 1, common),
    };
    if common.redis_url.is_some() && common.engine != Engine::Redis {
        let message = "the argument '--redis-url <URL>' needs '--engine redis'";
        return Err(Cli::command().error(clap::error::ErrorKind::ArgumentConflict, message));
    }
    Ok(Args {
        command,
        engine: common.engine,
        data: common.data,
        redis_url: common.redis_url,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse<const N: usize>(args: [&str; N]) -> Result<Args, clap::Error> {
        parse_args(std::iter::once("flights").chain(args))
    }

    /// The rejection's message (which names the flag) and its exit code.
    fn rejected<const N: usize>(args: [&str; N]) -> (String, i32) {
        let e = parse(args).expect_err("rejected");
        (e.to_string(), e.exit_code())
    }

    #[test]
    fn the_command_line_is_clap_s_view_of_it() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let a = parse(["delays"]).unwrap();
        assert_eq!(a.command, Command::Delays(DelaysOptions::default()));
        assert_eq!(a.engine, Engine::Memory);
        assert_eq!(a.data, None);
        let s = parse(["sessions"]).unwrap();
        assert_eq!(
            s.command,
            Command::Sessions(SessionsOptions { gap_min: 1440 })
        );
    }

    #[test]
    fn values_both_spellings() {
        let a = parse([
            "delays",
            "--event-time",
            "actual",
            "--ooo=30",
            "--lateness",
            "15",
            "--engine",
            "memory",
            "--data",
            "x.zip",
        ])
        .unwrap();
        assert_eq!(
            a.command,
            Command::Delays(DelaysOptions {
                event_time: EventTime::Actual,
                out_of_orderness_min: 30,
                lateness_min: 15
            })
        );
        assert_eq!(a.data, Some(PathBuf::from("x.zip")));
        assert_eq!(
            parse(["sessions", "--gap=60"]).unwrap().command,
            Command::Sessions(SessionsOptions { gap_min: 60 })
        );
    }

    #[test]
    fn errors_name_the_flag_and_exit_with_2() {
        for (args, flag) in [
            (vec!["fly"], "fly"),
            (vec!["delays", "--ooo", "-5"], "-5"),
            (vec!["delays", "--ooo"], "--ooo"),
            (vec!["delays", "--ooo", "x"], "--ooo"),
            (vec!["delays", "--lateness", "1.5"], "--lateness"),
            (vec!["delays", "--event-time", "arrival"], "--event-time"),
            (vec!["delays", "--gap", "5"], "--gap"),
            (vec!["sessions", "--gap", "0"], "--gap"),
            (vec!["sessions", "--ooo", "5"], "--ooo"),
            (vec!["sessions", "--bogus", "5"], "--bogus"),
            (vec!["sessions", "--gap", "5", "--gap", "6"], "--gap"),
            (vec!["delays", "--engine", "flink"], "--engine"),
            (vec!["delays", "--ooo", "99999999999999999"], "--ooo"),
            (vec!["delays", "--data", ""], "--data"),
        ] {
            let e = parse_args(std::iter::once("flights").chain(args.iter().copied()))
                .expect_err("rejected");
            assert!(e.to_string().contains(flag), "{args:?}: {e}");
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
        let (message, code) = rejected([]);
        assert!(message.contains("Usage"), "{message}");
        assert_eq!(code, 2);
    }

    #[test]
    fn windowed_jobs_run_on_redis() {
        let a = parse(["sessions", "--engine", "redis", "--gap", "60"]).unwrap();
        assert_eq!(
            (a.command, a.engine, a.redis_url, a.partitions),
            (
                Command::Sessions(SessionsOptions { gap_min: 60 }),
                Engine::Redis,
                None,
                1
            )
        );
        let a = parse([
            "delays",
            "--engine=redis",
            "--redis-url",
            "redis://h:1",
            "--ooo",
            "30",
        ])
        .unwrap();
        assert_eq!(a.engine, Engine::Redis);
        assert_eq!(a.redis_url.as_deref(), Some("redis://h:1"));
        assert_eq!(
            a.command,
            Command::Delays(DelaysOptions {
                out_of_orderness_min: 30,
                ..DelaysOptions::default()
            })
        );
    }

    #[test]
    fn counts_runs_on_both_engines() {
        let a = parse(["counts"]).unwrap();
        assert_eq!(
            (a.command, a.engine, a.redis_url),
            (Command::Counts, Engine::Memory, None)
        );
        let a = parse(["counts", "--engine", "redis", "--redis-url", "redis://h:1"]).unwrap();
        assert_eq!(a.engine, Engine::Redis);
        assert_eq!(a.redis_url.as_deref(), Some("redis://h:1"));
        let (message, code) = rejected(["counts", "--redis-url", "redis://h:1"]);
        assert!(message.contains("--redis-url"), "{message}");
        assert_eq!(code, 2);
        assert!(rejected(["counts", "--gap", "5"]).0.contains("--gap"));
    }

    #[test]
    fn partitions() {
        assert_eq!(parse(["delays"]).unwrap().partitions, 1);
        assert_eq!(
            parse(["delays", "--partitions", "4"]).unwrap().partitions,
            4
        );
        assert_eq!(parse(["sessions", "--partitions=3"]).unwrap().partitions, 3);
        for bad in [
            ["delays", "--partitions", "0"],
            ["delays", "--partitions", "x"],
            ["counts", "--partitions", "4"],
        ] {
            assert!(rejected(bad).0.contains("--partitions"), "{bad:?}");
        }
        let a = parse(["delays", "--partitions", "4", "--engine", "redis"]).unwrap();
        assert_eq!((a.engine, a.partitions), (Engine::Redis, 4));
    }

    #[test]
    fn help_prints_the_flags() {
        let e = parse(["delays", "--ooo", "5", "--help"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        assert_eq!(e.exit_code(), 0);
        assert!(e.to_string().contains("--lateness <MIN>"), "{e}");
    }
}
