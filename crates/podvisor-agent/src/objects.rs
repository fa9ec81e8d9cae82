//! Where the agent reads the ConfigMaps and Secrets its pods refer to (the kubelet's
//! `configMapManager` and `secretManager`). The agent assumes nothing about who serves them:
//! [`ObjectSource`] is implemented over podvisor's store by the node
//! ([`crate::node::StoreObjects`]), over the objects of a manifest file by `podvisor run`
//! ([`StaticObjects`]), and by nothing at all ([`NoObjects`]).
//!
//! Fetched objects travel to the runtime as a [`PodObjects`] snapshot of the names a start
//! needs; the runtime resolves keys and reports what is missing with the kubelet's words.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use podvisor_api::references::ObjectNames;
use podvisor_runtime::config::objects::{ConfigMapData, PodObjects, SecretData};

/// Reads ConfigMaps and Secrets by namespace and name. `Ok(None)`: it does not exist; `Err`:
/// it could not be read (the message becomes the start's or the mount's error).
pub trait ObjectSource: Send + Sync {
    /// The ConfigMap `namespace/name`.
    ///
    /// # Errors
    ///
    /// Why it could not be read.
    fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>, String>;

    /// The Secret `namespace/name`.
    ///
    /// # Errors
    ///
    /// Why it could not be read.
    fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, String>;

    /// A token of the service account `namespace/name` (a `TokenRequest`, as the kubelet
    /// asks `serviceaccounts/<name>/token`). By default there is no one to ask.
    ///
    /// # Errors
    ///
    /// Why no token was issued (`serviceaccounts "x" not found`, ...).
    fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequestStatus, String> {
        let _ = (namespace, name, request);
        Err("no API server to request service account tokens from".to_owned())
    }

    /// Where the `kubernetes` Service answers for a pod on the host network (host, port),
    /// if there is one: containers get its `KUBERNETES_SERVICE_*` variables.
    fn kubernetes_service(&self) -> Option<(String, u16)> {
        None
    }

    /// The same for a pod on the pod network (its own network namespace), which cannot
    /// reach the host's loopback: the API's address on that network, if it listens there.
    fn kubernetes_service_on_pod_network(&self) -> Option<(String, u16)> {
        None
    }
}

/// A source without objects: every reference is to something that does not exist.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObjects;

impl ObjectSource for NoObjects {
    fn config_map(&self, _: &str, _: &str) -> Result<Option<ConfigMap>, String> {
        Ok(None)
    }

    fn secret(&self, _: &str, _: &str) -> Result<Option<Secret>, String> {
        Ok(None)
    }
}

/// A fixed set of objects (those of a manifest file), by namespace and name.
#[derive(Debug, Clone, Default)]
pub struct StaticObjects {
    config_maps: BTreeMap<(String, String), ConfigMap>,
    secrets: BTreeMap<(String, String), Secret>,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned()),
        meta.name.clone().unwrap_or_default(),
    )
}

impl StaticObjects {
    /// Adds a ConfigMap (namespace `default` when it has none).
    pub fn add_config_map(&mut self, cm: ConfigMap) {
        self.config_maps.insert(key_of(&cm.metadata), cm);
    }

    /// Adds a Secret (namespace `default` when it has none).
    pub fn add_secret(&mut self, secret: Secret) {
        self.secrets.insert(key_of(&secret.metadata), secret);
    }
}

impl ObjectSource for StaticObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>, String> {
        Ok(self
            .config_maps
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned())
    }

    fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, String> {
        Ok(self
            .secrets
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned())
    }
}

/// Fetches the objects `names` refers to in `namespace`; those that do not exist are left
/// out.
///
/// # Errors
///
/// The first read that failed.
pub fn fetch(
    source: &dyn ObjectSource,
    namespace: &str,
    names: &ObjectNames,
) -> Result<PodObjects, String> {
    let mut objects = PodObjects {
        api_service: source.kubernetes_service(),
        api_service_pod_network: source.kubernetes_service_on_pod_network(),
        ..PodObjects::default()
    };
    for name in &names.config_maps {
        if let Some(cm) = source.config_map(namespace, name)? {
            objects
                .config_maps
                .insert(name.clone(), ConfigMapData::from(&cm));
        }
    }
    for name in &names.secrets {
        if let Some(s) = source.secret(namespace, name)? {
            objects.secrets.insert(name.clone(), SecretData::from(&s));
        }
    }
    Ok(objects)
}
