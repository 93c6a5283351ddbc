//! The Redis engine's per-message tracing span (seed §2.2 `mdcEnabled` / `mdcSampleRate`)
//! against a private redis-server, captured by a hand-written `tracing` subscriber (this
//! binary's global one).

mod support;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

type Fields = BTreeMap<String, String>;

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.to_string());
    }
}

/// A user event (one with a `record` field): its fields, and the fields of the innermost
/// entered `message` span, if any.
type Captured = (Fields, Option<Fields>);

#[derive(Default)]
struct Capture {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, (&'static str, Fields)>>,
    events: Mutex<Vec<Captured>>,
}

thread_local! {
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone)]
struct CaptureSubscriber(Arc<Capture>);

impl Subscriber for CaptureSubscriber {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Fields::new();
        attrs.record(&mut Visitor(&mut fields));
        self.0
            .spans
            .lock()
            .unwrap()
            .insert(id, (attrs.metadata().name(), fields));
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        if !fields.contains_key("record") {
            return;
        }
        let spans = self.0.spans.lock().unwrap();
        let span = STACK.with(|s| {
            s.borrow().iter().rev().find_map(|id| match spans.get(id) {
                Some(("message", f)) => Some(f.clone()),
                _ => None,
            })
        });
        drop(spans);
        self.0.events.lock().unwrap().push((fields, span));
    }
    fn enter(&self, id: &Id) {
        STACK.with(|s| s.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, id: &Id) {
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(i) = s.iter().rposition(|x| *x == id.into_u64()) {
                s.remove(i);
            }
        });
    }
}

fn capture() -> &'static Arc<Capture> {
    static C: OnceLock<Arc<Capture>> = OnceLock::new();
    C.get_or_init(|| {
        let c = Arc::new(Capture::default());
        tracing::subscriber::set_global_default(CaptureSubscriber(Arc::clone(&c))).unwrap();
        c
    })
}

/// FNV-1a 64, written out independently of the engine.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The documented sampling: top 53 bits of FNV-1a 64 of the id, as a fraction, < rate.
/// MurmurHash3 fmix64, written out here independently of the engine.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ceb9fe1a85ec53);
    h ^ (h >> 33)
}

fn sampled(id: &str, rate: f64) -> bool {
    rate >= 1.0 || ((fmix64(fnv1a64(id.as_bytes())) >> 11) as f64 / (1u64 << 53) as f64) < rate
}

fn wait_until(what: &str, job: &JobClient, mut check: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {:?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs 40 keyed messages over 2 partitions of `topic` with MDC settings; returns the
/// captured user events of this topic.
fn run(test: &str, topic: &str, enabled: bool, rate: f64) -> Vec<Captured> {
    let cap = capture();
    let redis = TestRedis::shared();
    let mq_opts = fast_options(test).build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(redis.url(), mq_opts.clone()))
        .unwrap();
    rt.block_on(mq.create_topic(topic, 2)).unwrap();
    let msgs: Vec<OutgoingMessage> = (0..40)
        .map(|i| OutgoingMessage::new(format!("v{i}")).key(format!("k{}", i % 5)))
        .collect();
    rt.block_on(mq.producer().send_batch(topic, &msgs)).unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("mdcjob")
        .job_instance_id("test")
        .state_key_prefix(unique_prefix(test))
        .mq_options(mq_opts)
        .mdc_enabled(enabled)
        .mdc_sample_rate(rate)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url(), config).unwrap();
    let out = CollectSink::new();
    let t = topic.to_string();
    env.from_mq_topic_with_options(
        topic,
        "g",
        SubscriptionOptions::builder()
            .start(StartPolicy::Earliest)
            .batch_count(8)
            .poll_timeout(Duration::from_millis(50))
            .build()
            .unwrap(),
    )
    .map(move |m: Message| {
        tracing::info!(record = %m.id, t = %t, mkey = m.key.as_deref().unwrap_or(""),
                       mpart = m.partition, "user function");
        m.id
    })
    .sink(out.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("every record", &job, || out.len() == 40);
    job.blocking_shutdown(Duration::MAX);
    cap.events
        .lock()
        .unwrap()
        .iter()
        .filter(|(f, _)| f.get("t").map(String::as_str) == Some(topic))
        .cloned()
        .collect()
}

fn check_span(event: &Fields, span: &Fields, topic: &str) {
    let want: Fields = [
        ("job", "mdcjob"),
        ("topic", topic),
        ("group", "g"),
        ("consumer", "mdcjob-test-0"),
        ("id", &event["record"]),
        ("key", &event["mkey"]),
        ("partition", &event["mpart"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(span, &want);
}

#[test]
fn every_message_runs_inside_its_span_when_mdc_is_on() {
    let events = run("mdc-all", "mdcall", true, 1.0);
    assert_eq!(events.len(), 40);
    let mut partitions = std::collections::BTreeSet::new();
    for (event, span) in &events {
        let span = span
            .as_ref()
            .expect("a message span around the user function");
        check_span(event, span, "mdcall");
        partitions.insert(event["mpart"].clone());
    }
    assert_eq!(partitions.len(), 2, "both partitions carry their number");
}

#[test]
fn sampling_is_deterministic_by_message_id() {
    let events = run("mdc-half", "mdchalf", true, 0.5);
    assert_eq!(events.len(), 40);
    let mut with = 0;
    for (event, span) in &events {
        assert_eq!(span.is_some(), sampled(&event["record"], 0.5), "{event:?}");
        if let Some(span) = span {
            check_span(event, span, "mdchalf");
            with += 1;
        }
    }
    assert!(0 < with && with < 40, "{with} of 40 sampled");
}

#[test]
fn no_span_when_mdc_is_off() {
    let events = run("mdc-off", "mdcoff", false, 1.0);
    assert_eq!(events.len(), 40);
    assert!(events.iter().all(|(_, span)| span.is_none()));
}

/// The engine's own work runs in spans that carry the job, topic, group and partition:
/// `take` per partition taken, `batch` per batch read (with its record count) and `commit`
/// inside it, `checkpoint` per checkpoint part written.
#[test]
fn takes_batches_commits_and_checkpoints_run_in_spans() {
    let cap = capture();
    let (redis, topic) = (TestRedis::shared(), "spans");
    let mq_opts = fast_options("work-spans").build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(redis.url(), mq_opts.clone()))
        .unwrap();
    rt.block_on(mq.create_topic(topic, 2)).unwrap();
    let msgs: Vec<OutgoingMessage> = (0..40)
        .map(|i| OutgoingMessage::new(format!("v{i}")).key(format!("k{}", i % 5)))
        .collect();
    rt.block_on(mq.producer().send_batch(topic, &msgs)).unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("spanjob")
        .job_instance_id("test")
        .state_key_prefix(unique_prefix("work-spans"))
        .mq_options(mq_opts)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url(), config).unwrap();
    let out = CollectSink::new();
    let options = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(8)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    env.from_mq_topic_with_options(topic, "g", options)
        .map(|m: Message| m.id)
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("every record", &job, || out.len() == 40);
    job.blocking_trigger_checkpoint_now()
        .unwrap()
        .expect("a checkpoint");
    job.blocking_shutdown(Duration::MAX);
    let spans = cap.spans.lock().unwrap();
    let of = |name: &str| -> Vec<Fields> {
        (spans.values())
            .filter(|(n, f)| *n == name && f.get("job").map(String::as_str) == Some("spanjob"))
            .map(|(_, f)| f.clone())
            .collect()
    };
    for name in ["take", "batch", "commit", "checkpoint"] {
        let found = of(name);
        assert!(!found.is_empty(), "no `{name}` span");
        for f in &found {
            assert_eq!(
                (f["topic"].as_str(), f["group"].as_str()),
                (topic, "g"),
                "{name}: {f:?}"
            );
            assert!(
                ["0", "1"].contains(&f["partition"].as_str()),
                "{name}: {f:?}"
            );
        }
    }
    let partitions: std::collections::BTreeSet<String> =
        of("take").iter().map(|f| f["partition"].clone()).collect();
    assert_eq!(partitions.len(), 2, "a take span per partition");
    let read: u64 = of("batch")
        .iter()
        .map(|f| f["records"].parse::<u64>().unwrap())
        .sum();
    assert_eq!(read, 40, "every record read in exactly one batch span");
    assert!(of("checkpoint").iter().all(|f| f["open"] != "0"));
}
