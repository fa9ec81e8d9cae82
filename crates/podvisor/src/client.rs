//! A small client of `podvisor serve` (or any Kubernetes API server reachable with a bearer
//! token): reads a kubeconfig, verifies the server against the kubeconfig's CA, and sends JSON
//! requests over HTTPS/1.1, one connection per request. Streaming responses (watches, followed
//! logs) are read chunk by chunk.
//!
//! What it does not do: client certificates, exec/auth-provider plugins, proxies, or trust in
//! the system's CA store (the kubeconfig must carry the CA, as `serve`'s does).

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, pki_types::CertificateDer, pki_types::ServerName};

pub mod api;
pub mod yaml;

/// `Accept` for `kubectl get`: a server-side `Table` if the server can, else the object.
pub const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// `Accept` for plain JSON.
pub const JSON: &str = "application/json";

/// How long connecting (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `--kubeconfig` option shared by the client subcommands.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConnArgs {
    /// The kubeconfig of the running `podvisor serve` (default: `$KUBECONFIG`, else
    /// `/var/lib/podvisor/kubeconfig` as root or `$XDG_STATE_HOME/podvisor/kubeconfig`).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl ConnArgs {
    /// Loads the kubeconfig and builds a client.
    pub fn client(&self) -> anyhow::Result<Client> {
        let path = kubeconfig_path(
            self.kubeconfig.as_deref(),
            std::env::var_os("KUBECONFIG").as_deref(),
            is_root(),
            std::env::var_os("XDG_STATE_HOME").as_deref(),
            std::env::var_os("HOME").as_deref(),
        );
        let text = match std::fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
                "no kubeconfig at {}: is `podvisor serve` running? Start it with `podvisor \
                 serve` (as root; it writes that file once its API answers), or say where \
                 its kubeconfig is with --kubeconfig or $KUBECONFIG",
                path.display()
            ),
            read => read.with_context(|| format!("reading kubeconfig {}", path.display()))?,
        };
        let config = Kubeconfig::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .with_context(|| format!("kubeconfig {}", path.display()))?;
        Client::new(config)
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Where the kubeconfig is: the flag, else the first entry of `$KUBECONFIG` that exists (or the
/// first entry), else `/var/lib/podvisor/kubeconfig` for root, else
/// `$XDG_STATE_HOME/podvisor/kubeconfig` (`~/.local/state/podvisor/kubeconfig`).
pub fn kubeconfig_path(
    flag: Option<&Path>,
    env: Option<&std::ffi::OsStr>,
    root: bool,
    xdg_state_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> PathBuf {
    if let Some(flag) = flag {
        return flag.to_owned();
    }
    if let Some(env) = env {
        let entries: Vec<PathBuf> = std::env::split_paths(env)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if let Some(found) = entries.iter().find(|p| p.exists()).or(entries.first()) {
            return found.clone();
        }
    }
    if root {
        return PathBuf::from("/var/lib/podvisor/kubeconfig");
    }
    let state = match xdg_state_home.filter(|s| !s.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(home.unwrap_or_default()).join(".local/state"),
    };
    state.join("podvisor/kubeconfig")
}

/// What a kubeconfig's current context says about reaching the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubeconfig {
    /// `https` or `http`.
    pub scheme: String,
    /// Host name or IP address (without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path prefix of the API (empty, or like `/k8s` without a trailing slash).
    pub base_path: String,
    /// The CA bundle (PEM) that signs the server's certificate.
    pub ca_pem: Option<Vec<u8>>,
    /// The bearer token.
    pub token: Option<String>,
    /// The context's default namespace.
    pub namespace: Option<String>,
    /// The name to verify the server's certificate against, when not the host.
    pub tls_server_name: Option<String>,
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    cluster: ClusterInfo,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    context: ContextInfo,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: RawUser,
}

#[derive(Deserialize)]
struct ClusterInfo {
    server: String,
    #[serde(rename = "certificate-authority-data")]
    ca_data: Option<String>,
    #[serde(rename = "certificate-authority")]
    ca_file: Option<PathBuf>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    insecure: bool,
    #[serde(rename = "tls-server-name")]
    tls_server_name: Option<String>,
}

#[derive(Deserialize)]
struct ContextInfo {
    cluster: String,
    #[serde(default)]
    user: String,
    namespace: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawUser {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
}

impl Kubeconfig {
    /// Parses kubeconfig YAML and resolves its current context; relative file references
    /// (`certificate-authority`, `tokenFile`) are relative to `dir`.
    pub fn parse(text: &str, dir: &Path) -> anyhow::Result<Kubeconfig> {
        let raw: RawConfig =
            serde_saphyr::from_str(text).map_err(|e| anyhow!("parsing YAML: {e}"))?;
        let current = raw
            .current_context
            .filter(|c| !c.is_empty())
            .ok_or_else(|| anyhow!("no current-context"))?;
        let context = &raw
            .contexts
            .iter()
            .find(|c| c.name == current)
            .ok_or_else(|| anyhow!("context {current:?} not found"))?
            .context;
        let cluster = &raw
            .clusters
            .iter()
            .find(|c| c.name == context.cluster)
            .ok_or_else(|| anyhow!("cluster {:?} not found", context.cluster))?
            .cluster;
        let user = raw.users.iter().find(|u| u.name == context.user);
        if cluster.insecure {
            bail!("insecure-skip-tls-verify is not supported; give the server's CA");
        }
        let (scheme, host, port, base_path) = parse_server(&cluster.server)?;
        let ca_pem = match (&cluster.ca_data, &cluster.ca_file) {
            (Some(data), _) => Some(
                base64_decode(data)
                    .ok_or_else(|| anyhow!("certificate-authority-data is not base64"))?,
            ),
            (None, Some(file)) => {
                let file = dir.join(file);
                Some(std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?)
            }
            (None, None) => None,
        };
        let token = match user {
            Some(NamedUser {
                user: RawUser { token: Some(t), .. },
                ..
            }) => Some(t.clone()),
            Some(NamedUser {
                user:
                    RawUser {
                        token_file: Some(f),
                        ..
                    },
                ..
            }) => {
                let file = dir.join(f);
                let t = std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?;
                Some(t.trim().to_owned())
            }
            _ => None,
        };
        Ok(Kubeconfig {
            scheme,
            host,
            port,
            base_path,
            ca_pem,
            token,
            namespace: context.namespace.clone().filter(|n| !n.is_empty()),
            tls_server_name: cluster.tls_server_name.clone(),
        })
    }

    /// `host:port` as a URL authority (IPv6 in brackets).
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Splits `https://host:port/prefix` into its parts; the port defaults by scheme.
fn parse_server(server: &str) -> anyhow::Result<(String, String, u16, String)> {
    let (scheme, rest) = server
        .split_once("://")
        .ok_or_else(|| anyhow!("server {server:?} is not a URL"))?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        other => bail!("server {server:?}: unsupported scheme {other:?}"),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| anyhow!("server {server:?}: bad IPv6 address"))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| anyhow!("server {server:?}: bad port {p:?}"))?,
        None => default_port,
    };
    if host.is_empty() {
        bail!("server {server:?} has no host");
    }
    Ok((scheme, host.to_owned(), port, path.to_owned()))
}

/// Standard base64 (padding optional, whitespace ignored); `None` when malformed.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// An error status from the API server (`metav1.Status`), printed as kubectl prints it.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `reason` (`NotFound`, `AlreadyExists`, `Invalid`, ...); may be empty.
    pub reason: String,
    /// `message`.
    pub message: String,
    /// The whole `Status` object (for `details.causes`).
    pub status: Value,
}

impl ApiError {
    /// The error for a non-2xx answer `code` with `body` (a `Status`, or any text).
    pub fn from_response(code: StatusCode, body: &[u8]) -> ApiError {
        let status: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let text = |k: &str| status.get(k).and_then(Value::as_str).map(str::to_owned);
        let reason = text("reason").unwrap_or_default();
        let message = text("message").unwrap_or_else(|| {
            let body = String::from_utf8_lossy(body).trim().to_owned();
            if body.is_empty() {
                format!(
                    "the server responded with the status code {}",
                    code.as_u16()
                )
            } else {
                body
            }
        });
        ApiError {
            code: code.as_u16(),
            reason,
            message,
            status,
        }
    }

    /// Whether the object was not there.
    pub fn is_not_found(&self) -> bool {
        self.code == 404
    }
}

impl fmt::Display for ApiError {
    /// kubectl's `StandardErrorMessage` / `checkErr` shapes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason == "Invalid" {
            return self.fmt_invalid(f);
        }
        if self.code == 401 {
            return write!(
                f,
                "error: You must be logged in to the server ({})",
                if self.message.is_empty() {
                    "Unauthorized"
                } else {
                    &self.message
                }
            );
        }
        if self.reason.is_empty() {
            write!(f, "Error from server: {}", self.message)
        } else {
            write!(f, "Error from server ({}): {}", self.reason, self.message)
        }
    }
}

impl ApiError {
    /// kubectl's `Invalid` output: `The Pod "x" is invalid: ` and one `* field: message` line
    /// per cause.
    fn fmt_invalid(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let details = self.status.get("details");
        let get = |k: &str| {
            details
                .and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let Some(details) = details else {
            return write!(f, "{}", self.message);
        };
        let prefix = if get("kind").is_empty() && get("name").is_empty() {
            "The request is invalid".to_owned()
        } else {
            format!("The {} {:?} is invalid", get("kind"), get("name"))
        };
        let causes: Vec<String> = details
            .get("causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let field = c.get("field").and_then(Value::as_str).unwrap_or_default();
                let message = c.get("message").and_then(Value::as_str).unwrap_or_default();
                format!("{field}: {message}")
            })
            .collect();
        match causes.as_slice() {
            [] => write!(f, "{prefix}"),
            [one] => write!(f, "{prefix}: {one}"),
            many => {
                write!(f, "{prefix}: ")?;
                for cause in many {
                    write!(f, "\n* {cause}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ApiError {}

/// Prints `err` the way kubectl would and returns kubectl's exit code (1).
pub fn report(err: &anyhow::Error) -> i32 {
    if let Some(api) = err.downcast_ref::<ApiError>() {
        eprintln!("{api}");
    } else if let Some(refused) = err.downcast_ref::<Refused>() {
        eprintln!(
            "The connection to the server {} was refused - did you specify the right host or port?",
            refused.0
        );
        eprintln!("(is `podvisor serve` running? Start it with `podvisor serve`.)");
    } else {
        eprintln!("error: {err:#}");
    }
    1
}

/// The server is not listening.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connection to {} refused", self.0)
    }
}

impl std::error::Error for Refused {}

/// A connection factory for one API server.
pub struct Client {
    config: Kubeconfig,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

/// A request body and its content type.
pub struct Body<'a> {
    /// `Content-Type`.
    pub content_type: &'a str,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl<'a> Body<'a> {
    /// A JSON body.
    pub fn json(v: &Value) -> Body<'a> {
        Body {
            content_type: JSON,
            bytes: serde_json::to_vec(v).unwrap_or_default(),
        }
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Client {
    /// A client for `config`'s server.
    pub fn new(config: Kubeconfig) -> anyhow::Result<Client> {
        let tls = if config.scheme == "https" {
            let pem = config.ca_pem.as_deref().ok_or_else(|| {
                anyhow!("the kubeconfig has no certificate-authority-data for the server")
            })?;
            let mut roots = rustls::RootCertStore::empty();
            use rustls::pki_types::pem::PemObject;
            for cert in CertificateDer::pem_slice_iter(pem) {
                roots
                    .add(cert.context("reading the CA certificate")?)
                    .context("adding the CA certificate")?;
            }
            if roots.is_empty() {
                bail!("the kubeconfig's certificate-authority-data holds no certificate");
            }
            let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .context("configuring TLS")?
            .with_root_certificates(roots)
            .with_no_client_auth();
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            let name = config.tls_server_name.as_deref().unwrap_or(&config.host);
            let server_name = match name.parse::<IpAddr>() {
                Ok(ip) => ServerName::IpAddress(ip.into()),
                Err(_) => ServerName::try_from(name.to_owned())
                    .map_err(|_| anyhow!("{name:?} is not a valid server name"))?,
            };
            Some((TlsConnector::from(Arc::new(tls)), server_name))
        } else {
            None
        };
        Ok(Client { config, tls })
    }

    /// The kubeconfig context's namespace, or `default`.
    pub fn default_namespace(&self) -> &str {
        self.config.namespace.as_deref().unwrap_or("default")
    }

    async fn connect(&self) -> anyhow::Result<Box<dyn Io>> {
        let authority = self.config.authority();
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((self.config.host.as_str(), self.config.port)),
        )
        .await
        .map_err(|_| anyhow!("connecting to {authority}: timed out"))?
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                anyhow::Error::new(Refused(authority.clone()))
            } else {
                anyhow::Error::new(e).context(format!("connecting to {authority}"))
            }
        })?;
        tcp.set_nodelay(true).ok();
        match &self.tls {
            None => Ok(Box::new(tcp)),
            Some((connector, name)) => {
                let tls =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| anyhow!("TLS handshake with {authority}: timed out"))?
                        .with_context(|| format!("TLS handshake with {authority}"))?;
                Ok(Box::new(tls))
            }
        }
    }

    /// Sends one request; `path` is the path and query below the server's base path.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Body<'_>>,
    ) -> anyhow::Result<Response<Incoming>> {
        let io = self.connect().await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .context("starting HTTP")?;
        tokio::spawn(async move {
            // The connection ends with the response body; errors surface on the body.
            let _ = conn.await;
        });
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.config.base_path))
            .header(header::HOST, self.config.authority())
            .header(header::ACCEPT, accept)
            .header(
                header::USER_AGENT,
                concat!("podvisor/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(token) = &self.config.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, b.content_type);
                Full::new(Bytes::from(b.bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let req = req.body(body).context("building the request")?;
        sender
            .send_request(req)
            .await
            .with_context(|| format!("sending the request to {}", self.config.authority()))
    }

    /// Sends a request and reads the whole JSON answer; a non-2xx answer is an [`ApiError`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        body: Option<Body<'_>>,
    ) -> anyhow::Result<Value> {
        let resp = self.send(method, path, accept, body).await?;
        let status = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .context("reading the response")?
            .to_bytes();
        if !status.is_success() {
            return Err(ApiError::from_response(status, &bytes).into());
        }
        serde_json::from_slice(&bytes).context("decoding the response")
    }

    /// `GET` as JSON.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, JSON, None).await
    }

    /// Opens a streaming response (watch, followed log); a non-2xx answer is an [`ApiError`].
    pub async fn stream(&self, path: &str, accept: &str) -> anyhow::Result<Stream> {
        let resp = self.send(Method::GET, path, accept, None).await?;
        let status = resp.status();
        if !status.is_success() {
            let bytes = resp
                .into_body()
                .collect()
                .await
                .context("reading the response")?
                .to_bytes();
            return Err(ApiError::from_response(status, &bytes).into());
        }
        Ok(Stream {
            body: resp.into_body(),
            buf: Vec::new(),
        })
    }
}

/// A response body read as it arrives.
pub struct Stream {
    body: Incoming,
    buf: Vec<u8>,
}

impl Stream {
    /// The next chunk of bytes; `None` at the end.
    pub async fn chunk(&mut self) -> anyhow::Result<Option<Bytes>> {
        if !self.buf.is_empty() {
            return Ok(Some(Bytes::from(std::mem::take(&mut self.buf))));
        }
        loop {
            match self.body.frame().await {
                None => return Ok(None),
                Some(frame) => {
                    let frame = frame.context("reading the stream")?;
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The next newline-terminated line (without the newline); a final line without one is
    /// returned too. `None` at the end.
    pub async fn line(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                return Ok(Some(line));
            }
            match self.body.frame().await {
                None => {
                    if self.buf.is_empty() {
                        return Ok(None);
                    }
                    return Ok(Some(std::mem::take(&mut self.buf)));
                }
                Some(frame) => {
                    let frame = frame.context("reading the stream")?;
                    if let Ok(data) = frame.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}

/// Percent-encodes a query parameter value.
pub fn query_escape(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Runs `f` on a small tokio runtime (the client commands are short-lived and mostly wait).
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(rt.block_on(f))
}

#[cfg(test)]
mod tests;
