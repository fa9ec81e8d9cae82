//! `kubectl port-forward`'s connection into a pod, as containerd's CRI `PortForward` makes it:
//! a TCP connection to `localhost:<port>` made inside the pod's network namespace (the host's
//! for a pod on the host network), IPv4 first, then IPv6, with containerd's words when both
//! fail. The socket stays in the pod's namespace after the helper thread that made it ends.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::RuntimeError;
use crate::sandbox::netns::{NsKind, in_namespace};
use podvisor_api::gotext::os_error;

/// How long a connection to the pod's loopback may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to `localhost:port` in the network namespace held at `netns` (`None`: this
/// host's). `sandbox` names the pod's sandbox in the error.
///
/// # Errors
/// [`RuntimeError::Other`] worded as containerd's when neither address answers.
pub async fn dial_localhost(
    netns: Option<PathBuf>,
    sandbox: String,
    port: u16,
) -> Result<tokio::net::TcpStream, RuntimeError> {
    let stream = tokio::task::spawn_blocking(move || match &netns {
        Some(path) => in_namespace(path, NsKind::Net, move || connect(port, Some(&sandbox)))
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .map_err(|e| {
                format!(
                    "failed to execute portforward in network namespace {:?}: {e}",
                    path.display().to_string()
                )
            }),
        None => connect(port, None),
    })
    .await
    .map_err(|e| RuntimeError::Other(format!("port-forward: {e}")))?
    .map_err(RuntimeError::Other)?;
    stream
        .set_nonblocking(true)
        .map_err(|source| RuntimeError::Io {
            what: "port-forward: set the connection non-blocking".to_owned(),
            source,
        })?;
    tokio::net::TcpStream::from_std(stream).map_err(|source| RuntimeError::Io {
        what: "port-forward: register the connection".to_owned(),
        source,
    })
}

fn connect(port: u16, sandbox: Option<&str>) -> Result<std::net::TcpStream, String> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    let e4 = match std::net::TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT) {
        Ok(stream) => return Ok(stream),
        Err(e) => e,
    };
    let e6 = match std::net::TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT) {
        Ok(stream) => return Ok(stream),
        Err(e) => e,
    };
    let inside = sandbox
        .map(|id| format!(" inside namespace {id:?}"))
        .unwrap_or_default();
    Err(format!(
        "failed to connect to localhost:{port}{inside}, IPv4: dial tcp4 {v4}: connect: {} \
         IPv6 dial tcp6 {v6}: connect: {} ",
        os_error(&e4),
        os_error(&e6)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn connects_to_a_listener_on_the_hosts_loopback() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            conn.write_all(b"hi").await.unwrap();
        });
        let mut stream = dial_localhost(None, "sb".into(), port).await.unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hi");
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_closed_port_is_refused_with_containerds_words() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let err = dial_localhost(None, "sb".into(), port).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "failed to connect to localhost:{port}, IPv4: dial tcp4 127.0.0.1:{port}: \
                 connect: connection refused IPv6 dial tcp6 [::1]:{port}: connect: "
            )),
            "{text}"
        );
    }
}
