//! Several OS processes of one Redis job: the test binary starts copies of itself that run
//! a word-count job (keyed `ValueState` count, a `RedisListSink`) — over one topic, the
//! union of two, or one topic connected to a broadcast rules topic — and checks the list
//! output for exactly-once and exact counts (and each partition's rules).
//!
//! A test file using it declares `#[test] fn worker() { support::workers::serve() }`:
//! in a child started by [`Worker::spawn`] (environment `STREAMING_WORKER=1`) that test
//! runs the job until its stdin closes; everywhere else it returns at once. The child
//! reads `scale N` and `caught_up <timeout ms>` lines on stdin and prints `INSTANCE <id>`
//! when started, `CAUGHT_UP <bool>` (what `await_caught_up` returned) and
//! `FINAL <diagnostics>` when stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, Collector, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext, ValueStateDescriptor,
};
use streaming::mq::{Message, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, RedisEnv, RedisListSink, RedisRuntimeConfig, ReplicaWait};
use streaming::BoxError;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// The topic, group and output list of the job.
pub const TOPIC: &str = "t";
/// The second topic of a two-input job ([`Inputs::Union`]), read as group `g2`.
pub const TOPIC2: &str = "t2";
/// The broadcast topic of [`Inputs::Broadcast`] (one partition), read as group `gr`.
pub const RULES: &str = "rules";
/// The output list (one per partition, [`RedisListSink::key_for`]).
pub const LIST: &str = "out";

/// What a worker process runs with.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    pub url: String,
    pub prefix: String,
    pub mode: AckMode,
    pub parallelism: u32,
    /// Per-record processing time (widens the window in which a batch is in flight).
    pub record_delay: Duration,
    /// `commit_replica_wait`: wait for one replica, at most this long (`None`: no wait).
    pub replica_wait: Option<Duration>,
    /// Periodic checkpoints and leader election (`None`: neither).
    pub checkpoints: Option<WorkerCheckpoints>,
    /// What the job reads.
    pub inputs: Inputs,
}

/// What a worker's job reads: the word count's keyed input, and maybe another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inputs {
    /// [`TOPIC`] alone.
    One,
    /// The union of [`TOPIC`] and [`TOPIC2`] (co-partitioned).
    Union,
    /// [`TOPIC`] keyed and connected to [`RULES`] broadcast: every partition keeps each
    /// rule message in its broadcast state and outputs `rule|{rule}|{rules kept}`.
    Broadcast,
}

impl Inputs {
    /// [`Inputs::Union`] when `two_inputs`, else [`Inputs::One`].
    pub fn union_if(two_inputs: bool) -> Inputs {
        if two_inputs {
            Inputs::Union
        } else {
            Inputs::One
        }
    }
}

/// A worker's checkpoint options: checkpoints every `interval`, leader election with
/// lease `leader_ttl` renewed every `leader_renew` (checkpoint keys under `{prefix}:ck:`).
#[derive(Clone, Copy, Debug)]
pub struct WorkerCheckpoints {
    pub interval: Duration,
    pub leader_ttl: Duration,
    pub leader_renew: Duration,
}

/// The job's pipeline after its source: a keyed count per word; each output line is
/// `{id}|{word}|{count}`.
macro_rules! word_count {
    ($stream:expr, $delay:expr) => {
        $stream
            .map(word_and_id)
            .key_by(|(w, _): &(String, String)| w.clone())
            .process(move |(w, id): (String, String), ctx, out| {
                std::thread::sleep($delay);
                let mut c = ctx.state(&COUNT)?;
                let n = c.value() + 1;
                c.update(n);
                out.collect(format!("{id}|{w}|{n}"));
                Ok(())
            })
            .sink(RedisListSink::<String>::text(LIST).unwrap())
    };
}

/// A word message as `(word, id)`.
fn word_and_id(m: Message) -> (String, String) {
    (
        m.key.as_deref().unwrap_or_default().to_owned(),
        m.text().unwrap().to_string(),
    )
}

/// The broadcast rules each partition keeps: rule → its place among the rules kept.
const KEPT: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::persistent("kept");

/// The word count of [`word_count!`] connected to the rules: each word line as there, and
/// each rule kept in the broadcast state, with the line `rule|{rule}|{rules kept}`.
#[derive(Clone)]
struct CountWithRules {
    delay: Duration,
}

impl KeyedBroadcastProcessFunction<String, (String, String), Message, String, u64>
    for CountWithRules
{
    type Out = String;

    fn process_element(
        &mut self,
        (w, id): (String, String),
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        std::thread::sleep(self.delay);
        let mut c = ctx.state(&COUNT)?;
        let n = c.value() + 1;
        c.update(n);
        out.collect(format!("{id}|{w}|{n}"));
        Ok(())
    }

    fn process_broadcast_element(
        &mut self,
        rule: Message,
        ctx: &mut BroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let rule = rule.text()?.to_string();
        let mut kept = ctx.broadcast_state()?;
        let place = kept.len() as u64 + 1;
        kept.put(rule.clone(), place);
        out.collect(format!("rule|{rule}|{}", kept.len()));
        Ok(())
    }
}

/// The child side: runs the job while stdin is open, when started as a worker.
pub fn serve() {
    if std::env::var("STREAMING_WORKER").as_deref() != Ok("1") {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let mode = if var("W_MODE") == "xack" {
        AckMode::Xack
    } else {
        AckMode::Offset
    };
    let delay = Duration::from_micros(var("W_DELAY_US").parse().unwrap());
    let replica_wait = std::env::var("W_REPLICA_WAIT_MS")
        .ok()
        .map(|ms| ReplicaWait::new(1, Duration::from_millis(ms.parse().unwrap())));
    let opts = super::fast_options("w")
        .key_prefix(var("W_PREFIX"))
        .build()
        .unwrap();
    let ms = |k: &str| {
        std::env::var(k)
            .ok()
            .map(|v| Duration::from_millis(v.parse().unwrap()))
    };
    let mut builder = RedisRuntimeConfig::builder();
    if let (Some(interval), Some(ttl), Some(renew)) = (
        ms("W_CK_MS"),
        ms("W_LEADER_TTL_MS"),
        ms("W_LEADER_RENEW_MS"),
    ) {
        builder = builder
            .checkpoint_key_prefix(format!("{}:ck:", var("W_PREFIX")))
            .checkpoint_interval(interval)
            .leader_election_enabled(true)
            .leader_lease_ttl(ttl)
            .leader_renew_interval(renew);
    }
    // Default job_instance_id: every worker of a test runs on this host.
    let config = builder
        .job_name("wc")
        .mq_options(opts)
        .ack_mode(mode)
        .pipeline_parallelism(var("W_PAR").parse().unwrap())
        .commit_replica_wait(replica_wait)
        .build()
        .unwrap();
    println!("INSTANCE {}", config.job_instance_id());
    let env = RedisEnv::try_with_config(var("W_URL").as_str(), config).unwrap();
    let options = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(20)
        .build()
        .unwrap();
    let first = env.from_mq_topic_with_options(TOPIC, "g", options.clone());
    match var("W_INPUTS").as_str() {
        "union" => {
            let second = env.from_mq_topic_with_options(TOPIC2, "g2", options);
            word_count!(first.union(second), delay)
        }
        "broadcast" => {
            let rules = env.from_mq_topic_with_options(RULES, "gr", options);
            (first.map(word_and_id))
                .key_by(|(w, _): &(String, String)| w.clone())
                .connect(rules.broadcast(KEPT))
                .process(CountWithRules { delay })
                .sink(RedisListSink::<String>::text(LIST).unwrap())
        }
        _ => word_count!(first, delay),
    }
    .unwrap();
    let job = env.blocking_start().unwrap();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if let Some(n) = line.strip_prefix("scale ") {
            scale(&job, n.trim().parse().unwrap());
        }
        if let Some(ms) = line.strip_prefix("caught_up ") {
            let timeout = Duration::from_millis(ms.trim().parse().unwrap());
            println!(
                "CAUGHT_UP {}",
                job.blocking_await_caught_up(timeout).unwrap()
            );
        }
    }
    job.blocking_shutdown(Duration::MAX);
    println!("FINAL {:?}", job.diagnostics());
    std::io::stdout().flush().unwrap();
    std::process::exit(0);
}

fn scale(job: &streaming::redis::JobClient, n: u32) {
    job.scale_parallelism(n).unwrap();
}

/// A worker process of the job.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<String>>>,
    pub instance: String,
}

impl Worker {
    /// Starts a copy of the running test binary as a worker (its test `worker`).
    pub fn spawn(spec: &WorkerSpec) -> Worker {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new(exe);
        cmd.args(["worker", "--exact", "--nocapture", "--test-threads", "1"])
            .env("STREAMING_WORKER", "1")
            .env("W_URL", &spec.url)
            .env("W_PREFIX", &spec.prefix)
            .env(
                "W_MODE",
                if spec.mode == AckMode::Xack {
                    "xack"
                } else {
                    "offset"
                },
            )
            .env("W_PAR", spec.parallelism.to_string())
            .env("W_DELAY_US", spec.record_delay.as_micros().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for k in ["W_CK_MS", "W_LEADER_TTL_MS", "W_LEADER_RENEW_MS"] {
            cmd.env_remove(k);
        }
        if let Some(c) = spec.checkpoints {
            cmd.env("W_CK_MS", c.interval.as_millis().to_string())
                .env("W_LEADER_TTL_MS", c.leader_ttl.as_millis().to_string())
                .env("W_LEADER_RENEW_MS", c.leader_renew.as_millis().to_string());
        }
        let inputs = match spec.inputs {
            Inputs::One => "one",
            Inputs::Union => "union",
            Inputs::Broadcast => "broadcast",
        };
        cmd.env("W_INPUTS", inputs);
        match spec.replica_wait {
            Some(d) => cmd.env("W_REPLICA_WAIT_MS", d.as_millis().to_string()),
            None => cmd.env_remove("W_REPLICA_WAIT_MS"),
        };
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = Arc::clone(&out);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // libtest may print `test worker ... ` before it on the same line.
                if let Some(i) = line.find("INSTANCE ") {
                    let _ = tx.send(line[i + "INSTANCE ".len()..].trim().to_string());
                }
                lines.lock().unwrap().push(line);
            }
        });
        let instance = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        Worker {
            child,
            stdin,
            out,
            instance,
        }
    }

    /// Sends `sig` (`STOP`, `CONT`, `KILL`) to the process.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} failed");
    }

    /// Asks the job to run `n` subtasks.
    pub fn scale(&mut self, n: u32) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "scale {n}").unwrap();
        stdin.flush().unwrap();
    }

    /// Asks the job's `await_caught_up(timeout)` and returns its answer.
    pub fn await_caught_up(&mut self, timeout: Duration) -> bool {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "caught_up {}", timeout.as_millis()).unwrap();
        stdin.flush().unwrap();
        let end = std::time::Instant::now() + timeout + Duration::from_secs(30);
        loop {
            let answer = self.out.lock().unwrap().iter().find_map(|l| {
                l.find("CAUGHT_UP ")
                    .map(|i| l[i + "CAUGHT_UP ".len()..].trim() == "true")
            });
            if let Some(a) = answer {
                return a;
            }
            assert!(std::time::Instant::now() < end, "no CAUGHT_UP answer");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the job (cancel) and returns its final diagnostics line.
    pub fn stop(mut self) -> String {
        drop(self.stdin.take());
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        let out = self.out.lock().unwrap();
        out.iter()
            .find_map(|l| l.find("FINAL ").map(|i| l[i..].to_string()))
            .unwrap_or_default()
    }

    /// Kills the process (`SIGKILL`) and reaps it.
    /// Whether the worker's process has ended by itself (e.g. its job's start failed while
    /// a cluster master was failing over: the worker then exits).
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    pub fn kill(mut self) {
        self.signal("KILL");
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sum of a counter (e.g. `fenced`) over the partitions of a `FINAL` diagnostics line.
pub fn sum_of(diagnostics: &str, field: &str) -> u64 {
    let pat = format!("{field}: ");
    diagnostics
        .match_indices(&pat)
        .filter_map(|(i, _)| {
            let rest = &diagnostics[i + pat.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse::<u64>().ok()
        })
        .sum()
}

/// The words of message `i` of the input.
pub fn word(i: usize) -> String {
    format!("w{}", i % 17)
}

/// Every output line of the job, over all partitions.
pub fn output(conn: &mut impl redis::ConnectionLike, partitions: u32) -> Vec<String> {
    let mut all = Vec::new();
    for p in 0..partitions {
        let v: Vec<String> = redis::cmd("LRANGE")
            .arg(RedisListSink::<String>::key_for(LIST, TOPIC, p))
            .arg(0)
            .arg(-1)
            .query(conn)
            .unwrap();
        all.extend(v);
    }
    all
}

/// Asserts that the output has every message `m0..m{n}` exactly once and that each word's
/// counts are exactly 1..=its occurrences.
pub fn check_exactly_once(out: &[String], n: usize) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in out {
        let mut it = line.split('|');
        let (id, w, c) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        *seen.entry(id.to_string()).or_default() += 1;
        counts
            .entry(w.to_string())
            .or_default()
            .push(c.parse().unwrap());
    }
    let dup: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).take(10).collect();
    assert!(
        dup.is_empty(),
        "duplicated output ({} lines for {n} messages), e.g. {dup:?}",
        out.len()
    );
    let missing: Vec<usize> = (0..n)
        .filter(|i| !seen.contains_key(&format!("m{i}")))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "lost messages, e.g. {missing:?}");
    assert_eq!(seen.len(), n);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..n {
        *expected.entry(word(i)).or_default() += 1;
    }
    for (w, mut got) in counts {
        got.sort_unstable();
        let want: Vec<u64> = (1..=expected[&w]).collect();
        assert_eq!(got, want, "counts of {w}");
    }
}

/// The owners (instance ids) of the partitions' leases now, `None` for a free lease.
pub fn lease_owners(
    conn: &mut impl redis::ConnectionLike,
    prefix: &str,
    partitions: u32,
    instances: &[String],
) -> Vec<Option<String>> {
    (0..partitions)
        .map(|p| {
            let v: Option<String> = redis::cmd("GET")
                .arg(format!("{prefix}:{{{TOPIC}:{p}}}:lease:g"))
                .query(conn)
                .unwrap();
            v.map(|v| instance_of(v, instances))
        })
        .collect()
}

/// The instance of `instances` that a lease or assignment value (naming a consumer
/// `{job}-{instance}-{seq}`) belongs to; the value itself when none.
fn instance_of(value: String, instances: &[String]) -> String {
    (instances.iter())
        .find(|i| value.contains(i.as_str()))
        .cloned()
        .unwrap_or(value)
}

/// Per partition, the instance (of `instances`; else the consumer name) the job's
/// assignment gives it to now: the subtask that is to take it.
pub fn assigned_owners(
    conn: &mut impl redis::ConnectionLike,
    prefix: &str,
    partitions: u32,
    instances: &[String],
) -> Vec<Option<String>> {
    (0..partitions)
        .map(|p| {
            let v: Option<String> = redis::cmd("HGET")
                .arg(format!("{prefix}:topic:{TOPIC}:assignment:g"))
                .arg(format!("p:{p}"))
                .query(conn)
                .unwrap();
            v.map(|v| instance_of(v, instances))
        })
        .collect()
}

/// The raw values (`"{token} {consumer}"`) of the partitions' leases now.
pub fn lease_values(
    conn: &mut impl redis::ConnectionLike,
    prefix: &str,
    partitions: u32,
) -> Vec<Option<String>> {
    (0..partitions)
        .map(|p| {
            redis::cmd("GET")
                .arg(format!("{prefix}:{{{TOPIC}:{p}}}:lease:g"))
                .query(conn)
                .unwrap()
        })
        .collect()
}

/// Distinct owners in `owners`.
pub fn distinct(owners: &[Option<String>]) -> BTreeSet<String> {
    owners.iter().flatten().cloned().collect()
}
