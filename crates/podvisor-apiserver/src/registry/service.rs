//! Services and EndpointSlices, read-only: `serve` runs no service proxy, so the only Service
//! is the API's own `kubernetes` Service in `default` (type ClusterIP, port 443 `https` to
//! the API's port) with its EndpointSlice (`kubernetes.io/service-name: kubernetes`, the
//! API's address and port), reconciled at start ([`reconcile_kubernetes_service`]) as the
//! API server's endpoint reconciler keeps them. Reads (get, list, watch, `Table`) are the
//! registry's; every write is refused with why and where Services work.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use podvisor_store::Store;
use serde_json::{Value, json};

use super::Strategy;
use crate::db::{self, ENDPOINTSLICES, SERVICES};
use crate::request::{new_uid, now, time_text};
use crate::status::ApiResult;

/// Why Services and EndpointSlices take no writes.
pub(crate) const NO_SERVICE_PROXY: &str = "podvisor serve runs no service proxy, so its only Service is the API's own \
     \"kubernetes\" Service (read-only); Services need a cluster: run \"podvisor node\" joined to a real \
     control plane";

/// The `kubernetes` Service's cluster IP: the first address of kubeadm's default service
/// range (`10.96.0.0/12`), which the serving certificate does not name (nothing routes it
/// here; in-cluster clients use `KUBERNETES_SERVICE_HOST`, the API's real address).
pub(crate) const KUBERNETES_CLUSTER_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// The namespace and name of the API's Service and its EndpointSlice.
const NAMESPACE: &str = "default";
const NAME: &str = "kubernetes";

pub(super) static SERVICE: Strategy = Strategy {
    short_names: &["svc"],
    ..Strategy::read_only::<Service>(SERVICES, "service", NO_SERVICE_PROXY)
};

pub(super) static ENDPOINTSLICE: Strategy =
    Strategy::read_only::<EndpointSlice>(ENDPOINTSLICES, "endpointslice", NO_SERVICE_PROXY);

/// The Service as the API server's reconciler writes it.
fn kubernetes_service(api_port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_CLUSTER_IP.to_string(),
            "clusterIPs": [KUBERNETES_CLUSTER_IP.to_string()],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": api_port}],
        },
        "status": {"loadBalancer": {}},
    })
}

/// The EndpointSlice of the `kubernetes` Service: the API's address and port.
fn kubernetes_endpoint_slice(api: SocketAddr) -> Value {
    let family = if api.is_ipv4() { "IPv4" } else { "IPv6" };
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME},
        },
        "addressType": family,
        "endpoints": [{"addresses": [api.ip().to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": api.port(), "protocol": "TCP"}],
    })
}

/// The address the endpoint names: the one in-cluster clients reach (the pod network's, when
/// there is one), else the listening address (loopback for a wildcard).
pub(crate) fn endpoint_address(listen: SocketAddr, pod_network: Option<SocketAddr>) -> SocketAddr {
    pod_network.unwrap_or_else(|| {
        if listen.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), listen.port())
        } else {
            listen
        }
    })
}

/// Creates `want` under `res`, or rewrites the stored one when its content differs (its
/// identity and creation time kept).
fn reconcile(store: &Store, res: db::Resource, mut want: Value) -> ApiResult<()> {
    let current = db::try_get(store, res, NAMESPACE, NAME)?;
    let Some(current) = current else {
        want["metadata"]["uid"] = json!(new_uid());
        want["metadata"]["creationTimestamp"] = json!(time_text(now()));
        return match db::create(store, res, NAMESPACE, NAME, want) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        };
    };
    for k in ["uid", "creationTimestamp", "resourceVersion"] {
        want["metadata"][k] = current["metadata"][k].clone();
    }
    if want == current {
        return Ok(());
    }
    db::update(store, res, NAMESPACE, NAME, want, db::object_rv(&current)).map(|_| ())
}

/// Creates or repairs the `kubernetes` Service and its EndpointSlice for an API served at
/// `endpoint` (see [`endpoint_address`]).
///
/// # Errors
///
/// The store failed.
pub(crate) fn reconcile_kubernetes_service(store: &Store, endpoint: SocketAddr) -> ApiResult<()> {
    reconcile(store, SERVICES, kubernetes_service(endpoint.port()))?;
    reconcile(store, ENDPOINTSLICES, kubernetes_endpoint_slice(endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_and_its_slice_are_repaired_not_duplicated() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let api: SocketAddr = "10.88.0.1:6443".parse().unwrap();
        reconcile_kubernetes_service(&store, api).unwrap();
        let svc = db::get(&store, SERVICES, "default", "kubernetes").unwrap();
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], json!(6443));
        let uid = svc["metadata"]["uid"].clone();
        // A restart on another port rewrites both, keeping the Service's identity.
        let moved: SocketAddr = "10.88.0.1:7443".parse().unwrap();
        reconcile_kubernetes_service(&store, moved).unwrap();
        let svc = db::get(&store, SERVICES, "default", "kubernetes").unwrap();
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], json!(7443));
        assert_eq!(svc["metadata"]["uid"], uid);
        let slice = db::get(&store, ENDPOINTSLICES, "default", "kubernetes").unwrap();
        assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.88.0.1"]));
        assert_eq!(slice["ports"][0]["port"], json!(7443));
        let rv = slice["metadata"]["resourceVersion"].clone();
        reconcile_kubernetes_service(&store, moved).unwrap();
        let again = db::get(&store, ENDPOINTSLICES, "default", "kubernetes").unwrap();
        assert_eq!(
            again["metadata"]["resourceVersion"], rv,
            "an unchanged slice is not rewritten"
        );
        assert_eq!(
            endpoint_address("0.0.0.0:6443".parse().unwrap(), None),
            "127.0.0.1:6443".parse::<SocketAddr>().unwrap()
        );
    }
}
