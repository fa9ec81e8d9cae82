//! Probe executor tests (spec 6.3, R16-R21) against real servers on loopback: a small HTTP/1.1
//! responder, a TLS wrapper around it, plain TCP listeners and a tonic gRPC health server.
//! Exec probes run through a fake `Runtime` whose `exec` spawns the command on the host.

use crate::host_exec::HostExec;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, Probe,
    TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use podvisor_runtime::probe::{ProbeResult, run_probe};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 responder that records what it was sent.

/// One request as received.
#[derive(Debug, Clone)]
struct Seen {
    /// The request head exactly as sent, up to and including the blank line.
    raw: String,
    /// The request target.
    target: String,
}

impl Seen {
    fn header(&self, name: &str) -> Vec<String> {
        self.raw
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(": "))
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_string())
            .collect()
    }
}

/// What the responder does with a request.
enum Reply {
    /// A complete response with `Content-Length` and `Connection: close`.
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Accept and never answer.
    Hang,
    /// Send the headers promising `len` body bytes, then stall.
    StallBody { len: usize },
    /// Close the connection without answering.
    Close,
}

fn ok(body: &str) -> Reply {
    Reply::Respond {
        status: 200,
        headers: vec![],
        body: body.as_bytes().to_vec(),
    }
}

fn status(code: u16) -> Reply {
    Reply::Respond {
        status: code,
        headers: vec![],
        body: b"nope".to_vec(),
    }
}

fn redirect(code: u16, location: &str, body: &[u8]) -> Reply {
    Reply::Respond {
        status: code,
        headers: vec![("Location".into(), location.into())],
        body: body.to_vec(),
    }
}

type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

struct HttpServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl HttpServer {
    fn port(&self) -> i32 {
        i32::from(self.addr.port())
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves `handler` (given the request target) over plain HTTP, or over TLS with `tls`.
async fn http_server(
    tls: Option<tokio_rustls::TlsAcceptor>,
    handler: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> HttpServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler: Handler = Arc::new(handler);
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (handler, log, tls) = (handler.clone(), log.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            serve_one(stream, handler, log).await;
                        }
                    }
                    None => serve_one(stream, handler, log).await,
                }
            });
        }
    });
    HttpServer { addr, seen }
}

async fn serve_one<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    handler: Handler,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if !buf[0].is_ascii_uppercase() {
            // Not HTTP (e.g. a TLS ClientHello): answer like a plain HTTP server does.
            let _ = stream.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n").await;
            let _ = stream.shutdown().await;
            return;
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end + 4);
            break;
        }
    }
    let raw = String::from_utf8_lossy(&buf).into_owned();
    let target = raw.split(' ').nth(1).unwrap_or_default().to_string();
    log.lock().unwrap().push(Seen {
        raw,
        target: target.clone(),
    });
    match handler(&target) {
        Reply::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = stream.shutdown().await;
        }
        Reply::StallBody { len } => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\npartial");
            let _ = stream.write_all(head.as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Reply::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
        Reply::Close => {}
    }
}

const TEST_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBkjCCATmgAwIBAgIUFrNXiUPX/gnUaNqcCX9EZBa7iCwwCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTcG9kdmlzb3ItcHJvYmUtdGVzdDAgFw0yNjExMjEwNjMzMDZa
GA8yMTI2MTAyODA2MzMwNlowHjEcMBoGA1UEAwwTcG9kdmlzb3ItcHJvYmUtdGVz
dDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABFQXekK+ujk0VqOSyIEKcRZ+hPu4
F0xhEP66T+YIiwANtAzjfQigotnpKpE0gBMY4MCyHjAz8T1JYBxmU1D99sejUzBR
MB0GA1UdDgQWBBT/AhyRjJn249fuHdUhAhs2ywn3wjAfBgNVHSMEGDAWgBT/AhyR
jJn249fuHdUhAhs2ywn3wjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cA
MEQCICINnAK6fszWsO10WteJj5UPIzc30nSJAeRlv4T9xjzpAiB5QI/n0PHCKAr9
GdtR+wSpRtXH8zUNwT1113wtL83tBQ==
-----END CERTIFICATE-----
";

const TEST_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgtO1SeieCM32m9edj
tihrBV8FSCL7ITLOz8OpPe9EsKGhRANCAARUF3pCvro5NFajksiBCnEWfoT7uBdM
YRD+uk/mCIsADbQM430IoKLZ6SqRNIATGODAsh4wM/E9SWAcZlNQ/fbH
-----END PRIVATE KEY-----
";

/// A TLS acceptor with a self-signed certificate no client could verify.
fn self_signed_acceptor() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::pem::PemObject;
    let cert = rustls::pki_types::CertificateDer::from_pem_slice(TEST_CERT.as_bytes()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(TEST_KEY.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// A port on which nothing listens.
async fn closed_port() -> i32 {
    // A bound socket that never listens: connections are refused, and no other test can take
    // the port while this process lives (a dropped listener's port could be reused at once).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    std::mem::forget(socket);
    i32::from(port)
}

// ---------------------------------------------------------------------------------------------
// Probe builders.

fn container() -> Container {
    Container {
        name: "app".into(),
        ..Default::default()
    }
}

fn http_probe(port: IntOrString, path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            port,
            path: Some(path.into()),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

fn http_probe_with_headers(port: i32, headers: &[(&str, &str)]) -> Probe {
    let mut probe = http_probe(IntOrString::Int(port), "/healthz");
    probe.http_get.as_mut().unwrap().http_headers = Some(
        headers
            .iter()
            .map(|(n, v)| HTTPHeader {
                name: (*n).into(),
                value: (*v).into(),
            })
            .collect(),
    );
    probe
}

async fn probe(p: &Probe) -> ProbeResult {
    run_probe(&HostExec::default(), &(), 1, &container(), p).await
}

// ---------------------------------------------------------------------------------------------
// httpGet (R19)

#[tokio::test]
async fn r19_http_200_is_success_with_kubelet_request_head() {
    let server = http_server(None, |_| ok("fine")).await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/healthz")).await;
    assert_eq!(result, ProbeResult::Success);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].raw,
        format!(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nUser-Agent: kube-probe/1.34\r\n\
             Accept: */*\r\nConnection: close\r\n\r\n",
            server.port()
        )
    );
}

#[tokio::test]
async fn r19_status_399_is_success_only_when_not_a_followed_redirect() {
    let server = http_server(None, |_| status(399)).await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    assert_eq!(
        result,
        ProbeResult::Warning("Probe terminated redirects, Response body: nope".into())
    );
}

#[tokio::test]
async fn r19_http_404_and_500_fail_without_body() {
    for code in [404, 500] {
        let server = http_server(None, move |_| status(code)).await;
        let result = probe(&http_probe(IntOrString::Int(server.port()), "/healthz")).await;
        assert_eq!(
            result,
            ProbeResult::Failure(format!("HTTP probe failed with statuscode: {code}"))
        );
    }
}

#[tokio::test]
async fn r19_redirect_to_same_host_is_followed_with_referer() {
    let server = http_server(None, |target| match target {
        "/old" => redirect(302, "/healthz", b"moved"),
        _ => ok("fine"),
    })
    .await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/old")).await;
    assert_eq!(result, ProbeResult::Success);
    let seen = server.seen();
    assert_eq!(
        seen.iter().map(|s| s.target.as_str()).collect::<Vec<_>>(),
        ["/old", "/healthz"]
    );
    assert_eq!(
        seen[1].header("Referer"),
        [format!("http://127.0.0.1:{}/old", server.port())]
    );
    assert_eq!(seen[1].header("User-Agent"), ["kube-probe/1.34"]);
}

#[tokio::test]
async fn r19_redirect_to_same_host_other_port_is_followed() {
    let target = http_server(None, |_| status(503)).await;
    let location = format!("http://127.0.0.1:{}/elsewhere", target.port());
    let server = http_server(None, move |_| redirect(301, &location, b"")).await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    assert_eq!(
        result,
        ProbeResult::Failure("HTTP probe failed with statuscode: 503".into())
    );
    assert_eq!(
        target.seen()[0].header("Host"),
        [format!("127.0.0.1:{}", target.port())]
    );
}

#[tokio::test]
async fn r19_redirect_to_other_host_is_a_warning_with_body() {
    let server = http_server(None, |target| match target {
        "/" => redirect(
            302,
            "http://localhost:1/elsewhere",
            b"<a href=\"x\">Found</a>.",
        ),
        _ => ok("unexpected"),
    })
    .await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    assert_eq!(
        result,
        ProbeResult::Warning(
            "Probe terminated redirects, Response body: <a href=\"x\">Found</a>.".into()
        )
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn r19_at_most_ten_requests_then_failure() {
    // /r/0 .. /r/8 redirect and /r/9 answers: ten requests, success.
    let server = http_server(None, |target| {
        let n: u32 = target.trim_start_matches("/r/").parse().unwrap();
        if n < 9 {
            redirect(307, &format!("/r/{}", n + 1), b"")
        } else {
            ok("done")
        }
    })
    .await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/r/0")).await;
    assert_eq!(result, ProbeResult::Success);
    assert_eq!(server.seen().len(), 10);

    // One more redirect: the eleventh request is refused by the client (a failure).
    let server = http_server(None, |target| {
        let n: u32 = target.trim_start_matches("/r/").parse().unwrap();
        redirect(302, &format!("/r/{}", n + 1), b"")
    })
    .await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/r/0")).await;
    assert_eq!(
        result,
        ProbeResult::Failure("Get \"/r/10\": stopped after 10 redirects".into())
    );
    assert_eq!(server.seen().len(), 10);
}

#[tokio::test]
async fn r19_connection_refused_is_a_failure_in_go_shape() {
    let port = closed_port().await;
    let result = probe(&http_probe(IntOrString::Int(port), "/healthz")).await;
    assert_eq!(
        result,
        ProbeResult::Failure(format!(
            "Get \"http://127.0.0.1:{port}/healthz\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
}

#[tokio::test]
async fn r19_server_that_never_answers_times_out_after_timeout_seconds() {
    let server = http_server(None, |_| Reply::Hang).await;
    let started = Instant::now();
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/healthz")).await;
    let elapsed = started.elapsed();
    assert_eq!(
        result,
        ProbeResult::Failure(format!(
            "Get \"http://127.0.0.1:{}/healthz\": context deadline exceeded \
             (Client.Timeout exceeded while awaiting headers)",
            server.port()
        ))
    );
    assert!(
        elapsed >= Duration::from_millis(950) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    assert_eq!(server.seen().len(), 1, "a failure is not retried");
}

#[tokio::test]
async fn r19_closed_without_response_is_eof() {
    let server = http_server(None, |_| Reply::Close).await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    assert_eq!(
        result,
        ProbeResult::Failure(format!("Get \"http://127.0.0.1:{}/\": EOF", server.port()))
    );
}

#[tokio::test]
async fn r16_body_read_timeout_is_an_error_retried_three_times() {
    let server = http_server(None, |_| Reply::StallBody { len: 100 }).await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    assert_eq!(
        result,
        ProbeResult::Error(
            "context deadline exceeded (Client.Timeout or context cancellation while reading body)"
                .into()
        )
    );
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn r19_named_port_is_resolved_from_container_ports() {
    let server = http_server(None, |_| ok("fine")).await;
    let c = Container {
        name: "app".into(),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: server.port(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let p = http_probe(IntOrString::String("http".into()), "/healthz");
    let result = run_probe(&HostExec::default(), &(), 1, &c, &p).await;
    assert_eq!(result, ProbeResult::Success);

    // A number written as a string is the last resort.
    let p = http_probe(IntOrString::String(server.port().to_string()), "/healthz");
    assert_eq!(
        run_probe(&HostExec::default(), &(), 1, &c, &p).await,
        ProbeResult::Success
    );
}

#[tokio::test]
async fn r19_unknown_named_port_is_an_error_not_a_failure() {
    let result = probe(&http_probe(IntOrString::String("nope".into()), "/healthz")).await;
    assert_eq!(
        result,
        ProbeResult::Error("strconv.Atoi: parsing \"nope\": invalid syntax".into())
    );
    let result = probe(&http_probe(IntOrString::Int(70000), "/healthz")).await;
    assert_eq!(
        result,
        ProbeResult::Error("invalid port number: 70000".into())
    );
}

#[tokio::test]
async fn r19_headers_host_user_agent_and_suppressed_accept() {
    let server = http_server(None, |_| ok("fine")).await;
    let p = http_probe_with_headers(
        server.port(),
        &[
            ("Host", "example.com"),
            ("x-custom", "a"),
            ("X-Custom", "b"),
            ("Accept", ""),
            ("user-agent", "mine/1"),
        ],
    );
    assert_eq!(probe(&p).await, ProbeResult::Success);
    assert_eq!(
        server.seen()[0].raw,
        "GET /healthz HTTP/1.1\r\nHost: example.com\r\nUser-Agent: mine/1\r\nX-Custom: a\r\n\
         X-Custom: b\r\nConnection: close\r\n\r\n"
    );

    // An empty User-Agent is not sent; a custom Accept replaces */*.
    let server = http_server(None, |_| ok("fine")).await;
    let p = http_probe_with_headers(
        server.port(),
        &[("User-Agent", ""), ("Accept", "text/plain")],
    );
    assert_eq!(probe(&p).await, ProbeResult::Success);
    let seen = &server.seen()[0];
    assert!(seen.header("User-Agent").is_empty(), "{}", seen.raw);
    assert_eq!(seen.header("Accept"), ["text/plain"]);
    assert!(seen.header("Accept-Encoding").is_empty(), "no compression");
}

#[tokio::test]
async fn r19_body_is_read_up_to_10_kib() {
    let big = vec![b'a'; 20 * 1024];
    let server = http_server(None, move |_| redirect(302, "http://localhost:1/", &big)).await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    let expected = format!(
        "Probe terminated redirects, Response body: {}",
        "a".repeat(10 * 1024)
    );
    assert_eq!(result, ProbeResult::Warning(expected));

    let huge = vec![b'b'; 1024 * 1024];
    let server = http_server(None, move |_| Reply::Respond {
        status: 200,
        headers: vec![],
        body: huge.clone(),
    })
    .await;
    let result = probe(&http_probe(IntOrString::Int(server.port()), "/")).await;
    assert_eq!(result, ProbeResult::Success);
}

#[tokio::test]
async fn r19_path_may_carry_a_query_string() {
    let server = http_server(None, |_| ok("fine")).await;
    let result = probe(&http_probe(
        IntOrString::Int(server.port()),
        "/health?verbose=1&x=%2F",
    ))
    .await;
    assert_eq!(result, ProbeResult::Success);
    assert_eq!(server.seen()[0].target, "/health?verbose=1&x=%2F");
}

#[tokio::test]
async fn r19_https_skips_certificate_verification() {
    let server = http_server(Some(self_signed_acceptor()), |_| ok("secure")).await;
    let mut p = http_probe(IntOrString::Int(server.port()), "/tls");
    p.http_get.as_mut().unwrap().scheme = Some("HTTPS".into());
    assert_eq!(probe(&p).await, ProbeResult::Success);
    assert_eq!(server.seen()[0].target, "/tls");
}

#[tokio::test]
async fn r19_https_to_plain_http_server_fails_like_go() {
    let server = http_server(None, |_| ok("plain")).await;
    let mut p = http_probe(IntOrString::Int(server.port()), "/");
    p.http_get.as_mut().unwrap().scheme = Some("HTTPS".into());
    assert_eq!(
        probe(&p).await,
        ProbeResult::Failure(format!(
            "Get \"https://127.0.0.1:{}/\": http: server gave HTTP response to HTTPS client",
            server.port()
        ))
    );
}

// ---------------------------------------------------------------------------------------------
// tcpSocket (R20)

fn tcp_probe(port: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(port),
            ..Default::default()
        }),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

#[tokio::test]
async fn r20_tcp_open_port_is_success() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    assert_eq!(probe(&tcp_probe(port)).await, ProbeResult::Success);
    // The probe connected and closed: the accepted connection reads EOF at once.
    let (mut accepted, _) = listener.accept().await.unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(accepted.read(&mut buf).await.unwrap(), 0);
}

#[tokio::test]
async fn r20_tcp_closed_port_is_failure_in_go_shape() {
    let port = closed_port().await;
    assert_eq!(
        probe(&tcp_probe(port)).await,
        ProbeResult::Failure(format!(
            "dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
}

#[tokio::test]
async fn r20_tcp_host_field_and_named_port() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    let c = Container {
        name: "app".into(),
        ports: Some(vec![ContainerPort {
            name: Some("db".into()),
            container_port: port,
            ..Default::default()
        }]),
        ..Default::default()
    };
    let p = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("db".into()),
            host: Some("127.0.0.1".into()),
        }),
        ..Default::default()
    };
    assert_eq!(
        run_probe(&HostExec::default(), &(), 1, &c, &p).await,
        ProbeResult::Success
    );
}

// ---------------------------------------------------------------------------------------------
// grpc (R21)

fn grpc_probe(port: i32, service: Option<&str>) -> Probe {
    Probe {
        grpc: Some(GRPCAction {
            port,
            service: service.map(Into::into),
        }),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

/// A tonic server with the standard health service: "" and "up" serve, "down" does not.
async fn health_server() -> i32 {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("up", tonic_health::ServingStatus::Serving)
        .await;
    reporter
        .set_service_status("down", tonic_health::ServingStatus::NotServing)
        .await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    let incoming = tonic::codegen::tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        // Keep the reporter alive for as long as the server runs.
        let _reporter = reporter;
        tonic::transport::Server::builder()
            .serve_with_incoming(service, incoming)
            .await
    });
    port
}

/// A gRPC server without the health service: every call is answered like grpc-go answers
/// an unknown service.
#[derive(Clone)]
struct OtherService;

impl tonic::codegen::Service<tonic::codegen::http::Request<tonic::body::Body>> for OtherService {
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: tonic::codegen::http::Request<tonic::body::Body>) -> Self::Future {
        std::future::ready(Ok(tonic::Status::unimplemented(
            "unknown service grpc.health.v1.Health",
        )
        .into_http()))
    }
}

#[tokio::test]
async fn r21_grpc_serving_is_success() {
    let port = health_server().await;
    assert_eq!(probe(&grpc_probe(port, None)).await, ProbeResult::Success);
    assert_eq!(
        probe(&grpc_probe(port, Some("up"))).await,
        ProbeResult::Success
    );
}

#[tokio::test]
async fn r21_grpc_not_serving_is_failure() {
    let port = health_server().await;
    assert_eq!(
        probe(&grpc_probe(port, Some("down"))).await,
        ProbeResult::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
    );
}

#[tokio::test]
async fn r21_grpc_other_rpc_errors_are_failures() {
    let port = health_server().await;
    assert_eq!(
        probe(&grpc_probe(port, Some("unknown"))).await,
        ProbeResult::Failure(
            "error: health rpc probe failed: rpc error: code = NotFound desc = service not registered".into()
        )
    );
}

#[tokio::test]
async fn r21_grpc_unimplemented() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    let incoming = tonic::codegen::tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(tonic::transport::Server::builder().serve_with_incoming(OtherService, incoming));
    assert_eq!(
        probe(&grpc_probe(port, None)).await,
        ProbeResult::Failure(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): \
             unknown service grpc.health.v1.Health"
                .into()
        )
    );
}

#[tokio::test]
async fn r21_grpc_unreachable_waits_for_the_timeout() {
    let port = closed_port().await;
    let started = Instant::now();
    assert_eq!(
        probe(&grpc_probe(port, None)).await,
        ProbeResult::Failure(format!(
            "timeout: failed to connect service \"127.0.0.1:{port}\" within 1s: context deadline exceeded"
        ))
    );
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn r21_grpc_rpc_deadline() {
    // Accepts the connection and the HTTP/2 preface, then never answers the call: a raw TCP
    // server that reads forever.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        // An empty SETTINGS frame completes the client's handshake; then stay silent.
        let _ = s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await;
        let mut sink = vec![0u8; 65536];
        while let Ok(n) = s.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    });
    assert_eq!(
        probe(&grpc_probe(port, None)).await,
        ProbeResult::Failure("timeout: health rpc did not complete within 1s".into())
    );
}

// ---------------------------------------------------------------------------------------------
// exec (R18) and retries (R16)

fn exec_probe(command: &[&str], timeout: i32) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(command.iter().map(|s| (*s).to_string()).collect()),
        }),
        timeout_seconds: Some(timeout),
        ..Default::default()
    }
}

#[tokio::test]
async fn r18_exec_exit_zero_is_success() {
    assert_eq!(
        probe(&exec_probe(&["sh", "-c", "echo ok"], 1)).await,
        ProbeResult::Success
    );
}

#[tokio::test]
async fn r18_exec_non_zero_is_failure_with_output_and_not_retried() {
    let rt = HostExec::default();
    let p = exec_probe(
        &["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"],
        1,
    );
    let result = run_probe(&rt, &(), 1, &container(), &p).await;
    assert_eq!(
        result,
        ProbeResult::Failure("to-stdout\nto-stderr\n".into())
    );
    assert_eq!(rt.execs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn r18_exec_timeout_message() {
    let started = Instant::now();
    let result = probe(&exec_probe(&["sh", "-c", "sleep 30"], 1)).await;
    assert_eq!(
        result,
        ProbeResult::Failure("command \"sh -c sleep 30\" timed out".into())
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn r18_exec_expands_static_env_only() {
    let c = Container {
        name: "app".into(),
        env: Some(vec![
            EnvVar {
                name: "GREETING".into(),
                value: Some("hello".into()),
                ..Default::default()
            },
            EnvVar {
                name: "FROM_API".into(),
                value_from: Some(Default::default()),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let p = exec_probe(
        &[
            "sh",
            "-c",
            "printf %s '$(GREETING)|$(FROM_API)|$(MISSING)|$$(GREETING)'; exit 1",
        ],
        1,
    );
    let result = run_probe(&HostExec::default(), &(), 1, &c, &p).await;
    assert_eq!(
        result,
        ProbeResult::Failure("hello||$(MISSING)|$(GREETING)".into())
    );
}

#[tokio::test]
async fn r16_runtime_errors_are_retried_three_times() {
    let rt = HostExec::default();
    let p = exec_probe(&["/nonexistent/probe-binary"], 1);
    let result = run_probe(&rt, &(), 1, &container(), &p).await;
    assert!(
        matches!(&result, ProbeResult::Error(e) if e.starts_with("exec \"/nonexistent/probe-binary\": ")),
        "{result:?}"
    );
    assert_eq!(rt.execs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn r1_timeout_defaults_to_one_second() {
    let server = http_server(None, |_| Reply::Hang).await;
    let mut p = http_probe(IntOrString::Int(server.port()), "/");
    p.timeout_seconds = None;
    let started = Instant::now();
    assert!(matches!(probe(&p).await, ProbeResult::Failure(_)));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(950) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn http_probe_leaves_no_connection_open() {
    // After a probe, the server side sees the connection closed (EOF), not an idle socket.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = i32::from(listener.local_addr().unwrap().port());
    let server = tokio::spawn(async move {
        let (mut s, _): (TcpStream, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            head.extend_from_slice(&buf[..n]);
        }
        // Keep-alive style answer: the client must close on its own (Connection: close).
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await
    });
    assert_eq!(
        probe(&http_probe(IntOrString::Int(port), "/")).await,
        ProbeResult::Success
    );
    let after = server.await.unwrap();
    assert!(matches!(after, Ok(Ok(0))), "{after:?}");
}
