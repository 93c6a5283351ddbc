//! Two jobs chained by a topic, each an OS process killed with `SIGKILL` at random points:
//! job A reads `in`, maps, and produces into `mid` with a `RedisTopicSink`; job B reads
//! `mid` and appends to a `RedisListSink`. Two forwarders for `in` → `mid` run side by
//! side, each killed with its process: the one job A starts itself for its topic sink,
//! and one B's process starts with the public API. Every input record ends in B's lists exactly once, and `mid` holds exactly
//! one message per input, with its key and idempotency header.
//!
//! The children are copies of this test binary running the test `chain_worker` with
//! `CHAIN_ROLE` set (`a` or `b`); they print `READY` once started and stop cleanly when
//! their stdin closes.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use redis::Commands;
use serde::{Deserialize, Serialize};
use streaming::mq::HEADER_IDEMPOTENCY_KEY;
use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{
    RedisEnv, RedisListSink, RedisRuntimeConfig, RedisTopicForwarder, RedisTopicSink,
};
use support::redis_server::TestRedis;

const INPUT: &str = "in";
const MID: &str = "mid";
const IN_PARTITIONS: u32 = 3;
const MID_PARTITIONS: u32 = 2;
const LIST: &str = "chain-out";
const MESSAGES: usize = 600;
/// Kill rounds (each sends `MESSAGES / ROUNDS` inputs first).
const ROUNDS: usize = 12;

/// What job A produces into `mid`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Enriched {
    id: String,
    key: String,
}

/// The child side: runs job A (which starts its forwarder itself) or job B (beside which
/// it starts a forwarder) while stdin is open.
#[test]
fn chain_worker() {
    let Ok(role) = std::env::var("CHAIN_ROLE") else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let opts = support::fast_options("chain")
        .key_prefix(var("CHAIN_PREFIX"))
        .build()
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name(format!("job-{role}"))
        .mq_options(opts.clone())
        .pipeline_parallelism(2)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(var("CHAIN_URL").as_str(), config).unwrap();
    let read = |topic: &str, group: &str| {
        let options = SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .batch_count(16)
            .build()
            .unwrap();
        env.from_mq_topic_with_options(topic, group, options)
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut forwarding = None;
    if role == "a" {
        read(INPUT, "ga")
            .map(|m: Message| Enriched {
                id: m.text().unwrap().to_string(),
                key: m.key.as_deref().unwrap_or_default().to_owned(),
            })
            .sink(
                RedisTopicSink::new(MID)
                    .unwrap()
                    .key(|e: &Enriched| e.key.clone()),
            )
            .unwrap();
    } else {
        read(MID, "gb")
            .map(|m: Message| {
                let e: Enriched = m.json().unwrap();
                let header = m.headers.get(HEADER_IDEMPOTENCY_KEY).cloned();
                let key = m.key.clone().unwrap_or_default();
                format!("{}|{}|{}|{}", e.id, e.key, key, header.unwrap_or_default())
            })
            .sink(RedisListSink::<String>::text(LIST).unwrap())
            .unwrap();
        let mq = rt.block_on(Mq::connect(&var("CHAIN_URL"), opts)).unwrap();
        // Every partition of `in` (the default).
        let forwarder = RedisTopicForwarder::builder(&mq, INPUT, MID)
            .poll_interval(Duration::from_millis(20))
            .build()
            .unwrap();
        forwarding = Some(rt.block_on(forwarder.start()).unwrap());
    }
    let job = env.blocking_start().unwrap();
    println!("READY");
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    job.blocking_shutdown(Duration::MAX);
    if let Some(f) = forwarding {
        rt.block_on(f.stop());
    }
    std::process::exit(0);
}

/// One job process.
struct Job {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Job {
    fn spawn(role: &str, url: &str, prefix: &str) -> Job {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "chain_worker",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("CHAIN_ROLE", role)
            .env("CHAIN_URL", url)
            .env("CHAIN_PREFIX", prefix)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("READY") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("job {role} did not start"));
        Job {
            stdin: child.stdin.take(),
            child,
        }
    }

    /// `SIGKILL`, then reaps it: nothing of it runs when this returns.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Closes stdin (the job shuts down cleanly) and waits for the exit.
    fn stop(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "a job exited with {status}");
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic generator (xorshift64), seeded per run and printed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn key_of(i: usize) -> String {
    format!("k{}", i % 11)
}

/// Every line of B's lists.
fn output(conn: &mut redis::Connection) -> Vec<String> {
    let mut all = Vec::new();
    for p in 0..MID_PARTITIONS {
        let list = RedisListSink::<String>::key_for(LIST, MID, p);
        let v: Vec<String> = conn.lrange(list, 0, -1).unwrap();
        all.extend(v);
    }
    all
}

/// Messages in `mid`, over its partitions.
fn in_mid(conn: &mut redis::Connection, mq: &Mq) -> usize {
    (0..MID_PARTITIONS)
        .map(|q| conn.xlen::<_, usize>(mq.keys().stream(MID, q)).unwrap())
        .sum()
}

#[test]
fn each_record_crosses_two_killed_jobs_exactly_once() {
    if std::env::var("CHAIN_ROLE").is_ok() {
        return;
    }
    let redis = TestRedis::shared();
    let url = redis.url().to_string();
    let prefix = support::unique_prefix("chain");
    let opts = support::fast_options("chain")
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mq = rt.block_on(Mq::connect(&url, opts)).unwrap();
    rt.block_on(mq.create_topic(INPUT, IN_PARTITIONS)).unwrap();
    rt.block_on(mq.create_topic(MID, MID_PARTITIONS)).unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut a = Job::spawn("a", &url, &prefix);
    let mut b = Job::spawn("b", &url, &prefix);
    // Rounds: send a chunk, wait until the work the kill should cut is under way (A's
    // round: `mid` grows, so the forwarders are at work; B's round: B's output grows),
    // wait a random few ms more, kill the process (A twice as often) and start it again.
    let chunk = MESSAGES / ROUNDS;
    for round in 0..ROUNDS {
        let msgs: Vec<OutgoingMessage> = (round * chunk..(round + 1) * chunk)
            .map(|i| OutgoingMessage::new(format!("m{i}")).key(key_of(i)))
            .collect();
        let kill_a = round % 3 != 2;
        let progress = |conn: &mut redis::Connection| {
            if kill_a {
                in_mid(conn, &mq)
            } else {
                output(conn).len()
            }
        };
        let before = progress(&mut conn);
        rt.block_on(mq.producer().send_batch(INPUT, &msgs)).unwrap();
        let busy = std::time::Instant::now() + Duration::from_secs(30);
        while progress(&mut conn) == before && std::time::Instant::now() < busy {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        if kill_a {
            a.kill();
            a = Job::spawn("a", &url, &prefix);
        } else {
            b.kill();
            b = Job::spawn("b", &url, &prefix);
        }
    }
    let end = std::time::Instant::now() + Duration::from_secs(180);
    while output(&mut conn).len() < MESSAGES {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for B's output"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    a.stop();
    b.stop();
    check(&output(&mut conn), &mut conn, &mq);
}

/// B's lines are `{id}|{key A saw}|{message key in mid}|{idempotency header}`: each input
/// exactly once, with its key carried through, and `mid` holds one message per input.
fn check(lines: &[String], conn: &mut redis::Connection, mq: &Mq) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut headers = BTreeSet::new();
    for line in lines {
        let parts: Vec<&str> = line.split('|').collect();
        let (id, key, mid_key, header) = (parts[0], parts[1], parts[2], parts[3]);
        let i: usize = id.trim_start_matches('m').parse().unwrap();
        assert_eq!((key, mid_key), (&*key_of(i), &*key_of(i)), "keys of {id}");
        assert!(
            header.starts_with("job-a/ga/in/"),
            "stable id header {header}"
        );
        headers.insert(header.to_string());
        *seen.entry(id.to_string()).or_default() += 1;
    }
    let dup: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(10).collect();
    assert!(dup.is_empty(), "duplicated in B's output: {dup:?}");
    let missing: Vec<usize> = (0..MESSAGES)
        .filter(|i| !seen.contains_key(&format!("m{i}")))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "lost: {missing:?}");
    assert_eq!(lines.len(), MESSAGES);
    assert_eq!(headers.len(), MESSAGES, "one stable id per record");
    assert_eq!(in_mid(conn, mq), MESSAGES, "mid holds each record once");
}
