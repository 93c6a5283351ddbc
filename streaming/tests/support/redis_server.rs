//! A private `redis-server` on a free loopback port, killed on drop; can be killed and
//! restarted on the same port and directory (AOF on, fsync always) for fault tests.
//!
//! [`TestRedis::shared`] honours `REDIS_URL` (then no server is started);
//! [`TestRedis::private`] always starts one (fault tests need to kill it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running test Redis: either one we started or the one `REDIS_URL` names.
pub struct TestRedis {
    url: String,
    server: Option<RedisServer>,
}

impl TestRedis {
    /// `REDIS_URL` when set, else a private server.
    pub fn shared() -> Self {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Self { url, server: None },
            _ => Self::private(),
        }
    }

    /// Always a private server (AOF on), so the test may kill and restart it.
    pub fn private() -> Self {
        let server = RedisServer::start();
        Self {
            url: server.url(),
            server: Some(server),
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
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

impl RedisServer {
    /// Starts a server on a free loopback port in a fresh temporary directory.
    pub fn start() -> Self {
        // A port can be taken between probing and binding: try a few.
        for _ in 0..5 {
            let mut s = Self {
                port: free_port(),
                dir: tempfile::tempdir().expect("temp dir"),
                child: None,
            };
            if s.spawn() {
                return s;
            }
        }
        panic!("could not start redis-server");
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server (is it installed?)");
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
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
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
        self.kill();
    }
}
