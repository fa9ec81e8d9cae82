//! A one-request-per-connection HTTP/1.1 GET client with the behaviour of the Go
//! `http.Client` the kubelet uses for HTTP probes and hooks: Go's header canonicalisation and
//! ordering, `Host` override, optional `Connection: close`, TLS without certificate
//! verification, redirects followed only to the same host name (at most 10 requests), one
//! deadline over the whole exchange, and Go's error texts.
//!
//! Every connection is owned by the call that opened it and is closed when the call returns,
//! so nothing is pooled or left half-open.

use super::gofmt;
use super::net::{self, DialError, Trace, Traced};
use super::url::ProbeUrl;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tokio_rustls::rustls;

/// Go's message when `http.Client.Timeout` expires before the response headers arrive.
const TIMEOUT_AWAITING_HEADERS: &str =
    "context deadline exceeded (Client.Timeout exceeded while awaiting headers)";
/// Go's message when it expires while the body is being read.
const TIMEOUT_READING_BODY: &str =
    "context deadline exceeded (Client.Timeout or context cancellation while reading body)";
/// Go's `http.Client` stops after 10 requests.
const MAX_REQUESTS: usize = 10;

/// A Go `http.Header`: canonical keys, sorted when written, repeatable values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GoHeader(BTreeMap<String, Vec<String>>);

impl GoHeader {
    /// `Header.Add`.
    pub(crate) fn add(&mut self, key: &str, value: &str) {
        self.0
            .entry(canonical_key(key))
            .or_default()
            .push(value.to_string());
    }

    /// `Header.Set`.
    pub(crate) fn set(&mut self, key: &str, value: &str) {
        self.0.insert(canonical_key(key), vec![value.to_string()]);
    }

    /// `Header.Get`: the first value, or `""`.
    pub(crate) fn get(&self, key: &str) -> &str {
        self.0
            .get(&canonical_key(key))
            .and_then(|v| v.first())
            .map_or("", String::as_str)
    }

    /// Whether the key is present (possibly with an empty value).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.0.contains_key(&canonical_key(key))
    }

    /// `Header.Del`.
    pub(crate) fn del(&mut self, key: &str) {
        self.0.remove(&canonical_key(key));
    }
}

/// Go's `textproto.CanonicalMIMEHeaderKey`.
fn canonical_key(key: &str) -> String {
    let valid = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !valid {
        return key.to_string();
    }
    let mut upper = true;
    key.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// One GET as the kubelet builds it.
#[derive(Debug, Clone)]
pub(crate) struct GetRequest {
    /// Where to send it.
    pub(crate) url: ProbeUrl,
    /// The request headers (`Host` and `User-Agent` included, as Go keeps them).
    pub(crate) header: GoHeader,
    /// Go's `Request.Host`: overrides the URL's authority in the `Host` header when set.
    pub(crate) host: String,
    /// Keep-alives enabled (hooks); when false, `Connection: close` is sent (probes).
    pub(crate) keep_alive: bool,
    /// Go's transparent compression (hooks): `Accept-Encoding: gzip` is added.
    pub(crate) compression: bool,
}

/// The final response.
#[derive(Debug, Clone)]
pub(crate) struct GetResponse {
    /// The status code.
    pub(crate) status: u16,
    /// The body, or why reading it failed; at most the requested limit.
    pub(crate) body: Result<Vec<u8>, String>,
}

/// Performs `req` like Go's `Client.Do`, following same-host redirects. `Err` is the text of
/// Go's `*url.Error` (`Get "<url>": <cause>`). `timeout` bounds everything, body included;
/// `body_limit` caps how much of the final body is read.
pub(crate) async fn get(
    req: GetRequest,
    timeout: Option<Duration>,
    body_limit: usize,
) -> Result<GetResponse, String> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let first_host = req.url.hostname().to_string();
    let original = req.header.clone();
    let mut current = req;
    let mut sent = 0;
    loop {
        sent += 1;
        let resp = round_trip(&current, deadline, body_limit)
            .await
            .map_err(|cause| format!("Get {}: {cause}", gofmt::quote(&current.url.to_string())))?;
        let follows = matches!(resp.status, 301 | 302 | 303 | 307 | 308);
        let location = match resp.location {
            Some(loc) if follows && !loc.is_empty() => loc,
            _ => {
                return Ok(GetResponse {
                    status: resp.status,
                    body: resp.body,
                });
            }
        };
        let next_url = current.url.join(&location);
        if next_url.hostname() != first_host {
            // followNonLocalRedirects = false: the 3xx itself is the answer.
            return Ok(GetResponse {
                status: resp.status,
                body: resp.body,
            });
        }
        if sent >= MAX_REQUESTS {
            return Err(format!(
                "Get {}: stopped after {MAX_REQUESTS} redirects",
                gofmt::quote(&location)
            ));
        }
        let mut header = original.clone();
        let referer = if current.url.scheme == "https" && next_url.scheme == "http" {
            String::new()
        } else if !original.get("Referer").is_empty() {
            original.get("Referer").to_string()
        } else {
            current.url.to_string()
        };
        if !referer.is_empty() {
            header.set("Referer", &referer);
        }
        // A custom Host survives only a relative redirect (Go issue 22233).
        let relative = !location
            .split(['/', '?', '#'])
            .next()
            .is_some_and(|s| s.contains(':'));
        let host = if relative && !current.host.is_empty() && current.host != current.url.authority
        {
            current.host.clone()
        } else {
            String::new()
        };
        current = GetRequest {
            url: next_url,
            header,
            host,
            ..current
        };
    }
}

/// One response, before redirect handling.
struct RawResponse {
    status: u16,
    location: Option<String>,
    body: Result<Vec<u8>, String>,
}

/// Builds the wire request: `Host`, `User-Agent`, the other headers sorted, then the
/// transport's own headers, like Go's `Request.write`.
fn wire_request(req: &GetRequest) -> Result<Request<Empty<Bytes>>, String> {
    let mut builder = Request::get(req.url.request_uri());
    let host = if req.host.is_empty() {
        &req.url.authority
    } else {
        &req.host
    };
    let host = HeaderValue::from_str(host).map_err(|_| "http: invalid Host header".to_string())?;
    builder = builder.header(hyper::header::HOST, host);
    let user_agent = if req.header.has("User-Agent") {
        req.header.get("User-Agent")
    } else {
        "Go-http-client/1.1"
    };
    if !user_agent.is_empty() {
        let value = HeaderValue::from_bytes(user_agent.as_bytes())
            .map_err(|_| "net/http: invalid header field value for \"User-Agent\"".to_string())?;
        builder = builder.header(hyper::header::USER_AGENT, value);
    }
    for (key, values) in &req.header.0 {
        if matches!(
            key.as_str(),
            "Host" | "User-Agent" | "Content-Length" | "Transfer-Encoding" | "Trailer"
        ) {
            continue;
        }
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| format!("net/http: invalid header field name {}", gofmt::quote(key)))?;
        for value in values {
            let value = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| {
                format!(
                    "net/http: invalid header field value for {}",
                    gofmt::quote(key)
                )
            })?;
            builder = builder.header(name.clone(), value);
        }
    }
    let wants_close = req.header.0.get("Connection").is_some_and(|v| {
        v.iter()
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    });
    if !req.keep_alive && !wants_close {
        builder = builder.header(hyper::header::CONNECTION, "close");
    }
    if req.compression
        && req.header.get("Accept-Encoding").is_empty()
        && req.header.get("Range").is_empty()
    {
        builder = builder.header(hyper::header::ACCEPT_ENCODING, "gzip");
    }
    builder.body(Empty::new()).map_err(|e| e.to_string())
}

async fn round_trip(
    req: &GetRequest,
    deadline: Option<Instant>,
    body_limit: usize,
) -> Result<RawResponse, String> {
    if req.url.scheme != "http" && req.url.scheme != "https" {
        return Err(format!(
            "unsupported protocol scheme {}",
            gofmt::quote(&req.url.scheme)
        ));
    }
    let wire = wire_request(req)?;
    let port = req.url.port()?;
    // Without a client timeout (hooks) the exchange may take as long as the peer wants.
    let deadline =
        deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 86_400));
    let tcp = net::dial(req.url.hostname(), port, deadline)
        .await
        .map_err(|e| match e {
            DialError::TimedOut { .. } => TIMEOUT_AWAITING_HEADERS.to_string(),
            DialError::Failed(text) => text,
        })?;
    let (traced, trace) = Traced::new(tcp);
    let stream = if req.url.scheme == "https" {
        let server_name = rustls::pki_types::ServerName::try_from(req.url.hostname().to_string())
            .map_err(|e| format!("tls: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(tls_config());
        match tokio::time::timeout_at(deadline, connector.connect(server_name, traced)).await {
            Err(_) => return Err(TIMEOUT_AWAITING_HEADERS.to_string()),
            Ok(Err(e)) => return Err(tls_error_text(&e, &lock(&trace))),
            Ok(Ok(tls)) => Stream::Tls(Box::new(tls)),
        }
    } else {
        Stream::Plain(traced)
    };

    let handshake = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake::<_, Empty<Bytes>>(TokioIo::new(stream));
    let (mut sender, conn) = match tokio::time::timeout_at(deadline, handshake).await {
        Err(_) => return Err(TIMEOUT_AWAITING_HEADERS.to_string()),
        Ok(Err(e)) => return Err(e.to_string()),
        Ok(Ok(parts)) => parts,
    };
    let mut driver = Driver {
        conn: pin!(conn),
        done: false,
        error: None,
    };

    let response =
        match tokio::time::timeout_at(deadline, driver.run(sender.send_request(wire))).await {
            Err(_) => return Err(TIMEOUT_AWAITING_HEADERS.to_string()),
            Ok(Err(e)) => {
                return Err(exchange_error_text(
                    &e,
                    driver.error.as_ref(),
                    &lock(&trace),
                ));
            }
            Ok(Ok(response)) => response,
        };
    let status = response.status();
    let location = response
        .headers()
        .get(hyper::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut body = response.into_body();
    let mut data = Vec::new();
    let body = loop {
        if data.len() >= body_limit {
            data.truncate(body_limit);
            break Ok(data);
        }
        match tokio::time::timeout_at(deadline, driver.run(body.frame())).await {
            Err(_) => break Err(TIMEOUT_READING_BODY.to_string()),
            Ok(None) => break Ok(data),
            Ok(Some(Ok(frame))) => {
                if let Ok(chunk) = frame.into_data() {
                    data.extend_from_slice(&chunk);
                }
            }
            Ok(Some(Err(e))) => break Err(body_error_text(&e, &lock(&trace))),
        }
    };
    Ok(RawResponse {
        status: status.as_u16(),
        location,
        body,
    })
}

fn lock(trace: &Arc<Mutex<Trace>>) -> std::sync::MutexGuard<'_, Trace> {
    trace.lock().unwrap_or_else(|p| p.into_inner())
}

/// Polls the connection alongside whatever waits on it, keeping its error.
struct Driver<'a, C> {
    conn: Pin<&'a mut C>,
    done: bool,
    error: Option<hyper::Error>,
}

impl<C: Future<Output = hyper::Result<()>>> Driver<'_, C> {
    async fn run<F: Future>(&mut self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        loop {
            if self.done {
                return fut.await;
            }
            tokio::select! {
                biased;
                out = &mut fut => return out,
                res = self.conn.as_mut() => {
                    self.done = true;
                    if let Err(e) = res {
                        self.error = Some(e);
                    }
                }
            }
        }
    }
}

/// Go's text for a failure before the response headers arrived.
fn exchange_error_text(e: &hyper::Error, conn: Option<&hyper::Error>, trace: &Trace) -> String {
    if let Some(text) = &trace.error {
        return text.clone();
    }
    let parse = e.is_parse() || conn.is_some_and(hyper::Error::is_parse);
    if parse {
        return format!(
            "net/http: HTTP/1.x transport connection broken: malformed HTTP response {}",
            gofmt::quote_bytes(trace.first_line())
        );
    }
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() || conn.is_some() {
        return "EOF".to_string();
    }
    e.to_string()
}

/// Go's text for a failure while reading the body.
fn body_error_text(e: &hyper::Error, trace: &Trace) -> String {
    if let Some(text) = &trace.error {
        return text.clone();
    }
    if e.is_incomplete_message() || e.is_closed() {
        return "unexpected EOF".to_string();
    }
    e.to_string()
}

fn tls_error_text(e: &io::Error, trace: &Trace) -> String {
    if trace.first_bytes.starts_with(b"HTTP/") {
        return "http: server gave HTTP response to HTTPS client".to_string();
    }
    if let Some(text) = &trace.error {
        return text.clone();
    }
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return match tls {
            rustls::Error::InvalidMessage(_) => {
                "tls: first record does not look like a TLS handshake".to_string()
            }
            rustls::Error::AlertReceived(alert) => {
                format!("remote error: tls: {}", alert_text(*alert))
            }
            other => format!("tls: {other}"),
        };
    }
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return "EOF".to_string();
    }
    e.to_string()
}

/// Go's `tls.alert` strings for the alerts a server commonly sends.
fn alert_text(alert: rustls::AlertDescription) -> String {
    use rustls::AlertDescription as A;
    match alert {
        A::HandshakeFailure => "handshake failure".to_string(),
        A::ProtocolVersion => "protocol version not supported".to_string(),
        A::InternalError => "internal error".to_string(),
        A::BadCertificate => "bad certificate".to_string(),
        A::UnrecognisedName => "unrecognized name".to_string(),
        A::AccessDenied => "access denied".to_string(),
        A::DecryptError => "error decrypting message".to_string(),
        A::IllegalParameter => "illegal parameter".to_string(),
        A::UnexpectedMessage => "unexpected message".to_string(),
        A::CertificateRequired => "certificate required".to_string(),
        A::NoApplicationProtocol => "no application protocol".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// TLS for probes and hooks: any certificate is accepted (Go's `InsecureSkipVerify`), but
/// the handshake signatures are still checked. HTTP/1.1 only (no ALPN).
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
                .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A plain or TLS connection.
enum Stream {
    Plain(Traced),
    Tls(Box<tokio_rustls::client::TlsStream<Traced>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_keys_match_go() {
        assert_eq!(canonical_key("user-agent"), "User-Agent");
        assert_eq!(canonical_key("X-CUSTOM-header"), "X-Custom-Header");
        assert_eq!(canonical_key("bad key"), "bad key");
    }
}
