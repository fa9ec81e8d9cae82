//! The ConfigMaps and Secrets a container start reads, as the node agent fetched them for it
//! (the kubelet's `configMapManager`/`secretManager` answers). The runtime never fetches
//! anything: what is not here does not exist.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::{Deserialize, Serialize};

/// A ConfigMap's contents.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigMapData {
    /// `data`.
    pub data: BTreeMap<String, String>,
    /// `binaryData`.
    pub binary_data: BTreeMap<String, Vec<u8>>,
}

/// A Secret's contents (`data`, decoded).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretData {
    /// `data`.
    pub data: BTreeMap<String, Vec<u8>>,
    /// `type`.
    pub type_: String,
    /// `metadata.uid`: with the pod's namespace and the name, the Secret's coordinates, which
    /// the image pull records keep (empty for a Secret of `podvisor run`'s manifest).
    #[serde(default)]
    pub uid: String,
}

impl From<&ConfigMap> for ConfigMapData {
    fn from(cm: &ConfigMap) -> Self {
        ConfigMapData {
            data: cm.data.clone().unwrap_or_default(),
            binary_data: cm
                .binary_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
        }
    }
}

impl From<&Secret> for SecretData {
    fn from(s: &Secret) -> Self {
        SecretData {
            data: s
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
            type_: s.type_.clone().unwrap_or_default(),
            uid: s.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// The objects of the pod's namespace a start may read, by name. Missing names are objects
/// that do not exist.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PodObjects {
    /// ConfigMaps by name.
    pub config_maps: BTreeMap<String, ConfigMapData>,
    /// Secrets by name.
    pub secrets: BTreeMap<String, SecretData>,
    /// The pod's service account tokens for its `serviceAccountToken` projections, by
    /// [`TokenKey`]: the token, or why it could not be had (the mount's error).
    pub tokens: BTreeMap<TokenKey, Result<String, String>>,
    /// Where the `kubernetes` Service of the `default` namespace answers for this pod
    /// (host, port): the kubelet gives every container its `KUBERNETES_SERVICE_*` and
    /// `KUBERNETES_PORT*` variables.
    pub api_service: Option<(String, u16)>,
    /// The same for a pod with its own network namespace on the pod network (an `oci` pod
    /// without `hostNetwork`), which cannot reach the host's loopback: the API's address on
    /// that network, if it listens there.
    pub api_service_pod_network: Option<(String, u16)>,
}

/// What a `serviceAccountToken` projection asks for (the pod and its service account are
/// the pod's own).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TokenKey {
    /// `audience`; empty: the API server's own.
    pub audience: String,
    /// `expirationSeconds` (the API server defaults it to 3600).
    pub expiration_seconds: i64,
}

/// The API server's `expirationSeconds` default for a `serviceAccountToken` projection.
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;

impl TokenKey {
    /// The key of a projection.
    #[must_use]
    pub fn of(source: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection) -> TokenKey {
        TokenKey {
            audience: source.audience.clone().unwrap_or_default(),
            expiration_seconds: source
                .expiration_seconds
                .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
        }
    }

    /// The keys of the pod's `serviceAccountToken` projections.
    #[must_use]
    pub fn of_pod(pod: &k8s_openapi::api::core::v1::Pod) -> std::collections::BTreeSet<TokenKey> {
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .flat_map(|v| v.projected.iter().flat_map(|p| p.sources.iter().flatten()))
            .filter_map(|s| s.service_account_token.as_ref())
            .map(TokenKey::of)
            .collect()
    }
}

/// Names and keys only: secret values never reach a log line through `{:?}`.
impl fmt::Debug for PodObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
        f.debug_struct("PodObjects")
            .field("config_maps", &self.config_maps.keys().collect::<Vec<_>>())
            .field(
                "secrets",
                &self
                    .secrets
                    .iter()
                    .map(|(n, s)| (n, keys(&s.data)))
                    .collect::<Vec<_>>(),
            )
            .field("tokens", &self.tokens.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl fmt::Debug for ConfigMapData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigMapData")
            .field(
                "keys",
                &self
                    .data
                    .keys()
                    .chain(self.binary_data.keys())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretData")
            .field("type", &self.type_)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The error the kubelet's managers give for a missing object: `configmap "x" not found`.
pub(crate) fn not_found(kind: &str, name: &str) -> String {
    format!("{kind} {} not found", podvisor_api::gotext::quote(name))
}
