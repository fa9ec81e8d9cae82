//! What `serve`'s node agent reads besides pods: ConfigMaps and Secrets from the store,
//! service account tokens from the API server's issuer (the kubelet's `TokenRequest`), and
//! the addresses at which containers reach the API (their `KUBERNETES_SERVICE_*` variables):
//! loopback on the host network, the API's listener on the pod network otherwise.

use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use podvisor_agent::node::StoreObjects;
use podvisor_agent::objects::ObjectSource;
use podvisor_apiserver::TokenIssuer;
use podvisor_store::Store;

/// See the module docs.
pub(crate) struct ServeObjects {
    pub(crate) objects: StoreObjects,
    pub(crate) store: Store,
    pub(crate) issuer: Arc<TokenIssuer>,
    /// The API's listening address.
    pub(crate) api: SocketAddr,
    /// Where pods on the pod network reach it ([`podvisor_apiserver::ApiServer::pod_network_addr`]).
    pub(crate) pod_network_api: Option<SocketAddr>,
}

impl ObjectSource for ServeObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>, String> {
        self.objects.config_map(namespace, name)
    }

    fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, String> {
        self.objects.secret(namespace, name)
    }

    fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequestStatus, String> {
        let answer = self
            .issuer
            .issue(&self.store, namespace, name, request)
            .map_err(|e| e.message)?;
        answer
            .status
            .ok_or_else(|| "the token request has no status".to_owned())
    }

    fn kubernetes_service(&self) -> Option<(String, u16)> {
        // A wildcard listen address answers on loopback too.
        let ip = match self.api.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
            ip if ip.is_unspecified() => "::1".to_owned(),
            ip => ip.to_string(),
        };
        Some((ip, self.api.port()))
    }

    fn kubernetes_service_on_pod_network(&self) -> Option<(String, u16)> {
        self.pod_network_api
            .map(|addr| (addr.ip().to_string(), addr.port()))
    }
}
