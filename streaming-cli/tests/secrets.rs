//! A password never leaks: a job, a producer, checkpoints and the admin CLI run against a
//! private redis-server that requires a password, and the password is found in none of
//! what they leave for people to read — the logs (every level), the metrics, the `Debug`
//! output of the handles, the errors (of a wrong password too), everything stored in
//! Redis (the job registry, checkpoints, state, topics) and the CLI's stdout and stderr.

mod support;

#[path = "../../streaming/tests/support/word_count.rs"]
#[allow(unreachable_pub, dead_code)]
mod word_count;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assert_cmd::Command;
use streaming::mq::{Message, Mq, MqOptions, StartPolicy, SubscriptionOptions};
use streaming::redis::{CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use support::Redis;
use word_count::register_word_count;

/// The server's password: long and unusual enough that finding it means a leak.
const PASSWORD: &str = "Pw-7dQx94mZt-secret";
/// A wrong password some calls use: it must not leak either.
const WRONG: &str = "Wr0ng-kP2v-guess";

/// What the logs say, at every level, from every target.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Every value stored on the server, as text: strings, hashes, lists, sets, sorted sets
/// and streams, keys included.
fn everything_stored(url: &str) -> String {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(!keys.is_empty(), "the run stored nothing?");
    let mut out = String::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).unwrap();
        let mut dump = |cmd: &mut redis::Cmd| -> redis::Value { cmd.query(&mut conn).unwrap() };
        let value = match kind.as_str() {
            "string" => dump(redis::cmd("GET").arg(&key)),
            "hash" => dump(redis::cmd("HGETALL").arg(&key)),
            "list" => dump(redis::cmd("LRANGE").arg(&key).arg(0).arg(-1)),
            "set" => dump(redis::cmd("SMEMBERS").arg(&key)),
            "zset" => dump(
                redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES"),
            ),
            "stream" => dump(redis::cmd("XRANGE").arg(&key).arg("-").arg("+")),
            other => panic!("key `{key}` of type {other}"),
        };
        out.push_str(&format!("{key} {value:?}\n"));
    }
    out
}

/// Runs `streaming-admin` with `args` (the URL from `REDIS_URL`, or in `args`): its stdout
/// and stderr, and whether it succeeded.
fn admin(env_url: Option<&str>, args: &[&str]) -> (String, bool) {
    let mut cmd = Command::cargo_bin("streaming-admin").expect("the binary");
    cmd.env_remove("REDIS_URL");
    if let Some(url) = env_url {
        cmd.env("REDIS_URL", url);
    }
    let out = cmd.args(args).output().unwrap();
    // The command line itself holds the password when the test passes it there.
    let text = format!(
        "$ streaming-admin {}\n{}{}",
        args.join(" ").replace(PASSWORD, "<password>"),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (text, out.status.success())
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [PASSWORD, WRONG] {
        assert!(!text.contains(secret), "{what} shows a password:\n{text}");
    }
}

/// Produces, runs a keyed count through its input and a checkpoint, and returns what the
/// job's handles and errors show, and the job (still running).
fn run_a_job(redis: &Redis, rt: &tokio::runtime::Runtime) -> (String, JobClient) {
    let mut shown = String::new();
    let mq = rt
        .block_on(Mq::connect(&redis.url(), MqOptions::default()))
        .unwrap();
    shown.push_str(&format!("{mq:?}\n"));
    rt.block_on(mq.create_topic("words", 2)).unwrap();
    let producer = mq.producer();
    shown.push_str(&format!("{producer:?}\n"));
    for w in ["to", "be", "or", "not", "to", "be"] {
        rt.block_on(producer.send("words", Some(w), w)).unwrap();
    }
    let config = RedisRuntimeConfig::builder()
        .job_name("secretive")
        .build()
        .unwrap();
    shown.push_str(&format!("{config:?}\n"));
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    shown.push_str(&format!("{env:?}\n"));
    let earliest = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .build()
        .unwrap();
    register_word_count(&env, "words", "g", earliest);
    let job = env.blocking_start().unwrap();
    support::await_records(&job, 6);
    job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    shown.push_str(&format!("{job:?}\n{:?}\n", job.diagnostics()));
    (shown, job)
}

/// What failing calls say: a wrong password, a URL that does not parse, a cluster URL
/// whose nodes do not answer.
fn failures(redis: &Redis, rt: &tokio::runtime::Runtime) -> String {
    let mut shown = String::new();
    let opts = || MqOptions::default();
    for url in [
        redis.url_as("", WRONG),
        format!("redis://:{PASSWORD}@127.0.0.1:notaport/"),
        format!("redis+cluster://app:{PASSWORD}@127.0.0.1:1,127.0.0.1:2"),
        format!("redis://app:{PASSWORD}@127.0.0.1:{}/99", redis.port),
    ] {
        let e = rt.block_on(Mq::connect(&url, opts())).unwrap_err();
        shown.push_str(&format!("{e}\n{e:?}\n"));
        let e = RedisEnv::try_new(&url).and_then(|env| {
            env.from_mq_topic("words", "g")
                .sink(CollectSink::<Message>::new())?;
            env.blocking_start().map(|_| ())
        });
        let e = e.unwrap_err();
        shown.push_str(&format!("{e}\n{e:?}\n"));
    }
    shown
}

#[test]
fn a_password_is_never_shown() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .unwrap();
    let redis = Redis::start_with(&["--requirepass", PASSWORD]);
    let rt = support::rt();

    let (shown, job) = run_a_job(&redis, &rt);
    assert_no_secret("Debug output of the handles", &shown);
    let failed = failures(&redis, &rt);
    // Errors name the address (host and port), never the URL.
    assert!(failed.contains("wrong password"), "{failed}");
    assert_no_secret("errors", &failed);
    assert_no_secret(
        "what the run stored in Redis",
        &everything_stored(&redis.url()),
    );
    let rendered = metrics.render();
    assert!(rendered.contains("streaming_"), "{rendered}");
    assert_no_secret("metrics", &rendered);

    // The CLI, with the URL from the environment, from a file and on the command line.
    let url = redis.url();
    let file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file.as_file(), "{url}").unwrap();
    let path = file.path().to_str().unwrap();
    let mut cli = String::new();
    for (env_url, args, succeeds) in [
        (Some(url.as_str()), vec!["jobs", "list", "--json"], true),
        (Some(url.as_str()), vec!["jobs", "show", "secretive"], true),
        (
            Some(url.as_str()),
            vec!["topics", "describe", "words"],
            true,
        ),
        (Some(url.as_str()), vec!["lag"], true),
        (
            Some(url.as_str()),
            vec!["checkpoints", "list", "--job", "secretive"],
            true,
        ),
        (
            None,
            vec!["--redis-url-file", path, "dlq", "list", "words"],
            true,
        ),
        (None, vec!["--redis-url", &url, "topics", "list"], true),
        (
            Some(&redis.url_as("", WRONG)),
            vec!["topics", "list"],
            false,
        ),
        (
            None,
            vec![
                "--redis-url",
                &format!("redis+cluster://:{PASSWORD}@127.0.0.1:1"),
                "lag",
            ],
            false,
        ),
    ] {
        let (out, ok) = admin(env_url, &args);
        assert_eq!(ok, succeeds, "{out}");
        cli.push_str(&out);
    }
    let state_get = [
        "state",
        "get",
        "--job",
        "secretive",
        "--topic",
        "words",
        "--partition",
        "0",
        "--group",
        "g",
        "--operator",
        "words.g/3:process",
        "--state",
        "count",
        "--key",
        "\"nothing\"",
    ];
    let cluster = format!("redis+cluster://:{PASSWORD}@127.0.0.1:{}", redis.port);
    let (out, ok) = admin(Some(&cluster), &state_get);
    assert!(!ok && out.contains("redis+cluster://:***@"), "{out}");
    cli.push_str(&out);
    assert!(job.blocking_shutdown(Duration::from_secs(10)));
    assert!(cli.contains("secretive"), "the CLI read the job:\n{cli}");
    assert_no_secret("the admin CLI's output", &cli);

    let logs = logs.text();
    assert!(
        logs.contains("topic created"),
        "the logs saw the run:\n{logs}"
    );
    assert_no_secret("the logs", &logs);
}
