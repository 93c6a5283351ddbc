//! Checkpoint mode of `redis_engine_bench` (`--checkpoint [--messages N]`):
//!
//! 1. Per partition size — 10,000, 100,000 and 1,000,000 stored keys of the keyed count in
//!    a 1-partition topic (written straight into the state hash, as in takeover mode, then
//!    100 records through the job) —
//!    the time of `trigger_checkpoint_now` (the partition's owner copies its part inside
//!    Redis in steps of 500 fields) and the longest Redis command during it (`SLOWLOG`,
//!    every command logged); then the same for restoring that checkpoint into a new job
//!    (`restore_from_checkpoint` + `blocking_start`, which restores before it returns).
//! 2. The keyed count of throughput mode (10,000 keys, 4 partitions, Offset mode,
//!    parallelism 1, N messages, default 1,000,000) with checkpoints every 1 s against
//!    none, interleaved, three rounds each: medians and their ratio.

use std::time::{Duration, Instant};

use streaming::mq::{Mq, MqOptions};
use streaming::redis::{AckMode, CheckpointStatus, RedisEnv, RedisRuntimeConfig};

/// Logs every command in the slow log (bench server only) and empties it.
fn slowlog_everything(conn: &mut redis::Connection) {
    for (k, v) in [
        ("slowlog-log-slower-than", 0),
        ("slowlog-max-len", 1_000_000),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query(conn)
            .expect("CONFIG SET");
    }
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(conn)
        .expect("SLOWLOG");
}

/// The longest command in the slow log: (µs, its first words).
fn longest(conn: &mut redis::Connection) -> (u64, String) {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(conn)
        .unwrap_or_default();
    (entries.into_iter())
        .filter_map(|e| {
            let redis::Value::Array(f) = e else {
                return None;
            };
            let micros: u64 = redis::from_redis_value(f.get(2)?).ok()?;
            let args: Vec<String> = redis::from_redis_value(f.get(3)?).unwrap_or_default();
            let name = args.first()?.to_uppercase();
            if ["SLOWLOG", "CONFIG"].contains(&name.as_str()) {
                return None; // the benchmark's own
            }
            // A script (after its lease and fencing keys): its third key says what it worked on.
            let what = if name.starts_with("EVAL") {
                args.get(5)
            } else {
                args.get(1)
            };
            let what: String = what.map_or(String::new(), |a| a.chars().take(60).collect());
            Some((micros, format!("{name} {what}")))
        })
        .max_by_key(|(m, _)| *m)
        .unwrap_or_default()
}

/// One partition of `keys` stored keys: (checkpoint ms, longest command during it,
/// restore ms, longest command during the restore).
fn size_run(
    url: &str,
    rt: &tokio::runtime::Runtime,
    keys: u64,
    unique: &impl Fn(&str) -> String,
) -> (f64, (u64, String), f64, (u64, String)) {
    let (mq_prefix, state_prefix) = (unique("ck-mq"), unique("ck-state"));
    let opts = MqOptions::builder()
        .key_prefix(mq_prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    rt.block_on(mq.create_topic("t", 1)).expect("create topic");
    let mut conn = redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect");
    super::takeover::populate(&mut conn, &state_prefix, keys);
    let config = || {
        RedisRuntimeConfig::builder()
            .job_name("bench")
            .state_key_prefix(&state_prefix)
            .checkpoint_key_prefix(format!("{state_prefix}:ck:"))
            .mq_options(opts.clone())
            .build()
            .unwrap()
    };
    let env = RedisEnv::try_with_config(url, config()).unwrap();
    super::register_keyed_count(&env);
    let job = env.blocking_start().unwrap();
    // 100 records of stored keys: the state's schema fingerprint is known (as in any job
    // that ran), so the copy knows the state keeps no per-key collections.
    super::takeover::send(rt, &mq, (0..100).map(|i| format!("k{}", i * (keys / 100))));
    while (job.diagnostics().partitions.iter())
        .map(|p| p.records)
        .sum::<u64>()
        < 100
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    slowlog_everything(&mut conn);
    let started = Instant::now();
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    let ck_ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(ck.status, CheckpointStatus::Complete, "{ck:?}");
    let ck_longest = longest(&mut conn);
    job.blocking_shutdown(Duration::from_secs(30));
    let env = RedisEnv::try_with_config(url, config()).unwrap();
    super::register_keyed_count(&env);
    env.restore_from_checkpoint(ck.id).unwrap();
    slowlog_everything(&mut conn);
    let started = Instant::now();
    let job = env.blocking_start().unwrap();
    let restore_ms = started.elapsed().as_secs_f64() * 1e3;
    let restore_longest = longest(&mut conn);
    job.blocking_shutdown(Duration::from_secs(30));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(10_000)
        .query(&mut conn)
        .unwrap_or(());
    rt.block_on(mq.delete_topic("t")).ok();
    for prefix in [&mq_prefix, &state_prefix] {
        super::delete_prefix(url, prefix);
    }
    (ck_ms, ck_longest, restore_ms, restore_longest)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The checkpoint benchmark; prints two Markdown tables.
pub(crate) fn checkpoint_main(url: &str, n: usize, unique: impl Fn(&str) -> String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| keys in the partition | checkpoint | longest command | restore | longest command |"
    );
    println!("|---|---|---|---|---|");
    for keys in [10_000, 100_000, 1_000_000] {
        let (ck, ck_long, restore, restore_long) = size_run(url, &rt, keys, &unique);
        println!(
            "| {keys} | {ck:.1} ms | {:.2} ms `{}` | {restore:.1} ms | {:.2} ms `{}` |",
            ck_long.0 as f64 / 1e3,
            ck_long.1,
            restore_long.0 as f64 / 1e3,
            restore_long.1
        );
    }
    let run = |interval| super::CountRun {
        keys: 10_000,
        mode: AckMode::Offset,
        parallelism: 1,
        partitions: 4,
        replica_wait: None,
        checkpoint_interval: interval,
        sink: super::sinks::SinkKind::Discard,
    };
    let (mut none, mut every_s) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        none.push(super::count_run(url, &rt, n, &run(None)));
        every_s.push(super::count_run(
            url,
            &rt,
            n,
            &run(Some(Duration::from_secs(1))),
        ));
    }
    println!();
    println!("| keyed count, 10,000 keys, {n} messages | runs (msg/s) | median |");
    println!("|---|---|---|");
    for (name, rates) in [
        ("no checkpoints", &none),
        ("checkpoint every 1 s", &every_s),
    ] {
        let runs: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        println!(
            "| {name} | {} | {:.0} |",
            runs.join(", "),
            median(rates.clone())
        );
    }
    println!(
        "| ratio (every 1 s / none) | | {:.2} |",
        median(every_s) / median(none)
    );
}
