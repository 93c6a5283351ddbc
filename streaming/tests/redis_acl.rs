//! Least-privilege users, as the guide's ACL page writes them (the test runs the page's
//! own `ACL SETUSER` lines): a producer and a job run exactly once as their users, and a
//! job user missing one command or one key pattern fails at start — before it reads or
//! writes anything — with an error naming the rule to add.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::mq::{Mq, MqOptions};
use streaming::redis::{RedisEnv, RedisRuntimeConfig};
use streaming::Error;
use support::engine::{earliest, rt, wait_until};
use support::redis_server::TestRedis;
use support::word_count::{checkpoint_and_shut_down, expected_counts, register_word_count};

/// The guide's `ACL SETUSER` line for `user`, joined into one command's words.
fn documented_rules(user: &str) -> Vec<String> {
    let page = include_str!("../docs/security.md");
    let start = page
        .find(&format!("ACL SETUSER {user} "))
        .unwrap_or_else(|| panic!("the ACL page has no rules for `{user}`"));
    let block = &page[start..];
    let block = &block[..block.find("```").expect("the code block ends")];
    block
        .split_whitespace()
        .skip(2) // ACL SETUSER
        .map(str::to_owned)
        .collect()
}

/// Creates `user` with the documented rules of `documented` (password `pw`), changed by
/// `edit` (words appended at the end, or the key patterns replaced).
fn create_user(
    redis: &TestRedis,
    documented: &str,
    user: &str,
    edit: impl FnOnce(&mut Vec<String>),
) {
    let mut words = documented_rules(documented);
    words[0] = user.to_owned();
    edit(&mut words);
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER");
    for w in &words {
        // The page's password placeholder.
        cmd.arg(if w == ">password" { ">pw" } else { w.as_str() });
    }
    let () = cmd
        .query(&mut conn)
        .unwrap_or_else(|e| panic!("{words:?}: {e}"));
}

/// The server's URL as `user` (password `pw`).
fn url_as(redis: &TestRedis, user: &str) -> String {
    redis
        .url()
        .replacen("redis://", &format!("redis://{user}:pw@"), 1)
}

/// An environment of `user` counting words of topic `words` per key, job `job`.
fn counting_env(redis: &TestRedis, user: &str, job: &str) -> RedisEnv {
    let config = RedisRuntimeConfig::builder()
        .job_name(job)
        .mq_options(
            MqOptions::builder()
                .lease_ttl(Duration::from_millis(1500))
                .lease_renew_interval(Duration::from_millis(200))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url_as(redis, user).as_str(), config).unwrap();
    register_word_count(&env, "words", "counts", earliest(100));
    env
}

/// Every key on the server whose name contains `part`.
fn keys_with(redis: &TestRedis, part: &str) -> Vec<String> {
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.into_iter().filter(|k| k.contains(part)).collect()
}

#[test]
fn documented_users_run_a_producer_and_a_job_exactly_once() {
    let redis = TestRedis::private();
    let rt = rt();
    create_user(&redis, "producer", "producer", |_| {});
    create_user(&redis, "job-user", "job-user", |_| {});
    // The topic is made by an administrator; the producer only sends.
    let admin = rt
        .block_on(Mq::connect(redis.url(), MqOptions::default()))
        .unwrap();
    rt.block_on(admin.create_topic("words", 2)).unwrap();
    let producer_mq = rt
        .block_on(Mq::connect(
            &url_as(&redis, "producer"),
            MqOptions::default(),
        ))
        .unwrap();
    let producer = producer_mq.producer();
    let words: Vec<String> = (0..300).map(|i| format!("w{}", i % 7)).collect();
    for w in &words {
        rt.block_on(producer.send("words", Some(w), w.clone()))
            .unwrap();
    }

    let env = counting_env(&redis, "job-user", "acl-count");
    let job = env.blocking_start().unwrap();
    wait_until("every record committed", &job, || {
        job.diagnostics()
            .partitions
            .iter()
            .map(|p| p.records)
            .sum::<u64>()
            == 300
    });
    checkpoint_and_shut_down(&job);

    // Exactly once: the stored counts are the input's.
    let expected = expected_counts(&words);
    let mut stored = BTreeMap::new();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    // The count state's hashes: `{state prefix}:{job}:{T:n}:{group}:{operator}:count`.
    for key in keys_with(&redis, "acl-count:")
        .into_iter()
        .filter(|k| k.ends_with(":count"))
    {
        let fields: BTreeMap<String, String> =
            redis::cmd("HGETALL").arg(&key).query(&mut conn).unwrap();
        for (k, v) in fields {
            stored.insert(k, v.parse::<u64>().unwrap());
        }
    }
    assert_eq!(stored, expected);
}

#[test]
fn a_job_user_missing_a_command_or_a_key_pattern_fails_at_start_naming_the_rule() {
    let redis = TestRedis::private();
    let rt = rt();
    let admin = rt
        .block_on(Mq::connect(redis.url(), MqOptions::default()))
        .unwrap();
    rt.block_on(admin.create_topic("words", 1)).unwrap();
    rt.block_on(admin.producer().send("words", Some("a"), "a"))
        .unwrap();

    // (user, how its rules differ from the page's, the rule the error names, the key
    // prefix it names when a key is refused)
    type Case = (
        &'static str,
        fn(&mut Vec<String>),
        &'static str,
        Option<&'static str>,
    );
    let cases: [Case; 5] = [
        // Without MULTI the other probes are not sent (they would run).
        ("no-multi", |w| w.push("-multi".into()), "+multi", None),
        ("no-xack", |w| w.push("-xack".into()), "+xack", None),
        (
            "no-evalsha",
            |w| w.push("-evalsha".into()),
            "+evalsha",
            None,
        ),
        (
            "no-xgroup-create",
            |w| w.push("-xgroup|create".into()),
            "+xgroup|create",
            None,
        ),
        (
            "no-state-keys",
            |w| w.retain(|r| r != "~streaming:runtime:*"),
            "~streaming:runtime:*",
            Some("streaming:runtime:"),
        ),
    ];
    for (user, edit, rule, key) in cases {
        create_user(&redis, "job-user", user, edit);
        let job = format!("acl-{user}");
        let e = counting_env(&redis, user, &job)
            .blocking_start()
            .unwrap_err();
        match &e {
            Error::Permission {
                rule: r, key: k, ..
            } => {
                assert_eq!(r, rule, "{e}");
                assert_eq!(
                    k.as_deref().map(|k| k.starts_with(key.unwrap_or(""))),
                    key.map(|_| true),
                    "{e}"
                );
            }
            other => panic!("{user}: expected a permission error, got {other:?}"),
        }
        let text = e.to_string();
        assert!(text.contains(&format!("add `{rule}`")), "{text}");
        assert_eq!(e.kind(), streaming::ErrorKind::Config);
        // Refused before anything ran: no registry record, no consumer group, no state.
        assert!(
            keys_with(&redis, &job).is_empty(),
            "{user}: {:?}",
            keys_with(&redis, &job)
        );
        let groups: Vec<redis::Value> = {
            let mut conn = redis::Client::open(redis.url())
                .unwrap()
                .get_connection()
                .unwrap();
            redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(streaming::mq::KeySpace::new("mq").stream("words", 0))
                .query(&mut conn)
                .unwrap()
        };
        assert!(groups.is_empty(), "{user}: a group was created: {groups:?}");
    }
}

#[test]
fn the_documented_forwarder_user_forwards_an_outbox_into_its_topic() {
    use streaming::redis::RedisTopicForwarder;
    let redis = TestRedis::private();
    // The forwarder runs as a task: a runtime with threads of its own drives it.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    create_user(&redis, "forwarder", "forwarder", |_| {});
    let admin = rt
        .block_on(Mq::connect(redis.url(), MqOptions::default()))
        .unwrap();
    rt.block_on(admin.create_topic("orders", 1)).unwrap();
    rt.block_on(admin.create_topic("enriched", 1)).unwrap();
    let as_forwarder = rt
        .block_on(Mq::connect(
            &url_as(&redis, "forwarder"),
            MqOptions::default(),
        ))
        .unwrap();
    let forwarder = RedisTopicForwarder::builder(&as_forwarder, "orders", "enriched")
        .partitions(0..1)
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    // Outbox entries as a job's topic sink writes them (fields id, payload, ts, key).
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    for i in 1..=5 {
        let fields = [
            ("id", format!("job/orders/0/{i}-0/0")),
            ("payload", format!("{{\"n\":{i}}}")),
            ("ts", "1700".to_string()),
            ("key", format!("k{i}")),
        ];
        let _: String = redis::cmd("XADD")
            .arg(forwarder.outbox_key(0))
            .arg(format!("{i}-0"))
            .arg(&fields)
            .query(&mut conn)
            .unwrap();
    }
    let queued: usize = redis::cmd("XLEN")
        .arg(forwarder.outbox_key(0))
        .query(&mut conn)
        .unwrap();
    assert_eq!(queued, 5, "the outbox {}", forwarder.outbox_key(0));
    let running = rt.block_on(forwarder.start()).unwrap();
    let target = streaming::mq::KeySpace::new("mq").stream("enriched", 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let len: usize = redis::cmd("XLEN").arg(&target).query(&mut conn).unwrap();
        // The counter moves after the forward's reply, a moment after the entries land.
        if len == 5 && running.stats().appended == 5 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "forwarded {len} of 5: {:?}",
            running.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(running.stats().failed, 0, "no refused command");
    rt.block_on(running.stop());
}

#[test]
fn a_producer_user_missing_xadd_is_told_the_rule_to_add() {
    let redis = TestRedis::private();
    let rt = rt();
    create_user(&redis, "producer", "no-xadd", |w| w.push("-xadd".into()));
    let admin = rt
        .block_on(Mq::connect(redis.url(), MqOptions::default()))
        .unwrap();
    rt.block_on(admin.create_topic("words", 1)).unwrap();
    let mq = rt
        .block_on(Mq::connect(
            &url_as(&redis, "no-xadd"),
            MqOptions::default(),
        ))
        .unwrap();
    let e = rt
        .block_on(mq.producer().send("words", Some("a"), "a"))
        .unwrap_err();
    match &e {
        Error::Permission {
            command,
            rule,
            key: None,
        } => {
            assert_eq!((command.as_str(), rule.as_str()), ("xadd", "+xadd"));
        }
        other => panic!("expected a permission error, got {other:?}"),
    }
    assert!(!e.is_retryable(), "a missing permission is not retried");
}
