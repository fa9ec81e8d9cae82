//! The node's [`ObjectSource`]: ConfigMaps and Secrets read from podvisor's store, where the
//! API server keeps them (`configmaps/<ns>/<name>`, `secrets/<ns>/<name>`).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use podvisor_store::{Key, Store};

use crate::objects::ObjectSource;

/// ConfigMaps and Secrets from the store.
#[derive(Clone)]
pub struct StoreObjects {
    store: Store,
}

impl StoreObjects {
    /// Reads from `store`.
    #[must_use]
    pub fn new(store: Store) -> StoreObjects {
        StoreObjects { store }
    }

    fn read(
        &self,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, String> {
        self.store
            .get(&Key::new(plural, ns, name))
            .map_err(|e| format!("reading {plural} {ns}/{name}: {e}"))
    }
}

impl ObjectSource for StoreObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>, String> {
        self.read("configmaps", namespace, name)?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| format!("decoding configmaps {namespace}/{name}: {e}"))
    }

    fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, String> {
        self.read("secrets", namespace, name)?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| format!("decoding secrets {namespace}/{name}: {e}"))
    }
}
