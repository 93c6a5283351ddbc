//! A private PostgreSQL cluster for one test: `initdb` into a temporary directory, a free
//! loopback port, the unix socket inside that directory, trust authentication (user
//! `postgres`, database `postgres`), `max_prepared_transactions = 20` and `fsync = off`
//! (a killed server keeps its data in the page cache; only a machine crash would lose it).
//!
//! [`TestPostgres::kill`] sends `SIGKILL` to the postmaster, [`TestPostgres::restart`]
//! kills it and starts it again on the same data directory and port (crash recovery replays
//! the WAL, so committed and prepared transactions survive). Dropping the handle stops the
//! server (`pg_ctl stop -m immediate`) and deletes the directory.
//!
//! The binaries are those of the newest `/usr/lib/postgresql/<version>/bin` (Debian's
//! `postgresql` package; `.ci/run` installs it). `initdb` and `postgres` refuse to run as
//! root, so a root test process runs them as the `postgres` user (`runuser -u postgres --`)
//! and hands it the directory first.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The account that owns the cluster when the test runs as root (Debian's package makes it).
const SERVICE_USER: &str = "postgres";

/// A running private PostgreSQL cluster; stopped and deleted on drop.
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// `Some("postgres")` when we are root and run the server binaries as that user.
    run_as: Option<&'static str>,
}

impl TestPostgres {
    /// `initdb` + `pg_ctl start -w` on a free loopback port; panics (saying why, with the
    /// server log) when PostgreSQL is not installed or does not start.
    pub fn start() -> Self {
        Self::start_configured(|_| {})
    }

    /// Like [`start`](Self::start), but TCP connections must use TLS (`hostssl` only in
    /// `pg_hba.conf`; the unix socket stays plain): the server presents the PEM
    /// certificate `cert` with its key `key`.
    pub fn start_with_tls(cert: &str, key: &str) -> Self {
        Self::start_configured(|pg| {
            let data = pg.data_dir();
            for (name, text) in [("server.crt", cert), ("server.key", key)] {
                let path = data.join(name);
                std::fs::write(&path, text).expect("write the server certificate");
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .expect("chmod 600");
                if let Some(user) = pg.run_as {
                    chown_to(&path, user);
                }
            }
            append(
                &data.join("postgresql.conf"),
                "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n",
            );
            std::fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
            )
            .expect("write pg_hba.conf");
        })
    }

    /// `initdb`, then `configure`, then start.
    fn start_configured(configure: impl FnOnce(&Self)) -> Self {
        let bin = newest_bin_dir();
        let run_as = is_root().then_some(SERVICE_USER);
        let dir = tempfile::Builder::new()
            .prefix("pg-test-")
            .tempdir()
            .expect("temp dir");
        if let Some(user) = run_as {
            chown_to(dir.path(), user);
        }
        let mut pg = Self {
            dir,
            bin,
            port: 0,
            run_as,
        };
        pg.init_db();
        configure(&pg);
        // A port can be taken between probing and binding: try a few.
        for _ in 0..5 {
            pg.port = free_port();
            pg.write_port();
            if pg.pg_ctl_start().status.success() {
                return pg;
            }
        }
        panic!("could not start postgres; log:\n{}", pg.log_tail());
    }

    /// The loopback TCP port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of its unix socket (`.s.PGSQL.<port>`).
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `postgresql://postgres@127.0.0.1:<port>/postgres` (trust auth: no password).
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Key-value connection parameters for the same server over its unix socket (plain
    /// even when TCP needs TLS).
    pub fn socket_params(&self) -> String {
        format!(
            "host={} port={} user=postgres dbname=postgres",
            self.socket_dir().display(),
            self.port
        )
    }

    /// Key-value connection parameters for the same server over TCP.
    pub fn params(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// A client connection (tokio-postgres, no TLS); its connection task is spawned on the
    /// current tokio runtime.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.params(), tokio_postgres::NoTls)
            .await
            .expect("connect to the test postgres");
        tokio::spawn(async move {
            // Ends with an error when the server is killed: the test sees that on its
            // next query.
            let _ = conn.await;
        });
        client
    }

    /// The postmaster's pid (first line of `postmaster.pid`), if it is running.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        let pid: u32 = text.lines().next()?.trim().parse().ok()?;
        pid_alive(pid).then_some(pid)
    }

    /// `kill -9` of the postmaster, then waits (at most 20 s) until it and its children
    /// (backends, background workers) are gone. No shutdown checkpoint is written.
    pub fn kill(&mut self) {
        let Some(pid) = self.postmaster_pid() else {
            return;
        };
        let children = child_pids(pid);
        let status = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -9 {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::iter::once(pid)
            .chain(children.iter().copied())
            .any(pid_alive)
        {
            assert!(
                Instant::now() < deadline,
                "postgres {pid} or its children still alive 20 s after kill -9"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server ([`kill`](Self::kill)) and starts it again on the same data
    /// directory and port; returns once it accepts connections (crash recovery done).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.pg_ctl_start().status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "postgres did not restart on port {}; log:\n{}",
                self.port,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The last 30 lines of the server log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn init_db(&self) {
        std::fs::create_dir(self.socket_dir()).expect("create the socket dir");
        if let Some(user) = self.run_as {
            chown_to(&self.socket_dir(), user);
        }
        let data = self.data_dir();
        let out = self.run(
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = format!(
            "\n# tests/support/postgres.rs\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nmax_prepared_transactions = 20\n\
             max_connections = 40\nshared_buffers = 16MB\nfsync = off\n\
             full_page_writes = off\n",
            self.socket_dir().display()
        );
        append(&data.join("postgresql.conf"), &conf);
    }

    /// The port goes into `postgresql.auto.conf` (read after `postgresql.conf`), so a
    /// restart by hand (`pg_ctl start -D <data dir>`) uses it too.
    fn write_port(&self) {
        let auto = self.data_dir().join("postgresql.auto.conf");
        std::fs::write(&auto, format!("port = {}\n", self.port)).expect("write auto conf");
        if let Some(user) = self.run_as {
            chown_to(&auto, user);
        }
    }

    fn pg_ctl_start(&self) -> Output {
        self.run(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                path_str(&self.data_dir()),
                "-l",
                path_str(&self.log_path()),
            ],
        )
    }

    /// Runs `bin/<program> args`, as the service user when we are root.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(program);
        let mut cmd = match self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()))
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        if self.postmaster_pid().is_none() {
            return;
        }
        let data = self.data_dir();
        let stop = self.run(
            "pg_ctl",
            &[
                "stop",
                "-m",
                "immediate",
                "-w",
                "-t",
                "20",
                "-D",
                path_str(&data),
            ],
        );
        if !stop.status.success() {
            self.kill();
        }
        // The temporary directory is deleted after this (field drop).
    }
}

/// The newest `/usr/lib/postgresql/<major>/bin` holding `initdb` and `pg_ctl`.
fn newest_bin_dir() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server binaries under {} (install Debian's `postgresql`; .ci/run does)",
            root.display()
        )
    })
}

/// Whether this process runs as root (`id -u` prints 0).
fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("run id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// `chown user:<user's group> path` (not recursive).
fn chown_to(path: &Path, user: &str) {
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, user])
            .output()
            .expect("run id");
        assert!(
            out.status.success(),
            "no `{user}` user to run PostgreSQL as root (install Debian's `postgresql`)"
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("numeric id")
    };
    std::os::unix::fs::chown(path, Some(id("-u")), Some(id("-g")))
        .unwrap_or_else(|e| panic!("chown {} to {user}: {e}", path.display()));
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    f.write_all(text.as_bytes())
        .expect("append to postgresql.conf");
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// Whether `pid` is a live process (a zombie counts as gone).
fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: `pid (comm) S ...`.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The pids whose parent is `pid` (its backends and workers, for the postmaster).
fn child_pids(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(')')?;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}
