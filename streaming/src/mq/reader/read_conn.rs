//! Connections of their own for fenced reads on one server: the request is sent as
//! redis-rs packs it, and the replies come back as bytes, so a read's entries are parsed
//! once, straight into messages, instead of into a `redis::Value` tree first (redis-rs's
//! parser was half of a subtask's time on 500-entry reads).
//!
//! A connection is opened when a read finds none idle (with the server's credentials and
//! database, speaking RESP2), is used by one read at a time, and goes back to the idle
//! ones after a complete reply. A read that fails or times out drops its connection (the
//! next read opens another: one attempt each, like the shared connection); a connection
//! found closed while idle is dropped before it is used. Nothing is retried.

use std::sync::Mutex;
use std::time::Duration;

use bytes::BytesMut;
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, RedisResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::resp::Framer;

/// The name these connections give themselves (`CLIENT SETNAME`): `CLIENT LIST` tells
/// them from the job's other connections.
pub(crate) const CLIENT_NAME: &str = "streaming-read";

/// At most this many connections wait idle (the others are closed after their read).
const MAX_IDLE: usize = 8;

/// A reply buffer that grew beyond this is not kept for the next read.
const KEEP_BUFFER: usize = 1 << 20;

/// Buffer space asked for before each socket read.
const READ_CHUNK: usize = 64 * 1024;

/// The fenced reads' connections to one server.
pub(crate) struct ReadConnections {
    info: ConnectionInfo,
    timeout: Duration,
    idle: Mutex<Vec<ReadConn>>,
}

impl std::fmt::Debug for ReadConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadConnections")
            .field("addr", &self.info.addr)
            .finish_non_exhaustive()
    }
}

impl ReadConnections {
    /// Connections to the server `info` names, each connect and each read bounded by
    /// `timeout`; `None` for a TLS address (those reads go through redis-rs).
    pub(crate) fn new(info: &ConnectionInfo, timeout: Duration) -> Option<Self> {
        let supported = match info.addr {
            ConnectionAddr::Tcp(..) => true,
            ConnectionAddr::Unix(_) => cfg!(unix),
            ConnectionAddr::TcpTls { .. } => false,
        };
        supported.then(|| Self {
            info: info.clone(),
            timeout,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Sends `request` (`replies` commands, packed) on an idle or a new connection, waits
    /// for its `replies` replies and returns what `read` makes of their bytes (one slice
    /// per reply, in order).
    ///
    /// # Errors
    /// The connection's [`RedisError`]: I/O (the connection was refused, closed or timed
    /// out: `is_timeout` after the timeout) or a reply that is not the Redis protocol.
    pub(crate) async fn round_trip<T>(
        &self,
        request: &[u8],
        replies: usize,
        read: impl FnOnce(&[&[u8]]) -> T,
    ) -> RedisResult<T> {
        let mut conn = match self.take_idle() {
            Some(c) => c,
            None => self.bounded(ReadConn::open(&self.info)).await?,
        };
        let ends = self.bounded(conn.exchange(request, replies)).await?;
        let mut frames = Vec::with_capacity(ends.len());
        let mut start = 0;
        for &end in &ends {
            frames.push(&conn.buf[start..end]);
            start = end;
        }
        let out = read(&frames);
        if start == conn.buf.len() {
            self.put_back(conn);
        }
        Ok(out)
    }

    async fn bounded<T>(&self, f: impl std::future::Future<Output = RedisResult<T>>) -> RedisResult<T> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no reply to a stream read within the response timeout",
            )
            .into()),
        }
    }

    /// An idle connection still open.
    fn take_idle(&self) -> Option<ReadConn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(c) = idle.pop() {
            if c.is_open() {
                return Some(c);
            }
        }
        None
    }

    fn put_back(&self, mut conn: ReadConn) {
        if conn.buf.capacity() > KEEP_BUFFER {
            conn.buf = BytesMut::new();
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

/// The socket of a [`ReadConn`].
enum Io {
    Tcp(tokio::net::TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// One connection and its reply buffer.
struct ReadConn {
    io: Io,
    buf: BytesMut,
}

impl ReadConn {
    /// Connects and logs in: `AUTH` when `info` has a password, `SELECT` for a database
    /// other than 0, then names itself [`CLIENT_NAME`].
    async fn open(info: &ConnectionInfo) -> RedisResult<Self> {
        let io = match &info.addr {
            ConnectionAddr::Tcp(host, port) => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
                s.set_nodelay(true)?;
                Io::Tcp(s)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Io::Unix(tokio::net::UnixStream::connect(path).await?),
            _ => {
                return Err((ErrorKind::InvalidClientConfig, "no stream-read connection to this address").into())
            }
        };
        let mut conn = Self {
            io,
            buf: BytesMut::with_capacity(READ_CHUNK),
        };
        let mut login = redis::pipe();
        if let Some(password) = &info.redis.password {
            let auth = login.cmd("AUTH");
            if let Some(user) = &info.redis.username {
                auth.arg(user);
            }
            auth.arg(password);
        }
        if info.redis.db != 0 {
            login.cmd("SELECT").arg(info.redis.db);
        }
        login.cmd("CLIENT").arg("SETNAME").arg(CLIENT_NAME);
        {
            let ends = conn.exchange(&login.get_packed_pipeline(), login.len()).await?;
            let mut start = 0;
            for end in ends {
                redis::parse_redis_value(&conn.buf[start..end]).and_then(redis::Value::extract_error)?;
                start = end;
            }
        }
        Ok(conn)
    }

    /// Whether the server has not closed the connection (nor sent anything unasked).
    fn is_open(&self) -> bool {
        let mut probe = [0u8; 1];
        let r = match &self.io {
            Io::Tcp(s) => s.try_read(&mut probe),
            #[cfg(unix)]
            Io::Unix(s) => s.try_read(&mut probe),
        };
        matches!(r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Sends `request` and reads until `replies` replies are in the buffer; returns where
    /// each ends.
    async fn exchange(&mut self, request: &[u8], replies: usize) -> RedisResult<Vec<usize>> {
        self.buf.clear();
        match &mut self.io {
            Io::Tcp(s) => s.write_all(request).await?,
            #[cfg(unix)]
            Io::Unix(s) => s.write_all(request).await?,
        }
        let mut ends = Vec::with_capacity(replies);
        let mut framer = Framer::at(0);
        while ends.len() < replies {
            match framer.advance(&self.buf) {
                Ok(Some(end)) => {
                    ends.push(end);
                    framer = Framer::at(end);
                }
                Ok(None) => self.fill().await?,
                Err(e) => return Err((ErrorKind::ParseError, "parse error", e.0.to_owned()).into()),
            }
        }
        Ok(ends)
    }

    /// Reads what the socket has into the buffer.
    async fn fill(&mut self) -> RedisResult<()> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
            self.buf.reserve(READ_CHUNK);
        }
        let n = match &mut self.io {
            Io::Tcp(s) => s.read_buf(&mut self.buf).await?,
            #[cfg(unix)]
            Io::Unix(s) => s.read_buf(&mut self.buf).await?,
        };
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the stream-read connection",
            )
            .into());
        }
        Ok(())
    }
}
