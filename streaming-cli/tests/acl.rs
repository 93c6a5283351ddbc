//! The admin CLI as the guide's least-privilege users (the test runs the page's own
//! `ACL SETUSER` lines): the read-only user reads everything the read-only commands show
//! and is refused a change; the repair user may change.

mod support;

use streaming::mq::{Failure, Message, Mq, MqOptions, OutgoingMessage};
use support::{rt, Redis};

/// Creates `user` (password `pw`) with the guide's rules for `documented`.
fn create_user(redis: &Redis, documented: &str, user: &str) {
    let page = include_str!("../../streaming/docs/security.md");
    let start = page
        .find(&format!("ACL SETUSER {documented} "))
        .unwrap_or_else(|| panic!("the ACL page has no rules for `{documented}`"));
    let block = &page[start..];
    let block = &block[..block.find("```").expect("the code block ends")];
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER").arg(user);
    for w in block.split_whitespace().skip(3) {
        cmd.arg(if w == ">password" { ">pw" } else { w });
    }
    let () = cmd.query(&mut conn).unwrap();
}

/// `streaming-admin` as `user` (the URL from `REDIS_URL`): stdout and stderr, and
/// whether it succeeded.
fn admin_as(redis: &Redis, user: &str, args: &[&str]) -> (String, bool) {
    let out = assert_cmd::Command::cargo_bin("streaming-admin")
        .unwrap()
        .env("REDIS_URL", redis.url_as(user, "pw"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "$ streaming-admin {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (text, out.status.success())
}

#[test]
fn the_documented_admin_users_read_and_repair_as_the_guide_says() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("orders", 2)).unwrap();
    let msg = OutgoingMessage::new("{\"x\":1}").partition(0);
    rt.block_on(mq.producer().send_message("orders", msg))
        .unwrap();
    // A dead letter to list: read and dead-letter the message by hand.
    let mut reader = rt
        .block_on(mq.exclusive_reader(
            "orders",
            "billing",
            0,
            "t",
            None,
            streaming::mq::StartPolicy::Earliest,
        ))
        .unwrap();
    let read: Vec<Message> = rt
        .block_on(reader.read(10, std::time::Duration::from_millis(50)))
        .unwrap()
        .messages;
    assert_eq!(read.len(), 1);
    let failure = Failure::new("decode", "bad");
    rt.block_on(reader.dead_letter(&read[0], &failure)).unwrap();
    create_user(&redis, "admin-ro", "ro");
    create_user(&redis, "admin", "rw");

    for args in [
        vec!["topics", "list"],
        vec!["topics", "describe", "orders"],
        vec!["lag"],
        vec!["dlq", "list", "orders"],
        vec!["jobs", "list"],
    ] {
        let (out, ok) = admin_as(&redis, "ro", &args);
        assert!(ok, "the read-only user: {out}");
    }
    let (out, ok) = admin_as(&redis, "ro", &["dlq", "list", "orders", "--json"]);
    assert!(ok && out.contains("\"error_type\": \"decode\""), "{out}");
    // A change is refused to the read-only user, naming the rule it lacks.
    let (out, ok) = admin_as(
        &redis,
        "ro",
        &["topics", "create", "payments", "--partitions", "1"],
    );
    assert!(!ok && out.contains("add `+"), "{out}");
    let (out, ok) = admin_as(&redis, "ro", &["dlq", "replay", "orders", "--all"]);
    assert!(!ok && out.contains("add `+"), "{out}");
    // The repair user changes.
    let (out, ok) = admin_as(
        &redis,
        "rw",
        &["topics", "create", "payments", "--partitions", "1"],
    );
    assert!(ok, "{out}");
    let (out, ok) = admin_as(&redis, "rw", &["dlq", "replay", "orders", "--all"]);
    assert!(ok, "{out}");
    let topics = rt.block_on(mq.list_topics()).unwrap();
    assert!(topics.iter().any(|t| t == "payments"), "{topics:?}");
    let again = rt
        .block_on(Mq::connect(&redis.url(), MqOptions::default()))
        .unwrap();
    let dead = rt.block_on(again.dead_letters("orders", 10)).unwrap();
    assert!(dead.is_empty(), "replayed: {dead:?}");
}
