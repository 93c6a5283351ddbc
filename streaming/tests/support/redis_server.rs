//! A private `redis-server` on a free loopback port, killed on drop; can be killed and
//! restarted on the same port and directory (AOF on, fsync always) for fault tests.
//!
//! [`TestRedis::shared`] honours `REDIS_URL` (then no server is started);
//! [`TestRedis::private`] always starts one (fault tests need to kill it).
//!
//! `STREAMING_TEST_REDIS_SERVER` names the server binary to start (default `redis-server`
//! on the `PATH`), so the same tests run against another server, e.g. Valkey's
//! `valkey-server` (CI does; see `.ci/run`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running test Redis: either one we started or the one `REDIS_URL` names.
pub struct TestRedis {
    url: String,
    server: Option<RedisServer>,
    /// What keeps the servers behind `url` running (a test cluster), dropped with it.
    _keep: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl TestRedis {
    /// `REDIS_URL` when set, else a private server.
    pub fn shared() -> Self {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Self {
                url,
                server: None,
                _keep: None,
            },
            _ => Self::private(),
        }
    }

    /// Always a private server (AOF on), so the test may kill and restart it.
    pub fn private() -> Self {
        let server = RedisServer::start();
        Self {
            url: server.url(),
            server: Some(server),
            _keep: None,
        }
    }

    /// The servers `keep` runs (a test cluster, say), reached at `url`; they stop when
    /// this is dropped.
    pub fn kept(url: String, keep: Box<dyn std::any::Any + Send + Sync>) -> Self {
        Self {
            url,
            server: None,
            _keep: Some(keep),
        }
    }

    /// The connection URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The private server; panics for an external `REDIS_URL` server.
    pub fn server(&mut self) -> &mut RedisServer {
        self.server.as_mut().expect("a private redis-server")
    }
}

/// A `redis-server` child process.
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Extra `redis-server` arguments (e.g. `--requirepass`).
    args: Vec<String>,
}

/// The server binary tests start: `STREAMING_TEST_REDIS_SERVER`, else `redis-server`.
pub fn server_binary() -> String {
    std::env::var("STREAMING_TEST_REDIS_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".to_string())
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// A free port for a cluster node: it also listens on port + 10000 (the cluster bus), so
/// the port is at most 55535 and port + 10000 is free too.
fn free_cluster_port() -> u16 {
    loop {
        let p = free_port();
        if p <= 55535 && TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
}

impl RedisServer {
    /// Starts a server on a free loopback port in a fresh temporary directory.
    pub fn start() -> Self {
        Self::start_with_args(&[])
    }

    /// Like [`start`](Self::start) with extra `redis-server` arguments; with
    /// `--requirepass` the readiness probe authenticates first.
    pub fn start_with_args(args: &[&str]) -> Self {
        // A port can be taken between probing and binding: try a few.
        let cluster = args.contains(&"--cluster-enabled");
        for _ in 0..5 {
            let mut s = Self {
                port: if cluster {
                    free_cluster_port()
                } else {
                    free_port()
                },
                dir: tempfile::tempdir().expect("temp dir"),
                child: None,
                args: args.iter().map(|a| a.to_string()).collect(),
            };
            if s.spawn() {
                return s;
            }
        }
        panic!("could not start redis-server");
    }

    fn spawn(&mut self) -> bool {
        let binary = server_binary();
        let child = Command::new(&binary)
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
            ])
            .arg(self.dir.path())
            .args(["--logfile", "redis.log"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {binary} (is it installed?): {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.ping() {
                return true;
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        false
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut buf = [0u8; 64];
        if let Some(i) = self.args.iter().position(|a| a == "--requirepass") {
            let auth = format!("AUTH {}\r\n", self.args[i + 1]);
            if s.write_all(auth.as_bytes()).is_err() || s.read(&mut buf).is_err() {
                return false;
            }
        }
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server at once (SIGKILL: no shutdown, no final save).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Freezes the server (`SIGSTOP`): connections stay open, the kernel still accepts
    /// new ones, nothing answers until [`thaw`](Self::thaw).
    pub fn freeze(&mut self) {
        assert!(self.signal("-STOP"), "kill -STOP failed");
    }

    /// Lets a frozen server run again (`SIGCONT`).
    pub fn thaw(&mut self) {
        assert!(self.signal("-CONT"), "kill -CONT failed");
    }

    /// Sends `sig` to the server process (by its own pid); whether that worked.
    fn signal(&self, sig: &str) -> bool {
        let Some(child) = self.child.as_ref() else {
            return false;
        };
        Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Kills and starts it again on the same port and directory; the AOF restores data.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("could not restart redis-server on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            // A frozen server would not die of SIGKILL any later than now, but let it run
            // so that nothing waits on it.
            let _ = self.signal("-CONT");
        }
        self.kill();
    }
}

/// A port that accepts connections and never answers (like a frozen or wedged server).
/// The listener lives as long as the returned guard; accepted sockets are kept open.
pub struct SilentPort {
    port: u16,
    _thread: std::thread::JoinHandle<()>,
}

impl SilentPort {
    /// Listens on a free loopback port.
    pub fn start() -> Self {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let thread = std::thread::spawn(move || {
            let mut open = Vec::new();
            for s in l.incoming().flatten() {
                open.push(s);
            }
        });
        Self {
            port,
            _thread: thread,
        }
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// A port with a minimal HTTP server: whatever arrives, it answers
/// `HTTP/1.1 400 Bad Request` and closes the connection.
pub fn http_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    port
}
