//! `Sink::flush`, the batch boundary of ordinary sinks, on both engines with the same
//! pipeline: the memory engine flushes once at the end of input, the Redis engine once per
//! batch before its commit; a failing flush keeps the Redis engine's batch uncommitted
//! (it is read and invoked again), and fails the memory engine's pipeline.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use streaming::api::{Sink, ValueStateDescriptor};
use streaming::mq::{Message, OutgoingMessage};
use streaming::redis::RedisEnv;
use streaming::{BoxError, MemoryEnv};
use support::engine::{earliest, setup, wait_until};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// What a [`Recording`] sink was called with, in order: `word=n` per invoke, `|` per
/// flush.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<String>>>);

impl Calls {
    fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Buffers in `invoke`, "writes" the buffer to `written` in `flush` (failing the first
/// `failures` flushes that have something to write, dropping the buffer then, as
/// `Sink::flush` asks: the batch is invoked again).
#[derive(Clone)]
struct Recording {
    calls: Calls,
    written: Calls,
    buffer: Vec<String>,
    failures: Arc<Mutex<u32>>,
}

impl Recording {
    fn new(failures: u32) -> Self {
        Recording {
            calls: Calls::default(),
            written: Calls::default(),
            buffer: Vec::new(),
            failures: Arc::new(Mutex::new(failures)),
        }
    }
}

impl Sink<(String, u64)> for Recording {
    fn invoke(&mut self, (word, n): (String, u64)) -> Result<(), BoxError> {
        self.calls.0.lock().unwrap().push(format!("{word}={n}"));
        self.buffer.push(format!("{word}={n}"));
        Ok(())
    }

    fn flush(&mut self) -> Result<(), BoxError> {
        self.calls.0.lock().unwrap().push("|".into());
        let mut failures = self.failures.lock().unwrap();
        if *failures > 0 && !self.buffer.is_empty() {
            *failures -= 1;
            self.buffer.clear();
            return Err("the database is away".into());
        }
        self.written.0.lock().unwrap().append(&mut self.buffer);
        Ok(())
    }
}

/// The keyed count both engines run.
macro_rules! counts {
    ($stream:expr) => {
        $stream
            .key_by(|w: &String| w.clone())
            .process(|w: String, ctx, out| {
                let mut c = ctx.state(&COUNT)?;
                let n = c.value() + 1;
                c.update(n);
                out.collect((w, n));
                Ok(())
            })
    };
}

const WORDS: [&str; 5] = ["a", "b", "a", "c", "a"];

#[test]
fn the_memory_engine_flushes_once_at_the_end_of_input() {
    let sink = Recording::new(0);
    let env = MemoryEnv::new();
    counts!(env.from_collection(WORDS.map(String::from).to_vec()))
        .sink(sink.clone())
        .unwrap();
    assert_eq!(
        sink.calls.snapshot(),
        ["a=1", "b=1", "a=2", "c=1", "a=3", "|"]
    );
    assert_eq!(sink.written.snapshot(), ["a=1", "b=1", "a=2", "c=1", "a=3"]);
}

#[test]
fn a_failing_flush_fails_the_memory_pipeline_naming_the_sink() {
    let env = MemoryEnv::new();
    let err = counts!(env.from_collection(WORDS.map(String::from).to_vec()))
        .sink(Recording::new(1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("the database is away"), "{err}");
    assert!(err.contains("sink"), "{err}");
}

/// Each batch's outputs are invoked, then flushed, before the batch commits; a flush
/// that fails leaves the batch uncommitted: it runs again from the committed state, so
/// the sink sees the same outputs again (at-least-once) and the keyed state counts each
/// word once.
#[test]
fn the_redis_engine_flushes_every_batch_before_its_commit_and_retries_a_failed_one() {
    let s = setup("sink-flush");
    let mq = s.mq();
    s.rt.block_on(mq.create_topic("w", 1)).unwrap();
    let msgs: Vec<OutgoingMessage> = WORDS.iter().map(|w| OutgoingMessage::new(*w)).collect();
    s.rt.block_on(mq.producer().send_batch("w", &msgs)).unwrap();
    let sink = Recording::new(1);
    let env = RedisEnv::try_with_config(s.redis.url(), s.config("flush").build().unwrap()).unwrap();
    counts!(env
        .from_mq_topic_with_options("w", "g", earliest(16))
        .map(|m: Message| m.text().unwrap().to_string()))
    .sink(sink.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    wait_until("the flush error is reported", &job, || {
        job.diagnostics()
            .errors
            .iter()
            .any(|e| e.message.contains("flush") && e.message.contains("the database is away"))
    });
    assert!(job.blocking_shutdown(Duration::from_secs(30)));
    // One batch of five: the first flush failed (nothing committed), the batch ran
    // again from the committed (empty) state and its flush wrote it.
    let batch = ["a=1", "b=1", "a=2", "c=1", "a=3"];
    let calls = sink.calls.snapshot();
    let first_two: Vec<&str> = (batch.iter().chain(&["|"]))
        .chain(batch.iter().chain(&["|"]))
        .copied()
        .collect();
    assert_eq!(calls[..12], first_two[..], "{calls:?}");
    // Later flushes (timers, idle commits) have nothing to write.
    assert!(calls[12..].iter().all(|c| c == "|"), "{calls:?}");
    assert_eq!(sink.written.snapshot(), batch);
}
