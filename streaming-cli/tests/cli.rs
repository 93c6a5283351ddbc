//! `streaming-admin` against a private redis-server: topics, lag, dead letters, running jobs
//! and keyed state made by the library itself (producer, exclusive reader, a Redis engine job).

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use streaming::api::{SetStateDescriptor, ValueStateDescriptor};
use streaming::mq::{
    ExclusiveReader, Failure, Message, Mq, MqOptions, OutgoingMessage, StartPolicy,
    SubscriptionOptions, HEADER_ORIGINAL_ID,
};
use streaming::redis::{CollectSink, RedisEnv, RedisRuntimeConfig};
use support::{rt, Redis};

fn send(rt: &tokio::runtime::Runtime, mq: &Mq, topic: &str, partition: u32, payload: &str) {
    let msg = OutgoingMessage::new(payload.to_owned()).partition(partition);
    rt.block_on(mq.producer().send_message(topic, msg)).unwrap();
}

fn reader(rt: &tokio::runtime::Runtime, mq: &Mq, topic: &str, group: &str) -> ExclusiveReader {
    rt.block_on(mq.exclusive_reader(topic, group, 0, "admin-test", None, StartPolicy::Earliest))
        .unwrap()
}

/// A job's subscription: from the start of each partition, polling every 50 ms.
fn earliest() -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap()
}

fn read(rt: &tokio::runtime::Runtime, r: &mut ExclusiveReader) -> Vec<Message> {
    rt.block_on(r.read(100, Duration::from_millis(50)))
        .unwrap()
        .messages
}

#[test]
fn topics_create_list_describe_and_delete() {
    let redis = Redis::start();
    redis
        .admin()
        .args(["topics", "create", "orders", "--partitions", "2"])
        .assert()
        .success()
        .stdout("created topic `orders` with 2 partitions\n");
    redis
        .admin()
        .args(["topics", "create", "orders", "--partitions", "2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("already exists"));
    redis
        .admin()
        .args(["topics", "create", "orders", "--partitions", "3"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("exists with 2 partitions, not 3"));
    redis
        .admin()
        .args(["topics", "create", "bad{name}", "--partitions", "1"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "error: invalid configuration `topic`",
        ));

    let rt = rt();
    let mq = redis.mq(&rt);
    for (p, payload) in [(0, "a"), (0, "b"), (0, "c"), (1, "d")] {
        send(&rt, &mq, "orders", p, payload);
    }
    rt.block_on(mq.ensure_group("orders", "billing", StartPolicy::Earliest))
        .unwrap();
    // `billing` takes two entries of partition 0 (NOACK: nothing pending).
    let mut r = rt
        .block_on(mq.exclusive_reader("orders", "billing", 0, "c1", None, StartPolicy::Earliest))
        .unwrap();
    let got = rt.block_on(r.read(2, Duration::ZERO)).unwrap();
    assert_eq!(got.messages.len(), 2);

    assert_eq!(
        redis.json(&["topics", "list"]),
        serde_json::json!([{ "topic": "orders", "partitions": 2 }])
    );
    let d = redis.json(&["topics", "describe", "orders"]);
    assert_eq!(d["partitions"], 2);
    let p0 = &d["partition_info"][0];
    assert_eq!(
        (p0["length"].as_u64(), p0["dead_letters"].as_u64()),
        (Some(3), Some(0))
    );
    let billing = &p0["groups"][0];
    assert_eq!(billing["group"], "billing");
    assert_eq!(billing["lag"], 1);
    assert_eq!(billing["pending"], 0);
    assert_eq!(billing["last_delivered_id"], got.last_id.unwrap().as_str());
    assert!(billing["commit_frontier"].is_string(), "{billing}");
    assert_eq!(d["partition_info"][1]["groups"][0]["lag"], 1);

    redis
        .admin()
        .args(["topics", "describe", "orders"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("PARTITION  LENGTH").and(predicate::str::contains("billing")),
        );
    redis
        .admin()
        .args(["topics", "delete", "orders"])
        .assert()
        .success()
        .stdout("deleted topic `orders`\n");
    for args in [
        ["topics", "describe", "orders"],
        ["topics", "delete", "orders"],
    ] {
        redis
            .admin()
            .args(args)
            .assert()
            .code(1)
            .stderr("error: topic `orders` does not exist (`topics list` shows the topics)\n");
    }
    assert_eq!(redis.json(&["topics", "list"]), serde_json::json!([]));
}

#[test]
fn lag_per_topic_group_and_partition() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("clicks", 2)).unwrap();
    rt.block_on(mq.create_topic("views", 1)).unwrap();
    for (p, payload) in [(0, "a"), (0, "b"), (1, "c")] {
        send(&rt, &mq, "clicks", p, payload);
    }
    send(&rt, &mq, "views", 0, "v");
    rt.block_on(mq.ensure_group("clicks", "a", StartPolicy::Earliest))
        .unwrap();
    rt.block_on(mq.ensure_group("clicks", "b", StartPolicy::Latest))
        .unwrap();
    rt.block_on(mq.ensure_group("views", "a", StartPolicy::Earliest))
        .unwrap();
    let mut r = reader(&rt, &mq, "clicks", "a");
    assert_eq!(read(&rt, &mut r).len(), 2);

    let rows = redis.json(&["lag"]);
    let got: Vec<(String, String, u64, u64, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["topic"].as_str().unwrap().to_owned(),
                r["group"].as_str().unwrap().to_owned(),
                r["partition"].as_u64().unwrap(),
                r["lag"].as_u64().unwrap(),
                r["pending"].as_u64().unwrap(),
            )
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        got,
        [
            (s("clicks"), s("a"), 0, 0, 0),
            (s("clicks"), s("a"), 1, 1, 0),
            (s("clicks"), s("b"), 0, 0, 0),
            (s("clicks"), s("b"), 1, 0, 0),
            (s("views"), s("a"), 0, 1, 0),
        ]
    );
    assert_eq!(
        redis
            .json(&["lag", "clicks", "--group", "a"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
    redis
        .admin()
        .args(["lag", "views"])
        .assert()
        .success()
        .stdout("TOPIC  GROUP  PARTITION  LAG  PENDING\nviews  a      0          1    0\n");
    redis
        .admin()
        .args(["lag", "views", "--group", "nobody"])
        .assert()
        .code(1)
        .stderr("error: consumer group `nobody` reads no partition of topic `views`\n");
    redis
        .admin()
        .args(["lag", "nope"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("topic `nope` does not exist"));
}

/// Dead-letters the messages `r` reads whose text `dead` lists (with their error types).
fn dead_letter_some(rt: &tokio::runtime::Runtime, r: &mut ExclusiveReader, dead: &[(&str, &str)]) {
    for m in read(rt, r) {
        let text = m.text().unwrap().to_owned();
        if let Some((_, error_type)) = dead.iter().find(|(p, _)| *p == text) {
            let failure = Failure::new(*error_type, format!("cannot handle {text}"));
            rt.block_on(r.dead_letter(&m, &failure)).unwrap();
        }
    }
}

/// Topic `jobs` (2 partitions) whose group `workers` dead-lettered three of five messages
/// of partition 0: `bad-1`, `bad-2` (`decode`) and `slow-1` (`timeout`).
struct Dlq {
    redis: Redis,
    rt: tokio::runtime::Runtime,
    mq: Mq,
    reader: ExclusiveReader,
    /// `dlq list jobs --json`.
    listed: Vec<Value>,
}

impl Dlq {
    fn new() -> Self {
        let redis = Redis::start();
        let rt = rt();
        let mq = redis.mq(&rt);
        rt.block_on(mq.create_topic("jobs", 2)).unwrap();
        for payload in ["ok-1", "bad-1", "bad-2", "slow-1", "ok-2"] {
            send(&rt, &mq, "jobs", 0, payload);
        }
        let mut reader = reader(&rt, &mq, "jobs", "workers");
        let dead = [
            ("bad-1", "decode"),
            ("bad-2", "decode"),
            ("slow-1", "timeout"),
        ];
        dead_letter_some(&rt, &mut reader, &dead);
        let listed = redis
            .json(&["dlq", "list", "jobs"])
            .as_array()
            .unwrap()
            .clone();
        Dlq {
            redis,
            rt,
            mq,
            reader,
            listed,
        }
    }

    /// How many dead letters `dlq list jobs <filters>` shows.
    fn count(&self, filters: &[&str]) -> usize {
        let mut args = vec!["dlq", "list", "jobs"];
        args.extend_from_slice(filters);
        self.redis.json(&args).as_array().unwrap().len()
    }

    fn dlq_id(&self, i: usize) -> String {
        self.listed[i]["dlq_id"].as_str().unwrap().to_owned()
    }
}

#[test]
fn dlq_list_filters_and_show() {
    let d = Dlq::new();
    let all = &d.listed;
    assert_eq!(all.len(), 3);
    assert_eq!(all[0]["group"], "workers");
    assert_eq!(all[0]["partition"], 0);
    assert_eq!(all[0]["error_type"], "decode");
    assert_eq!(all[0]["error"], "cannot handle bad-1");
    assert_eq!(all[2]["error_type"], "timeout");
    assert_eq!(d.count(&["--error-type", "decode"]), 2);
    assert_eq!(
        d.count(&["--error-type", "timeout", "--group", "workers"]),
        1
    );
    assert_eq!(d.count(&["--group", "others"]), 0);
    assert_eq!(d.count(&["--partition", "1"]), 0);
    assert_eq!(d.count(&["--partition", "0", "--limit", "2"]), 2);
    let admin = |args: &[&str]| {
        let mut cmd = d.redis.admin();
        cmd.args(["dlq"]).args(args);
        cmd
    };
    admin(&["list", "jobs", "--partition", "2"])
        .assert()
        .code(1)
        .stderr("error: topic `jobs` has partitions 0..2, not partition 2\n");
    admin(&["list", "jobs"]).assert().success().stdout(
        predicate::str::contains("cannot handle slow-1")
            .and(predicate::str::contains("ERROR-TYPE")),
    );

    let slow_id = d.dlq_id(2);
    let shown = d.redis.json(&["dlq", "show", "jobs", &slow_id]);
    assert_eq!(shown["payload"], "slow-1");
    assert_eq!(shown["attempts"], 1);
    assert_eq!(shown["fields"]["dlq.error_type"], "timeout");
    admin(&["show", "jobs", &slow_id, "--partition", "0"])
        .assert()
        .success()
        .stdout(predicate::str::contains("payload:      slow-1"));
    admin(&["show", "jobs", "1-0"])
        .assert()
        .code(1)
        .stderr("error: topic `jobs` has no dead letter `1-0`\n");
    admin(&["show", "jobs", "xyz"])
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "error: `xyz` is not a dead-letter id",
        ));
}

#[test]
fn dlq_replay_puts_the_message_back_once() {
    let mut d = Dlq::new();
    d.redis
        .admin()
        .args(["dlq", "replay", "jobs"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("pass `--all`"));
    let slow_id = d.dlq_id(2);
    let replayed = d
        .redis
        .json(&["dlq", "replay", "jobs", "--error-type", "timeout"]);
    let replayed = replayed.as_array().unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["dlq_id"], slow_id.as_str());
    assert_eq!(d.count(&[]), 2);
    // The group reads it again, once, in its original partition, as the same message.
    let again = read(&d.rt, &mut d.reader);
    assert_eq!(again.len(), 1, "the replayed message, once");
    assert_eq!(again[0].text().unwrap(), "slow-1");
    assert_eq!(again[0].partition, 0);
    assert_eq!(again[0].id, replayed[0]["new_id"].as_str().unwrap());
    assert_eq!(
        again[0].headers.get(HEADER_ORIGINAL_ID).map(String::as_str),
        d.listed[2]["original_id"].as_str()
    );
    assert!(read(&d.rt, &mut d.reader).is_empty());
    // A replayed dead letter is gone: it cannot be replayed twice.
    d.redis
        .admin()
        .args(["dlq", "replay", "jobs", "--id", &slow_id])
        .assert()
        .code(1)
        .stderr(format!(
            "error: topic `jobs` has no dead letter `{slow_id}`\n"
        ));
    let described = d.redis.json(&["topics", "describe", "jobs"]);
    assert_eq!(described["partition_info"][0]["length"], 6);
    assert_eq!(described["partition_info"][0]["dead_letters"], 2);
    // A corrected payload: the message goes back with it (same key and original id).
    let other = d.dlq_id(0);
    let original = d.listed[0]["original_id"].as_str().unwrap().to_owned();
    let fixed = d.redis.json(&[
        "dlq",
        "replay",
        "jobs",
        "--id",
        &other,
        "--payload",
        "corrected",
    ]);
    assert_eq!(fixed[0]["dlq_id"], other.as_str());
    let again = read(&d.rt, &mut d.reader);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].text().unwrap(), "corrected");
    assert_eq!(
        again[0].headers.get(HEADER_ORIGINAL_ID).map(String::as_str),
        Some(original.as_str())
    );
    d.redis
        .admin()
        .args(["dlq", "replay", "jobs", "--all", "--payload", "x"])
        .assert()
        .code(2);
}

#[test]
fn dlq_purge_by_id_by_filter_and_all() {
    let mut d = Dlq::new();
    let first = d.dlq_id(0);
    assert_eq!(
        d.redis.json(&["dlq", "purge", "jobs", "--id", &first])["purged"],
        1
    );
    assert_eq!(d.count(&[]), 2);
    send(&d.rt, &d.mq, "jobs", 0, "bad-3");
    dead_letter_some(&d.rt, &mut d.reader, &[("bad-3", "fail:io")]);
    assert_eq!(d.count(&["--error-type", "fail"]), 1);
    d.redis
        .admin()
        .args(["dlq", "purge", "jobs", "--error-type", "decode"])
        .assert()
        .success()
        .stdout("purged 1 dead letters of `jobs`\n");
    assert_eq!(d.count(&["--error-type", "timeout"]), 1);
    assert_eq!(
        d.redis.json(&["dlq", "purge", "jobs", "--all"])["purged"],
        2
    );
    assert_eq!(d.count(&[]), 0);
}

/// An entry with 1005 fields that does not decode (`mr` is not a number), written with a
/// plain `XADD` to partition 0 of `topic`.
fn add_wide_malformed_entry(rt: &tokio::runtime::Runtime, redis: &Redis, mq: &Mq, topic: &str) {
    let mut fields = vec![
        ("p".to_owned(), r#"{"order":7}"#.to_owned()),
        ("ts".to_owned(), "1700000000000".to_owned()),
        ("k".to_owned(), "order-7".to_owned()),
        (
            "h".to_owned(),
            r#"{"source":"import","trace":"t-1"}"#.to_owned(),
        ),
        ("mr".to_owned(), "many".to_owned()),
    ];
    fields.extend((0..1000).map(|i| (format!("x{i}"), format!("v{i}"))));
    let stream = mq.keys().stream(topic, 0);
    rt.block_on(async {
        let client = redis::Client::open(redis.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: String = redis::AsyncCommands::xadd(&mut conn, stream, "*", &fields)
            .await
            .unwrap();
    });
}

#[test]
fn dlq_show_prints_the_payload_and_headers_of_a_very_wide_entry() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("wide", 1)).unwrap();
    add_wide_malformed_entry(&rt, &redis, &mq, "wide");
    let mut r = reader(&rt, &mq, "wide", "g");
    let batch = rt.block_on(r.read(10, Duration::from_millis(50))).unwrap();
    assert_eq!((batch.messages.len(), batch.malformed), (0, 1));
    let listed = redis.json(&["dlq", "list", "wide"]);
    let dlq_id = listed[0]["dlq_id"].as_str().unwrap().to_owned();

    let shown = redis.json(&["dlq", "show", "wide", &dlq_id]);
    assert_eq!(shown["error_type"], "malformed");
    assert_eq!(shown["payload"], r#"{"order":7}"#);
    assert_eq!(
        shown["headers"],
        serde_json::json!({ "source": "import", "trace": "t-1" })
    );
    assert_eq!(shown["key"], "order-7");
    assert_eq!(shown["timestamp_ms"], 1_700_000_000_000_i64);
    let fields = shown["fields"].as_object().unwrap();
    assert_eq!(
        (fields["x0"].as_str(), fields["x999"].as_str()),
        (Some("v0"), Some("v999"))
    );
    assert_eq!(
        fields.len(),
        1005 + 9,
        "the entry's fields and the `dlq.*` ones"
    );
    let text = redis
        .admin()
        .args(["dlq", "show", "wide", &dlq_id])
        .assert()
        .success();
    let text = String::from_utf8(text.get_output().stdout.clone()).unwrap();
    for line in [
        r#"payload:      {"order":7}"#,
        "header:       source = import",
        "header:       trace = t-1",
        "key:          order-7",
        "timestamp:    1700000000000",
        "field:        x0 = v0",
        "field:        x999 = v999",
    ] {
        assert!(text.lines().any(|l| l == line), "`{line}` in:\n{text}");
    }
    let raw = text.lines().filter(|l| l.starts_with("field")).count();
    assert_eq!(
        raw, 1005,
        "every field of the entry in the text view:\n{text}"
    );
}

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);
const LETTERS: SetStateDescriptor<String> = SetStateDescriptor::persistent("letters");

/// A pipeline of two topics shows its other input in `jobs show` (text and JSON).
#[test]
fn jobs_show_lists_the_other_inputs_of_a_pipeline() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("orders", 2)).unwrap();
    rt.block_on(mq.create_topic("refunds", 2)).unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("billing")
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    env.from_mq_topic_with_options("orders", "bill", earliest())
        .union(env.from_mq_topic_with_options("refunds", "bill-refunds", earliest()))
        .map(|m: Message| m.payload.len())
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis.json(&["jobs", "show", "billing"])[0]["pipelines"][0]["inputs"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        assert!(Instant::now() < deadline, "the inputs were not registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pipeline = &redis.json(&["jobs", "show", "billing"])[0]["pipelines"][0];
    assert_eq!(pipeline["topic"], "orders");
    assert_eq!(pipeline["inputs"][0]["topic"], "refunds");
    assert_eq!(pipeline["inputs"][0]["group"], "bill-refunds");
    let shown = redis
        .admin()
        .args(["jobs", "show", "billing"])
        .assert()
        .success();
    let shown = String::from_utf8(shown.get_output().stdout.clone()).unwrap();
    let row = (shown.lines())
        .find(|l| l.contains("refunds"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(shown.contains("ALSO READS"), "{shown}");
    assert!(
        row.starts_with("orders  bill") && row.trim_end().ends_with("bill-refunds"),
        "{shown}"
    );
    job.blocking_shutdown(Duration::from_secs(10));
}

#[test]
fn state_get_reads_a_jobs_keyed_state_as_json() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("words", 1)).unwrap();
    for w in ["to", "be", "or", "not", "to", "be", "to"] {
        send(&rt, &mq, "words", 0, w);
    }
    let config = RedisRuntimeConfig::builder()
        .job_name("wordcount")
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    env.from_mq_topic_with_options("words", "g", earliest())
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            let mut letters = ctx.state(&LETTERS)?;
            for c in w.chars() {
                letters.add(c.to_string());
            }
            out.collect((w, n));
            Ok(())
        })
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    support::await_records(&job, 7);
    // `jobs show` lists the states the job opened (the registry follows within a
    // heartbeat).
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis.json(&["jobs", "show", "wordcount"])[0]["pipelines"][0]["states"]
        .as_array()
        .is_none_or(|states| states.len() < 2)
    {
        assert!(Instant::now() < deadline, "the states were not registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let shown = redis
        .admin()
        .args(["jobs", "show", "wordcount"])
        .assert()
        .success();
    let shown = String::from_utf8(shown.get_output().stdout.clone()).unwrap();
    let count_row = (shown.lines())
        .find(|l| l.contains(" count "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        count_row.starts_with("words  g") && count_row.contains("words.g/3:process"),
        "{shown}"
    );
    assert!(count_row.ends_with("ValueState<u64> by String"), "{shown}");
    assert!(shown.contains("letters"), "{shown}");
    let ck = job.blocking_trigger_checkpoint_now().unwrap().unwrap();
    job.blocking_shutdown(Duration::from_secs(10));
    let listed = redis.json(&["checkpoints", "list", "--job", "wordcount"]);
    assert_eq!(listed[0]["id"], ck.id);
    assert_eq!(listed[0]["status"], "complete");
    assert_eq!(listed[0]["pipelines"][0]["topic"], "words");
    assert_eq!(listed[0]["pipelines"][0]["partitions"], 1);
    let table = redis
        .admin()
        .args(["checkpoints", "list", "--job", "wordcount"])
        .assert()
        .success();
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    assert!(
        table.contains("complete") && table.contains("words/g×1"),
        "{table}"
    );

    let get_state = |state: &str, key: &str| {
        let mut args = vec!["state", "get", "--job", "wordcount", "--topic", "words"];
        args.extend([
            "--partition",
            "0",
            "--group",
            "g",
            "--operator",
            "words.g/3:process",
        ]);
        args.extend(["--state", state, "--key", key]);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let get = |key: &str| get_state("count", key);
    redis
        .admin()
        .args(get("\"to\""))
        .assert()
        .success()
        .stdout("3\n");
    let got = redis.json(
        &get(" \"be\" ")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(got["value"], 2);
    assert_eq!(got["field"], "\"be\"");
    assert_eq!(
        got["hash"],
        "streaming:runtime:wordcount:{words:0}:g:words.g/3:process:count"
    );
    // A set state: each key's members in a Redis set of their own, printed sorted.
    redis
        .admin()
        .args(get_state("letters", "\"to\""))
        .assert()
        .success()
        .stdout("[\n  \"o\",\n  \"t\"\n]\n");
    let got = redis.json(
        &get_state("letters", "\"not\"")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(got["collection"], serde_json::json!(["n", "o", "t"]));
    assert_eq!(
        got["key"],
        "streaming:runtime:wordcount:{words:0}:g:words.g/3:process:letters:k:\"not\""
    );
    // Without `--partition`: looked for in every partition; the answer names it.
    let mut anywhere = get(" \"be\" ");
    let at = anywhere.iter().position(|a| a == "--partition").unwrap();
    anywhere.drain(at..at + 2);
    let anywhere: Vec<&str> = anywhere.iter().map(String::as_str).collect();
    let got = redis.json(&anywhere);
    assert_eq!((&got["value"], &got["partition"]), (&2.into(), &0.into()));
    let mut nowhere = get("\"never\"");
    nowhere.drain(at..at + 2);
    redis
        .admin()
        .args(nowhere)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "looked in every partition of `words` (1)",
        ));
    redis
        .admin()
        .args(get("\"never\""))
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "error: no state `count` of operator `words.g/3:process` for key \"never\"",
        ));
    redis
        .admin()
        .args(get("never"))
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("error: `--key` must be JSON"));
}

#[test]
fn jobs_list_and_show_read_the_registry_of_a_running_job() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("clicks", 2)).unwrap();
    for (p, w) in [(0, "a"), (0, "b"), (1, "c")] {
        send(&rt, &mq, "clicks", p, w);
    }
    let fast = MqOptions::builder()
        .lease_ttl(Duration::from_millis(1500))
        .lease_renew_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("clickcount")
        .job_instance_id("cli-test")
        .mq_options(fast)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    env.from_mq_topic_with_options("clicks", "g", earliest())
        .map(|m: Message| m.text().unwrap().to_string())
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let committed = |p: u32| {
        let d = job.diagnostics();
        let part = d.partitions.iter().find(|x| x.partition == p).cloned();
        part.and_then(|x| x.last_committed_id)
    };
    // The registry's heartbeat follows the commits within a renew interval.
    let shown = loop {
        let shown = redis.json(&["jobs", "show", "clickcount"]);
        let offsets: Vec<Option<String>> = (0..2).map(&committed).collect();
        let registered: Vec<Option<String>> = (0..2)
            .map(|p| {
                shown[0]["partitions"][p]["offset"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        if offsets.iter().all(Option::is_some) && registered == offsets {
            break shown;
        }
        assert!(Instant::now() < deadline, "{shown:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(shown[0]["instance"], "cli-test");
    assert_eq!(shown[0]["partitions"][1]["topic"], "clicks");
    assert_eq!(shown[0]["partitions"][1]["stalled"], false);
    let listed = redis.json(&["jobs", "list"]);
    assert_eq!(listed[0]["job"], "clickcount");
    assert_eq!(listed[0]["instance"], "cli-test");
    assert_eq!(listed[0]["parallelism"], 1);
    assert_eq!(listed[0]["partitions"], 2);
    assert_eq!(listed[0]["stalled"], 0);
    assert!(listed[0]["heartbeat_age_ms"].as_u64().unwrap() < 10_000);
    redis
        .admin()
        .args(["jobs", "list"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "JOB         INSTANCE  PARALLELISM  PARTITIONS  STALLED  PAUSED  HEARTBEAT\nclickcount  cli-test  1            2           0        false",
        ));
    let offset0 = committed(0).unwrap();
    redis
        .admin()
        .args(["jobs", "show", "clickcount"])
        .assert()
        .success()
        .stdout(predicate::str::contains("OFFSET").and(predicate::str::contains(offset0)));
    // A job with no running instance: an empty answer, as `jobs list` gives, with a note.
    redis
        .admin()
        .args(["jobs", "show", "nope", "--json"])
        .assert()
        .success()
        .stdout("[]\n")
        .stderr(predicate::str::starts_with(
            "no running instance of job `nope` in the registry",
        ));
    assert!(job.blocking_shutdown(Duration::from_secs(10)));
    assert_eq!(redis.json(&["jobs", "list"]), serde_json::json!([]));
    assert_eq!(
        redis.json(&["jobs", "show", "clickcount"]),
        serde_json::json!([])
    );
}

#[test]
fn completions_are_printed_for_each_shell_without_redis() {
    for (shell, says) in [
        ("bash", "complete -F _streaming__admin"),
        ("zsh", "#compdef streaming-admin"),
        ("fish", "complete -c streaming-admin"),
    ] {
        let out = Command::cargo_bin("streaming-admin")
            .unwrap()
            .env("REDIS_URL", "redis://127.0.0.1:1/")
            .args(["completions", shell])
            .assert()
            .success();
        let script = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(script.contains(says), "{shell}: {script}");
        assert!(
            script.contains("checkpoints"),
            "{shell} completes the subcommands"
        );
    }
}

#[test]
fn unreachable_redis_is_one_line_naming_the_url() {
    // A port nobody listens on: bound, then released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    for args in [
        vec!["topics", "list"],
        vec!["lag"],
        vec!["dlq", "list", "t"],
    ] {
        let out = Command::cargo_bin("streaming-admin")
            .unwrap()
            .env("REDIS_URL", &url)
            .args(&args)
            .assert()
            .code(1)
            .stderr(predicate::str::starts_with(format!(
                "error: cannot connect to Redis at `{url}`"
            )));
        let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let mut args = vec![
        "state",
        "get",
        "--topic",
        "t",
        "--partition",
        "0",
        "--group",
        "g",
    ];
    args.extend(["--operator", "t.g/1:process", "--state", "s", "--key", "1"]);
    Command::cargo_bin("streaming-admin")
        .unwrap()
        .args(["--redis-url", &url])
        .args(&args)
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(format!(
            "error: cannot connect to Redis at `{url}`"
        )));
}

/// A window's panes: `jobs show` names the operator of the `panes` state, and
/// `state get --state panes` prints the key's open panes labelled (window as times,
/// accumulator, timers, flags).
#[test]
fn state_get_prints_a_keys_window_panes_labelled() {
    use streaming::time::TumblingEventTimeWindows;
    let redis = Redis::start();
    let rt = rt();
    rt.block_on(redis.mq(&rt).create_topic("clicks", 1))
        .unwrap();
    for (key, time) in [("a", "60000"), ("a", "61000"), ("b", "62000")] {
        redis
            .admin()
            .args(["produce", "clicks", key, "--key", key, "--time", time])
            .assert()
            .success();
    }
    let fast = MqOptions::builder()
        .lease_ttl(Duration::from_millis(1500))
        .lease_renew_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("windows")
        .mq_options(fast)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    env.from_mq_topic_with_options("clicks", "g", earliest())
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60)).unwrap())
        .count()
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    support::await_records(&job, 3);
    let deadline = Instant::now() + Duration::from_secs(30);
    let operator = loop {
        let shown = redis.json(&["jobs", "show", "windows"]);
        let states = shown[0]["pipelines"][0]["states"].as_array().cloned();
        let panes = states.into_iter().flatten().find(|s| s["state"] == "panes");
        if let Some(p) = panes {
            break p["operator"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no panes state registered: {shown}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let args = [
        "state",
        "get",
        "--job",
        "windows",
        "--topic",
        "clicks",
        "--group",
        "g",
        "--operator",
        &operator,
        "--state",
        "panes",
        "--key",
        "\"a\"",
    ];
    let got = redis.json(&args);
    let panes = got["panes"].as_array().unwrap();
    assert_eq!(panes.len(), 1, "{got}");
    let p = &panes[0];
    assert_eq!(
        (&p["window"]["start"], &p["window"]["end"]),
        (&60_000.into(), &120_000.into())
    );
    assert_eq!(p["window"]["start_time"], "1970-01-01T00:01:00.000Z");
    assert_eq!(p["accumulator"], 2);
    assert_eq!(
        (&p["has_content"], &p["not_emitted_yet"]),
        (&true.into(), &true.into())
    );
    assert_eq!(got["partition"], 0);
    let text = redis.admin().args(args).assert().success();
    let text = String::from_utf8(text.get_output().stdout.clone()).unwrap();
    assert!(
        text.starts_with(
            "window 1970-01-01T00:01:00.000Z .. 1970-01-01T00:02:00.000Z  accumulator 2"
        ),
        "{text}"
    );
    // A key without an open pane says so.
    let mut none = args.map(str::to_owned);
    *none.last_mut().unwrap() = "\"zzz\"".to_owned();
    redis
        .admin()
        .args(&none)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "key \"zzz\" has no open window pane",
        ));
    job.blocking_shutdown(Duration::from_secs(10));
}
