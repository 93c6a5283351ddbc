//! Script-argument mode of `redis_engine_bench` (`--lua-args`): what Redis spends writing
//! 500 fields into a 10,000-field hash as a plain `HSET`, and as the same `HSET` called
//! from a Lua script that gets the fields as `ARGV` — the reason the batch commit sends
//! its writes as plain commands inside its transaction. Times are Redis's own (`SLOWLOG`
//! at threshold 0, reset before and restored after), 30 calls each, interleaved; the
//! hash lives under a fresh key and is deleted afterwards. Needs a Redis whose
//! `slowlog-log-slower-than` may be changed for the duration (a private one).

/// Runs the comparison on `url` and prints a Markdown table.
pub(crate) fn lua_args_main(url: &str, unique: fn(&str) -> String) {
    let client = redis::Client::open(url).expect("redis url");
    let mut conn = client.get_connection().expect("connect");
    let key = format!("{}:hash", unique("lua-args"));
    let fields = |round: usize| -> Vec<String> {
        (0..500)
            .flat_map(|i| {
                let k = (i * 20 + round) % 10_000;
                [
                    format!("{{\"k\":\"key-{k:05}\"}}"),
                    format!("{}", round * 1000 + i),
                ]
            })
            .collect()
    };
    for chunk in 0..20 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&key);
        for k in chunk * 500..chunk * 500 + 500 {
            cmd.arg(format!("{{\"k\":\"key-{k:05}\"}}")).arg(12345);
        }
        let _: () = cmd.query(&mut conn).expect("fill");
    }
    let threshold: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("slowlog-log-slower-than")
        .query(&mut conn)
        .expect("config get");
    let set = |conn: &mut redis::Connection, v: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-log-slower-than")
            .arg(v)
            .query(conn)
            .expect("config set");
    };
    let mut plain = Vec::new();
    let mut script = Vec::new();
    set(&mut conn, "0");
    // One call per SLOWLOG reset: a script's own HSET is logged too (and a log entry
    // keeps only 32 arguments), so each entry is told apart by the call alone.
    let slowest = |conn: &mut redis::Connection, name: &[u8]| -> Option<u64> {
        let log: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(10).query(conn).ok()?;
        log.into_iter().find_map(|e| match e {
            redis::Value::Array(v) if v.len() >= 4 => {
                let args: Vec<Vec<u8>> = redis::from_redis_value(&v[3]).ok()?;
                (args.first().map(Vec::as_slice) == Some(name))
                    .then(|| redis::from_redis_value(&v[2]).ok())
                    .flatten()
            }
            _ => None,
        })
    };
    for round in 0..30 {
        let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut conn).unwrap();
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg(fields(round))
            .query(&mut conn)
            .unwrap();
        plain.extend(slowest(&mut conn, b"HSET"));
        let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut conn).unwrap();
        let _: () = redis::cmd("EVAL")
            .arg("redis.call('HSET', KEYS[1], unpack(ARGV))")
            .arg(1)
            .arg(&key)
            .arg(fields(round + 1))
            .query(&mut conn)
            .unwrap();
        script.extend(slowest(&mut conn, b"EVAL"));
    }
    set(&mut conn, threshold.get(1).map_or("10000", String::as_str));
    let _: () = redis::cmd("UNLINK").arg(&key).query(&mut conn).unwrap();
    plain.sort_unstable();
    script.sort_unstable();
    let median = |v: &[u64]| v.get(v.len() / 2).copied().unwrap_or(0);
    println!("| 500 fields into a 10,000-field hash | calls | median µs | min µs |");
    println!("|---|---|---|---|");
    println!(
        "| plain `HSET` | {} | {} | {} |",
        plain.len(),
        median(&plain),
        plain.first().copied().unwrap_or(0)
    );
    println!(
        "| `HSET` from `EVAL`, fields as `ARGV` | {} | {} | {} |",
        script.len(),
        median(&script),
        script.first().copied().unwrap_or(0)
    );
}
