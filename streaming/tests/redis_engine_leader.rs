//! The job leader across OS processes (leader election on, checkpoints every 100 ms):
//! a follower takes over after the leader's `kill -9` within `leader_lease_ttl` +
//! `leader_renew_interval` and continues the checkpoint ids; a leader stopped (`SIGSTOP`)
//! past its lease and resumed never completes a checkpoint after the new leader's.

mod support;

use std::time::{Duration, Instant};

use redis::Commands;
use streaming::mq::{Mq, OutgoingMessage};
use streaming::redis::AckMode;
use support::redis_server::TestRedis;
use support::workers::{word, Inputs, Worker, WorkerCheckpoints, WorkerSpec, TOPIC};

const TTL: Duration = Duration::from_millis(1000);
const RENEW: Duration = Duration::from_millis(250);

/// The child side of every test here.
#[test]
fn worker() {
    support::workers::serve();
}

struct Fixture {
    _redis: TestRedis,
    spec: WorkerSpec,
    conn: redis::Connection,
}

fn fixture(test: &str) -> Fixture {
    let redis = TestRedis::private();
    let prefix = support::unique_prefix(test);
    let opts = support::fast_options(test)
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mq = Mq::connect(redis.url(), opts).await.unwrap();
        mq.create_topic(TOPIC, 4).await.unwrap();
        let msgs: Vec<OutgoingMessage> = (0..400)
            .map(|i| OutgoingMessage::new(format!("m{i}")).key(word(i)))
            .collect();
        mq.producer().send_batch(TOPIC, &msgs).await.unwrap();
    });
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    Fixture {
        spec: WorkerSpec {
            url: redis.url().to_string(),
            prefix,
            mode: AckMode::Offset,
            parallelism: 1,
            record_delay: Duration::from_millis(1),
            replica_wait: None,
            inputs: Inputs::One,
            checkpoints: Some(WorkerCheckpoints {
                interval: Duration::from_millis(100),
                leader_ttl: TTL,
                leader_renew: RENEW,
            }),
        },
        _redis: redis,
        conn,
    }
}

/// A complete checkpoint: (id, fencing token, instance, finished at ms).
type Done = (u64, u64, String, u64);

impl Fixture {
    fn key(&self, name: &str) -> String {
        format!("{}:ck:{{wc}}:{name}", self.spec.prefix)
    }

    /// The leader's (token, instance), if any.
    fn leader(&mut self) -> Option<(u64, String)> {
        let v: Option<String> = self.conn.get(self.key("leader")).unwrap();
        let v = v?;
        let (token, instance) = v.split_once(' ')?;
        Some((token.parse().unwrap(), instance.to_string()))
    }

    /// The complete checkpoints, by id.
    fn complete(&mut self) -> Vec<Done> {
        let ids: Vec<u64> = self.conn.zrange(self.key("complete"), 0, -1).unwrap();
        ids.into_iter()
            .filter_map(|id| {
                let meta: std::collections::HashMap<String, String> =
                    self.conn.hgetall(self.key(&format!("meta:{id}"))).unwrap();
                Some((
                    id,
                    meta.get("token")?.parse().ok()?,
                    meta.get("instance")?.clone(),
                    meta.get("finished_at_ms")?.parse().ok()?,
                ))
            })
            .collect()
    }

    /// Waits (bounded) until `check` holds.
    fn until<T>(&mut self, what: &str, mut check: impl FnMut(&mut Self) -> Option<T>) -> T {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `instance` leads and completed a checkpoint after `after`.
    fn leads_and_checkpoints(&mut self, instance: &str, after: u64) -> (u64, Done) {
        self.until(&format!("{instance} leads and checkpoints"), |f| {
            let (token, leader) = f.leader()?;
            let done = f
                .complete()
                .into_iter()
                .rev()
                .find(|c| c.0 > after && c.1 == token)?;
            (leader == instance).then_some((token, done))
        })
    }
}

/// Complete checkpoints never go back in fencing token as ids grow.
fn assert_tokens_grow(done: &[Done]) {
    for pair in done.windows(2) {
        assert!(
            pair[0].1 <= pair[1].1,
            "a stale leader completed one: {done:?}"
        );
    }
}

#[test]
fn a_follower_takes_over_after_the_leader_is_killed_and_continues_the_ids() {
    let mut f = fixture("leader-kill");
    let mut takeovers = Vec::new();
    let mut workers = vec![Worker::spawn(&f.spec), Worker::spawn(&f.spec)];
    for round in 0..3 {
        let (token, leader) = f.until("a leader", |f| f.leader());
        let (_, last) = f.leads_and_checkpoints(&leader, 0);
        let i = workers.iter().position(|w| w.instance == leader).unwrap();
        workers.remove(i).kill();
        let killed = Instant::now();
        let next = workers[0].instance.clone();
        let (new_token, _) = f.until("a new leader", |f| f.leader().filter(|l| l.1 == next));
        let took = killed.elapsed();
        takeovers.push(took);
        assert!(new_token > token, "round {round}");
        assert!(
            took <= TTL + RENEW + Duration::from_millis(1500),
            "round {round}: takeover took {took:?}"
        );
        let (_, first) = f.leads_and_checkpoints(&next, last.0);
        assert!(first.0 > last.0, "ids go on: {first:?} after {last:?}");
        workers.push(Worker::spawn(&f.spec));
    }
    let done = f.complete();
    assert_tokens_grow(&done);
    takeovers.sort();
    eprintln!("leader takeover after kill -9 (ttl {TTL:?}, renew {RENEW:?}): {takeovers:?}");
}

#[test]
fn a_stopped_leader_resumed_past_its_lease_never_completes_a_checkpoint() {
    let mut f = fixture("leader-stop");
    let workers = [Worker::spawn(&f.spec), Worker::spawn(&f.spec)];
    let (old_token, leader) = f.until("a leader", |f| f.leader());
    f.leads_and_checkpoints(&leader, 0);
    let old = workers.iter().find(|w| w.instance == leader).unwrap();
    let other = workers.iter().find(|w| w.instance != leader).unwrap();
    old.signal("STOP");
    let (new_token, first) = f.leads_and_checkpoints(&other.instance.clone(), 0);
    assert!(new_token > old_token);
    old.signal("CONT");
    // The resumed process finishes what it had started and runs its scheduler again
    // until its renewal finds the lease gone.
    std::thread::sleep(TTL + RENEW * 2);
    let (token, instance) = f.leader().unwrap();
    assert_eq!(
        (token, instance.as_str()),
        (new_token, other.instance.as_str())
    );
    let done = f.complete();
    assert_tokens_grow(&done);
    assert!(
        done.iter()
            .all(|c| c.1 == new_token || (c.0 < first.0 && c.3 <= first.3)),
        "no checkpoint of the old term completed after the new leader's: {done:?}"
    );
    assert_eq!(done.last().unwrap().1, new_token);
}
