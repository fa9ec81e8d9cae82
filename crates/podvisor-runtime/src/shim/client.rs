//! The agent's side of the shim protocol (tokio): one connection per request, plus a
//! long-lived `Subscribe` connection that feeds exits into a channel.

use super::protocol::{Event, ExitRecord, MAX_PASSED_FDS, Request, Response};
use crate::RuntimeError;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// A streaming exec the shim started ([`ShimClient::exec_stream`]).
#[derive(Debug)]
pub struct StreamingExec {
    /// Host pid of the command.
    pub pid: u32,
    /// The agent's ends of the command's streams, as [`Request::ExecStream`] orders them.
    pub fds: Vec<OwnedFd>,
    /// The connection the exit comes on; dropping it kills the command's process group.
    pub connection: ExecConnection,
}

/// The open connection of a streaming exec.
#[derive(Debug)]
pub struct ExecConnection {
    stream: UnixStream,
    /// What was read past the `ExecStarted` line.
    pending: Vec<u8>,
}

impl ExecConnection {
    /// Waits for the command's exit code (128 + n when killed by signal n); an attach's end is
    /// 0.
    pub async fn exit(mut self) -> Result<i32, RuntimeError> {
        let mut buf = [0_u8; 256];
        while !self.pending.contains(&b'\n') {
            let n = self
                .stream
                .read(&mut buf)
                .await
                .map_err(|e| shim_err("reading the exec's exit", e))?;
            if n == 0 {
                return Err(RuntimeError::Shim(
                    "the shim closed the exec connection before the command exited".into(),
                ));
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
        let end = self.pending.iter().position(|&b| b == b'\n').unwrap_or(0);
        match serde_json::from_slice(&self.pending[..end]) {
            Ok(Response::ExecExited { exit_code }) => Ok(exit_code),
            Ok(Response::AttachEnded) => Ok(0),
            Ok(other) => Err(RuntimeError::Shim(format!("unexpected answer {other:?}"))),
            Err(e) => Err(shim_err("decoding the exec's exit", e)),
        }
    }
}

/// A handle on one pod's shim.
#[derive(Debug, Clone)]
pub struct ShimClient {
    socket: PathBuf,
}

fn shim_err(what: &str, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Shim(format!("{what}: {e}"))
}

impl ShimClient {
    /// Connects to the shim at `socket` (checking that it answers).
    pub async fn connect(socket: impl Into<PathBuf>) -> Result<Self, RuntimeError> {
        let client = ShimClient {
            socket: socket.into(),
        };
        drop(client.open().await?);
        Ok(client)
    }

    /// A handle on the shim at `socket` that was just seen answering (no check of its own).
    pub(crate) fn answering(socket: impl Into<PathBuf>) -> Self {
        ShimClient {
            socket: socket.into(),
        }
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn open(&self) -> Result<UnixStream, RuntimeError> {
        UnixStream::connect(&self.socket)
            .await
            .map_err(|e| shim_err(&format!("connecting to {}", self.socket.display()), e))
    }

    async fn send(&self, request: &Request) -> Result<BufReader<UnixStream>, RuntimeError> {
        let mut stream = self.open().await?;
        let mut line = serde_json::to_vec(request).map_err(|e| shim_err("encoding request", e))?;
        line.push(b'\n');
        stream
            .write_all(&line)
            .await
            .map_err(|e| shim_err("sending request", e))?;
        Ok(BufReader::new(stream))
    }

    /// Sends one request and reads its response.
    pub async fn request(&self, request: &Request) -> Result<Response, RuntimeError> {
        let mut reader = self.send(request).await?;
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .await
            .map_err(|e| shim_err("reading response", e))?;
        if n == 0 {
            return Err(RuntimeError::Shim("the shim closed the connection".into()));
        }
        serde_json::from_str(&line).map_err(|e| shim_err("decoding response", e))
    }

    /// Sends a request that expects `Ok`.
    pub async fn expect_ok(&self, request: &Request) -> Result<(), RuntimeError> {
        match self.request(request).await? {
            Response::Ok => Ok(()),
            Response::NotFound { instance } => Err(RuntimeError::NotFound(instance)),
            Response::Error { message } => Err(RuntimeError::Shim(message)),
            other => Err(RuntimeError::Shim(format!("unexpected answer {other:?}"))),
        }
    }

    /// Starts a streaming exec ([`Request::ExecStream`]) and receives the descriptors of its
    /// streams. `Err` when the shim refused (no such instance, the command cannot start).
    pub async fn exec_stream(&self, request: &Request) -> Result<StreamingExec, RuntimeError> {
        let mut stream = self.open().await?;
        let mut line = serde_json::to_vec(request).map_err(|e| shim_err("encoding request", e))?;
        line.push(b'\n');
        stream
            .write_all(&line)
            .await
            .map_err(|e| shim_err("sending request", e))?;
        let mut received = Vec::new();
        let mut fds = Vec::new();
        while !received.contains(&b'\n') {
            let n = stream
                .async_io(tokio::io::Interest::READABLE, || {
                    recv_with_fds(&stream, &mut received, &mut fds)
                })
                .await
                .map_err(|e| shim_err("reading response", e))?;
            if n == 0 {
                return Err(RuntimeError::Shim("the shim closed the connection".into()));
            }
        }
        let end = received.iter().position(|&b| b == b'\n').unwrap_or(0);
        let response = serde_json::from_slice(&received[..end])
            .map_err(|e| shim_err("decoding response", e))?;
        let pending = received[end + 1..].to_vec();
        match response {
            Response::ExecStarted { pid, fds: count } if count == fds.len() => Ok(StreamingExec {
                pid,
                fds,
                connection: ExecConnection { stream, pending },
            }),
            Response::ExecStarted { fds: count, .. } => Err(RuntimeError::Shim(format!(
                "expected {count} descriptors from the shim, got {}",
                fds.len()
            ))),
            Response::NotFound { instance } => Err(RuntimeError::NotFound(instance)),
            Response::Error { message } => Err(RuntimeError::Other(message)),
            other => Err(RuntimeError::Shim(format!("unexpected answer {other:?}"))),
        }
    }

    /// Every instance the shim knows, and the shim's pid.
    pub async fn state(&self) -> Result<(u32, Vec<super::protocol::InstanceState>), RuntimeError> {
        match self.request(&Request::State).await? {
            Response::State {
                shim_pid,
                instances,
            } => Ok((shim_pid, instances)),
            Response::Error { message } => Err(RuntimeError::Shim(message)),
            other => Err(RuntimeError::Shim(format!("unexpected answer {other:?}"))),
        }
    }

    /// Opens a subscription: exits not yet acknowledged first, then each new one. The
    /// receiver closes when the connection ends (the shim exited or was unreachable).
    pub async fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<ExitRecord>, RuntimeError> {
        let mut reader = self.send(&Request::Subscribe).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut line = String::new();
            loop {
                line.clear();
                // Hang up as soon as nobody listens, so the shim drops this subscriber too.
                tokio::select! {
                    read = reader.read_line(&mut line) => match read {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    },
                    () = tx.closed() => return,
                }
                match serde_json::from_str::<Event>(&line) {
                    Ok(Event::Exited(exit)) => {
                        if tx.send(exit).is_err() {
                            return;
                        }
                    }
                    // A newer shim's event this agent does not know: skip it.
                    Err(_) => {}
                }
            }
        });
        Ok(rx)
    }
}

/// One `recvmsg`: bytes onto `received`, passed descriptors (close-on-exec) onto `fds`.
fn recv_with_fds(
    stream: &UnixStream,
    received: &mut Vec<u8>,
    fds: &mut Vec<OwnedFd>,
) -> std::io::Result<usize> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    use std::mem::MaybeUninit;
    let mut buf = [0_u8; 1024];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_PASSED_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = recvmsg(
        stream,
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    )?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(passed) = message {
            fds.extend(passed);
        }
    }
    received.extend_from_slice(&buf[..msg.bytes]);
    Ok(msg.bytes)
}
