//! What the CLI's tests share: a private `redis-server` and the runtime of their own
//! async calls.
#![allow(dead_code, unreachable_pub)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use streaming::mq::{Mq, MqOptions};

/// A `redis-server` on a free loopback port in a temporary directory, killed on drop.
pub struct Redis {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
    /// The password every connection gives (`--requirepass`), if any.
    password: Option<String>,
}

impl Redis {
    /// A server without a password.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (`--requirepass P` sets the password
    /// [`url`](Self::url) gives).
    pub fn start_with(args: &[&str]) -> Self {
        let password = args
            .iter()
            .position(|a| *a == "--requirepass")
            .and_then(|i| args.get(i + 1))
            .map(|p| p.to_string());
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let dir = tempfile::tempdir().expect("temp dir");
            let mut child = Process::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(dir.path())
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server (is it installed?)");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && child.try_wait().ok().flatten().is_none() {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Redis {
                        port,
                        child,
                        _dir: dir,
                        password,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start redis-server");
    }

    /// The URL of the default user (with the server's password, if any).
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => self.url_as("", p),
            None => format!("redis://127.0.0.1:{}/", self.port),
        }
    }

    /// The URL of `user` with `password`.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!("redis://{user}:{password}@127.0.0.1:{}/", self.port)
    }

    /// `streaming-admin --redis-url <this server>`, with `REDIS_URL` cleared.
    pub fn admin(&self) -> Command {
        let mut cmd = Command::cargo_bin("streaming-admin").expect("the binary");
        cmd.env_remove("REDIS_URL")
            .args(["--redis-url", &self.url()]);
        cmd
    }

    /// Runs `args` with `--json`, expects success, parses stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.admin().args(args).arg("--json").assert().success();
        let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    }

    /// A queue client of the default user.
    pub fn mq(&self, rt: &tokio::runtime::Runtime) -> Mq {
        rt.block_on(Mq::connect(&self.url(), MqOptions::default()))
            .unwrap()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A runtime for the test's own async calls.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Waits (bounded) until `job` has committed `n` records over all its partitions.
pub fn await_records(job: &streaming::redis::JobClient, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while job
        .diagnostics()
        .partitions
        .iter()
        .map(|p| p.records)
        .sum::<u64>()
        < n
    {
        assert!(Instant::now() < deadline, "{:?}", job.diagnostics());
        std::thread::sleep(Duration::from_millis(20));
    }
}
