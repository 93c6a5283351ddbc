//! Several OS processes of one job against one Redis: partition ownership is fenced (a
//! stalled process that lost its partitions writes nothing when it wakes up), processes on
//! one host with the default config share the partitions, random kills, stops and restarts
//! (chaos) lose and duplicate nothing, and the output stays exactly-once with exact keyed
//! counts.

mod support;

use std::time::{Duration, Instant};

use streaming::mq::{Mq, OutgoingMessage};
use streaming::redis::AckMode;
use support::redis_server::TestRedis;
use support::workers::{
    assigned_owners, check_exactly_once, distinct, lease_owners, lease_values, output, sum_of,
    word, Inputs, Worker, WorkerSpec, RULES, TOPIC, TOPIC2,
};

const PARTITIONS: u32 = 4;
/// The event time the input starts at (ms).
const T0: i64 = 1_700_000_000_000;

/// The child side of every test here.
#[test]
fn worker() {
    support::workers::serve();
}

struct Fixture {
    _redis: TestRedis,
    spec: WorkerSpec,
    conn: redis::Connection,
    rt: tokio::runtime::Runtime,
    mq: Mq,
    /// The rules produced to [`RULES`] so far (`r0`, `r1`, …).
    rules: usize,
}

fn fixture(test: &str, mode: AckMode, messages: usize) -> Fixture {
    fixture_of(test, mode, messages, Inputs::One)
}

/// A private Redis with `messages` word messages (`m{i}` keyed by [`word`]`(i)`): all in
/// [`TOPIC`], or with [`Inputs::Union`] the even ones in [`TOPIC`] and the odd ones in
/// [`TOPIC2`] (same partition count) for a job that counts the union of both. With
/// [`Inputs::Broadcast`], an empty [`RULES`] topic of one partition
/// ([`Fixture::produce_rules`]).
fn fixture_of(test: &str, mode: AckMode, messages: usize, inputs: Inputs) -> Fixture {
    let two_inputs = inputs == Inputs::Union;
    let redis = TestRedis::private();
    let prefix = support::unique_prefix(test);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = support::fast_options(test)
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let mq = rt.block_on(Mq::connect(redis.url(), opts)).unwrap();
    rt.block_on(async {
        mq.create_topic(TOPIC, PARTITIONS).await.unwrap();
        if two_inputs {
            mq.create_topic(TOPIC2, PARTITIONS).await.unwrap();
        }
        if inputs == Inputs::Broadcast {
            mq.create_topic(RULES, 1).await.unwrap();
        }
        let topic_of = |i: usize| {
            if two_inputs && i % 2 == 1 {
                TOPIC2
            } else {
                TOPIC
            }
        };
        // Of a union, the second topic's event time runs 8 times as fast as the first's:
        // it is always ahead, and the job holds its entries back for the first's, which
        // each kill and takeover must read again from the committed positions.
        let at = |i: usize| T0 + if topic_of(i) == TOPIC2 { 8 * i } else { i } as i64;
        let msgs: Vec<(usize, OutgoingMessage)> = (0..messages)
            .map(|i| {
                let m = OutgoingMessage::new(format!("m{i}")).key(word(i));
                (i, m.timestamp_ms(at(i)))
            })
            .collect();
        for chunk in msgs.chunks(1000) {
            for topic in [TOPIC, TOPIC2] {
                let part: Vec<OutgoingMessage> = (chunk.iter())
                    .filter(|(i, _)| topic_of(*i) == topic)
                    .map(|(_, m)| m.clone())
                    .collect();
                if !part.is_empty() {
                    mq.producer().send_batch(topic, &part).await.unwrap();
                }
            }
        }
    });
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    Fixture {
        spec: WorkerSpec {
            url: redis.url().to_string(),
            prefix,
            mode,
            parallelism: 1,
            record_delay: Duration::from_millis(2),
            replica_wait: None,
            inputs,
            checkpoints: None,
        },
        _redis: redis,
        conn,
        rt,
        mq,
        rules: 0,
    }
}

impl Fixture {
    /// Produces the next `k` rules (`r{j}`) to [`RULES`].
    fn produce_rules(&mut self, k: usize) {
        let rules: Vec<OutgoingMessage> = (self.rules..self.rules + k)
            .map(|j| OutgoingMessage::new(format!("r{j}")))
            .collect();
        let sent = self
            .rt
            .block_on(self.mq.producer().send_batch(RULES, &rules));
        sent.unwrap();
        self.rules += k;
    }

    /// The output lines of a job over `n` messages: one per message, and one per rule on
    /// every partition.
    fn lines(&self, n: usize) -> usize {
        n + self.rules * PARTITIONS as usize
    }

    /// Asserts the word lines are exactly once with exact counts, and that every
    /// partition kept each rule once, in order: `rule|r{j}|{j + 1}` (its broadcast state
    /// held the `j` rules before it, no more, no fewer).
    fn check_output(&mut self, n: usize) {
        let (rules, words): (Vec<String>, Vec<String>) = output(&mut self.conn, PARTITIONS)
            .into_iter()
            .partition(|line| line.starts_with("rule|"));
        check_exactly_once(&words, n);
        assert_eq!(rules.len(), self.rules * PARTITIONS as usize);
        let expected: Vec<String> = (0..self.rules)
            .map(|j| format!("rule|r{j}|{}", j + 1))
            .collect();
        for p in 0..PARTITIONS {
            let kept: Vec<String> = (partition_lines(&mut self.conn, p).into_iter())
                .filter(|line| line.starts_with("rule|"))
                .collect();
            assert_eq!(kept, expected, "the rules partition {p} kept");
        }
    }

    fn output_len(&mut self) -> usize {
        output(&mut self.conn, PARTITIONS).len()
    }

    fn wait_output(&mut self, what: &str, n: usize, deadline: Duration) {
        let end = Instant::now() + deadline;
        while self.output_len() < n {
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}: {} < {n}",
                self.output_len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the output has `n` lines and has not grown for a while (a duplicate
    /// would come after that).
    fn wait_done(&mut self, n: usize) {
        self.wait_output("all messages", n, Duration::from_secs(120));
        let mut last = self.output_len();
        let mut still = Instant::now();
        while still.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(100));
            let now = self.output_len();
            if now != last {
                last = now;
                still = Instant::now();
            }
        }
    }
}

/// A process `SIGSTOP`ped past `lease_ttl` loses its partitions to another process; when
/// it is `SIGCONT`ed, the batch it had in flight is fenced: nothing of it is written.
fn zombie(mode: AckMode, test: &str) {
    zombie_of(mode, test, Inputs::One);
}

fn zombie_of(mode: AckMode, test: &str, inputs: Inputs) {
    const N: usize = 2500;
    let mut f = fixture_of(test, mode, N, inputs);
    let a = Worker::spawn(&f.spec);
    f.wait_output("A's first commits", 100, Duration::from_secs(60));
    a.signal("STOP");
    let stopped_at = Instant::now();
    let frozen = f.output_len();
    let b = Worker::spawn(&f.spec);
    // B takes A's partitions once their leases expired and commits.
    f.wait_output("B's commits", frozen + 200, Duration::from_secs(60));
    let b_took_over_after = stopped_at.elapsed();
    a.signal("CONT");
    f.wait_done(f.lines(N));
    let (da, db) = (a.stop(), b.stop());
    f.check_output(N);
    // Not before A's leases expired (lease_ttl 1.5 s): A held them all.
    assert!(
        b_took_over_after > Duration::from_millis(1500),
        "{b_took_over_after:?}"
    );
    assert!(
        sum_of(&da, "fenced") >= 1,
        "A's in-flight batch was not fenced: {da}"
    );
    assert_eq!(sum_of(&db, "fenced"), 0, "{db}");
}

/// The stalled owner of a two-input job writes nothing of either input when it wakes up.
#[test]
fn a_stalled_process_of_a_two_input_job_is_fenced_when_it_wakes_up() {
    zombie_of(AckMode::Offset, "zombie-two-inputs", Inputs::Union);
}

#[test]
fn a_stalled_process_is_fenced_when_it_wakes_up_offset_mode() {
    zombie(AckMode::Offset, "zombie-offset");
}

#[test]
fn a_stalled_process_is_fenced_when_it_wakes_up_xack_mode() {
    zombie(AckMode::Xack, "zombie-xack");
}

/// Two processes with the default config on one host: every lease has one owner at every
/// sample, both own partitions (two each once settled), and the output is exactly-once.
#[test]
fn processes_on_one_host_share_partitions() {
    const N: usize = 3000;
    let mut f = fixture("same-host", AckMode::Offset, N);
    let a = Worker::spawn(&f.spec);
    let b = Worker::spawn(&f.spec);
    let instances = [a.instance.clone(), b.instance.clone()];
    let prefix = f.spec.prefix.clone();
    let end = Instant::now() + Duration::from_secs(120);
    let mut balanced = 0;
    while f.output_len() < N {
        assert!(Instant::now() < end, "timed out");
        let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
        for o in owners.iter().flatten() {
            assert!(instances.contains(o), "lease held by an unknown owner: {o}");
        }
        let per = |i: &String| owners.iter().flatten().filter(|o| *o == i).count();
        if per(&instances[0]) == 2 && per(&instances[1]) == 2 {
            balanced += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f.wait_done(N);
    let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
    let (da, db) = (a.stop(), b.stop());
    check_exactly_once(&output(&mut f.conn, PARTITIONS), N);
    assert_ne!(instances[0], instances[1]);
    assert_eq!(distinct(&owners).len(), 2, "{owners:?}");
    assert!(balanced > 0, "never two partitions each");
    assert!(
        sum_of(&da, "records") > 0 && sum_of(&db, "records") > 0,
        "{da}\n{db}"
    );
}

/// The assignment is sticky: when one of three processes dies (`kill -9`), only its
/// partitions move — every partition of the two survivors keeps its lease (same fencing
/// token: never taken again) — and the survivors end up with two partitions each.
#[test]
fn a_dead_process_moves_only_its_own_partitions() {
    const N: usize = 6000;
    let mut f = fixture("sticky", AckMode::Offset, N);
    let workers: Vec<Worker> = (0..3).map(|_| Worker::spawn(&f.spec)).collect();
    let instances: Vec<String> = workers.iter().map(|w| w.instance.clone()).collect();
    let prefix = f.spec.prefix.clone();
    let end = Instant::now() + Duration::from_secs(60);
    // Settled: three holders, every partition leased, no lease changed over 10 samples
    // (over two renew intervals).
    let (mut last, mut same) = (Vec::new(), 0);
    let before = loop {
        assert!(Instant::now() < end, "never settled on three processes");
        let values = lease_values(&mut f.conn, &prefix, PARTITIONS);
        let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
        let held = distinct(&owners).len() == 3 && values.iter().all(Option::is_some);
        same = if held && values == last { same + 1 } else { 0 };
        if same == 10 {
            break values;
        }
        last = values;
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        f.output_len() < N / 2,
        "the input ran out before the kill: raise N"
    );
    let mut workers = workers.into_iter();
    let (a, b, c) = (
        workers.next().unwrap(),
        workers.next().unwrap(),
        workers.next().unwrap(),
    );
    let dead = c.instance.clone();
    c.kill();
    let survivors = [a.instance.clone(), b.instance.clone()];
    let end = Instant::now() + Duration::from_secs(60);
    let after = loop {
        assert!(
            Instant::now() < end,
            "the dead process's partitions were not taken"
        );
        let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
        if owners
            .iter()
            .all(|o| o.as_ref().is_some_and(|o| survivors.contains(o)))
        {
            break lease_values(&mut f.conn, &prefix, PARTITIONS);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for (p, (was, now)) in before.iter().zip(&after).enumerate() {
        if !was.as_ref().is_some_and(|v| v.contains(&dead)) {
            assert_eq!(
                was, now,
                "partition {p} of a survivor moved ({before:?} -> {after:?})"
            );
        }
    }
    let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
    let per = |i: &String| owners.iter().flatten().filter(|o| *o == i).count();
    assert_eq!(
        (per(&survivors[0]), per(&survivors[1])),
        (2, 2),
        "{owners:?}"
    );
    f.wait_done(N);
    let (_, _) = (a.stop(), b.stop());
    check_exactly_once(&output(&mut f.conn, PARTITIONS), N);
}

/// With two processes sharing the partitions, either one's `await_caught_up` answers for
/// the whole job: `true` once every partition (its own and the other's) committed up to
/// its stream's end, and by then the output has every message.
#[test]
fn await_caught_up_answers_for_partitions_of_other_processes() {
    const N: usize = 2000;
    let mut f = fixture("caught-up", AckMode::Offset, N);
    f.spec.record_delay = Duration::ZERO;
    let mut a = Worker::spawn(&f.spec);
    let b = Worker::spawn(&f.spec);
    let instances = [a.instance.clone(), b.instance.clone()];
    let prefix = f.spec.prefix.clone();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &instances);
        if distinct(&owners).len() == 2 && owners.iter().all(Option::is_some) {
            break;
        }
        assert!(Instant::now() < end, "never shared: {owners:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(a.await_caught_up(Duration::from_secs(60)));
    assert_eq!(
        f.output_len(),
        N,
        "caught up before every message was committed"
    );
    let (_, db) = (a.stop(), b.stop());
    assert!(sum_of(&db, "records") > 0, "B processed nothing: {db}");
    check_exactly_once(&output(&mut f.conn, PARTITIONS), N);
}

/// One process slot of the chaos test.
enum Slot {
    Running(Worker),
    Stopped(Worker),
    Dead,
}

/// A partition whose owner died or stopped at `since`, waiting for another process's first
/// commit on it.
struct Takeover {
    partition: u32,
    from: String,
    since: Instant,
    /// The partition's output length when its lease moved (at the event until then).
    output_then: usize,
    /// When the sampled lease first named another owner (debug output of slow takeovers).
    taken: Option<Duration>,
    /// Another failure overlapped it: no other process was running when it began or at
    /// a later failure, or another process was killed or stopped before the partition's
    /// lease moved (it may have been the one dealt the partition) or while it held the
    /// lease or the assignment before the first commit. Two failures, not one takeover:
    /// its time is reported apart.
    compound: bool,
}

/// Partition `p`'s output lines, in order.
fn partition_lines(conn: &mut redis::Connection, p: u32) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(streaming::redis::RedisListSink::<String>::key_for(
            support::workers::LIST,
            TOPIC,
            p,
        ))
        .arg(0)
        .arg(-1)
        .query(conn)
        .unwrap()
}

fn partition_len(conn: &mut redis::Connection, p: u32) -> usize {
    redis::cmd("LLEN")
        .arg(streaming::redis::RedisListSink::<String>::key_for(
            support::workers::LIST,
            TOPIC,
            p,
        ))
        .query(conn)
        .unwrap()
}

/// Chaos: 3 worker processes over 20,000 messages; every 0.5–2 s (seeded RNG: the seed is
/// printed, set `CHAOS_SEED` to replay it) a random process is killed (`SIGKILL`),
/// restarted, stopped (`SIGSTOP`) or continued (`SIGCONT`), for 15 s (`CHAOS_SECS`); then every process
/// resumes. The output is exactly-once with exact keyed counts. Prints the takeover times
/// (a process's death or stop to another process's first commit on a partition it owned);
/// takeovers another failure overlapped (no other process running when it began, or
/// another process killed or stopped before it ended) apart.
fn chaos(mode: AckMode, test: &str) {
    chaos_of(mode, test, Inputs::One);
}

fn chaos_of(mode: AckMode, test: &str, inputs: Inputs) {
    use rand::{Rng, SeedableRng};
    // `CHAOS_SECS` runs it longer (more takeovers measured).
    let chaos_for = Duration::from_secs(
        std::env::var("CHAOS_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(15),
    );
    // 20,000 messages per 15 s of chaos: the input outlasts it.
    let n = usize::try_from(chaos_for.as_secs()).unwrap_or(15).max(15) * 20_000 / 15;
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("{test}: CHAOS_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut f = fixture_of(test, mode, n, inputs);
    f.spec.record_delay = Duration::from_millis(1);
    let mut slots: Vec<Slot> = (0..3)
        .map(|_| Slot::Running(Worker::spawn(&f.spec)))
        .collect();
    let prefix = f.spec.prefix.clone();
    // Every instance ever started: a killed process's lease still names it.
    let mut known: Vec<String> = (slots.iter())
        .filter_map(|s| match s {
            Slot::Running(w) | Slot::Stopped(w) => Some(w.instance.clone()),
            Slot::Dead => None,
        })
        .collect();
    let mut pending: Vec<Takeover> = Vec::new();
    let mut takeovers: Vec<Duration> = Vec::new();
    let mut compound: Vec<Duration> = Vec::new();
    let mut events = Vec::new();
    let start = Instant::now();
    let mut next = start;
    while start.elapsed() < chaos_for {
        // Settle measurements: the partition's lease is another process's and its output
        // grew since the lease moved (only the lease's owner commits: a commit of the old
        // owner in flight at the event is not the takeover's).
        let owners = lease_owners(&mut f.conn, &prefix, PARTITIONS, &known);
        pending.retain_mut(|t| {
            let owner = owners[t.partition as usize].as_ref();
            let moved = owner.is_some_and(|o| *o != t.from);
            if moved && t.taken.is_none() {
                t.taken = Some(t.since.elapsed());
                t.output_then = partition_len(&mut f.conn, t.partition);
                return true;
            }
            if moved && partition_len(&mut f.conn, t.partition) > t.output_then {
                let took = t.since.elapsed();
                if took > Duration::from_millis(2700) {
                    println!(
                        "{test}: slow takeover (compound: {}) of partition {} from {} at {:.2}: leased by {:?} after {:?}, committed after {took:?}; events {events:?}",
                        t.compound, t.partition, t.from, (t.since - start).as_secs_f64(), owner, t.taken
                    );
                }
                if t.compound {
                    compound.push(took);
                } else {
                    takeovers.push(took);
                }
                return false;
            }
            true
        });
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        next = Instant::now() + Duration::from_millis(rng.random_range(500..=2000));
        if inputs == Inputs::Broadcast {
            // Rules keep coming while processes die, stop and take over.
            f.produce_rules(5);
        }
        let i = rng.random_range(0..slots.len());
        let slot = std::mem::replace(&mut slots[i], Slot::Dead);
        let others_running = slots.iter().any(|s| matches!(s, Slot::Running(_)));
        let lost = |w: &Worker, f: &mut Fixture, pending: &mut Vec<Takeover>| {
            // A takeover under way whose taker this process was (leasing the partition,
            // or assigned it) has to start again.
            let assigned = assigned_owners(&mut f.conn, &prefix, PARTITIONS, &known);
            for t in pending.iter_mut() {
                let p = t.partition as usize;
                let mine = |o: &Option<String>| o.as_deref() == Some(w.instance.as_str());
                // Before its lease moved, its successor is not known: maybe this one.
                let unsettled = t.taken.is_none();
                t.compound |=
                    mine(&owners[p]) || mine(&assigned[p]) || unsettled || !others_running;
            }
            for (p, o) in owners.iter().enumerate() {
                if o.as_deref() == Some(w.instance.as_str()) {
                    let p = p as u32;
                    // A takeover still waiting for its first commit is superseded: its
                    // next owner failed before committing (two failures, not one takeover).
                    pending.retain(|t| t.partition != p);
                    pending.push(Takeover {
                        partition: p,
                        from: w.instance.clone(),
                        since: Instant::now(),
                        output_then: partition_len(&mut f.conn, p),
                        taken: None,
                        compound: !others_running,
                    });
                }
            }
        };
        let at = start.elapsed().as_secs_f64();
        slots[i] = match slot {
            Slot::Running(w) if rng.random_bool(0.5) => {
                events.push(format!("{at:.2} kill {}", w.instance));
                lost(&w, &mut f, &mut pending);
                w.kill();
                Slot::Dead
            }
            Slot::Running(w) => {
                events.push(format!("{at:.2} stop {}", w.instance));
                lost(&w, &mut f, &mut pending);
                w.signal("STOP");
                Slot::Stopped(w)
            }
            Slot::Stopped(w) => {
                events.push(format!("{at:.2} cont {}", w.instance));
                // Resumed before anyone took over: its partitions never moved.
                pending.retain(|t| t.from != w.instance);
                w.signal("CONT");
                Slot::Running(w)
            }
            Slot::Dead => {
                let w = Worker::spawn(&f.spec);
                events.push(format!("{at:.2} start {}", w.instance));
                known.push(w.instance.clone());
                Slot::Running(w)
            }
        };
    }
    println!(
        "{test}: events {events:?}; {} of {n} output lines when the chaos ended",
        f.output_len()
    );
    for slot in &mut slots {
        *slot = match std::mem::replace(slot, Slot::Dead) {
            Slot::Stopped(w) => {
                w.signal("CONT");
                Slot::Running(w)
            }
            Slot::Dead => Slot::Running(Worker::spawn(&f.spec)),
            running => running,
        };
    }
    f.wait_done(f.lines(n));
    for slot in slots {
        if let Slot::Running(w) = slot {
            w.stop();
        }
    }
    takeovers.sort_unstable();
    if !takeovers.is_empty() {
        // lease_ttl + renew interval + 1 s of the test options (fast_options).
        let bound = Duration::from_millis(1500 + 200 + 1000);
        let n = takeovers.len();
        println!(
            "{test}: TAKEOVER n={n} median={:?} p90={:?} max={:?} over lease_ttl+renew+1s={}",
            takeovers[n / 2],
            takeovers[(n * 9 / 10).min(n - 1)],
            takeovers[n - 1],
            takeovers.iter().filter(|t| **t > bound).count()
        );
    }
    compound.sort_unstable();
    println!(
        "{test}: COMPOUND (another failure overlapped) n={} max={:?}",
        compound.len(),
        compound.last()
    );
    f.check_output(n);
}

#[test]
fn chaos_kill_stop_restart_is_exactly_once_offset_mode() {
    chaos(AckMode::Offset, "chaos-offset");
}

#[test]
fn chaos_kill_stop_restart_is_exactly_once_xack_mode() {
    chaos(AckMode::Xack, "chaos-xack");
}

/// The keyed count's stored state: word → count, over every partition's count hash.
fn stored_counts(conn: &mut redis::Connection) -> std::collections::BTreeMap<String, u64> {
    // The count of a `process` or a `broadcast_process` operator.
    let hashes: Vec<String> = redis::cmd("KEYS")
        .arg("*process:count*")
        .query(conn)
        .unwrap();
    let mut counts = std::collections::BTreeMap::new();
    for h in hashes {
        let fields: Vec<(String, u64)> = redis::cmd("HGETALL").arg(&h).query(conn).unwrap();
        for (field, n) in fields {
            let word: String = serde_json::from_str(&field).unwrap();
            assert!(counts.insert(word, n).is_none(), "a word in two hashes");
        }
    }
    counts
}

/// One worker process `SIGKILL`ed at 30 random points (seeded; `KILL_SEED` replays a
/// run) — while taking partitions, fetching state, processing or committing — and started
/// again each time: the list output is exactly-once with exact counts, and the stored
/// state holds each word's exact count.
fn kill_at_random_points(mode: AckMode, test: &str) {
    kill_at_random_points_of(mode, test, Inputs::One);
}

fn kill_at_random_points_of(mode: AckMode, test: &str, inputs: Inputs) {
    use rand::{Rng, SeedableRng};
    const N: usize = 6_000;
    let seed: u64 = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("{test}: KILL_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut f = fixture_of(test, mode, N, inputs);
    f.spec.record_delay = Duration::from_micros(300);
    let mut at_kill = Vec::new();
    for _ in 0..30 {
        if inputs == Inputs::Broadcast {
            f.produce_rules(3);
        }
        let w = Worker::spawn(&f.spec);
        std::thread::sleep(Duration::from_millis(rng.random_range(20..=1200)));
        w.kill();
        at_kill.push(f.output_len());
    }
    println!("{test}: output lines at each kill {at_kill:?}");
    let w = Worker::spawn(&f.spec);
    f.wait_done(f.lines(N));
    w.stop();
    f.check_output(N);
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..N {
        *expected.entry(word(i)).or_insert(0u64) += 1;
    }
    assert_eq!(stored_counts(&mut f.conn), expected);
}

#[test]
fn kill_9_at_30_random_points_is_exactly_once_offset_mode() {
    kill_at_random_points(AckMode::Offset, "kill30-offset");
}

#[test]
fn kill_9_at_30_random_points_is_exactly_once_xack_mode() {
    kill_at_random_points(AckMode::Xack, "kill30-xack");
}

/// The union of two co-partitioned topics: each input's position commits with the state.
#[test]
fn kill_9_at_30_random_points_of_a_two_input_job_is_exactly_once() {
    kill_at_random_points_of(AckMode::Xack, "kill30-two-inputs", Inputs::Union);
}

#[test]
fn chaos_kill_stop_restart_of_a_two_input_job_is_exactly_once() {
    chaos_of(AckMode::Offset, "chaos-two-inputs", Inputs::Union);
}

/// A keyed topic connected to a broadcast rules topic, rules produced between the kills:
/// every partition keeps every rule once, in order, and the counts are exact.
#[test]
fn kill_9_at_30_random_points_of_a_broadcast_job_is_exactly_once() {
    kill_at_random_points_of(AckMode::Offset, "kill30-broadcast", Inputs::Broadcast);
}

/// The broadcast job under chaos, rules produced at every event: each partition's
/// broadcast state is built exactly once, in order, whoever owns it (job partition 0 reads
/// the rules under the rules topic's lease, the others follow it without one).
#[test]
fn chaos_kill_stop_restart_of_a_broadcast_job_is_exactly_once() {
    chaos_of(AckMode::Xack, "chaos-broadcast", Inputs::Broadcast);
}
