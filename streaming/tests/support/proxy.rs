//! A TCP proxy in front of a test Redis that, once, makes one command carrying a marker
//! fail on the client's side: its reply is lost, or the command reaches Redis late.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What happens to the command that carries the marker.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Redis runs it; its reply is swallowed and the client's connection closed: Redis
    /// applied the command, the client never hears it did. A `NOSCRIPT` reply (the script
    /// was not cached yet, so nothing ran) is passed on and the next such command is taken.
    LoseReply,
    /// The client's connection is closed before the command reaches Redis (the client sees
    /// no reply), and the proxy sends it to Redis `after` that, on the connection it was
    /// written to: a command that reaches Redis late, e.g. from a network that held it.
    /// Redis's reply to it is kept ([`FaultyProxy::late_reply`]).
    DeliverLate(Duration),
}

/// The proxy: connect to [`url`](Self::url) instead of the server.
pub struct FaultyProxy {
    pub url: String,
    fired: Arc<AtomicBool>,
    late_reply: Arc<Mutex<Option<Vec<u8>>>>,
}

/// What the threads of one proxied connection share.
#[derive(Clone)]
struct Shared {
    marker: &'static [u8],
    fault: Fault,
    /// Commands with the marker still let through before the fault (scripts get cached).
    skip: Arc<AtomicUsize>,
    fired: Arc<AtomicBool>,
    late_reply: Arc<Mutex<Option<Vec<u8>>>>,
}

impl FaultyProxy {
    /// Proxies `upstream` (`redis://host:port/`); the fault hits the first command with
    /// `marker` after `skip` of them went through.
    pub fn start(upstream: &str, marker: &'static [u8], skip: usize, fault: Fault) -> Self {
        let addr = upstream
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let shared = Shared {
            marker,
            fault,
            skip: Arc::new(AtomicUsize::new(skip)),
            fired: Arc::new(AtomicBool::new(false)),
            late_reply: Arc::new(Mutex::new(None)),
        };
        let proxy = FaultyProxy {
            url,
            fired: Arc::clone(&shared.fired),
            late_reply: Arc::clone(&shared.late_reply),
        };
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&addr) else {
                    return;
                };
                let armed = Arc::new(AtomicBool::new(false));
                let (c, s) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (sh, a) = (shared.clone(), Arc::clone(&armed));
                std::thread::spawn(move || to_server(c, s, &sh, &a));
                let sh = shared.clone();
                std::thread::spawn(move || to_client(server, client, &sh, &armed));
            }
        });
        proxy
    }

    /// Whether the fault happened.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Redis's reply to the command delivered late, once it came.
    pub fn late_reply(&self) -> Option<Vec<u8>> {
        self.late_reply.lock().unwrap().clone()
    }
}

/// Client → server: forwards, and arms (or, delivering late, holds back) the command with
/// the marker.
fn to_server(mut c_in: TcpStream, mut s_out: TcpStream, sh: &Shared, armed: &AtomicBool) {
    let mut buf = vec![0u8; 1 << 16];
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = match c_in.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tail.extend_from_slice(&buf[..n]);
        let marked = tail.windows(sh.marker.len()).any(|w| w == sh.marker);
        let keep = tail.len().saturating_sub(sh.marker.len());
        tail.drain(..keep);
        if marked && !sh.fired.load(Ordering::SeqCst) && !skipped(sh) {
            if let Fault::DeliverLate(after) = sh.fault {
                sh.fired.store(true, Ordering::SeqCst);
                armed.store(true, Ordering::SeqCst);
                let _ = c_in.shutdown(Shutdown::Both);
                std::thread::sleep(after);
                let _ = s_out.write_all(&buf[..n]);
                return;
            }
            armed.store(true, Ordering::SeqCst);
        }
        if s_out.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = s_out.shutdown(Shutdown::Both);
}

/// Whether this command with the marker is one of those let through first.
fn skipped(sh: &Shared) -> bool {
    sh.skip
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Server → client: forwards replies; swallows the armed command's reply (losing it), or
/// keeps the reply to the command delivered late.
fn to_client(mut s_in: TcpStream, mut c_out: TcpStream, sh: &Shared, armed: &AtomicBool) {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match s_in.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if armed.load(Ordering::SeqCst) {
            match sh.fault {
                Fault::DeliverLate(_) => {
                    *sh.late_reply.lock().unwrap() = Some(buf[..n].to_vec());
                    return;
                }
                Fault::LoseReply if buf[..n].starts_with(b"-NOSCRIPT") => {
                    armed.store(false, Ordering::SeqCst);
                }
                Fault::LoseReply => {
                    sh.fired.store(true, Ordering::SeqCst);
                    break;
                }
            }
        }
        if c_out.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = c_out.shutdown(Shutdown::Both);
    let _ = s_in.shutdown(Shutdown::Both);
}
