//! What a crashed owner leaves behind is processed by the next one: pending entries of
//! another consumer (Xack mode) are claimed, and entries read with NOACK but never
//! committed (Offset mode) are read again from the committed offset.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use support::fast_options;
use support::redis_server::TestRedis;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

struct Fixture {
    redis: TestRedis,
    rt: tokio::runtime::Runtime,
    mq: Mq,
    opts: streaming::mq::MqOptions,
}

fn fixture(test: &str) -> Fixture {
    let redis = TestRedis::shared();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = fast_options(test).build().unwrap();
    let mq = rt.block_on(Mq::connect(redis.url(), opts.clone())).unwrap();
    rt.block_on(mq.create_topic("t", 2)).unwrap();
    Fixture {
        redis,
        rt,
        mq,
        opts,
    }
}

impl Fixture {
    fn send(&self, words: &[String]) {
        let msgs: Vec<OutgoingMessage> = words
            .iter()
            .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
            .collect();
        self.rt
            .block_on(self.mq.producer().send_batch("t", &msgs))
            .unwrap();
    }

    fn cmd(&self, cmd: &redis::Cmd) {
        let client = redis::Client::open(self.redis.url()).unwrap();
        self.rt.block_on(async {
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            let _: redis::Value = cmd.query_async(&mut c).await.unwrap();
        });
    }

    fn start(&self, mode: AckMode, out: &CollectSink<(String, u64)>) -> JobClient {
        let config = RedisRuntimeConfig::builder()
            .job_name("takeover")
            .job_instance_id("second")
            .mq_options(self.opts.clone())
            .ack_mode(mode)
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(self.redis.url(), config).unwrap();
        env.from_mq_topic_with_options(
            "t",
            "g",
            SubscriptionOptions::builder()
                .start(StartPolicy::Earliest)
                .batch_count(7)
                .build()
                .unwrap(),
        )
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
        env.blocking_start().unwrap()
    }
}

fn wait_for(out: &CollectSink<(String, u64)>, n: usize, job: &JobClient) {
    let end = Instant::now() + Duration::from_secs(60);
    while out.len() < n {
        assert!(Instant::now() < end, "timed out: {:?}", job.diagnostics());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check(out: &CollectSink<(String, u64)>, words: &[String]) {
    let mut got: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (w, n) in out.snapshot() {
        got.entry(w).or_default().push(n);
    }
    let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for w in words {
        let v = expected.entry(w.clone()).or_default();
        v.push(v.len() as u64 + 1);
    }
    assert_eq!(got, expected);
}

fn words(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w{}", i % 5)).collect()
}

#[test]
fn xack_mode_claims_entries_a_dead_consumer_left_pending() {
    let f = fixture("take-xack");
    let input = words(60);
    f.send(&input);
    // A consumer of an earlier instance read everything and died before acknowledging.
    for p in 0..2 {
        let stream = f.mq.keys().stream("t", p);
        f.cmd(
            redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&stream)
                .arg("g")
                .arg("0"),
        );
        f.cmd(
            redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg("g")
                .arg("takeover-first-0")
                .arg("COUNT")
                .arg(1000)
                .arg("STREAMS")
                .arg(&stream)
                .arg(">"),
        );
    }
    let out = CollectSink::new();
    let job = f.start(AckMode::Xack, &out);
    wait_for(&out, 60, &job);
    job.blocking_shutdown(Duration::MAX);
    check(&out, &input);
    let info = f.rt.block_on(f.mq.describe_topic("t")).unwrap();
    for p in &info.partition_info {
        for g in p.groups.iter().filter(|g| g.name == "g") {
            assert_eq!(g.pending, 0, "partition {}: {g:?}", p.partition);
        }
    }
}

#[test]
fn offset_mode_reads_again_what_was_read_but_never_committed() {
    let f = fixture("take-offset");
    let first = words(40);
    f.send(&first);
    let out = CollectSink::new();
    let job = f.start(AckMode::Offset, &out);
    wait_for(&out, 40, &job);
    job.blocking_shutdown(Duration::MAX);
    let second = words(25);
    f.send(&second);
    // An owner read the new entries with NOACK (the group's position moved past them) and
    // crashed before committing its offset.
    for p in 0..2 {
        let stream = f.mq.keys().stream("t", p);
        f.cmd(
            redis::cmd("XGROUP")
                .arg("SETID")
                .arg(&stream)
                .arg("g")
                .arg("$"),
        );
    }
    let job = f.start(AckMode::Offset, &out);
    wait_for(&out, 65, &job);
    job.blocking_shutdown(Duration::MAX);
    let all: Vec<String> = first.iter().chain(&second).cloned().collect();
    check(&out, &all);
}

/// Takes partition 0's lease from the job (a new fencing token, as a new owner's take
/// would) and appends `words` to its stream in the same script, so the job's next read
/// finds entries while its lease is gone. Returns the group's last-delivered id then.
fn steal_and_append(f: &Fixture, words: &[&str]) -> String {
    let keys = f.mq.keys();
    let script = redis::Script::new(
        r"
        local t = redis.call('INCR', KEYS[2])
        redis.call('SET', KEYS[1], t .. ' thief', 'PX', 60000)
        for _, w in ipairs(ARGV) do
          redis.call('XADD', KEYS[3], '*', 'p', w, 'ts', '1', 'k', w)
        end
        for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[3])) do
          if g[2] == 'g' then
            for i = 1, #g, 2 do
              if g[i] == 'last-delivered-id' then return g[i + 1] end
            end
          end
        end
        return redis.error_reply('no group g')
        ",
    );
    let client = redis::Client::open(f.redis.url()).unwrap();
    f.rt.block_on(async {
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        script
            .key(keys.lease("t", 0, "g"))
            .key(keys.fence("t", 0, "g"))
            .key(keys.stream("t", 0))
            .arg(words)
            .invoke_async(&mut c)
            .await
            .unwrap()
    })
}

/// An owner whose lease was taken while it was idle reads the entries appended since
/// (its read runs as guard + read + undo in one transaction): the read is refused and
/// undone — the group's last-delivered id stays where it was and nothing is left in the
/// stale owner's pending list — and once the lease is free again every entry is
/// processed exactly once.
fn stale_read_moves_nothing(mode: AckMode, test: &str) {
    let f = fixture(test);
    let first = words(20);
    f.send(&first);
    let out = CollectSink::new();
    let job = f.start(mode, &out);
    wait_for(&out, 20, &job);
    let late = ["x1", "x2", "x3"];
    let before = steal_and_append(&f, &late);
    let fenced = || {
        job.diagnostics()
            .partitions
            .iter()
            .any(|p| p.partition == 0 && p.fenced >= 1)
    };
    support::engine::wait_until("the job finds partition 0 fenced", &job, fenced);
    let info = f.rt.block_on(f.mq.describe_topic("t")).unwrap();
    let g = info.partition_info[0]
        .groups
        .iter()
        .find(|g| g.name == "g")
        .unwrap();
    assert_eq!(
        (g.last_delivered_id.as_str(), g.pending),
        (before.as_str(), 0),
        "the stale read moved the group: {g:?}"
    );
    assert_eq!(out.len(), 20, "nothing of the stale read was emitted");
    // The thief leaves; the job takes the partition back and reads the new entries.
    f.cmd(redis::cmd("DEL").arg(f.mq.keys().lease("t", 0, "g")));
    wait_for(&out, 23, &job);
    job.blocking_shutdown(Duration::MAX);
    let all: Vec<String> = first
        .iter()
        .cloned()
        .chain(late.iter().map(|w| w.to_string()))
        .collect();
    check(&out, &all);
}

#[test]
fn a_stale_owners_read_is_undone_xack_mode() {
    stale_read_moves_nothing(AckMode::Xack, "stale-read-xack");
}

#[test]
fn a_stale_owners_read_is_undone_offset_mode() {
    stale_read_moves_nothing(AckMode::Offset, "stale-read-offset");
}

/// Every run of a job reads with consumers of its own; taking a partition deletes the
/// consumers of earlier runs that have nothing pending, so the group's consumer list does
/// not grow with every restart (it held one more consumer per run and partition).
fn consumers_do_not_pile_up(mode: AckMode, test: &str) {
    let f = fixture(test);
    let out = CollectSink::new();
    let mut all = Vec::new();
    for run in 0..3 {
        let words = words(10);
        f.send(&words);
        all.extend(words);
        let job = f.start(mode, &out);
        wait_for(&out, all.len(), &job);
        job.blocking_shutdown(Duration::MAX);
        let info = f.rt.block_on(f.mq.describe_topic("t")).unwrap();
        for p in &info.partition_info {
            let g = p.groups.iter().find(|g| g.name == "g").unwrap();
            assert_eq!(
                (g.consumers, g.pending),
                (1, 0),
                "run {run}, partition {}: {g:?}",
                p.partition
            );
        }
    }
    check(&out, &all);
}

#[test]
fn earlier_runs_consumers_are_deleted_xack_mode() {
    consumers_do_not_pile_up(AckMode::Xack, "prune-xack");
}

#[test]
fn earlier_runs_consumers_are_deleted_offset_mode() {
    consumers_do_not_pile_up(AckMode::Offset, "prune-offset");
}
