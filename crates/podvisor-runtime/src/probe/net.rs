//! Dialing TCP the way the kubelet's probes do, with Go's error texts, and a stream wrapper
//! that remembers what the peer said first and how the socket failed (for Go-shaped
//! transport errors such as `read tcp a->b: read: connection reset by peer`).

use super::gofmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Why a dial failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DialError {
    /// The deadline passed; `addr` is the address being connected to, if resolution finished.
    TimedOut {
        /// The address (`ip:port`), absent when the name lookup itself timed out.
        addr: Option<SocketAddr>,
    },
    /// Any other failure, as Go's `net.OpError` text (`dial tcp 1.2.3.4:80: connect: ...`).
    Failed(String),
}

impl DialError {
    /// The text Go's `net.Dialer` with a `Timeout` gives (TCP probes).
    pub(crate) fn dialer_text(&self, host: &str) -> String {
        match self {
            DialError::TimedOut { addr: Some(addr) } => format!("dial tcp {addr}: i/o timeout"),
            DialError::TimedOut { addr: None } => format!("dial tcp: lookup {host}: i/o timeout"),
            DialError::Failed(text) => text.clone(),
        }
    }
}

/// Joins host and port like Go's `net.JoinHostPort` (brackets around IPv6 literals).
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Connects to `host:port` before `deadline`. `host` is an IP literal (IPv6 without
/// brackets) or a name resolved by the node; resolved addresses are tried in order and the
/// first error is reported, as Go's serial dialer does.
pub(crate) async fn dial(host: &str, port: u16, deadline: Instant) -> Result<TcpStream, DialError> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            match tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
                Err(_) => return Err(DialError::TimedOut { addr: None }),
                Ok(Err(_)) => return Err(DialError::Failed(lookup_failure(host))),
                Ok(Ok(found)) => found.collect(),
            }
        }
    };
    let mut first_error = None;
    for addr in &addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => return Err(first_error.unwrap_or(DialError::TimedOut { addr: Some(*addr) })),
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => {
                first_error.get_or_insert_with(|| {
                    DialError::Failed(format!("dial tcp {addr}: connect: {}", gofmt::os_error(&e)))
                });
            }
        }
    }
    Err(first_error.unwrap_or_else(|| DialError::Failed(lookup_failure(host))))
}

/// Go's resolver error: `dial tcp: lookup <name> on <server>: no such host`.
fn lookup_failure(host: &str) -> String {
    match first_nameserver() {
        Some(server) => format!("dial tcp: lookup {host} on {server}: no such host"),
        None => format!("dial tcp: lookup {host}: no such host"),
    }
}

fn first_nameserver() -> Option<String> {
    let conf = std::fs::read_to_string("/etc/resolv.conf").ok()?;
    conf.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("nameserver"))
            .then(|| words.next())
            .flatten()
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53).to_string())
    })
}

/// What a [`Traced`] stream observed.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    /// The first bytes the peer sent (at most [`Trace::KEEP`]).
    pub(crate) first_bytes: Vec<u8>,
    /// The first socket error, as Go's `read tcp a->b: read: ...` text.
    pub(crate) error: Option<String>,
}

impl Trace {
    const KEEP: usize = 256;

    /// The first line the peer sent, without its line ending.
    pub(crate) fn first_line(&self) -> &[u8] {
        let line = self
            .first_bytes
            .split(|b| *b == b'\n')
            .next()
            .unwrap_or_default();
        line.strip_suffix(b"\r").unwrap_or(line)
    }
}

/// A TCP stream that records its peer's first bytes and its first error.
#[derive(Debug)]
pub(crate) struct Traced {
    inner: TcpStream,
    trace: Arc<Mutex<Trace>>,
    local: Option<SocketAddr>,
    peer: Option<SocketAddr>,
}

impl Traced {
    /// Wraps a connected stream; the returned handle reads the trace later.
    pub(crate) fn new(inner: TcpStream) -> (Self, Arc<Mutex<Trace>>) {
        let trace = Arc::new(Mutex::new(Trace::default()));
        let local = inner.local_addr().ok();
        let peer = inner.peer_addr().ok();
        (
            Traced {
                inner,
                trace: trace.clone(),
                local,
                peer,
            },
            trace,
        )
    }

    fn record_error(&self, op: &str, e: &io::Error) {
        let mut trace = self.trace.lock().unwrap_or_else(|p| p.into_inner());
        if trace.error.is_none() {
            let ends = match (self.local, self.peer) {
                (Some(l), Some(p)) => format!("{l}->{p}"),
                (_, Some(p)) => p.to_string(),
                _ => String::new(),
            };
            trace.error = Some(format!("{op} tcp {ends}: {op}: {}", gofmt::os_error(e)));
        }
    }
}

impl AsyncRead for Traced {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        match &poll {
            Poll::Ready(Ok(())) => {
                let mut trace = this.trace.lock().unwrap_or_else(|p| p.into_inner());
                let room = Trace::KEEP.saturating_sub(trace.first_bytes.len());
                let new = &buf.filled()[before..];
                trace
                    .first_bytes
                    .extend_from_slice(&new[..new.len().min(room)]);
            }
            Poll::Ready(Err(e)) => this.record_error("read", e),
            Poll::Pending => {}
        }
        poll
    }
}

impl AsyncWrite for Traced {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Err(e)) = &poll {
            this.record_error("write", e);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
