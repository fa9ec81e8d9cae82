//! `pods/exec` and `pods/attach` over WebSockets (`v5.channel.k8s.io`, or `v4`): what
//! `kubectl exec`, `kubectl attach` and `kubectl run -i` use since 1.30/1.31.
//!
//! An attach is the same session on the container's own stdio (its spec's `stdin`, `tty`):
//! no command; it ends when the container exits, or when the input ends without `stdinOnce`,
//! always with `Success` (as the kubelet's streaming server answers a finished attach).
//!
//! The request is checked as the API server's `ExecLocation` does (pod, container, node) before
//! the upgrade, so those errors are `Status` answers kubectl prints as `Error from server`.
//! After the upgrade, the session runs on the node through the [`PodExec`] the server was given
//! (the node agent's pod worker, then the runtime), with the API server's stream translator's
//! behaviour: an empty message on the lowest output channel once connected; binary messages
//! whose first byte is the channel (0 stdin, 1 stdout, 2 stderr, 3 the final `Status`, 4 terminal
//! resizes as `{"Width":..,"Height":..}`, 255 closes a stream in v5: `[255, 0]` is stdin's
//! end-of-file); the `Status` on channel 3 (`Success`, or `NonZeroExitCode` with the exit code
//! as an `ExitCode` cause, or `InternalError` worded as the kubelet's failure reaches kubectl
//! through the translator); then a close frame, and the connection ends when the client
//! closes it. A client that goes away ends the session, which kills the command's process
//! group.

mod spdy_session;
pub(crate) mod ws;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use podvisor_runtime::{ExecError, ExecReader, ExecRequest, ExecSession, TermSize};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::db::{self, PODS};
use crate::pods::pod_of;
use crate::req::Req;
use crate::status::{ApiError, ApiResult};

/// Runs `kubectl exec` sessions on the node: `podvisor serve` gives the API server one that
/// reaches the pod's worker ([`crate::ApiState::with_exec`]).
pub trait PodExec: Send + Sync + 'static {
    /// Starts `request` in the running instance of `container` of the pod with this UID.
    fn exec(
        &self,
        pod_uid: &str,
        container: &str,
        request: ExecRequest,
    ) -> Pin<Box<dyn Future<Output = Result<ExecSession, ExecError>> + Send + 'static>>;

    /// Connects to `port` on the loopback of the pod with this UID, inside its network
    /// (`kubectl port-forward`). The error is the node's words for why it could not.
    fn port_forward(
        &self,
        pod_uid: &str,
        port: u16,
    ) -> Pin<Box<dyn Future<Output = Result<tokio::net::TcpStream, String>> + Send + 'static>> {
        let _ = (pod_uid, port);
        Box::pin(std::future::ready(Err(
            "port-forward is not supported by this node".to_owned(),
        )))
    }
}

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE_STREAM: u8 = 255;

/// The subprotocols served, preferred first.
const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// How long output is still forwarded after the command exited (a background child may hold
/// the pipes open).
const OUTPUT_GRACE: Duration = Duration::from_secs(2);
/// How long the server waits for the client to close after the final status.
const FINISH_TIMEOUT: Duration = Duration::from_secs(60);

/// The connection's pending upgrade (hyper's), taken from the request.
pub(crate) struct Upgrade(pub(crate) Option<OnUpgrade>);

impl<S: Send + Sync> FromRequestParts<S> for Upgrade {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Upgrade(parts.extensions.remove::<OnUpgrade>()))
    }
}

/// Go's `strconv.ParseBool` for the true side.
fn truthy(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// `PodExecOptions` from the query (`command` repeats).
fn options(uri: &Uri) -> ApiResult<(Option<String>, ExecRequest)> {
    let pairs: Vec<(String, String)> = serde_urlencoded_pairs(uri.query().unwrap_or(""))?;
    let mut container = None;
    let mut request = ExecRequest {
        attach: false,
        argv: Vec::new(),
        stdin: false,
        stdout: false,
        stderr: false,
        tty: false,
        size: None,
    };
    for (key, value) in pairs {
        match key.as_str() {
            "command" => request.argv.push(value),
            "container" => container = Some(value),
            "stdin" => request.stdin = truthy(&value),
            "stdout" => request.stdout = truthy(&value),
            "stderr" => request.stderr = truthy(&value),
            "tty" => request.tty = truthy(&value),
            _ => {}
        }
    }
    // A terminal has one output stream.
    if request.tty {
        request.stderr = false;
    }
    Ok((container, request))
}

fn serde_urlencoded_pairs(query: &str) -> ApiResult<Vec<(String, String)>> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(
        &format!("/?{query}")
            .parse::<Uri>()
            .map_err(|e| ApiError::bad_request(e.to_string()))?,
    )
    .map(|q| q.0)
    .map_err(|e| ApiError::bad_request(e.body_text()))
}

/// The subprotocol to answer with: the first the client offers that is served.
fn negotiate(headers: &HeaderMap) -> Option<&'static str> {
    first_supported(
        &header_tokens(headers, header::SEC_WEBSOCKET_PROTOCOL),
        &PROTOCOLS,
    )
}

/// The comma-separated tokens of every `name` header, trimmed, empty ones left out.
pub(crate) fn header_tokens(headers: &HeaderMap, name: header::HeaderName) -> Vec<&str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

pub(crate) fn header_has(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    header_tokens(headers, name)
        .iter()
        .any(|t| t.eq_ignore_ascii_case(token))
}

/// The first of the client's `offered` protocols that is `supported`.
pub(crate) fn first_supported(
    offered: &[&str],
    supported: &[&'static str],
) -> Option<&'static str> {
    offered
        .iter()
        .find_map(|p| supported.iter().find(|s| *s == p).copied())
}

/// The header a SPDY upgrade negotiates its protocol in.
const STREAM_PROTOCOL: &str = "x-stream-protocol-version";

/// `httpstream.Handshake` of a SPDY/3.1 upgrade (exec, attach, port-forward): the first
/// protocol the client offers in `X-Stream-Protocol-Version` that is `supported`, else the
/// API server's refusal.
pub(crate) fn spdy_handshake(
    headers: &HeaderMap,
    supported: &[&'static str],
) -> ApiResult<&'static str> {
    let offered = header_tokens(headers, header::HeaderName::from_static(STREAM_PROTOCOL));
    if offered.is_empty() {
        return Err(ApiError::bad_request(
            "unable to upgrade: X-Stream-Protocol-Version is required",
        ));
    }
    first_supported(&offered, supported).ok_or_else(|| {
        ApiError::forbidden_message(format!(
            "unable to upgrade: unable to negotiate protocol: client supports [{}], server \
             accepts [{}]",
            offered.join(" "),
            supported.join(" ")
        ))
    })
}

/// The `101 Switching Protocols` that accepts a SPDY/3.1 upgrade speaking `protocol`.
pub(crate) fn spdy_switching_protocols(protocol: &'static str) -> ApiResult<Response> {
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "SPDY/3.1")
        .header(STREAM_PROTOCOL, protocol)
        .body(Body::empty())
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// `POST`/`GET …/pods/{name}/exec`, or `…/attach` (`attach`).
pub(crate) fn exec(
    req: &Req,
    ns: &str,
    name: &str,
    uri: &Uri,
    upgrade: Upgrade,
    attach: bool,
) -> ApiResult<Response> {
    let pod = pod_of(&db::get(req.state.store(), PODS, ns, name)?)?;
    let (container, mut request) = options(uri)?;
    if attach {
        request.attach = true;
        request.argv.clear();
    }
    let container = crate::logs::container_name(&pod, container.as_deref())?;
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    if !attach && request.argv.is_empty() {
        return Err(ApiError::bad_request(
            "you must specify at least one command for the container",
        ));
    }
    let headers = &req.headers;
    let websocket = header_has(headers, header::UPGRADE, "websocket")
        && header_has(headers, header::CONNECTION, "upgrade");
    let spdy = header_has(headers, header::UPGRADE, "SPDY/3.1")
        && header_has(headers, header::CONNECTION, "upgrade");
    if spdy && !websocket {
        return spdy_upgrade(req, &pod, container, request, upgrade);
    }
    if !websocket {
        return Err(ApiError::bad_request(
            if headers.contains_key(header::UPGRADE) {
                "unable to upgrade connection: streaming is served over WebSocket \
                 (v5.channel.k8s.io, v4.channel.k8s.io) or SPDY/3.1 (v4.channel.k8s.io)"
            } else {
                "Upgrade request required"
            },
        ));
    }
    let key = ws::handshake_key(headers)?;
    let protocol = negotiate(headers).ok_or_else(|| {
        ApiError::bad_request(format!(
            "unable to upgrade: unable to match protocol: the client offers none of {}",
            PROTOCOLS.join(", ")
        ))
    })?;
    let Upgrade(Some(on_upgrade)) = upgrade else {
        return Err(ApiError::internal("the connection cannot be upgraded"));
    };
    let Some(backend) = req.state.inner.exec.clone() else {
        return Err(ApiError::bad_request(
            "unable to upgrade connection: this API server runs no pods",
        ));
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let v5 = protocol == PROTOCOLS[0];
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let session = Session {
            uid,
            container,
            request,
            v5,
        };
        session.run(TokioIo::new(upgraded), &*backend).await;
    });
    ws::switching_protocols(key, Some(protocol))
}

/// The SPDY/3.1 upgrade of an exec or attach (`httpstream.Handshake` for the protocol, then
/// the kubelet's streaming session, [`spdy_session`]).
fn spdy_upgrade(
    req: &Req,
    pod: &k8s_openapi::api::core::v1::Pod,
    container: String,
    request: ExecRequest,
    upgrade: Upgrade,
) -> ApiResult<Response> {
    let protocol = spdy_handshake(&req.headers, &spdy_session::PROTOCOLS)?;
    let Upgrade(Some(on_upgrade)) = upgrade else {
        return Err(ApiError::internal("the connection cannot be upgraded"));
    };
    let Some(backend) = req.state.inner.exec.clone() else {
        return Err(ApiError::bad_request(
            "unable to upgrade connection: this API server runs no pods",
        ));
    };
    let target = spdy_session::Target {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        container,
        request,
        backend,
    };
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let (reader, writer) = tokio::io::split(TokioIo::new(upgraded));
        spdy_session::serve(reader, crate::spdy::RawSink(writer), target).await;
    });
    spdy_switching_protocols(protocol)
}

/// The final status for a successful command.
fn success() -> Value {
    json!({"metadata": {}, "status": "Success"})
}

/// `NonZeroExitCode` with the code as the `ExitCode` cause (what makes kubectl exit with it).
fn exit_status(code: i32) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: command terminated with exit code {code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// `apierrors.NewInternalError(err)`.
fn internal_error(err: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("Internal error occurred: {err}"),
        "reason": "InternalError",
        "details": {"causes": [{"message": err}]},
        "code": 500,
    })
}

/// The status for a session that did not start. The kubelet refuses the upgrade for a
/// container that does not run; it reports a command that cannot start as an internal error
/// on its error stream, which the API server's translator wraps once more.
fn start_failure(error: &ExecError) -> Value {
    match error {
        ExecError::ContainerNotFound(_) => {
            internal_error(&format!("unable to upgrade connection: {error}"))
        }
        ExecError::Runtime(e) => internal_error(&format!(
            "Internal error occurred: error executing command in container: {e}"
        )),
    }
}

struct Session {
    uid: String,
    container: String,
    request: ExecRequest,
    v5: bool,
}

/// What the client sent, for the session's writer.
enum FromClient {
    Ping(Vec<u8>),
}

impl Session {
    async fn run<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
        self,
        io: S,
        backend: &dyn PodExec,
    ) {
        let (mut write, mut reader) = ws::server(io).await;
        let first = if self.request.stdout {
            STDOUT
        } else if self.request.stderr {
            STDERR
        } else {
            ERROR
        };
        if write.write_channel(first, &[]).await.is_err() {
            return;
        }
        let mut request = self.request.clone();
        let mut early = Early::default();
        if request.tty {
            // kubectl sends the terminal's size as soon as the stream is up: start the command
            // on a terminal of that size, not 0x0 (a command asking at once would read it).
            match first_size(&mut reader, &mut early).await {
                Some(size) => request.size = size,
                None => return,
            }
        }
        let started = backend.exec(&self.uid, &self.container, request).await;
        let status = match started {
            Err(e) => start_failure(&e),
            Ok(session) => match self.pump(session, early, &mut reader, &mut write).await {
                Some(status) => status,
                // The client went away: the session is dropped (its command killed).
                None => return,
            },
        };
        finish(&mut reader, &mut write, &status).await;
    }

    /// Forwards the streams until the command exited and its output ended (or the grace
    /// expired); the final status, or `None` when the client went away.
    async fn pump<S>(
        &self,
        session: ExecSession,
        early: Early,
        reader: &mut ws::MessageReader<S>,
        write: &mut ws::MessageWriter<S>,
    ) -> Option<Value>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let ExecSession {
            stdin,
            stdout,
            stderr,
            resize,
            mut exit,
        } = session;
        // Stdin is written by a task of its own: a command blocked on a full stdout pipe must
        // still have its output read while the client's input waits.
        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(16);
        let stdin_task = stdin.map(|w| tokio::spawn(write_stdin(w, stdin_rx)));
        let mut stdin_tx = stdin_task.as_ref().map(|_| stdin_tx);
        // What came before the command started: its input first, in order.
        for bytes in early.stdin {
            if let Some(tx) = &stdin_tx
                && tx.send(bytes).await.is_err()
            {
                stdin_tx = None;
            }
        }
        if early.stdin_closed {
            stdin_tx = None;
        }
        let (client_tx, mut client_rx) = mpsc::unbounded_channel::<FromClient>();
        let mut outputs = [stdout, stderr];
        let mut code: Option<Result<i32, String>> = None;
        let grace = tokio::time::sleep(Duration::from_secs(86_400 * 365));
        tokio::pin!(grace);
        let reading = async {
            loop {
                match reader.next().await {
                    Ok(Some(ws::Message::Data(data))) => match data.split_first() {
                        Some((&STDIN, bytes)) => {
                            if let Some(tx) = &stdin_tx
                                && tx.send(bytes.to_vec()).await.is_err()
                            {
                                stdin_tx = None;
                            }
                        }
                        Some((&RESIZE, json)) => {
                            if let (Some(resize), Some(size)) = (&resize, term_size(json)) {
                                let _ = resize(size);
                            }
                        }
                        Some((&CLOSE_STREAM, [STDIN, ..])) if self.v5 => stdin_tx = None,
                        _ => {}
                    },
                    Ok(Some(ws::Message::Ping(payload))) => {
                        let _ = client_tx.send(FromClient::Ping(payload));
                    }
                    Ok(Some(ws::Message::Pong)) => {}
                    Ok(Some(ws::Message::Close) | None) | Err(_) => return,
                }
            }
        };
        tokio::pin!(reading);
        let mut client_gone = false;
        let mut buffers = [vec![0_u8; 32 * 1024], vec![0_u8; 32 * 1024]];
        loop {
            let done = outputs.iter().all(Option::is_none);
            if code.is_some() && done {
                break;
            }
            let [out, err] = &mut outputs;
            let [out_buf, err_buf] = &mut buffers;
            tokio::select! {
                () = &mut reading, if !client_gone => client_gone = true,
                Some(FromClient::Ping(payload)) = client_rx.recv() => {
                    if write.write_pong(&payload).await.is_err() {
                        client_gone = true;
                    }
                }
                n = read_some(out, out_buf) => {
                    if !forward(write, STDOUT, n, out, out_buf).await {
                        client_gone = true;
                    }
                }
                n = read_some(err, err_buf) => {
                    if !forward(write, STDERR, n, err, err_buf).await {
                        client_gone = true;
                    }
                }
                result = &mut exit, if code.is_none() => {
                    code = Some(result.map_err(|e| e.to_string()));
                    grace.as_mut().reset(tokio::time::Instant::now() + OUTPUT_GRACE);
                }
                () = &mut grace => break,
            }
            if client_gone {
                if let Some(task) = stdin_task {
                    task.abort();
                }
                return None;
            }
        }
        if let Some(task) = stdin_task {
            task.abort();
        }
        Some(match code {
            Some(Ok(_)) if self.request.attach => success(),
            Some(Err(e)) if self.request.attach => {
                internal_error(&format!("error attaching to container: {e}"))
            }
            Some(Ok(0)) => success(),
            Some(Ok(n)) => exit_status(n),
            Some(Err(e)) => internal_error(&format!(
                "Internal error occurred: error executing command in container: {e}"
            )),
            None => internal_error("the command's exit is unknown"),
        })
    }
}

/// Reads from an output stream, or waits forever once it has ended.
async fn read_some(stream: &mut Option<ExecReader>, buf: &mut [u8]) -> std::io::Result<usize> {
    match stream {
        Some(s) => s.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Sends what was read on `channel`; closes the stream at its end. False if the client is
/// gone.
async fn forward<S: AsyncRead + AsyncWrite + Unpin>(
    write: &mut ws::MessageWriter<S>,
    channel: u8,
    read: std::io::Result<usize>,
    stream: &mut Option<ExecReader>,
    buf: &[u8],
) -> bool {
    match read {
        Ok(n) if n > 0 => write.write_channel(channel, &buf[..n]).await.is_ok(),
        _ => {
            *stream = None;
            true
        }
    }
}

async fn write_stdin(mut stdin: podvisor_runtime::ExecWriter, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(chunk) = rx.recv().await {
        if stdin.write_all(&chunk).await.is_err() {
            // The command closed its stdin: what the client still sends is dropped.
            while rx.recv().await.is_some() {}
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

/// What a TTY session's client sent before its command started.
#[derive(Default)]
struct Early {
    stdin: Vec<Vec<u8>>,
    stdin_closed: bool,
}

/// How long a TTY session waits for the client's terminal size before starting the command
/// on a terminal of unknown size.
const FIRST_SIZE_WAIT: Duration = Duration::from_millis(300);

/// Reads the client's frames until its first resize (channel 4), for at most
/// [`FIRST_SIZE_WAIT`]; input that comes first is kept in `early`. `Some(None)`: no size came
/// in time; `None`: the client went away.
async fn first_size<S>(
    reader: &mut ws::MessageReader<S>,
    early: &mut Early,
) -> Option<Option<TermSize>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let deadline = tokio::time::Instant::now() + FIRST_SIZE_WAIT;
    loop {
        let next = tokio::time::timeout_at(deadline, reader.next()).await;
        let Ok(message) = next else {
            return Some(None);
        };
        match message {
            Ok(Some(ws::Message::Data(data))) => match data.split_first() {
                Some((&RESIZE, json)) => {
                    if let Some(size) = term_size(json) {
                        return Some(Some(size));
                    }
                }
                Some((&STDIN, bytes)) => early.stdin.push(bytes.to_vec()),
                Some((&CLOSE_STREAM, [STDIN, ..])) => early.stdin_closed = true,
                _ => {}
            },
            Ok(Some(ws::Message::Ping(_) | ws::Message::Pong)) => {}
            Ok(Some(ws::Message::Close) | None) | Err(_) => return None,
        }
    }
}

/// `remotecommand.TerminalSize` (`{"Width":80,"Height":24}`).
fn term_size(json: &[u8]) -> Option<TermSize> {
    let v: Value = serde_json::from_slice(json).ok()?;
    Some(TermSize {
        width: u16::try_from(v.get("Width")?.as_u64()?).ok()?,
        height: u16::try_from(v.get("Height")?.as_u64()?).ok()?,
    })
}

/// Writes the final status and a close frame, then waits (bounded) for the client to close:
/// closing at once could reset the connection before the client read everything.
async fn finish<S>(
    reader: &mut ws::MessageReader<S>,
    write: &mut ws::MessageWriter<S>,
    status: &Value,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let bytes = serde_json::to_vec(status).unwrap_or_default();
    if write.write_channel(ERROR, &bytes).await.is_err() {
        return;
    }
    if write.write_close().await.is_err() {
        return;
    }
    let wait = async {
        loop {
            match reader.next().await {
                Ok(Some(ws::Message::Close) | None) | Err(_) => return,
                Ok(Some(_)) => {}
            }
        }
    };
    let _ = tokio::time::timeout(FINISH_TIMEOUT, wait).await;
    write.shutdown().await;
}

/// Shared handle on a [`PodExec`].
pub(crate) type ExecBackend = Arc<dyn PodExec>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_repeat_command_and_drop_stderr_with_a_tty() {
        let uri: Uri = "/x?command=sh&command=-c&command=echo%20a&container=c&stdin=true&stdout=true&stderr=true&tty=true"
            .parse()
            .unwrap();
        let (container, request) = options(&uri).unwrap();
        assert_eq!(container.as_deref(), Some("c"));
        assert_eq!(request.argv, ["sh", "-c", "echo a"]);
        assert!(request.stdin && request.stdout && request.tty && !request.stderr);
    }

    #[test]
    fn exit_status_carries_the_code_as_kubectl_reads_it() {
        let s = exit_status(3);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(
            s["details"]["causes"][0],
            json!({"reason": "ExitCode", "message": "3"})
        );
        assert_eq!(
            start_failure(&ExecError::ContainerNotFound("c".into()))["message"],
            "Internal error occurred: unable to upgrade connection: container not found (\"c\")"
        );
    }

    #[test]
    fn term_size_decodes_go_field_names() {
        assert_eq!(
            term_size(br#"{"Width":100,"Height":30}"#),
            Some(TermSize {
                width: 100,
                height: 30
            })
        );
    }
}
