//! `pods/portforward`: `kubectl port-forward` (and client-go's port-forwarder) to a pod's
//! ports, as the API server and the kubelet's streaming server serve it together.
//!
//! Two transports carry the same SPDY/3.1 session ([`crate::spdy`]):
//! - a WebSocket whose subprotocol is `SPDY/3.1+portforward.k8s.io`, its binary messages the
//!   SPDY byte stream (kubectl 1.31+, the API server's `PortForwardWebsockets` tunnel);
//! - the connection itself, upgraded with `Upgrade: SPDY/3.1` and `X-Stream-Protocol-Version:
//!   portforward.k8s.io` (kubectl before 1.31, and newer ones when the WebSocket is refused).
//!
//! In the session (the kubelet's `portforward/httpstream.go`), each forwarded connection is a
//! pair of streams with the same `requestID` header: `streamType: error` and `streamType:
//! data`, each with a `port`. A stream without a valid port or type is reset; once both
//! streams of a request have arrived (within 30 s), the node connects to `localhost:<port>`
//! inside the pod's network namespace (the host's for a pod on the host network) and the
//! data stream carries the bytes both ways. A connection that fails is reported as text on
//! the error stream (`error forwarding port 80 to pod web_default, uid ...: failed to
//! connect ...`), which kubectl prints as `an error occurred forwarding 8080 -> 80: ...`.
//! When the pod's side ends its output, the data stream and then the error stream end
//! (`FIN`); the client's end of its input half-closes the pod's connection. The session's end
//! closes every connection it made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, Uri, header};
use axum::response::Response;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::PodExec;
use crate::db::{self, PODS};
use crate::exec::{
    Upgrade, first_supported, header_has, header_tokens, spdy_handshake, spdy_switching_protocols,
    ws,
};
use crate::pods::pod_of;
use crate::req::Req;
use crate::spdy::{self, Conn, FrameSink, Headers, InStream, Out};
use crate::status::{ApiError, ApiResult};

/// The stream protocol served (`portforward.PortForwardProtocolV1Name`).
const PROTOCOL: &str = "portforward.k8s.io";
/// The WebSocket subprotocol of the SPDY tunnel (`WebsocketsSPDYTunnelingPrefix` + it).
const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The kubelet's `streamCreationTimeout`: how long a request waits for its other stream.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// `GET`/`POST …/pods/{name}/portforward`.
pub(crate) fn portforward(
    req: &Req,
    ns: &str,
    name: &str,
    uri: &Uri,
    upgrade: Upgrade,
) -> ApiResult<Response> {
    let pod = pod_of(&db::get(req.state.store(), PODS, ns, name)?)?;
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
    let headers = &req.headers;
    let websocket = header_has(headers, header::UPGRADE, "websocket")
        && header_has(headers, header::CONNECTION, "upgrade");
    let spdy = header_has(headers, header::UPGRADE, "SPDY/3.1")
        && header_has(headers, header::CONNECTION, "upgrade");
    if !websocket && !spdy {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    let Some(backend) = req.state.inner.exec.clone() else {
        return Err(ApiError::bad_request(
            "unable to upgrade connection: this API server runs no pods",
        ));
    };
    let target = Arc::new(Target {
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        pod: format!("{name}_{ns}"),
        backend,
    });
    let Upgrade(Some(on_upgrade)) = upgrade else {
        return Err(ApiError::internal("the connection cannot be upgraded"));
    };
    if websocket {
        let key = ws::handshake_key(headers)?;
        if !header_tokens(headers, header::SEC_WEBSOCKET_PROTOCOL).contains(&TUNNEL_PROTOCOL) {
            return by_channels(headers, uri, key, target, on_upgrade);
        }
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            tunnel(TokioIo::new(upgraded), target).await;
        });
        return ws::switching_protocols(key, Some(TUNNEL_PROTOCOL));
    }
    spdy_handshake(headers, &[PROTOCOL])?;
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let (reader, writer) = tokio::io::split(TokioIo::new(upgraded));
        session(reader, spdy::RawSink(writer), target).await;
    });
    spdy_switching_protocols(PROTOCOL)
}

/// The WebSocket subprotocols of port-forwarding by channels (the kubelet's; binary).
const CHANNEL_PROTOCOLS: [&str; 1] = ["v4.channel.k8s.io"];

/// Port-forwarding by channels over a WebSocket (the kubelet's `handleWebSocketStreams`, what
/// the Python client's `portforward` speaks): the ports come in the query (`ports`, comma
/// lists allowed), each port `i` has a data channel `2i` and an error channel `2i + 1`, each
/// channel's first message is its port as two little-endian bytes, and each port is one
/// connection for the session's life. The WebSocket closes when every port's connection has
/// ended.
fn by_channels(
    headers: &HeaderMap,
    uri: &Uri,
    key: &str,
    target: Arc<Target>,
    on_upgrade: hyper::upgrade::OnUpgrade,
) -> ApiResult<Response> {
    let mut ports = Vec::new();
    let query = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    for (key, value) in query.0 {
        if key != "ports" && key != "port" {
            continue;
        }
        for p in value.split(',') {
            let port = p.trim().parse::<u16>().map_err(|e| {
                ApiError::bad_request(format!("unable to parse {value:?} as a port: {e}"))
            })?;
            if port == 0 {
                return Err(ApiError::bad_request(format!("port {value:?} must be > 0")));
            }
            ports.push(port);
        }
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request(
            "query parameter \"ports\" is required to forward ports over a WebSocket by \
             channels (kubectl 1.31+ tunnels SPDY instead: SPDY/3.1+portforward.k8s.io)",
        ));
    }
    // Channel numbers are one byte.
    if ports.len() > 128 {
        return Err(ApiError::bad_request("at most 128 ports per connection"));
    }
    let offered = header_tokens(headers, header::SEC_WEBSOCKET_PROTOCOL);
    let protocol = first_supported(&offered, &CHANNEL_PROTOCOLS);
    if protocol.is_none() && !offered.is_empty() {
        return Err(ApiError::bad_request(format!(
            "unable to upgrade: unable to match protocol: the client offers [{}], port-forwarding \
             serves {TUNNEL_PROTOCOL} and {}",
            offered.join(" "),
            CHANNEL_PROTOCOLS.join(" ")
        )));
    }
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        channels(TokioIo::new(upgraded), target, ports).await;
    });
    ws::switching_protocols(key, protocol)
}

/// The session of [`by_channels`].
async fn channels<S>(io: S, target: Arc<Target>, ports: Vec<u16>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut writer, mut reader) = ws::server(io).await;
    for (i, port) in ports.iter().enumerate() {
        for channel in [2 * i, 2 * i + 1] {
            if writer
                .write_channel(channel as u8, &port.to_le_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    }
    let (out_tx, mut out_rx) = mpsc::channel::<(u8, Vec<u8>)>(64);
    let mut inputs = Vec::with_capacity(ports.len());
    let mut tasks = JoinSet::new();
    for (i, port) in ports.iter().enumerate() {
        let (tx, rx) = mpsc::channel::<Vec<u8>>(64);
        inputs.push(Some(tx));
        tasks.spawn(forward_channel(
            Arc::clone(&target),
            *port,
            i as u8,
            rx,
            out_tx.clone(),
        ));
    }
    drop(out_tx);
    let mut ended = false;
    loop {
        tokio::select! {
            message = reader.next() => match message {
                Ok(Some(ws::Message::Data(data))) => {
                    let Some((&channel, bytes)) = data.split_first() else {
                        continue;
                    };
                    let index = usize::from(channel / 2);
                    if channel % 2 == 0
                        && let Some(slot) = inputs.get_mut(index)
                        && let Some(tx) = slot
                        && tx.send(bytes.to_vec()).await.is_err()
                    {
                        *slot = None;
                    }
                }
                Ok(Some(ws::Message::Ping(payload))) => {
                    if writer.write_pong(&payload).await.is_err() {
                        break;
                    }
                }
                Ok(Some(ws::Message::Pong)) => {}
                Ok(Some(ws::Message::Close) | None) | Err(_) => break,
            },
            out = out_rx.recv() => match out {
                Some((channel, data)) => {
                    if writer.write_channel(channel, &data).await.is_err() {
                        break;
                    }
                }
                None => {
                    ended = true;
                    break;
                }
            },
        }
    }
    if ended {
        // Every port's connection has ended: close, as the kubelet's `conn.Close()`.
        let _ = writer.write_close().await;
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(message)) = reader.next().await {
                if message == ws::Message::Close {
                    break;
                }
            }
        })
        .await;
    }
    writer.shutdown().await;
    // Dropping the tasks closes every connection to the pod.
}

/// One port of a [`channels`] session: its connection, both ways.
async fn forward_channel(
    target: Arc<Target>,
    port: u16,
    index: u8,
    input: mpsc::Receiver<Vec<u8>>,
    out: mpsc::Sender<(u8, Vec<u8>)>,
) {
    let (data, error) = (2 * index, 2 * index + 1);
    let tcp = match target.backend.port_forward(&target.uid, port).await {
        Ok(tcp) => tcp,
        Err(e) => {
            let message = target.forward_error(port, &e);
            let _ = out.send((error, message.into_bytes())).await;
            return;
        }
    };
    pipe(tcp, input, |bytes| {
        let out = out.clone();
        async move { out.send((data, bytes)).await.is_ok() }
    })
    .await;
}

/// One forwarded connection's bytes both ways: `input` (the client's) to the pod, from a task
/// of its own, with the client's end of input as a half-close (the pod may still answer); the
/// pod's output through `send` (false: the client is gone) until the pod ends it.
async fn pipe<F, Fut>(tcp: tokio::net::TcpStream, mut input: mpsc::Receiver<Vec<u8>>, send: F)
where
    F: Fn(Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let (mut from_pod, mut to_pod) = tcp.into_split();
    let upstream = tokio::spawn(async move {
        while let Some(chunk) = input.recv().await {
            if to_pod.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to_pod.shutdown().await;
    });
    let mut buf = vec![0_u8; spdy::MAX_DATA];
    loop {
        match from_pod.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if !send(buf[..n].to_vec()).await {
                    break;
                }
            }
        }
    }
    upstream.abort();
}

/// The pod a session forwards to.
struct Target {
    uid: String,
    /// `<name>_<namespace>`, as the kubelet names a pod in its errors.
    pod: String,
    backend: Arc<dyn PodExec>,
}

impl Target {
    /// The kubelet's words for a port it could not forward, as the error stream carries them.
    fn forward_error(&self, port: u16, error: &str) -> String {
        format!(
            "error forwarding port {port} to pod {}, uid {}: {error}",
            self.pod, self.uid
        )
    }
}

/// The SPDY session inside a WebSocket: binary messages in are the byte stream, each frame
/// out is one binary message (as client-go's `TunnelingConnection` writes and reads them).
async fn tunnel<S>(io: S, target: Arc<Target>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (writer, mut reader) = ws::server(io).await;
    let (pipe_out, mut pipe_in) = tokio::io::duplex(256 * 1024);
    let pump = tokio::spawn(async move {
        while let Ok(Some(message)) = reader.next().await {
            match message {
                ws::Message::Data(data) => {
                    if pipe_in.write_all(&data).await.is_err() {
                        break;
                    }
                }
                ws::Message::Close => break,
                ws::Message::Ping(_) | ws::Message::Pong => {}
            }
        }
    });
    session(pipe_out, WsSink(writer), target).await;
    pump.abort();
}

/// Frames out as WebSocket binary messages.
struct WsSink<S>(ws::MessageWriter<S>);

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> FrameSink for WsSink<S> {
    async fn send(&mut self, frame: Vec<u8>) -> std::io::Result<()> {
        self.0.write_binary(frame).await
    }
}

async fn session<R: AsyncRead + Unpin, S: FrameSink>(reader: R, sink: S, target: Arc<Target>) {
    let mut handler = Forwarder {
        target,
        pending: Arc::new(Mutex::new(HashMap::new())),
        tasks: JoinSet::new(),
    };
    spdy::serve(reader, sink, &mut handler, std::future::pending()).await;
    // Dropping the handler aborts its tasks: every connection to the pod is closed.
}

/// The streams of one forwarded connection, as they arrive.
#[derive(Default)]
struct Pair {
    error: Option<InStream>,
    data: Option<InStream>,
}

/// Pairs streams by request and forwards each complete pair.
struct Forwarder {
    target: Arc<Target>,
    pending: Arc<Mutex<HashMap<String, Pair>>>,
    tasks: JoinSet<()>,
}

fn stream_type(headers: &Headers) -> Option<&str> {
    headers
        .get("streamType")
        .filter(|t| matches!(*t, "error" | "data"))
}

fn port(headers: &Headers) -> Option<u16> {
    headers
        .get("port")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p > 0)
}

impl spdy::Handler for Forwarder {
    fn accept(&mut self, headers: &Headers) -> bool {
        port(headers).is_some() && stream_type(headers).is_some()
    }

    fn stream(&mut self, stream: InStream, conn: &Conn) {
        // Reap the tasks already done.
        while self.tasks.try_join_next().is_some() {}
        let kind = stream_type(&stream.headers).unwrap_or_default().to_owned();
        // Old clients send no request id: the kubelet derives one from the stream ids.
        let request = match stream.headers.get("requestID") {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ if kind == "error" => stream.id.to_string(),
            _ => stream.id.saturating_sub(2).to_string(),
        };
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let created = !pending.contains_key(&request);
        let pair = pending.entry(request.clone()).or_default();
        if created {
            let (pending, conn, request) =
                (Arc::clone(&self.pending), conn.clone(), request.clone());
            self.tasks.spawn(async move {
                tokio::time::sleep(STREAM_CREATION_TIMEOUT).await;
                let pair = pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&request);
                if let Some(Pair {
                    error: Some(error), ..
                }) = pair
                {
                    let message =
                        format!("(conn=spdy, request={request}) timed out waiting for streams");
                    conn.data(error.id, message.as_bytes()).await;
                    conn.send(Out::Fin(error.id)).await;
                }
            });
        }
        let slot = if kind == "error" {
            &mut pair.error
        } else {
            &mut pair.data
        };
        if slot.is_some() {
            if let Some(error) = &pair.error {
                let message = format!(
                    "error processing stream for request {request}: {kind} stream already assigned"
                );
                let (conn, id) = (conn.clone(), error.id);
                self.tasks.spawn(async move {
                    conn.data(id, message.as_bytes()).await;
                });
            }
            return;
        }
        *slot = Some(stream);
        if pair.error.is_some() && pair.data.is_some() {
            let Some(Pair {
                error: Some(error),
                data: Some(data),
            }) = pending.remove(&request)
            else {
                return;
            };
            let (target, conn) = (Arc::clone(&self.target), conn.clone());
            self.tasks.spawn(forward(target, conn, data, error));
        }
    }
}

/// One forwarded connection: the node's connection to the pod's port, both ways.
async fn forward(target: Arc<Target>, conn: Conn, data: InStream, error: InStream) {
    let port = port(&data.headers).unwrap_or_default();
    let (data_id, error_id) = (data.id, error.id);
    // The client does not write on the error stream (it ends its side at once).
    drop(error);
    match target.backend.port_forward(&target.uid, port).await {
        Err(e) => {
            let message = target.forward_error(port, &e);
            conn.data(error_id, message.as_bytes()).await;
        }
        Ok(tcp) => {
            pipe(tcp, data.data, |bytes| {
                let conn = conn.clone();
                async move { conn.data(data_id, &bytes).await }
            })
            .await;
        }
    }
    conn.send(Out::Fin(data_id)).await;
    conn.send(Out::Fin(error_id)).await;
}
