//! `produce` and `tail` against a private redis-server: messages from an argument, a
//! JSON-lines file and stdin land with their key, event time and headers; `tail` prints
//! them from the start, or only what comes after it started, without a consumer group;
//! `tail --sink` follows what a job's (job-scoped) list sink wrote on every partition.

mod support;

use std::process::{Command as Process, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{rt, Redis};

/// `tail` output as JSON objects, one per line.
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn produced_messages_land_with_key_time_and_headers_and_tail_prints_them() {
    let redis = Redis::start();
    let rt = rt();
    rt.block_on(redis.mq(&rt).create_topic("orders", 2))
        .unwrap();

    let sent = redis.json(&[
        "produce",
        "orders",
        "{\"n\":1}",
        "--key",
        "a",
        "--time",
        "1700000000000",
        "--header",
        "source=cli",
    ]);
    assert_eq!(sent.as_array().unwrap().len(), 1, "{sent}");
    let file = tempfile::NamedTempFile::new().unwrap();
    let lines = [
        r#"{"payload": "two", "key": "b", "time": "2023-11-14T22:13:20Z", "headers": {"h": "1"}}"#,
        "",
        r#"{"payload": {"n": 3}, "time": 5}"#,
    ];
    std::fs::write(file.path(), lines.join("\n")).unwrap();
    let sent = redis.json(&["produce", "orders", "--file", file.path().to_str().unwrap()]);
    assert_eq!(sent.as_array().unwrap().len(), 2, "{sent}");
    let out = redis
        .admin()
        .args(["produce", "orders", "--key", "c"])
        .write_stdin("four\nfive\n")
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout)
            .lines()
            .count(),
        2
    );
    // A bad line names its number.
    std::fs::write(file.path(), "{\"payload\": 1}\n{\"key\": \"x\"}\n").unwrap();
    let out = redis
        .admin()
        .args(["produce", "orders", "--file", file.path().to_str().unwrap()])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("line 2 of the file") && stderr.contains("payload"),
        "{stderr}"
    );

    let out = redis
        .admin()
        .args([
            "tail",
            "orders",
            "--from-beginning",
            "--count",
            "5",
            "--json",
        ])
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    let mut got = json_lines(&String::from_utf8_lossy(&out.get_output().stdout));
    got.sort_by_key(|m| m["payload"].as_str().unwrap().to_owned());
    let summary: Vec<(String, Value, Value)> = got
        .iter()
        .map(|m| {
            (
                m["payload"].as_str().unwrap().to_owned(),
                m["key"].clone(),
                m["timestamp_ms"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary[0],
        ("five".into(), "c".into(), summary[0].2.clone())
    );
    assert_eq!(
        summary[2],
        ("two".into(), "b".into(), 1_700_000_000_000i64.into())
    );
    assert_eq!(
        summary[3],
        ("{\"n\":1}".into(), "a".into(), 1_700_000_000_000i64.into())
    );
    assert_eq!(summary[4], ("{\"n\":3}".into(), Value::Null, 5.into()));
    assert_eq!(got[3]["headers"]["source"], "cli");
    assert_eq!(got[2]["headers"]["h"], "1");

    // Without --from-beginning: only what comes after the tail started.
    let mut tail = Process::new(env!("CARGO_BIN_EXE_streaming-admin"))
        .env_remove("REDIS_URL")
        .args([
            "--redis-url",
            &redis.url(),
            "tail",
            "orders",
            "--count",
            "1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Until it prints one: a message sent before it read the partitions' ends is not
    // printed, so keep sending (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    while tail.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "tail printed nothing");
        sent += 1;
        let payload = format!("new-{sent}");
        redis
            .admin()
            .args(["produce", "orders", &payload, "--key", "z"])
            .assert()
            .success();
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = tail.wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        printed.contains("key=z") && printed.contains(" new-"),
        "{printed}"
    );
    assert!(
        !printed.contains("five"),
        "only what came after the start: {printed}"
    );
    assert_eq!(printed.lines().count(), 1, "{printed}");
}

/// A job whose list sink is job-scoped writes `shop:seen:{orders:n}`; `tail --sink seen
/// --job shop` prints each value with its partition and index; a hash key is refused by
/// name; `--job` needs `--sink`.
#[test]
fn tail_follows_a_jobs_list_sink_on_every_partition() {
    use streaming::mq::{StartPolicy, SubscriptionOptions};
    use streaming::redis::{RedisEnv, RedisListSink, RedisRuntimeConfig};
    let redis = Redis::start();
    let rt = rt();
    rt.block_on(redis.mq(&rt).create_topic("orders", 2))
        .unwrap();
    for (key, payload) in [("a", "one"), ("b", "two"), ("c", "three"), ("d", "four")] {
        redis
            .admin()
            .args(["produce", "orders", payload, "--key", key])
            .assert()
            .success();
    }
    let config = RedisRuntimeConfig::builder()
        .job_name("shop")
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    let earliest = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    env.from_mq_topic_with_options("orders", "g", earliest)
        .map(|m: streaming::mq::Message| m.text().unwrap().to_uppercase())
        .sink(RedisListSink::text("seen").unwrap().job_scoped())
        .unwrap();
    let job = env.blocking_start().unwrap();
    support::await_records(&job, 4);
    job.blocking_shutdown(Duration::from_secs(10));

    let out = redis
        .admin()
        .args(["tail", "orders", "--sink", "seen", "--job", "shop"])
        .args(["--from-beginning", "--count", "4", "--json"])
        .timeout(Duration::from_secs(30))
        .assert()
        .success();
    let lines = json_lines(&String::from_utf8_lossy(&out.get_output().stdout));
    let mut values: Vec<&str> = lines.iter().map(|l| l["value"].as_str().unwrap()).collect();
    values.sort_unstable();
    assert_eq!(values, ["FOUR", "ONE", "THREE", "TWO"]);
    // Each partition's list from index 0, in its own order.
    for p in [0, 1] {
        let positions: Vec<&str> = (lines.iter())
            .filter(|l| l["partition"] == p)
            .map(|l| l["position"].as_str().unwrap())
            .collect();
        let expected: Vec<String> = (0..positions.len()).map(|i| i.to_string()).collect();
        assert_eq!(positions, expected, "partition {p}: {lines:?}");
    }

    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let key = RedisListSink::<()>::key_for("latest", "orders", 0);
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("f")
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let out = redis
        .admin()
        .args(["tail", "orders", "--sink", "latest", "--partition", "0"])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("latest:{orders:0}") && stderr.contains("is a hash"),
        "{stderr}"
    );
    redis
        .admin()
        .args(["tail", "orders", "--job", "shop"])
        .assert()
        .code(2);
}
