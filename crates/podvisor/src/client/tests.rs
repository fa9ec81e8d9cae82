//! Kubeconfig parsing and resolution, and one real HTTPS round trip against a throwaway TLS
//! server (CA and certificate made here) that checks the bearer token and the CA verification.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::*;

fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The shape `podvisor serve` writes.
fn kubeconfig_text(server: &str, ca_pem: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: podvisor\n  cluster:\n    \
         certificate-authority-data: {}\n    server: {server}\ncontexts:\n- name: podvisor\n  \
         context:\n    cluster: podvisor\n    namespace: team-a\n    user: podvisor\n\
         current-context: podvisor\npreferences: {{}}\nusers:\n- name: podvisor\n  user:\n    \
         token: {token}\n",
        b64(ca_pem.as_bytes())
    )
}

#[test]
fn base64_round_trip() {
    for text in [
        "",
        "a",
        "ab",
        "abc",
        "abcd",
        "-----BEGIN CERTIFICATE-----\n",
    ] {
        assert_eq!(
            base64_decode(&b64(text.as_bytes())).unwrap(),
            text.as_bytes()
        );
    }
    assert_eq!(base64_decode("aGk=\n").unwrap(), b"hi");
    assert!(base64_decode("a*b").is_none());
}

#[test]
fn parses_serve_kubeconfig() {
    let text = kubeconfig_text("https://127.0.0.1:6443", "PEM", "s3cret");
    let cfg = Kubeconfig::parse(&text, Path::new("/")).unwrap();
    assert_eq!(
        cfg,
        Kubeconfig {
            scheme: "https".into(),
            host: "127.0.0.1".into(),
            port: 6443,
            base_path: String::new(),
            ca_pem: Some(b"PEM".to_vec()),
            token: Some("s3cret".into()),
            namespace: Some("team-a".into()),
            tls_server_name: None,
        }
    );
}

#[test]
fn picks_the_current_context_and_reads_files() {
    let dir = std::env::temp_dir().join(format!("podvisor-kubeconfig-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.crt"), "CA").unwrap();
    std::fs::write(dir.join("token"), "tok\n").unwrap();
    let text = "\
clusters:
- name: a
  cluster: {server: 'https://a.example'}
- name: b
  cluster:
    server: https://[::1]:8443/prefix/
    certificate-authority: ca.crt
    tls-server-name: kubernetes
contexts:
- {name: one, context: {cluster: a, user: u}}
- {name: two, context: {cluster: b, user: u}}
current-context: two
users:
- name: u
  user: {tokenFile: token}
";
    let cfg = Kubeconfig::parse(text, &dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(cfg.host, "::1");
    assert_eq!(cfg.port, 8443);
    assert_eq!(cfg.base_path, "/prefix");
    assert_eq!(cfg.authority(), "[::1]:8443");
    assert_eq!(cfg.ca_pem.as_deref(), Some(&b"CA"[..]));
    assert_eq!(cfg.token.as_deref(), Some("tok"));
    assert_eq!(cfg.namespace, None);
    assert_eq!(cfg.tls_server_name.as_deref(), Some("kubernetes"));

    let err = Kubeconfig::parse("current-context: x\n", &dir).unwrap_err();
    assert_eq!(err.to_string(), "context \"x\" not found");
    assert_eq!(
        parse_server("https://h").unwrap(),
        ("https".into(), "h".into(), 443, String::new())
    );
    assert!(parse_server("ftp://h").is_err());
}

#[test]
fn kubeconfig_path_order() {
    let flag = Path::new("/f");
    assert_eq!(
        kubeconfig_path(Some(flag), Some(OsStr::new("/e")), true, None, None),
        flag
    );
    assert_eq!(
        kubeconfig_path(
            None,
            Some(OsStr::new("/nonexistent1:/nonexistent2")),
            true,
            None,
            None
        ),
        Path::new("/nonexistent1")
    );
    assert_eq!(
        kubeconfig_path(
            None,
            Some(OsStr::new("/nonexistent:/proc/self/status")),
            true,
            None,
            None
        ),
        Path::new("/proc/self/status")
    );
    assert_eq!(
        kubeconfig_path(None, None, true, Some(OsStr::new("/x")), None),
        Path::new("/var/lib/podvisor/kubeconfig")
    );
    assert_eq!(
        kubeconfig_path(
            None,
            Some(OsStr::new("")),
            false,
            Some(OsStr::new("/x")),
            None
        ),
        Path::new("/x/podvisor/kubeconfig")
    );
    assert_eq!(
        kubeconfig_path(None, None, false, None, Some(OsStr::new("/home/u"))),
        Path::new("/home/u/.local/state/podvisor/kubeconfig")
    );
}

#[test]
fn api_errors_print_like_kubectl() {
    let not_found = ApiError::from_response(
        StatusCode::NOT_FOUND,
        br#"{"kind":"Status","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404}"#,
    );
    assert!(not_found.is_not_found());
    assert_eq!(
        not_found.to_string(),
        r#"Error from server (NotFound): pods "x" not found"#
    );
    let invalid = ApiError::from_response(
        StatusCode::UNPROCESSABLE_ENTITY,
        br#"{"kind":"Status","message":"...","reason":"Invalid","code":422,
            "details":{"name":"web","kind":"Pod","causes":[
              {"field":"spec.containers[0].name","message":"Required value"},
              {"field":"spec.containers[0].image","message":"Required value"}]}}"#,
    );
    assert_eq!(
        invalid.to_string(),
        "The Pod \"web\" is invalid: \n* spec.containers[0].name: Required value\n* spec.containers[0].image: Required value"
    );
    let plain = ApiError::from_response(StatusCode::BAD_GATEWAY, b"upstream down");
    assert_eq!(plain.to_string(), "Error from server: upstream down");
}

struct Pki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn make_pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.clone().self_signed(&ca_key).unwrap();
    let mut server = CertificateParams::new(Vec::<String>::new()).unwrap();
    server
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = KeyPair::generate().unwrap();
    let cert = server.signed_by(&key, &Issuer::new(ca, &ca_key)).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// Serves one canned HTTP response per connection over TLS and hands back each request head.
async fn tls_server(
    pki: &Pki,
    response: &'static str,
) -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, rx)
}

#[tokio::test]
async fn https_round_trip_with_ca_and_token() {
    let pki = make_pki();
    let body = r#"{"kind":"Pod","metadata":{"name":"web"}}"#;
    let response: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let (port, mut heads) = tls_server(&pki, response).await;
    let text = kubeconfig_text(&format!("https://127.0.0.1:{port}"), &pki.ca_pem, "s3cret");
    let client = Client::new(Kubeconfig::parse(&text, Path::new("/")).unwrap()).unwrap();
    assert_eq!(client.default_namespace(), "team-a");

    let pod = client
        .get("/api/v1/namespaces/team-a/pods/web")
        .await
        .unwrap();
    assert_eq!(pod["metadata"]["name"], "web");
    let head = heads.recv().await.unwrap();
    assert!(
        head.starts_with("GET /api/v1/namespaces/team-a/pods/web HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer s3cret\r\n"),
        "{head}"
    );

    // A CA that did not sign the server's certificate is refused.
    let other = make_pki();
    let text = kubeconfig_text(
        &format!("https://127.0.0.1:{port}"),
        &other.ca_pem,
        "s3cret",
    );
    let client = Client::new(Kubeconfig::parse(&text, Path::new("/")).unwrap()).unwrap();
    let err = client.get("/api").await.unwrap_err();
    assert!(format!("{err:#}").contains("TLS handshake"), "{err:#}");
}

#[tokio::test]
async fn error_statuses_and_streams() {
    let pki = make_pki();
    let status = r#"{"kind":"Status","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","code":404}"#;
    let response: &'static str = Box::leak(
        format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{status}",
            status.len()
        )
        .into_boxed_str(),
    );
    let (port, _heads) = tls_server(&pki, response).await;
    let text = kubeconfig_text(&format!("https://127.0.0.1:{port}"), &pki.ca_pem, "t");
    let client = Client::new(Kubeconfig::parse(&text, Path::new("/")).unwrap()).unwrap();
    let err = client.get("/api/v1/namespaces/a/pods/x").await.unwrap_err();
    let api = err.downcast_ref::<ApiError>().unwrap();
    assert_eq!(
        api.to_string(),
        r#"Error from server (NotFound): pods "x" not found"#
    );

    let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                   6\r\n{\"a\":1\r\n4\r\n}\n{\"\r\n5\r\nb\":2}\r\n0\r\n\r\n";
    let (port, _heads) = tls_server(&pki, chunked).await;
    let text = kubeconfig_text(&format!("https://127.0.0.1:{port}"), &pki.ca_pem, "t");
    let client = Client::new(Kubeconfig::parse(&text, Path::new("/")).unwrap()).unwrap();
    let mut stream = client.stream("/watch", JSON).await.unwrap();
    assert_eq!(stream.line().await.unwrap().unwrap(), br#"{"a":1}"#);
    assert_eq!(stream.line().await.unwrap().unwrap(), br#"{"b":2}"#);
    assert!(stream.line().await.unwrap().is_none());

    // Nothing listening: kubectl's "connection refused" message.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let text = kubeconfig_text(&format!("https://127.0.0.1:{port}"), &pki.ca_pem, "t");
    let client = Client::new(Kubeconfig::parse(&text, Path::new("/")).unwrap()).unwrap();
    let err = client.get("/api").await.unwrap_err();
    assert!(err.downcast_ref::<Refused>().is_some(), "{err:#}");
}
