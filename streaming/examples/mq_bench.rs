//! Message-queue throughput: batched produce, consume + ack (subscription), NOACK reads
//! (exclusive reader), each on 1 and 4 partitions, and `redis-benchmark -P 16 XADD` as the
//! ceiling, all against one private `redis-server` (persistence off) started here.
//!
//! ```text
//! cargo run --release -p streaming --example mq_bench [-- MESSAGES]
//! ```
//!
//! `REDIS_URL` points it at an existing server instead (then the `redis-benchmark` line
//! is skipped). Messages default to 200 000, 100-byte payloads with a 8-byte key.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use streaming::mq::{
    HandleResult, Message, Mq, MqOptions, OutgoingMessage, StartPolicy, SubscriptionOptions,
};

struct Server {
    child: Child,
    port: u16,
    _dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

fn start_server() -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let dir = std::env::temp_dir().join(format!("mq-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        child,
        port,
        _dir: dir,
    }
}

fn rate(n: u64, d: Duration) -> String {
    format!("{:>9.0} msg/s", n as f64 / d.as_secs_f64())
}

async fn produce(mq: &Mq, topic: &str, n: usize, batch: usize, tasks: usize) -> Duration {
    let payload = vec![b'x'; 100];
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let producer = mq.producer();
        let payload = payload.clone();
        let topic = topic.to_owned();
        let share = n / tasks;
        handles.push(tokio::spawn(async move {
            let mut sent = 0;
            while sent < share {
                let k = batch.min(share - sent);
                let msgs: Vec<OutgoingMessage> = (0..k)
                    .map(|i| {
                        OutgoingMessage::new(payload.clone())
                            .key(format!("k{:07}", t * share + sent + i))
                    })
                    .collect();
                producer.send_batch(&topic, &msgs).await.expect("send");
                sent += k;
            }
        }));
    }
    for h in handles {
        h.await.expect("producer task");
    }
    start.elapsed()
}

async fn consume(mq: &Mq, topic: &str, n: u64) -> Duration {
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let start = Instant::now();
    let sub = mq
        .subscribe(
            topic,
            "bench",
            move |_m: Message| {
                c.fetch_add(1, Ordering::Relaxed);
                std::future::ready(HandleResult::Success)
            },
            SubscriptionOptions::builder()
                .start(StartPolicy::Earliest)
                .batch_count(500)
                .poll_timeout(Duration::from_millis(50))
                .build()
                .expect("options"),
        )
        .await
        .expect("subscribe");
    while count.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = start.elapsed();
    sub.stop().await.expect("stop");
    took
}

async fn read_noack(mq: &Mq, topic: &str, partitions: u32, n: u64) -> Duration {
    let start = Instant::now();
    let mut handles = Vec::new();
    for p in 0..partitions {
        let mq = mq.clone();
        let topic = topic.to_owned();
        handles.push(tokio::spawn(async move {
            let mut r = mq
                .exclusive_reader(
                    &topic,
                    "noack",
                    p,
                    &format!("o{p}"),
                    Some("0"),
                    StartPolicy::Earliest,
                )
                .await
                .expect("reader");
            let mut got = 0u64;
            loop {
                let b = r.read(500, Duration::from_millis(50)).await.expect("read");
                if b.last_id.is_none() {
                    break;
                }
                got += b.messages.len() as u64;
            }
            r.release().await.expect("release");
            got
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.expect("reader task");
    }
    assert_eq!(total, n, "NOACK readers read everything");
    start.elapsed()
}

fn redis_benchmark(port: u16, n: usize) -> Option<String> {
    let out = Command::new("redis-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-P",
            "16",
            "-n",
            &n.to_string(),
            "-q",
        ])
        .args(["XADD", "bench:ceiling", "*", "p"])
        .arg("x".repeat(100))
        .args(["ts", "1700000000000", "k", "k0000000"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .flat_map(|l| l.split('\r'))
        .rfind(|l| l.contains("requests per second"))
        .and_then(|l| {
            l.rsplit_once(": ")
                .map(|(_, figures)| figures.trim().to_owned())
        })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let server = match std::env::var("REDIS_URL") {
        Ok(_) => None,
        Err(_) => Some(start_server()),
    };
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| {
        format!(
            "redis://127.0.0.1:{}/",
            server.as_ref().map(|s| s.port).unwrap_or(6379)
        )
    });
    let opts = MqOptions::builder()
        .key_prefix(format!("bench{}", std::process::id()))
        .lease_ttl(Duration::from_secs(5))
        .lease_renew_interval(Duration::from_millis(500))
        .build()
        .expect("options");
    let mq = Mq::connect(&url, opts).await.expect("connect");
    println!("mq_bench: {n} messages, 100-byte payload, key per message, batches of 1000");
    for partitions in [1u32, 4] {
        let topic = format!("p{partitions}");
        mq.create_topic(&topic, partitions).await.expect("topic");
        let d = produce(&mq, &topic, n, 1000, 2).await;
        println!(
            "produce  (send_batch, 2 tasks)      {partitions} partition(s): {}",
            rate(n as u64, d)
        );
        let d = consume(&mq, &topic, n as u64).await;
        println!(
            "consume+ack (subscribe, batch 500)  {partitions} partition(s): {}",
            rate(n as u64, d)
        );
        let d = read_noack(&mq, &topic, partitions, n as u64).await;
        println!(
            "read NOACK (exclusive reader, 500)  {partitions} partition(s): {}",
            rate(n as u64, d)
        );
        mq.delete_topic(&topic).await.expect("delete");
    }
    if let Some(s) = &server {
        match redis_benchmark(s.port, 1_000_000) {
            Some(line) => {
                println!("ceiling: redis-benchmark -P 16 XADD (100-byte p, ts, k): {line}")
            }
            None => println!("ceiling: redis-benchmark not available"),
        }
    }
}
