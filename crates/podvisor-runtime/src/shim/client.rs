//! The agent's side of the shim protocol (tokio): one connection per request, plus a
//! long-lived `Subscribe` connection that feeds exits into a channel.

use super::protocol::{Event, ExitRecord, Request, Response};
use crate::RuntimeError;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

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
