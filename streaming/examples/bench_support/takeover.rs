//! Takeover mode of `redis_engine_bench` (`--takeover [--keys N]`): a 1-partition topic
//! whose keyed count state (`ValueState<u64>`) already holds `N` keys (default
//! 1,000,000, written straight into the state hash), taken by a new job instance.
//!
//! Reports: `blocking_start` → partition taken, taken → first batch committed (100 records
//! of stored keys waiting), then 200,000 records over random stored keys (every batch
//! misses keys: the cache fills to its bound and evicts) with their rate; the Redis
//! commands that took 10 ms or more during all of it (`SLOWLOG`, threshold 10 ms); and the
//! process RSS growth over the run against `state_cache_max_entries`.

use std::time::{Duration, Instant};

use streaming::mq::{Mq, MqOptions, OutgoingMessage};
use streaming::redis::{JobClient, RedisEnv, RedisRuntimeConfig};

/// This process's resident set size in bytes (`/proc/self/status`), 0 when unknown.
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn records(job: &JobClient) -> u64 {
    (job.diagnostics().partitions.iter())
        .map(|p| p.records + p.failed)
        .sum()
}

fn taken(job: &JobClient) -> bool {
    job.diagnostics().partitions.iter().any(|p| p.taken)
}

/// A small deterministic generator (xorshift) for the random keys.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

pub(crate) fn send(rt: &tokio::runtime::Runtime, mq: &Mq, keys: impl Iterator<Item = String>) {
    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = keys
        .map(|k| OutgoingMessage::new(k.clone()).key(k))
        .collect();
    for chunk in msgs.chunks(1000) {
        rt.block_on(producer.send_batch("t", chunk))
            .expect("produce");
    }
}

fn wait(job: &JobClient, what: &str, mut done: impl FnMut(&JobClient) -> bool) -> Instant {
    let start = Instant::now();
    while !done(job) {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "{what}: too slow"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    Instant::now()
}

/// Writes `keys` entries `"k{i}"` → `1` into the count hash and lists it in the index.
pub(crate) fn populate(conn: &mut redis::Connection, state_prefix: &str, keys: u64) {
    let base = format!("{state_prefix}:bench:{{t:0}}:g");
    let hash = format!("{base}:t.g/3:process:count");
    let mut i = 0;
    while i < keys {
        let end = (i + 10_000).min(keys);
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&hash);
        for k in i..end {
            cmd.arg(format!("\"k{k}\"")).arg(1);
        }
        let _: () = cmd.query(conn).expect("HSET");
        i = end;
    }
    let _: () = redis::cmd("SADD")
        .arg(format!("{base}:index"))
        .arg(&hash)
        .query(conn)
        .expect("SADD");
}

/// The takeover benchmark; prints a Markdown table.
pub(crate) fn takeover_main(url: &str, keys: u64, unique: impl Fn(&str) -> String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq_prefix = unique("to-mq");
    let state_prefix = unique("to-state");
    let opts = MqOptions::builder()
        .key_prefix(mq_prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    rt.block_on(mq.create_topic("t", 1)).expect("create topic");
    let client = redis::Client::open(url).expect("url");
    let mut conn = client.get_connection().expect("connect");
    let populating = Instant::now();
    populate(&mut conn, &state_prefix, keys);
    let populate_s = populating.elapsed().as_secs_f64();
    // 100 records of stored keys wait for the new owner.
    send(
        &rt,
        &mq,
        (0..100).map(|i| format!("k{}", i * (keys / 100).max(1))),
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(10_000)
        .query(&mut conn)
        .expect("CONFIG SET");
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut conn)
        .expect("SLOWLOG");

    let config = RedisRuntimeConfig::builder()
        .job_name("bench")
        .state_key_prefix(&state_prefix)
        .mq_options(opts)
        .build()
        .unwrap();
    let cache = config.state_cache_max_entries();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    super::register_keyed_count(&env);
    let rss_before = rss_bytes();
    let started = Instant::now();
    let job = env.blocking_start().unwrap();
    let taken_at = wait(&job, "take", taken);
    let first_at = wait(&job, "first commit", |j| records(j) >= 1);
    let hundred_at = wait(&job, "100 records", |j| records(j) >= 100);
    let n = 200_000u64;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let random: Vec<String> = (0..n)
        .map(|_| format!("k{}", next(&mut x) % keys))
        .collect();
    let sending = Instant::now();
    send(&rt, &mq, random.into_iter());
    let done_at = wait(&job, "random records", |j| records(j) >= 100 + n);
    let rate = n as f64 / (done_at - sending).as_secs_f64();
    let rss_after = rss_bytes();
    job.blocking_shutdown(Duration::from_secs(30));
    let slow: Vec<(u64, u64, Vec<String>)> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(128)
        .query::<Vec<redis::Value>>(&mut conn)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| {
            let redis::Value::Array(f) = e else {
                return None;
            };
            let id: u64 = redis::from_redis_value(f.first()?).ok()?;
            let micros: u64 = redis::from_redis_value(f.get(2)?).ok()?;
            let args: Vec<String> = redis::from_redis_value(f.get(3)?).unwrap_or_default();
            Some((id, micros, args.into_iter().take(3).collect()))
        })
        .collect();
    println!("| figure | value |");
    println!("|---|---|");
    println!("| stored keys in the partition | {keys} (written in {populate_s:.1} s) |");
    println!(
        "| `blocking_start` → partition taken | {:.1} ms |",
        (taken_at - started).as_secs_f64() * 1e3
    );
    println!(
        "| taken → first batch committed | {:.1} ms |",
        (first_at - taken_at).as_secs_f64() * 1e3
    );
    println!(
        "| taken → 100 waiting records committed | {:.1} ms |",
        (hundred_at - taken_at).as_secs_f64() * 1e3
    );
    println!("| 200,000 records over random stored keys | {rate:.0} msg/s |");
    println!("| Redis commands ≥ 10 ms (SLOWLOG) | {} |", slow.len());
    println!(
        "| RSS growth over the run | {:.1} MB (cache bound {cache} keys) |",
        rss_after.saturating_sub(rss_before) as f64 / 1e6
    );
    for (id, micros, args) in slow {
        println!(
            "slow #{id}: {:.1} ms {}",
            micros as f64 / 1e3,
            args.join(" ")
        );
    }
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
}
