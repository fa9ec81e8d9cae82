//! NodePorts (`pkg/scheduler/framework/plugins/nodeports`, `HostPortInfo.CheckConflict`): a
//! pod's host ports against those the node's pods hold.

use k8s_openapi::api::core::v1::Pod;

/// The address a host port with no `hostIP` binds.
const ALL_ADDRESSES: &str = "0.0.0.0";

/// One host port a container asks for: (host IP, protocol, port), sanitized as the scheduler
/// keeps them (`0.0.0.0` for no IP, `TCP` for no protocol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// The host address (`0.0.0.0`: all of them).
    pub ip: String,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The port, above 0.
    pub port: i32,
}

/// `getContainerPorts`: the host ports (`hostPort > 0`) of the pod's regular containers.
#[must_use]
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|port| *port > 0)?;
            let ip = p
                .host_ip
                .as_deref()
                .filter(|ip| !ip.is_empty())
                .unwrap_or(ALL_ADDRESSES);
            let protocol = p
                .protocol
                .as_deref()
                .filter(|p| !p.is_empty())
                .unwrap_or("TCP");
            Some(HostPort {
                ip: ip.to_owned(),
                protocol: protocol.to_owned(),
                port,
            })
        })
        .collect()
}

/// `CheckConflict`: the same protocol and port on the same address, or on `0.0.0.0` on either
/// side.
#[must_use]
pub fn conflicts(want: &HostPort, used: &HostPort) -> bool {
    want.protocol == used.protocol
        && want.port == used.port
        && (want.ip == used.ip || want.ip == ALL_ADDRESSES || used.ip == ALL_ADDRESSES)
}

/// Whether any host port `pod` wants is taken by one of `pods`.
#[must_use]
pub fn ports_conflict(pod: &Pod, pods: &[&Pod]) -> bool {
    let want = host_ports(pod);
    if want.is_empty() {
        return false;
    }
    let used: Vec<HostPort> = pods.iter().flat_map(|p| host_ports(p)).collect();
    want.iter().any(|w| used.iter().any(|u| conflicts(w, u)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ports: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "ports": ports}]}})).unwrap()
    }

    /// `TestNodePorts`' table (protocol/IP/port triples).
    #[test]
    fn host_port_conflicts_as_upstream() {
        let p = |proto: &str, ip: &str, port: i32| json!({"containerPort": 80, "hostPort": port, "protocol": proto, "hostIP": ip});
        let cases = [
            (json!([]), json!([]), false),
            (
                json!([p("UDP", "127.0.0.1", 8080)]),
                json!([p("UDP", "127.0.0.1", 9090)]),
                false,
            ),
            (
                json!([p("UDP", "127.0.0.1", 8080)]),
                json!([p("UDP", "127.0.0.1", 8080)]),
                true,
            ),
            (
                json!([p("UDP", "127.0.0.1", 8080)]),
                json!([p("TCP", "127.0.0.1", 8080)]),
                false,
            ),
            (
                json!([p("TCP", "127.0.0.1", 8001), p("UDP", "127.0.0.1", 8080)]),
                json!([p("UDP", "127.0.0.1", 8080)]),
                true,
            ),
            (
                json!([p("TCP", "127.0.0.1", 8001)]),
                json!([p("TCP", "127.0.0.2", 8001)]),
                false,
            ),
            (
                json!([p("TCP", "0.0.0.0", 8001)]),
                json!([p("TCP", "127.0.0.1", 8001)]),
                true,
            ),
            (
                json!([p("TCP", "127.0.0.1", 8001)]),
                json!([p("TCP", "0.0.0.0", 8001)]),
                true,
            ),
            (
                json!([p("TCP", "", 8001)]),
                json!([p("TCP", "10.0.0.1", 8001)]),
                true,
            ),
            (
                json!([p("", "127.0.0.1", 8001)]),
                json!([p("TCP", "127.0.0.1", 8001)]),
                true,
            ),
            // Container ports without a host port hold nothing.
            (
                json!([{"containerPort": 80}]),
                json!([{"containerPort": 80}]),
                false,
            ),
        ];
        for (i, (want, used, conflict)) in cases.into_iter().enumerate() {
            let (a, b) = (pod(want.clone()), pod(used.clone()));
            assert_eq!(
                ports_conflict(&a, &[&b]),
                conflict,
                "case {i}: {want} / {used}"
            );
        }
    }
}
