//! The job client from async code and in an outage: its waits run on a current-thread
//! tokio runtime beside the tasks they wait for (blocking waits would starve them), over
//! one connection per wait; dropping a running job's client returns at once while Redis
//! is frozen, and `shutdown(timeout)` says whether the subtasks stopped in time.

mod support;

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, MqOptions, OutgoingMessage};
use streaming::redis::{JobClient, RedisEnv, RedisListSink, RedisRuntimeConfig};
use support::engine::earliest;
use support::fast_options;
use support::redis_server::TestRedis;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

const PARTITIONS: u32 = 4;

/// Starts a word count over topic `t` (created here, empty) on `url`: parallelism 2, a
/// watermark idle timeout of 300 ms, each output `word=n` to the partition's list `out`.
fn start_job(url: &str, mq_opts: &MqOptions) -> JobClient {
    let config = RedisRuntimeConfig::builder()
        .job_name("client")
        .job_instance_id("test")
        .mq_options(mq_opts.clone())
        .pipeline_parallelism(2)
        .watermark_idle_timeout(Some(Duration::from_millis(300)))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    env.from_mq_topic_with_options("t", "g", earliest(10))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            out.collect(format!("{w}={n}"));
            Ok(())
        })
        .sink(RedisListSink::<String>::text("out").unwrap())
        .unwrap();
    env.blocking_start().unwrap()
}

fn words(n: usize) -> Vec<OutgoingMessage> {
    (0..n)
        .map(|i| format!("w{}", i % 13))
        .map(|w| OutgoingMessage::new(w.clone()).key(w))
        .collect()
}

fn records(job: &JobClient) -> u64 {
    job.diagnostics().partitions.iter().map(|p| p.records).sum()
}

/// `total_connections_received` of the server behind `conn`.
async fn connections_received(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The ids of the connections named `streaming-read` (the job's stream reads) that are
/// open now.
async fn read_connection_ids(conn: &mut redis::aio::MultiplexedConnection) -> Vec<u64> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .unwrap();
    list.lines()
        .filter(|l| l.split(' ').any(|f| f == "name=streaming-read"))
        .map(|l| {
            let id = l.split(' ').find_map(|f| f.strip_prefix("id=")).unwrap();
            id.parse().unwrap()
        })
        .collect()
}

/// On a current-thread runtime the waits share the thread with the test's own tasks: a
/// wait that only the task beside it can end (it resumes the paused job) returns `true`,
/// as it could not if it blocked the thread; the wait opens one connection whatever it
/// lasts, `await_flushed` sees the idle flush, and `shutdown` stops the job. The
/// blocking variants refuse to run there.
#[tokio::test(flavor = "current_thread")]
async fn async_waits_run_on_a_current_thread_runtime() {
    let redis = TestRedis::private();
    let mq_opts = fast_options("client-async").build().unwrap();
    let mq = Mq::connect(redis.url(), mq_opts.clone()).await.unwrap();
    mq.create_topic("t", PARTITIONS).await.unwrap();
    let job = start_job(redis.url(), &mq_opts);
    // Empty partitions: caught up once every partition is taken.
    assert!(job.await_caught_up(Duration::from_secs(60)).await.unwrap());

    job.pause();
    mq.producer().send_batch("t", &words(200)).await.unwrap();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let before = connections_received(&mut conn).await;
    let reads_before = read_connection_ids(&mut conn).await;
    let resume = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        job.resume();
    };
    let (caught_up, ()) = tokio::join!(job.await_caught_up(Duration::from_secs(60)), resume);
    assert!(caught_up.unwrap(), "{:#?}", job.diagnostics());
    assert_eq!(records(&job), 200);
    // The job's stream reads open connections of their own as they run concurrently
    // (named, kept idle afterwards): those opened meanwhile are not the wait's.
    let opened = connections_received(&mut conn).await - before;
    let new_reads = read_connection_ids(&mut conn)
        .await
        .into_iter()
        .filter(|id| !reads_before.contains(id))
        .count() as u64;
    let by_wait = opened - new_reads;
    assert!(by_wait <= 1, "the wait opened {by_wait} connections");

    assert!(job.await_flushed(Duration::from_secs(60)).await.unwrap());
    let d = job.diagnostics();
    assert!(
        d.partitions
            .iter()
            .all(|p| p.records == 0 || p.idle_flushes >= 1),
        "{d:#?}"
    );

    let blocking = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        job.blocking_await_termination(Duration::ZERO)
    }));
    assert!(blocking.is_err(), "a blocking wait inside a runtime panics");

    assert!(job.shutdown(Duration::from_secs(30)).await);
    assert_eq!(job.diagnostics().running_subtasks, 0);
    assert!(job.await_termination(Duration::ZERO).await);
    let outputs: usize = {
        let mut n = 0;
        for p in 0..PARTITIONS {
            let len: usize = conn
                .llen(RedisListSink::<String>::key_for("out", "t", p))
                .await
                .unwrap();
            n += len;
        }
        n
    };
    assert_eq!(outputs, 200);
}

/// The waits' futures can move to another thread (`tokio::spawn` on a multi-thread
/// runtime).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_can_be_spawned_on_a_multi_thread_runtime() {
    let redis = TestRedis::private();
    let mq_opts = fast_options("client-spawn").build().unwrap();
    let mq = Mq::connect(redis.url(), mq_opts.clone()).await.unwrap();
    mq.create_topic("t", PARTITIONS).await.unwrap();
    mq.producer().send_batch("t", &words(100)).await.unwrap();
    let job = std::sync::Arc::new(start_job(redis.url(), &mq_opts));
    let waiting = tokio::spawn({
        let job = std::sync::Arc::clone(&job);
        async move { job.await_flushed(Duration::from_secs(60)).await }
    });
    assert!(waiting.await.unwrap().unwrap());
    assert_eq!(records(&job), 100);
    let stopping = tokio::spawn({
        let job = std::sync::Arc::clone(&job);
        async move { job.shutdown(Duration::from_secs(30)).await }
    });
    assert!(stopping.await.unwrap());
}

/// A job over `t` with every partition taken, then Redis frozen (`SIGSTOP`): every
/// subtask is stuck in a call to Redis for up to the (long) response timeout.
fn frozen_job(test: &str) -> (TestRedis, JobClient) {
    let mut redis = TestRedis::private();
    let mq_opts = fast_options(test)
        .response_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let rt = support::engine::rt();
    let mq = rt
        .block_on(Mq::connect(redis.url(), mq_opts.clone()))
        .unwrap();
    rt.block_on(mq.create_topic("t", PARTITIONS)).unwrap();
    rt.block_on(mq.producer().send_batch("t", &words(200)))
        .unwrap();
    drop(mq);
    drop(rt);
    let job = start_job(redis.url(), &mq_opts);
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    redis.server().freeze();
    (redis, job)
}

/// Dropping the client of a running job only signals it: it returns at once while Redis
/// is frozen, although the subtasks wait on Redis for up to 30 s.
#[test]
fn dropping_a_running_jobs_client_returns_at_once_while_redis_is_frozen() {
    let (mut redis, job) = frozen_job("client-drop");
    let t = Instant::now();
    drop(job);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "drop took {took:?}");
    redis.server().thaw();
}

/// `shutdown(timeout)` is `false` when the subtasks are still stuck on a frozen Redis at
/// the timeout, and `true` once they stopped (Redis thawed).
#[test]
fn shutdown_says_whether_the_subtasks_stopped_in_time() {
    let (mut redis, job) = frozen_job("client-shutdown");
    assert!(!job.blocking_shutdown(Duration::from_millis(500)));
    assert_eq!(job.diagnostics().running_subtasks, 2, "still stopping");
    redis.server().thaw();
    assert!(job.blocking_shutdown(Duration::from_secs(60)));
    assert_eq!(job.diagnostics().running_subtasks, 0);
}

/// `start` checks the server on a thread of its own: on a current-thread runtime a task
/// beside it runs while a silent server makes the check wait for its response timeout
/// (a blocking start would hold the thread until it gave up, so the task would finish
/// after it). The failure names the address.
#[tokio::test(flavor = "current_thread")]
async fn start_leaves_the_runtime_free_while_it_checks_the_server() {
    // Accepts connections (the kernel's backlog) but never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let mq_opts = fast_options("client-start")
        .response_timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("start")
        .mq_options(mq_opts)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(format!("redis://{addr}/"), config).unwrap();
    env.from_mq_topic("t", "g")
        .map(|m: Message| m.id.to_string())
        .sink(RedisListSink::<String>::text("out").unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    let started = async {
        let result = env.start().await;
        (result, Instant::now())
    };
    let beside = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Instant::now()
    };
    let ((result, start_returned), beside_done) = tokio::join!(started, beside);
    let error = result.expect_err("nothing answers");
    assert!(error.to_string().contains(&addr), "{error}");
    assert!(
        beside_done < start_returned,
        "the task beside start ran only after start returned"
    );
}
