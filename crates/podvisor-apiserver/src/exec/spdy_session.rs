//! `pods/exec` and `pods/attach` over SPDY/3.1 (`v4.channel.k8s.io`): what kubectl before
//! 1.30 (Debian's 1.20) speaks, as the kubelet's streaming server serves it
//! (`remotecommand/httpstream.go`).
//!
//! The client opens one stream per channel, each named by its `streamType` header: `error`
//! always, `stdin`/`stdout`/`stderr` as the query asked, `resize` with a terminal. Once all
//! of them are there (within 30 s, else the connection is closed, as the kubelet does), the
//! command starts; stdin's end is the client's `FIN` on its stream; `resize` carries a series
//! of `{"Width":..,"Height":..}` objects. When the command exited and its output ended (or
//! the output grace expired), the final `Status` goes on the error stream as JSON (v4's
//! `Success`, `NonZeroExitCode` with the `ExitCode` cause, or an internal error worded as
//! the kubelet's, which the API server proxies as it is), every stream ends, and the
//! connection is closed. A client that goes away ends the session, which kills the command.

use std::sync::Arc;
use std::time::Duration;

use podvisor_runtime::{ExecReader, ExecRequest, ExecSession, TermSize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::{OUTPUT_GRACE, PodExec, exit_status, internal_error, success, term_size};
use crate::spdy::{self, Conn, FrameSink, Headers, InStream, Out};

/// The stream protocols served, preferred first (the kubelet negotiates the client's first
/// that it supports; kubectl offers v4 first).
pub(super) const PROTOCOLS: [&str; 1] = ["v4.channel.k8s.io"];

/// The kubelet's `streamCreationTimeout`.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a terminal session waits for the client's first size before it starts.
const FIRST_SIZE_WAIT: Duration = Duration::from_millis(300);

/// What one session runs.
pub(super) struct Target {
    pub(super) uid: String,
    pub(super) container: String,
    pub(super) request: ExecRequest,
    pub(super) backend: Arc<dyn PodExec>,
}

/// The streams of the session, by type.
#[derive(Default)]
struct Streams {
    error: Option<InStream>,
    stdin: Option<InStream>,
    stdout: Option<InStream>,
    stderr: Option<InStream>,
    resize: Option<InStream>,
}

impl Streams {
    fn slot(&mut self, kind: &str) -> Option<&mut Option<InStream>> {
        match kind {
            "error" => Some(&mut self.error),
            "stdin" => Some(&mut self.stdin),
            "stdout" => Some(&mut self.stdout),
            "stderr" => Some(&mut self.stderr),
            "resize" => Some(&mut self.resize),
            _ => None,
        }
    }

    /// Every stream the request asks for is there.
    fn complete(&self, request: &ExecRequest) -> bool {
        self.error.is_some()
            && (!request.stdin || self.stdin.is_some())
            && (!request.stdout || self.stdout.is_some())
            && (!request.stderr || self.stderr.is_some())
            && (!request.tty || self.resize.is_some())
    }
}

struct Collector {
    target: Option<Target>,
    streams: Streams,
    tasks: JoinSet<()>,
    started: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Sender<()>>,
}

fn stream_type(headers: &Headers) -> Option<&str> {
    headers
        .get("streamType")
        .filter(|t| matches!(*t, "error" | "stdin" | "stdout" | "stderr" | "resize"))
}

impl spdy::Handler for Collector {
    fn accept(&mut self, headers: &Headers) -> bool {
        stream_type(headers).is_some()
    }

    fn stream(&mut self, stream: InStream, conn: &Conn) {
        let kind = stream_type(&stream.headers).unwrap_or_default().to_owned();
        let Some(slot) = self.streams.slot(&kind) else {
            return;
        };
        if slot.is_some() {
            // A second stream of a type: the kubelet ignores it too.
            return;
        }
        *slot = Some(stream);
        let complete = self
            .target
            .as_ref()
            .is_some_and(|t| self.streams.complete(&t.request));
        if complete && let Some(target) = self.target.take() {
            let streams = std::mem::take(&mut self.streams);
            if let Some(started) = self.started.take() {
                let _ = started.send(());
            }
            let (conn, done) = (conn.clone(), self.done.take());
            self.tasks.spawn(async move {
                run(target, streams, conn).await;
                if let Some(done) = done {
                    let _ = done.send(());
                }
            });
        }
    }
}

/// Serves one session on an upgraded connection.
pub(super) async fn serve<R: AsyncRead + Unpin, S: FrameSink>(reader: R, sink: S, target: Target) {
    let (started_tx, started_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    let mut collector = Collector {
        target: Some(target),
        streams: Streams::default(),
        tasks: JoinSet::new(),
        started: Some(started_tx),
        done: Some(done_tx),
    };
    // The session ends once the command's status is queued, or when its streams did not all
    // come in time (the kubelet closes the connection then).
    let stop = async move {
        if let Ok(Ok(())) = tokio::time::timeout(STREAM_CREATION_TIMEOUT, started_rx).await {
            let _ = done_rx.await;
        }
    };
    spdy::serve(reader, sink, &mut collector, stop).await;
}

/// Runs the command on the session's streams and queues its final status.
async fn run(target: Target, streams: Streams, conn: Conn) {
    let Streams {
        error,
        stdin,
        stdout,
        stderr,
        resize,
    } = streams;
    let Some(error) = error else {
        return;
    };
    let mut request = target.request;
    let mut resize_rx = resize.map(|s| s.data);
    let mut sizes = Sizes::default();
    if request.tty
        && let Some(rx) = &mut resize_rx
        && let Ok(Some(bytes)) = tokio::time::timeout(FIRST_SIZE_WAIT, rx.recv()).await
    {
        // Start on a terminal of the client's size, not 0x0.
        request.size = sizes.feed(&bytes).last().copied();
    }
    let attach = request.attach;
    let started = target
        .backend
        .exec(&target.uid, &target.container, request)
        .await;
    let mut ends = Vec::new();
    let status = match started {
        Err(e) => match e {
            podvisor_runtime::ExecError::ContainerNotFound(_) => {
                internal_error(&format!("unable to upgrade connection: {e}"))
            }
            podvisor_runtime::ExecError::Runtime(e) => {
                internal_error(&format!("error executing command in container: {e}"))
            }
        },
        Ok(session) => {
            let ExecSession {
                stdin: command_stdin,
                stdout: command_stdout,
                stderr: command_stderr,
                resize: command_resize,
                exit,
            } = session;
            let mut tasks = JoinSet::new();
            if let (Some(mut writer), Some(stream)) = (command_stdin, stdin) {
                let mut rx = stream.data;
                tasks.spawn(async move {
                    while let Some(chunk) = rx.recv().await {
                        if writer.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                    let _ = writer.shutdown().await;
                });
            }
            if let (Some(set_size), Some(mut rx)) = (command_resize, resize_rx) {
                tasks.spawn(async move {
                    while let Some(chunk) = rx.recv().await {
                        for size in sizes.feed(&chunk) {
                            let _ = set_size(size);
                        }
                    }
                });
            }
            let mut outputs = JoinSet::new();
            for (reader, stream) in [(command_stdout, stdout), (command_stderr, stderr)] {
                if let Some(stream) = stream {
                    ends.push(stream.id);
                    if let Some(reader) = reader {
                        outputs.spawn(copy_out(reader, stream.id, conn.clone()));
                    }
                }
            }
            let code = exit.await;
            // The last bytes of the output, for a while (a background child may hold the
            // pipes open).
            let _ = tokio::time::timeout(OUTPUT_GRACE, async {
                while outputs.join_next().await.is_some() {}
            })
            .await;
            outputs.abort_all();
            tasks.abort_all();
            match code {
                Ok(_) if attach => success(),
                Err(e) if attach => internal_error(&format!("error attaching to container: {e}")),
                Ok(0) => success(),
                Ok(n) => exit_status(n),
                Err(e) => internal_error(&format!("error executing command in container: {e}")),
            }
        }
    };
    let bytes = serde_json::to_vec(&status).unwrap_or_default();
    conn.data(error.id, &bytes).await;
    for id in ends {
        conn.send(Out::Fin(id)).await;
    }
    conn.send(Out::Fin(error.id)).await;
}

/// Sends an output stream's bytes on stream `id` until it ends.
async fn copy_out(mut reader: ExecReader, id: u32, conn: Conn) {
    let mut buf = vec![0_u8; spdy::MAX_DATA];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if !conn.data(id, &buf[..n]).await {
                    return;
                }
            }
        }
    }
}

/// The terminal sizes on the resize stream: JSON objects one after another, split across
/// frames anywhere.
#[derive(Default)]
struct Sizes {
    buf: Vec<u8>,
}

impl Sizes {
    fn feed(&mut self, bytes: &[u8]) -> Vec<TermSize> {
        self.buf.extend_from_slice(bytes);
        let mut sizes = Vec::new();
        let mut consumed = 0;
        let mut items = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        loop {
            match items.next() {
                Some(Ok(value)) => {
                    consumed = items.byte_offset();
                    if let Some(size) = term_size(value.to_string().as_bytes()) {
                        sizes.push(size);
                    }
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(_)) => {
                    // Not JSON: drop what is there, as a decoder error ends the kubelet's loop.
                    consumed = self.buf.len();
                    break;
                }
                None => break,
            }
        }
        self.buf.drain(..consumed);
        sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_split_across_frames_are_decoded_in_order() {
        let mut sizes = Sizes::default();
        assert!(sizes.feed(br#"{"Width":80,"He"#).is_empty());
        let got = sizes.feed(br#"ight":24}{"Width":100,"Height":30}"#);
        assert_eq!(
            got,
            vec![
                TermSize {
                    width: 80,
                    height: 24
                },
                TermSize {
                    width: 100,
                    height: 30
                }
            ]
        );
        assert!(sizes.buf.is_empty());
    }
}
