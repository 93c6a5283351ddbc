//! Command-line arguments of the `flights` example (plain `std::env::args` parsing).

use super::jobs::{DelaysOptions, EventTime, SessionsOptions};
use std::fmt;
use std::path::PathBuf;

/// The usage text (`--help`).
pub const USAGE: &str = "\
usage: flights delays   [--event-time sched|actual] [--ooo MIN] [--lateness MIN] [--partitions N] [COMMON]
       flights sessions [--gap MIN] [--partitions N] [COMMON]
       flights counts   [COMMON]

  delays     per carrier, 1-hour tumbling event-time windows: count and sum of dep_delay;
             prints `carrier,window_start,flights,sum_dep_delay` per window firing, then
             `# skipped=N late=N windows=N`
    --event-time sched|actual   event time: scheduled or actual departure (default sched)
    --ooo MIN                   watermark out-of-orderness in minutes (default 0)
    --lateness MIN              allowed lateness of the windows in minutes (default 0)
    --partitions N              replay the flights as N partitions keyed by carrier, each
                                with its own windows and watermark (default 1); lines come
                                partition by partition. With --engine redis: the topic's
                                partitions, same lines in the same order
  sessions   per tail number, event-time session windows over scheduled departures;
             prints `tailnum,session_start,session_end,flights` per session, then
             `# skipped=N sessions=N`
    --gap MIN                   session gap in minutes, at least 1 (default 1440)
    --partitions N              as for delays, keyed by tail number (default 1)
  counts     per carrier, a running count of departed flights in keyed ValueState;
             prints `carrier,flights` per carrier (final count, by carrier), then
             `# skipped=N`

COMMON:
    --engine memory|redis       the engine (default memory); `redis` produces the flights
                                into a fresh topic (counts: 4 partitions; delays, sessions:
                                --partitions N), runs the job there until it has processed
                                every flight (delays, sessions: and every partition has
                                flushed its last windows after a 500 ms idle timeout),
                                prints the memory engine's lines and deletes the topic
    --redis-url URL             the Redis server of --engine redis (default redis://127.0.0.1:6379),
                                or a Redis Cluster: redis+cluster://host:port[,host:port...]
    --data PATH                 the data file (default $STREAMING_DATA_DIR/flights.csv.zip, or
                                ../shared/data/flights.csv.zip from the repo root when unset)
    -h, --help                  this text

Flags take their value as `--flag VALUE` or `--flag=VALUE`. Bad arguments exit with code 2.";

/// The engine a job runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// The in-memory engine.
    #[default]
    Memory,
    /// The Redis engine.
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
    /// `--help`.
    Help,
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

/// A rejected command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// Malformed arguments; `flag` names the offending flag (or `command`).
    Usage {
        /// The flag (e.g. `--ooo`), or `command` for the subcommand.
        flag: String,
        /// What is wrong.
        message: String,
    },
}

impl ArgsError {
    fn usage(flag: &str, message: impl Into<String>) -> Self {
        ArgsError::Usage {
            flag: flag.to_string(),
            message: message.into(),
        }
    }

    /// The process exit code: 2 (bad arguments).
    pub fn exit_code(&self) -> i32 {
        match self {
            ArgsError::Usage { .. } => 2,
        }
    }
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgsError::Usage { flag, message } => write!(f, "{flag}: {message}"),
        }
    }
}

impl std::error::Error for ArgsError {}

/// Largest value in minutes whose milliseconds fit in `i64`.
const MAX_MINUTES: u64 = (i64::MAX / 60_000) as u64;

fn parse_minutes(flag: &str, value: &str, min: u64) -> Result<u64, ArgsError> {
    let n: u64 = value.parse().map_err(|_| {
        ArgsError::usage(
            flag,
            format!("expected a whole number of minutes (>= {min}), got `{value}`"),
        )
    })?;
    if n < min {
        return Err(ArgsError::usage(
            flag,
            format!("must be at least {min} minute(s), got {n}"),
        ));
    }
    if n > MAX_MINUTES {
        return Err(ArgsError::usage(
            flag,
            format!("{n} minutes is too large (at most {MAX_MINUTES})"),
        ));
    }
    Ok(n)
}

/// Parses the arguments after the program name.
///
/// # Errors
/// [`ArgsError::Usage`] naming the flag for a missing or unknown subcommand, an unknown or
/// repeated flag, a flag of the other subcommand, a missing or malformed value.
pub fn parse_args<I, S>(args: I) -> Result<Args, ArgsError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(Args {
            command: Command::Help,
            engine: Engine::Memory,
            data: None,
            redis_url: None,
            partitions: 1,
        });
    }
    let Some(command) = args.first() else {
        return Err(ArgsError::usage(
            "command",
            "missing: expected `delays`, `sessions` or `counts` (see --help)",
        ));
    };
    let kind = match command.as_str() {
        k @ ("delays" | "sessions" | "counts") => k,
        other if other.starts_with('-') => {
            return Err(ArgsError::usage(
                "command",
                format!(
                    "expected `delays`, `sessions` or `counts` before the flags, got `{other}`"
                ),
            ))
        }
        other => {
            return Err(ArgsError::usage(
                "command",
                format!("unknown command `{other}`: expected `delays`, `sessions` or `counts`"),
            ))
        }
    };
    let is_delays = kind == "delays";
    let mut redis_url = None;
    let mut delays = DelaysOptions::default();
    let mut sessions = SessionsOptions::default();
    let mut engine = None;
    let mut data = None;
    let mut partitions = 1u32;
    let mut seen: Vec<String> = Vec::new();
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if !flag.starts_with("--") {
            return Err(ArgsError::usage(
                &flag,
                "unexpected argument (flags start with --)",
            ));
        }
        let (known_here, owner) = match flag.as_str() {
            "--engine" | "--data" | "--redis-url" => (true, kind),
            "--event-time" | "--ooo" | "--lateness" => (is_delays, "delays"),
            "--gap" => (kind == "sessions", "sessions"),
            "--partitions" => (kind != "counts", "delays` and `sessions"),
            _ => {
                return Err(ArgsError::usage(
                    &flag,
                    format!("unknown flag for `{command}` (see --help)"),
                ))
            }
        };
        if !known_here {
            return Err(ArgsError::usage(
                &flag,
                format!("is a flag of `{owner}`, not of `{command}`"),
            ));
        }
        if seen.contains(&flag) {
            return Err(ArgsError::usage(&flag, "given more than once"));
        }
        seen.push(flag.clone());
        let value = match inline {
            Some(v) => v,
            None => match rest.next() {
                Some(v) if !v.starts_with("--") => v.clone(),
                _ => return Err(ArgsError::usage(&flag, "needs a value")),
            },
        };
        match flag.as_str() {
            "--engine" => match value.as_str() {
                "memory" => engine = Some(Engine::Memory),
                "redis" => engine = Some(Engine::Redis),
                other => {
                    return Err(ArgsError::usage(
                        "--engine",
                        format!("unknown engine `{other}`: expected `memory` or `redis`"),
                    ))
                }
            },
            "--redis-url" => {
                if value.is_empty() {
                    return Err(ArgsError::usage("--redis-url", "needs a URL"));
                }
                redis_url = Some(value);
            }
            "--data" => {
                if value.is_empty() {
                    return Err(ArgsError::usage("--data", "needs a path"));
                }
                data = Some(PathBuf::from(value));
            }
            "--event-time" => {
                delays.event_time = match value.as_str() {
                    "sched" => EventTime::Scheduled,
                    "actual" => EventTime::Actual,
                    other => {
                        return Err(ArgsError::usage(
                            "--event-time",
                            format!("expected `sched` or `actual`, got `{other}`"),
                        ))
                    }
                }
            }
            "--ooo" => delays.out_of_orderness_min = parse_minutes("--ooo", &value, 0)?,
            "--lateness" => delays.lateness_min = parse_minutes("--lateness", &value, 0)?,
            "--gap" => sessions.gap_min = parse_minutes("--gap", &value, 1)?,
            "--partitions" => {
                partitions = match value.parse::<u32>() {
                    Ok(n) if n >= 1 => n,
                    _ => {
                        return Err(ArgsError::usage(
                            "--partitions",
                            format!("expected a whole number of partitions (>= 1), got `{value}`"),
                        ))
                    }
                }
            }
            _ => unreachable!("checked above"),
        }
    }
    let command = match kind {
        "delays" => Command::Delays(delays),
        "sessions" => Command::Sessions(sessions),
        _ => Command::Counts,
    };
    let engine = engine.unwrap_or_default();
    if redis_url.is_some() && engine != Engine::Redis {
        return Err(ArgsError::usage("--redis-url", "needs --engine redis"));
    }
    Ok(Args {
        command,
        engine,
        data,
        redis_url,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag_of(r: Result<Args, ArgsError>) -> String {
        match r {
            Err(ArgsError::Usage { flag, .. }) => flag,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let a = parse_args(["delays"]).unwrap();
        assert_eq!(a.command, Command::Delays(DelaysOptions::default()));
        assert_eq!(a.engine, Engine::Memory);
        assert_eq!(a.data, None);
        let s = parse_args(["sessions"]).unwrap();
        assert_eq!(
            s.command,
            Command::Sessions(SessionsOptions { gap_min: 1440 })
        );
    }

    #[test]
    fn values_both_spellings() {
        let a = parse_args([
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
            parse_args(["sessions", "--gap=60"]).unwrap().command,
            Command::Sessions(SessionsOptions { gap_min: 60 })
        );
    }

    #[test]
    fn errors_name_the_flag() {
        assert_eq!(flag_of(parse_args(Vec::<String>::new())), "command");
        assert_eq!(flag_of(parse_args(["fly"])), "command");
        assert_eq!(flag_of(parse_args(["delays", "--ooo", "-5"])), "--ooo");
        assert_eq!(flag_of(parse_args(["delays", "--ooo"])), "--ooo");
        assert_eq!(flag_of(parse_args(["delays", "--ooo", "x"])), "--ooo");
        assert_eq!(
            flag_of(parse_args(["delays", "--lateness", "1.5"])),
            "--lateness"
        );
        assert_eq!(
            flag_of(parse_args(["delays", "--event-time", "arrival"])),
            "--event-time"
        );
        assert_eq!(flag_of(parse_args(["delays", "--gap", "5"])), "--gap");
        assert_eq!(flag_of(parse_args(["sessions", "--gap", "0"])), "--gap");
        assert_eq!(flag_of(parse_args(["sessions", "--ooo", "5"])), "--ooo");
        assert_eq!(flag_of(parse_args(["sessions", "--bogus", "5"])), "--bogus");
        assert_eq!(
            flag_of(parse_args(["sessions", "--gap", "5", "--gap", "6"])),
            "--gap"
        );
        assert_eq!(
            flag_of(parse_args(["delays", "--engine", "flink"])),
            "--engine"
        );
        assert_eq!(
            flag_of(parse_args(["delays", "--ooo", "99999999999999999"])),
            "--ooo"
        );
        assert_eq!(
            parse_args(["delays", "--ooo", "x"])
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    #[test]
    fn windowed_jobs_run_on_redis() {
        let a = parse_args(["sessions", "--engine", "redis", "--gap", "60"]).unwrap();
        assert_eq!(
            (a.command, a.engine, a.redis_url, a.partitions),
            (
                Command::Sessions(SessionsOptions { gap_min: 60 }),
                Engine::Redis,
                None,
                1
            )
        );
        let a = parse_args([
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
        let a = parse_args(["counts"]).unwrap();
        assert_eq!(
            (a.command, a.engine, a.redis_url),
            (Command::Counts, Engine::Memory, None)
        );
        let a = parse_args(["counts", "--engine", "redis", "--redis-url", "redis://h:1"]).unwrap();
        assert_eq!(a.engine, Engine::Redis);
        assert_eq!(a.redis_url.as_deref(), Some("redis://h:1"));
        assert_eq!(
            flag_of(parse_args(["counts", "--redis-url", "redis://h:1"])),
            "--redis-url"
        );
        assert_eq!(flag_of(parse_args(["counts", "--gap", "5"])), "--gap");
    }

    #[test]
    fn partitions() {
        assert_eq!(parse_args(["delays"]).unwrap().partitions, 1);
        assert_eq!(
            parse_args(["delays", "--partitions", "4"])
                .unwrap()
                .partitions,
            4
        );
        assert_eq!(
            parse_args(["sessions", "--partitions=3"])
                .unwrap()
                .partitions,
            3
        );
        assert_eq!(
            flag_of(parse_args(["delays", "--partitions", "0"])),
            "--partitions"
        );
        assert_eq!(
            flag_of(parse_args(["delays", "--partitions", "x"])),
            "--partitions"
        );
        assert_eq!(
            flag_of(parse_args(["counts", "--partitions", "4"])),
            "--partitions"
        );
        let a = parse_args(["delays", "--partitions", "4", "--engine", "redis"]).unwrap();
        assert_eq!((a.engine, a.partitions), (Engine::Redis, 4));
    }

    #[test]
    fn help_wins() {
        assert_eq!(
            parse_args(["delays", "--ooo", "x", "--help"])
                .unwrap()
                .command,
            Command::Help
        );
    }
}
