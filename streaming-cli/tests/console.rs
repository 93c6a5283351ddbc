//! `streaming-admin serve` in a real browser: headless Chromium driven through its
//! WebDriver (Debian's `chromium` and `chromium-driver`), against a private Redis with a
//! running job. The token is asked for and a wrong one refused; the jobs page shows the
//! partition with its lag; a dead letter edited and replayed from the page is processed
//! once; a read-only console refuses the replay; the topics page draws sparklines; off
//! loopback a token is required.
//!
//! `STREAMING_CONSOLE_SCREENSHOT=PATH` also writes the jobs page's screenshot to PATH
//! (the README's picture comes from here).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, StartPolicy, SubscriptionOptions};
use streaming::redis::{
    CollectSink, JobClient, ProcessingErrorResult, RedisEnv, RedisRuntimeConfig,
};
use support::{rt, Redis};

const TOTAL: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("total", 0);

/// A child process killed when the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `streaming-admin serve` on a free loopback port with `args`; its base URL.
fn serve(redis: &Redis, args: &[&str]) -> (Killed, String) {
    let mut child = Process::new(env!("CARGO_BIN_EXE_streaming-admin"))
        .env_remove("REDIS_URL")
        .env_remove("STREAMING_ADMIN_TOKEN")
        .args([
            "--redis-url",
            &redis.url(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    (Killed(child), base)
}

/// chromedriver and the browsers it started (its own process group), killed when the
/// test ends, also when it fails before closing its session.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Process::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.wait();
    }
}

/// Debian's chromedriver on a free port, ready.
fn chromedriver() -> (Driver, u16) {
    use std::os::unix::process::CommandExt as _;
    let port = free_port();
    let child = Process::new("chromedriver")
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (Debian's chromium-driver)");
    let child = Driver(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

/// A headless Chromium session.
async fn browser(driver_port: u16) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"] }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("a Chromium session")
}

/// The status code of a raw HTTP request (`body` form-encoded when given).
fn status(base: &str, method: &str, path: &str, headers: &[&str], body: Option<&str>) -> u16 {
    let host = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(&format!("{h}\r\n"));
    }
    if let Some(b) = body {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        req.push_str(&format!("Content-Length: {}\r\n\r\n{b}", b.len()));
    } else {
        req.push_str("\r\n");
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Runs job `shop`: the running total of each message's JSON `n`; a message that is not
/// such JSON is dead-lettered at once. Returns the job and its outputs.
fn start_job(redis: &Redis) -> (JobClient, CollectSink<u64>) {
    // Not the default key layout: the console finds it in the job registry.
    let config = RedisRuntimeConfig::builder()
        .job_name("shop")
        .state_key_prefix("shop-state")
        .keyed_state_shard_count(2)
        .checkpoint_key_prefix("shop-checkpoints:")
        .processing_error_result(ProcessingErrorResult::DeadLetter)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(redis.url().as_str(), config).unwrap();
    let earliest = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .poll_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options("orders", "g", earliest)
        .try_map(|m: Message| -> Result<u64, streaming::BoxError> {
            let v: Value = serde_json::from_slice(&m.payload)?;
            Ok(v["n"].as_u64().ok_or("no `n`")?)
        })
        .key_by(|_: &u64| "all".to_string())
        .process(|n: u64, ctx, out| {
            let mut total = ctx.state(&TOTAL)?;
            let t = total.value() + n;
            total.update(t);
            out.collect(t);
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    (env.blocking_start().unwrap(), out)
}

/// The element `css`, waited for (bounded): a click that submits a form returns before
/// the next page is there.
async fn element(c: &Client, css: &str) -> fantoccini::elements::Element {
    (c.wait().at_most(Duration::from_secs(20)))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("`{css}`: {e}"))
}

/// Polls `check` (bounded).
fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text of the element `css` on the page, reloading it until `wanted` accepts it.
async fn text_when(c: &Client, css: &str, wanted: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            let text = e.text().await.unwrap();
            if wanted(&text) {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "`{css}` never showed what was wanted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.refresh().await.unwrap();
    }
}

#[test]
fn the_console_shows_the_job_and_replays_an_edited_dead_letter_once() {
    let redis = Redis::start();
    let rt = rt();
    rt.block_on(redis.mq(&rt).create_topic("orders", 1))
        .unwrap();
    for payload in [r#"{"n": 1}"#, r#"{"n": 2}"#, "n=3"] {
        redis
            .admin()
            .args(["produce", "orders", payload])
            .assert()
            .success();
    }
    let (job, out) = start_job(&redis);
    wait_for("two totals and a dead letter", || {
        out.len() == 2
            && rt
                .block_on(redis.mq(&rt).dead_letters("orders", 10))
                .unwrap()
                .len()
                == 1
    });
    let checkpoint = job
        .blocking_trigger_checkpoint_now()
        .unwrap()
        .expect("a checkpoint");
    let (_console, base) = serve(&redis, &["--token", "s3cret"]);
    let (_driver, driver_port) = chromedriver();
    rt.block_on(async {
        let c = browser(driver_port).await;
        // The token is asked for; a wrong one is refused.
        c.goto(&format!("{base}/")).await.unwrap();
        assert_eq!(c.current_url().await.unwrap().path(), "/login");
        element(&c, "#token")
            .await
            .send_keys("wrong")
            .await
            .unwrap();
        element(&c, "#login").await.click().await.unwrap();
        let refused = element(&c, "#refused").await.text().await.unwrap();
        assert_eq!(refused, "Wrong token.");
        c.goto(&format!("{base}/login")).await.unwrap();
        element(&c, "#token")
            .await
            .send_keys("s3cret")
            .await
            .unwrap();
        element(&c, "#login").await.click().await.unwrap();
        element(&c, "#instances").await;
        assert_eq!(c.current_url().await.unwrap().path(), "/");

        // The partition with its lag (all read: 0) once the registry shows it.
        let row = r#"tr[data-partition="orders/g/0"]"#;
        let lag = text_when(&c, &format!("{row} td.lag"), |t| t == "0").await;
        assert_eq!(lag, "0");
        let states = element(&c, "#states").await.text().await.unwrap();
        assert!(
            states.contains("total") && states.contains("ValueState<u64> by String"),
            "{states}"
        );
        let shot = c.screenshot().await.unwrap();
        assert!(shot.starts_with(b"\x89PNG"), "a PNG screenshot");
        if let Ok(path) = std::env::var("STREAMING_CONSOLE_SCREENSHOT") {
            std::fs::write(path, &shot).unwrap();
        }

        // The job's checkpoints, from its link in the jobs page.
        element(&c, "#instances a").await.click().await.unwrap();
        let status = element(&c, "#checkpoints td.status")
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(status, "complete");
        let id = element(&c, "#checkpoints td").await.text().await.unwrap();
        assert_eq!(id, checkpoint.id.to_string());
        c.back().await.unwrap();

        // A key's state, from the state's link in the jobs page.
        element(&c, "#states a").await.click().await.unwrap();
        element(&c, "#key")
            .await
            .send_keys(r#""all""#)
            .await
            .unwrap();
        element(&c, "#look-up").await.click().await.unwrap();
        assert_eq!(element(&c, "#value").await.text().await.unwrap(), "3");

        // The dead letter, corrected on its page and replayed.
        c.goto(&format!("{base}/dlq/orders")).await.unwrap();
        element(&c, "#dead-letters a").await.click().await.unwrap();
        let payload = element(&c, "#payload").await;
        assert_eq!(payload.prop("value").await.unwrap().as_deref(), Some("n=3"));
        payload.clear().await.unwrap();
        payload.send_keys(r#"{"n": 3}"#).await.unwrap();
        // Without the confirmation nothing happens.
        element(&c, "#replay-button").await.click().await.unwrap();
        let failure = element(&c, "#failure").await.text().await.unwrap();
        assert!(failure.contains("tick the confirmation box"), "{failure}");
        c.back().await.unwrap();
        let payload = element(&c, "#payload").await;
        payload.clear().await.unwrap();
        payload.send_keys(r#"{"n": 3}"#).await.unwrap();
        element(&c, "#confirm-replay").await.click().await.unwrap();
        element(&c, "#replay-button").await.click().await.unwrap();
        let done = element(&c, "#done").await.text().await.unwrap();
        assert!(done.contains("with the edited payload"), "{done}");
        c.close().await.unwrap();
    });
    wait_for("the corrected message's total", || out.len() == 3);
    // Processed once: no dead letter left, no further output.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(out.snapshot(), [1, 3, 6]);
    assert!(rt
        .block_on(redis.mq(&rt).dead_letters("orders", 10))
        .unwrap()
        .is_empty());

    // A purge from the page (with its confirmation) deletes every dead letter.
    for bad in ["x=1", "x=2"] {
        redis
            .admin()
            .args(["produce", "orders", bad])
            .assert()
            .success();
    }
    wait_for("two new dead letters", || {
        rt.block_on(redis.mq(&rt).dead_letters("orders", 10))
            .unwrap()
            .len()
            == 2
    });
    rt.block_on(async {
        let c = browser(driver_port).await;
        c.goto(&format!("{base}/login")).await.unwrap();
        element(&c, "#token")
            .await
            .send_keys("s3cret")
            .await
            .unwrap();
        element(&c, "#login").await.click().await.unwrap();
        element(&c, "#instances").await;
        c.goto(&format!("{base}/dlq/orders")).await.unwrap();
        element(&c, "#confirm-purge").await.click().await.unwrap();
        element(&c, "#purge-button").await.click().await.unwrap();
        let done = element(&c, "#done").await.text().await.unwrap();
        assert_eq!(done, "Deleted 2 dead letters of orders.");
        c.close().await.unwrap();
    });
    assert!(rt
        .block_on(redis.mq(&rt).dead_letters("orders", 10))
        .unwrap()
        .is_empty());

    // Without the token: a page goes to the login page, a change is refused.
    let bearer = "Authorization: Bearer nope";
    assert_eq!(status(&base, "GET", "/", &[bearer], None), 303);
    assert_eq!(
        status(&base, "GET", "/", &["Authorization: Bearer s3cret"], None),
        200
    );
    assert_eq!(
        status(
            &base,
            "POST",
            "/dlq/orders/0/1-0/delete",
            &[],
            Some("confirm=yes")
        ),
        401
    );
    let token = "Authorization: bearer s3cret";
    // The filter form sends empty fields; a partition that is no number is refused.
    let filter = "/dlq/orders?partition=&group=&error_type=decode";
    assert_eq!(status(&base, "GET", filter, &[token], None), 200);
    assert_eq!(
        status(&base, "GET", "/dlq/orders?partition=x", &[token], None),
        400
    );
    // Behind a proxy that rewrites Host, the browser's host is X-Forwarded-Host.
    let proxied = [
        "Origin: https://console.example",
        "X-Forwarded-Host: console.example",
        token,
    ];
    let delete = "/dlq/orders/0/1-0/delete";
    assert_eq!(
        status(&base, "POST", delete, &proxied, Some("confirm=yes")),
        200
    );
    // A login from another site's page is refused; logging out forgets the cookie.
    let elsewhere = ["Origin: http://elsewhere.example"];
    assert_eq!(
        status(&base, "POST", "/login", &elsewhere, Some("token=s3cret")),
        403
    );
    assert_eq!(status(&base, "GET", "/logout", &[], None), 303);
    job.blocking_shutdown(Duration::from_secs(10));
}

#[test]
fn a_read_only_console_refuses_changes_and_off_loopback_needs_a_token() {
    let redis = Redis::start();
    let rt = rt();
    let mq = redis.mq(&rt);
    rt.block_on(mq.create_topic("orders", 1)).unwrap();
    redis
        .admin()
        .args(["produce", "orders", "n=1"])
        .assert()
        .success();
    let (job, _out) = start_job(&redis);
    let dead = || {
        rt.block_on(redis.mq(&rt).dead_letters("orders", 10))
            .unwrap()
    };
    wait_for("the dead letter", || dead().len() == 1);
    let id = dead()[0].dlq_id.clone();
    let (_console, base) = serve(&redis, &["--read-only", "--refresh", "1"]);
    let (_driver, driver_port) = chromedriver();
    rt.block_on(async {
        let c = browser(driver_port).await;
        c.goto(&format!("{base}/dlq/orders/0/{id}")).await.unwrap();
        let badge = element(&c, "#read-only").await.text().await.unwrap();
        assert_eq!(badge, "read-only");
        assert!(
            c.find(Locator::Id("replay")).await.is_err(),
            "no replay form"
        );
        let facts = element(&c, "#facts").await.text().await.unwrap();
        assert!(
            facts.contains("decode") || facts.contains("user_function"),
            "{facts}"
        );
        // The topics page draws each topic's recent entries/s and lag once sampled twice
        // (every refresh interval: 1 s here).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            c.goto(&format!("{base}/topics")).await.unwrap();
            if c.find(Locator::Css("svg.sparkline.lag polyline"))
                .await
                .is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "no sparkline");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let trend = element(&c, "#topics td.trend").await.text().await.unwrap();
        assert!(trend.contains("/s") && trend.contains("lag 0"), "{trend}");
        c.close().await.unwrap();
    });
    let replay = format!("/dlq/orders/0/{id}/replay");
    assert_eq!(
        status(&base, "POST", &replay, &[], Some("confirm=yes")),
        403
    );
    // A change from another site's page is refused whatever the console's mode.
    let other = "Origin: http://elsewhere.example";
    assert_eq!(
        status(&base, "POST", &replay, &[other], Some("confirm=yes")),
        403
    );
    assert_eq!(dead().len(), 1, "nothing was replayed");

    let refused = redis
        .admin()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("STREAMING_ADMIN_TOKEN")
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("token"),
        "{stderr}"
    );
    job.blocking_shutdown(Duration::from_secs(10));
}
