//! The API on the pod network: pods with their own network namespace (the `oci` class) reach
//! the node at the host's address on their network (the CNI bridge's gateway), never at its
//! loopback, so the API listens there too, on the port of its main address.
//!
//! The bridge, and so the address, appears only when the first pod is attached (the `bridge`
//! plugin makes it), and goes when someone deletes it. The listener is bound with
//! `IP_FREEBIND` (`IPV6_FREEBIND`): the kernel takes a bind to an address the host does not
//! hold yet, and connections arrive once it does, without a watch of the links or a bridge
//! made ahead of the CNI plugin that owns it.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Whether a socket listening on `main` already takes connections to `ip` (a wildcard of
/// the same family; `[::]` also takes IPv4, as Linux binds it dual-stack by default).
pub(crate) fn covers(main: SocketAddr, ip: IpAddr) -> bool {
    main.ip() == ip || (main.ip().is_unspecified() && (main.is_ipv6() || ip.is_ipv4()))
}

/// A listener on `addr`, bound whether or not this host holds the address yet.
pub(crate) fn bind_freebind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => {
            let socket = TcpSocket::new_v4()?;
            rustix::net::sockopt::set_ip_freebind(&socket, true)?;
            socket
        }
        SocketAddr::V6(_) => {
            let socket = TcpSocket::new_v6()?;
            rustix::net::sockopt::set_ipv6_freebind(&socket, true)?;
            socket
        }
    };
    // As `TcpListener::bind` (and its backlog): a restarted serve rebinds while old
    // connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(128)
}

/// The next connection on `main` or, when there is one, `pod` (both accepts are cancel-safe).
pub(crate) async fn accept_any(
    main: &TcpListener,
    pod: Option<&TcpListener>,
) -> std::io::Result<(TcpStream, SocketAddr)> {
    match pod {
        None => main.accept().await,
        Some(pod) => tokio::select! {
            accepted = main.accept() => accepted,
            accepted = pod.accept() => accepted,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_the_pod_network() {
        let ip: IpAddr = "10.244.0.1".parse().unwrap();
        let cases = [
            ("127.0.0.1:6443", false),
            ("0.0.0.0:6443", true),
            ("[::]:6443", true),
            ("[::1]:6443", false),
            ("10.244.0.1:6443", true),
        ];
        for (main, want) in cases {
            assert_eq!(covers(main.parse().unwrap(), ip), want, "{main}");
        }
        assert!(!covers(
            "0.0.0.0:6443".parse().unwrap(),
            "fd00::1".parse().unwrap()
        ));
    }

    #[tokio::test]
    async fn an_address_the_host_does_not_hold_is_bound_and_served_once_it_does() {
        // 192.0.2.0/24 is TEST-NET-1: no host holds it. A plain bind refuses it (unless the
        // host allows any with `ip_nonlocal_bind`); a free bind takes it.
        let absent: SocketAddr = "192.0.2.77:0".parse().unwrap();
        let nonlocal = std::fs::read_to_string("/proc/sys/net/ipv4/ip_nonlocal_bind");
        if nonlocal.is_ok_and(|v| v.trim() == "0") {
            assert!(TcpListener::bind(absent).await.is_err());
        }
        let listener = bind_freebind(absent).unwrap();
        assert_eq!(listener.local_addr().unwrap().ip(), absent.ip());
        // An address the host holds is served as by a plain bind.
        let held = bind_freebind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = held.local_addr().unwrap();
        let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::spawn(async move { TcpStream::connect(addr).await });
        let (_, peer) = accept_any(&main, Some(&held)).await.unwrap();
        assert_eq!(
            peer,
            client.await.unwrap().unwrap().local_addr().unwrap(),
            "accepted on the second listener"
        );
    }
}
