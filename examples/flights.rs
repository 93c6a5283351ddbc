//! Event-time windows on real data: every flight that left New York City in 2013.
//!
//! ```text
//! cargo run --release --example flights -- delays [--event-time sched|actual] [--ooo MIN] [--lateness MIN] [--partitions N]
//! cargo run --release --example flights -- sessions [--gap MIN] [--partitions N]
//! cargo run --release --example flights -- counts
//! ```
//! All take `--engine memory|redis` (default memory), `--redis-url URL` (with `--engine
//! redis`, default the `REDIS_URL` environment variable, else `redis://127.0.0.1:6379`;
//! nothing is started for you) and `--data PATH`
//! (default: `flights.csv.zip` in the directory `STREAMING_DATA_DIR` names, or
//! `../shared/data/flights.csv.zip` relative to the repository root when it is unset).
//!
//! On the Redis engine every job produces the flights, in replay order, into a fresh topic
//! (`flights-<job>-<pid>-<nanos>`; the job name is the topic name), runs the same pipeline
//! text as the memory engine after a map from message to flight (payload
//! `carrier,tailnum,sched_ms,dep_delay,row`, `counts` sends only
//! `carrier,sched_ms,dep_delay`; message timestamp = the job's event time), prints the same
//! lines as the memory engine and deletes the topic. `counts` uses 4 partitions keyed by carrier and
//! parallelism 2, and is done once every message is acknowledged. `delays` (key = carrier)
//! and `sessions` (key = tail number; flights without one are produced without a key) use
//! `--partitions N` partitions (default 1) and parallelism `min(2, N)`, with a watermark
//! idle timeout of 500 ms. The input is finished when `JobClient::blocking_await_flushed` returns
//! true: every flight (all produced before the job started) is committed AND every
//! partition that received flights was idle-flushed (`idle_flushes >= 1` in
//! `JobClient::diagnostics`, watermark at `i64::MAX`) — a drained partition flushes its
//! watermark to the maximum after 500 ms without input, which fires its last windows,
//! so their lines are in. Each partition's lines reach the sink in its firing
//! order but partitions interleave, so the example prints them stably sorted by partition:
//! the order of the memory engine with the same `--partitions N`. `late` is the job's
//! `window_late_dropped` diagnostics counter (the memory engine counts its late side
//! output; both count the same flights). The job's state hashes stay in Redis.
//!
//! - `counts`: key = carrier, a running count of departed flights in a keyed `ValueState`.
//!   Output: `carrier,flights` per carrier (final count), by carrier code, then
//!   `# skipped=N`.
//!
//! The source replays the flights sorted by scheduled departure (stable: ties keep file
//! order). Scheduled departure (UTC) = `time_hour` + `minute` minutes; actual departure =
//! scheduled + `dep_delay` minutes.
//!
//! - `delays`: key = carrier, 1-hour tumbling event-time windows with the default
//!   event-time trigger, count and sum of `dep_delay`. Event time is the scheduled
//!   (default) or actual departure; the watermark lags the highest event time by `--ooo`
//!   minutes; windows accept late flights for `--lateness` minutes, and each such flight
//!   fires its window again (a new line with the updated totals). Flights later than that
//!   go to the late side output and are counted. Output: one line per window firing,
//!   `carrier,window_start,flights,sum_dep_delay` (start as `YYYY-MM-DDTHH:MM:SSZ`), then
//!   `# skipped=N late=N windows=N` — `windows` counts distinct (carrier, window) pairs
//!   that fired.
//! - `sessions`: key = tail number, event time = scheduled departure, watermark = event
//!   time, session windows with a gap of `--gap` minutes (default 1440). Output: one line
//!   per session, `tailnum,session_start,session_end,flights` (end = last flight + gap),
//!   then `# skipped=N sessions=N`. Windows that intersect or touch merge, but only while
//!   open: a flight exactly one gap after its plane's previous flight starts a new session
//!   when a flight of another plane with the same scheduled time came before it in the
//!   replay, because that flight moved the watermark past the earlier session's end, so the
//!   session had already fired (Flink behaves the same).
//!
//! `--partitions N` (default 1; `delays` and `sessions`) replays the flights as N
//! partitions the way a Redis topic with N partitions holds them (key = carrier for
//! `delays`, tail number for `sessions`; `streaming::mq::partition_for_key`): each partition
//! runs its own windows with its own watermark, one partition after another, and the lines
//! come partition by partition (firing order within one). With 1 partition the output is
//! that of the single stream; the Redis engine prints the same lines in the same order for
//! every N. Results can differ with N where another key's flights moved the single
//! stream's watermark: lateness (`--ooo`, `--event-time actual`) and which touching
//! sessions merge.
//!
//! `skipped` counts data rows left out of the job: in `delays`, rows whose `dep_time` or
//! `dep_delay` is `NA` (cancelled flights); in `sessions`, those plus rows whose `tailnum`
//! is `NA` (each row counted once).
//!
//! Results go to stdout only; diagnostics (load time, run time) go to stderr through
//! `tracing` (`RUST_LOG=debug` for more). Exit codes: 0 ok, 1 runtime failure (e.g. Redis
//! unreachable), 2 bad arguments.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;
use std::time::Instant;
use streaming_suite::flights::{self, Args, Command, Engine};

fn main() -> ExitCode {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let args = match flights::parse_args(std::env::args_os()) {
        Ok(a) => a,
        // `--help` prints the help and exits with 0; bad arguments exit with 2.
        Err(e) => e.exit(),
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(mut e: &(dyn std::error::Error + 'static)) -> bool {
    loop {
        if let Some(io) = e.downcast_ref::<io::Error>() {
            return io.kind() == io::ErrorKind::BrokenPipe;
        }
        match e.source() {
            Some(s) => e = s,
            None => return false,
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let path = args.data.unwrap_or_else(flights::default_data_path);
    let started = Instant::now();
    let data = flights::load(&path)?;
    tracing::info!(
        path = %path.display(),
        rows = data.rows,
        flights = data.flights.len(),
        skipped_na_departure = data.skipped_na_departure,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded"
    );

    let redis = |partitions: u32| {
        let url = args
            .redis_url
            .clone()
            .or_else(|| std::env::var("REDIS_URL").ok())
            .unwrap_or_else(|| flights::DEFAULT_REDIS_URL.to_string());
        let mut r = flights::RedisWindowed::new(url);
        r.partitions = partitions;
        r
    };
    let started = Instant::now();
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    match args.command {
        Command::Delays(opts) => {
            let print = |line: &flights::DelayLine| writeln!(out, "{line}");
            let summary = match args.engine {
                Engine::Memory => {
                    flights::delays_partitioned(&data, &opts, args.partitions, print)?
                }
                Engine::Redis => {
                    flights::delays_redis(&data, &opts, &redis(args.partitions), print)?
                }
            };
            writeln!(out, "{summary}")?;
            tracing::info!(
                engine = ?args.engine,
                partitions = args.partitions,
                ?opts,
                firings = summary.firings,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "delays done"
            );
        }
        Command::Sessions(opts) => {
            let print = |line: &flights::SessionLine| writeln!(out, "{line}");
            let summary = match args.engine {
                Engine::Memory => {
                    flights::sessions_partitioned(&data, &opts, args.partitions, print)?
                }
                Engine::Redis => {
                    flights::sessions_redis(&data, &opts, &redis(args.partitions), print)?
                }
            };
            writeln!(out, "{summary}")?;
            if summary.late > 0 {
                tracing::warn!(
                    late = summary.late,
                    "flights were late for their session (side output)"
                );
            }
            tracing::info!(
                engine = ?args.engine,
                partitions = args.partitions,
                ?opts,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "sessions done"
            );
        }
        Command::Counts => {
            let print = |line: &flights::CountLine| writeln!(out, "{line}");
            let summary = match args.engine {
                Engine::Memory => flights::counts(&data, print)?,
                Engine::Redis => {
                    let url = redis(1).url;
                    flights::counts_redis(&data, &flights::RedisCounts::new(url), print)?
                }
            };
            writeln!(out, "{summary}")?;
            tracing::info!(
                engine = ?args.engine,
                carriers = summary.carriers,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "counts done"
            );
        }
    }
    out.flush()?;
    Ok(())
}
