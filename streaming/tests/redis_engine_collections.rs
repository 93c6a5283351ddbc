//! Collection states (list, map, set) of a keyed process operator on the Redis engine:
//! the same results as the memory engine over batches, a failed record and restarts; each
//! key's collection in its own Redis key, readable with any client; a batch that adds one
//! element to a big collection writes that element only.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use streaming::api::{ListStateDescriptor, MapStateDescriptor, SetStateDescriptor};
use streaming::mq::Message;
use streaming::redis::{CollectSink, JobClient, ProcessingErrorResult, RedisEnv};
use streaming::MemoryEnv;
use support::engine::{earliest, setup, wait_until, EngineSetup};

const LAST: MapStateDescriptor<String, u32> = MapStateDescriptor::persistent("last");
const SEEN: SetStateDescriptor<String> = SetStateDescriptor::persistent("seen");
const LOG: ListStateDescriptor<u32> = ListStateDescriptor::persistent("log");

/// What a key's collections hold after a record: map entries, set members, list.
type Summary = (BTreeMap<String, u32>, BTreeSet<String>, Vec<u32>);

/// Applies records `key op arg [value]` to the key's map (`put`, `del`), set (`add`,
/// `rem`) and list (`push`, `replace`); `clear` clears all three; `boom` changes all
/// three and fails. Emits the key's three collections after each record.
macro_rules! collections_pipeline {
    ($stream:expr) => {
        $stream
            .key_by(|r: &String| r.split(' ').next().unwrap().to_string())
            .process(|r: String, ctx, out| {
                let parts: Vec<&str> = r.split(' ').collect();
                let (op, arg) = (parts[1], parts.get(2).copied().unwrap_or(""));
                let n: u32 = parts.get(3).map_or(0, |v| v.parse().unwrap());
                match op {
                    "put" => {
                        ctx.state(&LAST)?.put(arg.into(), n);
                    }
                    "del" => {
                        ctx.state(&LAST)?.remove(&arg.to_string());
                    }
                    "add" => {
                        ctx.state(&SEEN)?.add(arg.into());
                    }
                    "rem" => {
                        ctx.state(&SEEN)?.remove(&arg.to_string());
                    }
                    "push" => ctx.state(&LOG)?.add(arg.parse().unwrap()),
                    "replace" => ctx.state(&LOG)?.update(vec![arg.parse().unwrap(); 2]),
                    "clear" | "boom" => {
                        ctx.state(&LAST)?.clear();
                        ctx.state(&SEEN)?.add("boom".into());
                        ctx.state(&LOG)?.clear();
                        if op == "boom" {
                            return Err("boom".into());
                        }
                    }
                    _ => unreachable!("{r}"),
                }
                let map = ctx.state(&LAST)?;
                let map: BTreeMap<String, u32> = map.iter().map(|(k, v)| (k.clone(), *v)).collect();
                let set: BTreeSet<String> = ctx.state(&SEEN)?.iter().cloned().collect();
                let list = ctx.state(&LOG)?.get().to_vec();
                out.collect((parts[0].to_string(), (map, set, list)));
                Ok(())
            })
    };
}

fn committed(job: &JobClient) -> u64 {
    job.diagnostics()
        .partitions
        .iter()
        .map(|p| p.records + p.failed)
        .sum()
}

impl EngineSetup {
    /// Runs the pipeline as job `job` over `topic` until `records` more records committed
    /// or failed; returns the outputs.
    fn run_collections(&self, job: &str, topic: &str, records: u64) -> Vec<(String, Summary)> {
        let config = (self.config(job))
            .processing_error_result(ProcessingErrorResult::DeadLetter)
            .build()
            .unwrap();
        let env = RedisEnv::try_with_config(self.redis.url(), config).unwrap();
        let out = CollectSink::new();
        collections_pipeline!(env
            .from_mq_topic_with_options(topic, "g", earliest(64))
            .map(|m: Message| m.text().unwrap().to_string()))
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("the records", &job, || committed(&job) == records);
        job.blocking_shutdown(Duration::MAX);
        out.snapshot()
    }

    fn client(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.redis.url()).unwrap();
        self.rt
            .block_on(client.get_multiplexed_async_connection())
            .unwrap()
    }

    /// The Redis key of `key`'s collection in `state` (job `job`, partition 0 of `topic`).
    fn collection_key(&self, job: &str, topic: &str, state: &str, key: &str) -> String {
        format!("{}:k:\"{key}\"", self.state_hash(job, topic, state))
    }

    /// The hash of `state` (job `job`, partition 0 of `topic`): each key's size.
    fn state_hash(&self, job: &str, topic: &str, state: &str) -> String {
        format!(
            "{}:{job}:{{{topic}:0}}:g:{topic}.g/3:process:{state}",
            self.prefix
        )
    }
}

fn records(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

#[test]
fn collections_match_memory_over_batches_a_failed_record_and_restarts() {
    let s = setup("coll-diff");
    s.rt.block_on(s.mq().create_topic("cd", 1)).unwrap();
    let phases = [
        records(&[
            "a put x 1",
            "a put y 2",
            "a add p",
            "a push 1",
            "b put x 9",
            "b push 4",
        ]),
        records(&[
            "a put x 3",
            "a del y",
            "a boom",
            "a push 2",
            "b add q",
            "b rem q",
        ]),
        records(&[
            "a replace 7",
            "b clear",
            "b put z 5",
            "a add r",
            "a rem p",
            "a push 3",
        ]),
    ];
    let valid: Vec<String> = (phases.iter().flatten())
        .filter(|r| !r.ends_with("boom"))
        .cloned()
        .collect();
    let expected = collections_pipeline!(MemoryEnv::new().from_collection(valid))
        .collect_vec()
        .unwrap();
    let mut got = Vec::new();
    for phase in &phases {
        s.produce_records("cd", phase);
        got.extend(s.run_collections("cd", "cd", phase.len() as u64));
    }
    assert_eq!(got, expected, "per key in order (one partition)");

    // Read with any client: each key's collection in its own key, its size in the hash.
    let mut conn = s.client();
    let map: HashMap<String, String> = (s.rt)
        .block_on(conn.hgetall(s.collection_key("cd", "cd", "last", "a")))
        .unwrap();
    assert_eq!(map, HashMap::from([("\"x\"".into(), "3".into())]));
    let set: BTreeSet<String> = (s.rt)
        .block_on(conn.smembers(s.collection_key("cd", "cd", "seen", "a")))
        .unwrap();
    assert_eq!(set, BTreeSet::from(["\"r\"".to_string()]));
    let list: Vec<String> = (s.rt)
        .block_on(conn.lrange(s.collection_key("cd", "cd", "log", "a"), 0, -1))
        .unwrap();
    assert_eq!(list, ["7", "7", "3"]);
    let sizes: HashMap<String, String> = (s.rt)
        .block_on(conn.hgetall(s.state_hash("cd", "cd", "log")))
        .unwrap();
    assert_eq!(
        sizes,
        HashMap::from([("\"a\"".into(), "3".into())]),
        "b's list is empty"
    );
}

impl EngineSetup {
    /// Sends `records` to `topic` (key = the record's first word).
    fn produce_records(&self, topic: &str, records: &[String]) {
        let mq = self.mq();
        let msgs: Vec<streaming::mq::OutgoingMessage> = (records.iter())
            .map(|r| streaming::mq::OutgoingMessage::new(r.clone()))
            .collect();
        (self.rt)
            .block_on(mq.producer().send_batch(topic, &msgs))
            .unwrap();
    }
}

/// Every command Redis runs (`MONITOR`, over a raw connection) whose line mentions
/// `needle`, until the returned stop function is called.
fn monitor(url: &str, needle: String) -> impl FnOnce() -> Vec<String> {
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(b"MONITOR\r\n").unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut ok = String::new();
    reader.read_line(&mut ok).unwrap();
    assert_eq!(ok.trim(), "+OK");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    let reading = std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            if line.contains(&needle) {
                seen.lock().unwrap().push(line);
            }
        }
    });
    move || {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        reading.join().unwrap();
        let lines = lines.lock().unwrap();
        lines.clone()
    }
}

#[test]
fn one_put_into_a_big_map_writes_that_entry_only() {
    let s = setup("coll-big");
    s.rt.block_on(s.mq().create_topic("cb", 1)).unwrap();
    let build: Vec<String> = (0..1000).map(|i| format!("big put e{i} {i}")).collect();
    s.produce_records("cb", &build);
    s.run_collections("cb", "cb", 1000);
    let key = s.collection_key("cb", "cb", "last", "big");
    // MONITOR shows the key's quotes escaped: match its part before them.
    let needle = format!("{}:k:", s.state_hash("cb", "cb", "last"));
    let mut conn = s.client();
    let before: HashMap<String, String> = s.rt.block_on(conn.hgetall(&key)).unwrap();
    assert_eq!(before.len(), 1000);

    let stop = monitor(s.redis.url(), needle);
    s.produce_records("cb", &records(&["big put e1000 1000"]));
    let out = s.run_collections("cb", "cb", 1);
    let lines = stop();
    assert_eq!(out[0].1 .0.len(), 1001, "the restarted job fetched the map");

    // The commit's writes to the map's key: one HSET of the new entry (the fetch's
    // HGETALL and the commit guard's TYPE check read it; the commit's scripts name it).
    let writes: Vec<&String> = (lines.iter())
        .filter(|l| !l.contains("\"HGETALL\"") && !l.contains("\"TYPE\""))
        .filter(|l| !l.contains("] \"EVAL\""))
        .collect();
    assert_eq!(writes.len(), 1, "{writes:#?}");
    assert!(
        writes[0].contains("\"HSET\"") && writes[0].contains("e1000"),
        "{writes:?}"
    );
    assert!(writes[0].len() < 400, "one field written: {}", writes[0]);
    let after: HashMap<String, String> = s.rt.block_on(conn.hgetall(&key)).unwrap();
    let changed: Vec<&String> = (after.keys())
        .filter(|f| before.get(*f) != after.get(*f))
        .collect();
    assert_eq!(changed, ["\"e1000\""]);
}

#[test]
fn a_collection_element_that_does_not_decode_fails_only_its_keys_records() {
    let s = setup("coll-poison");
    s.rt.block_on(s.mq().create_topic("cp", 1)).unwrap();
    s.produce_records("cp", &records(&["a put x 1", "b put x 2"]));
    s.run_collections("cp", "cp", 2);
    // Someone writes an element that is no `u32` into b's map.
    let b_map = s.collection_key("cp", "cp", "last", "b");
    let mut conn = s.client();
    let _: () =
        s.rt.block_on(conn.hset(&b_map, "\"x\"", "{not json"))
            .unwrap();

    s.produce_records("cp", &records(&["b put y 3", "a put y 4", "b add q"]));
    let out = s.run_collections("cp", "cp", 3);
    let a = (
        BTreeMap::from([("x".to_string(), 1), ("y".to_string(), 4)]),
        BTreeSet::new(),
        Vec::new(),
    );
    assert_eq!(
        out,
        [("a".to_string(), a)],
        "a is untouched by b's bad element"
    );
    let dead = s.rt.block_on(s.mq().dead_letters("cp", 10)).unwrap();
    let payloads: Vec<&[u8]> = dead.iter().map(|d| &d.payload[..]).collect();
    assert_eq!(
        payloads,
        [&b"b put y 3"[..], b"b add q"],
        "b's records only"
    );
    for d in &dead {
        assert_eq!(d.error_type, "state_decode");
        for part in ["state `last`", "key \"b\"", "does not decode"] {
            assert!(d.error.contains(part), "{part} not in {d:?}");
        }
    }
    let stored: HashMap<String, String> = s.rt.block_on(conn.hgetall(&b_map)).unwrap();
    assert_eq!(
        stored,
        HashMap::from([("\"x\"".into(), "{not json".into())]),
        "the bad element is left as it was"
    );
}

/// Adds 7 to the key's list when its processing-time timer (20 ms after its record) fires,
/// and emits the list.
#[derive(Clone)]
struct LogOnTimer;

impl streaming::api::KeyedProcessFunction<String, String> for LogOnTimer {
    type Out = Vec<u32>;

    fn process_element(
        &mut self,
        _value: String,
        ctx: &mut streaming::api::KeyedContext<'_, String>,
        _out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        let now = ctx.current_processing_time();
        ctx.register_processing_time_timer(now + 20);
        Ok(())
    }

    fn on_timer(
        &mut self,
        _timestamp: i64,
        ctx: &mut streaming::api::TimerContext<'_, String>,
        out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        let mut log = ctx.state(&LOG)?;
        log.add(7);
        out.collect(log.get().to_vec());
        Ok(())
    }
}

/// A processing-time timer that adds to a list commits the list's elements with its size:
/// the timers' commit once kept only keys with field writes, so it wrote the new size and
/// dropped the appended elements.
#[test]
fn a_processing_time_timer_that_adds_to_a_list_commits_the_elements() {
    let s = setup("coll-timer");
    s.rt.block_on(s.mq().create_topic("ct", 1)).unwrap();
    s.produce_records("ct", &records(&["a"]));
    let config = s.config("ct").build().unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options("ct", "g", earliest(64))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|r: &String| r.clone())
        .process_function(LogOnTimer)
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    // The record's batch, then the timer's commit.
    wait_until("the timer's commit", &job, || {
        job.diagnostics()
            .partitions
            .first()
            .map_or(0, |p| p.batches)
            >= 2
    });
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(out.snapshot(), [vec![7]]);
    let mut conn = s.client();
    let list: Vec<String> = (s.rt)
        .block_on(conn.lrange(s.collection_key("ct", "ct", "log", "a"), 0, -1))
        .unwrap();
    assert_eq!(list, ["7"], "the list's elements are in Redis");
    let size: Option<String> = (s.rt)
        .block_on(conn.hget(s.state_hash("ct", "ct", "log"), "\"a\""))
        .unwrap();
    assert_eq!(size.as_deref(), Some("1"));
}
