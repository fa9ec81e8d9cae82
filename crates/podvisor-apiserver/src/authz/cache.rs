//! The RBAC objects decoded once (the API server's informer caches for its RBAC authorizer):
//! a [`Snapshot`] of every Role, ClusterRole, RoleBinding and ClusterRoleBinding, rebuilt on
//! the first request after any of them changed. Changes are seen through store watches
//! drained without waiting before each use; the store hands a write's event to its watchers
//! before the write returns, so a request sent after a binding was written is authorized
//! with it (no informer lag).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use podvisor_store::{Store, Watch, WatchFrom};
use serde::de::DeserializeOwned;

use crate::db::{self, CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES, Resource};

/// The four kinds, decoded.
#[derive(Default)]
pub(crate) struct Snapshot {
    /// Every ClusterRoleBinding, by name.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// ClusterRoles by name.
    pub cluster_roles: HashMap<String, ClusterRole>,
    /// RoleBindings by namespace, by name.
    pub role_bindings: HashMap<String, Vec<RoleBinding>>,
    /// Roles by namespace and name.
    pub roles: HashMap<(String, String), Role>,
    /// What could not be read or decoded (reported as resolution errors).
    pub errors: Vec<String>,
}

fn decode<T: DeserializeOwned>(store: &Store, res: Resource, errors: &mut Vec<String>) -> Vec<T> {
    match db::list(store, res, None) {
        Err(e) => {
            errors.push(e.message);
            Vec::new()
        }
        Ok((values, _)) => values
            .into_iter()
            .filter_map(|v| match serde_json::from_value(v) {
                Ok(t) => Some(t),
                Err(e) => {
                    errors.push(format!("decoding a stored {}: {e}", res.kind));
                    None
                }
            })
            .collect(),
    }
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn namespace(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

impl Snapshot {
    /// Reads the four kinds from the store.
    pub(crate) fn read(store: &Store) -> Snapshot {
        let mut errors = Vec::new();
        let cluster_role_bindings = decode(store, CLUSTERROLEBINDINGS, &mut errors);
        let cluster_roles = decode::<ClusterRole>(store, CLUSTERROLES, &mut errors)
            .into_iter()
            .map(|r| (name(&r.metadata), r))
            .collect();
        let mut role_bindings: HashMap<String, Vec<RoleBinding>> = HashMap::new();
        for b in decode::<RoleBinding>(store, ROLEBINDINGS, &mut errors) {
            role_bindings
                .entry(namespace(&b.metadata))
                .or_default()
                .push(b);
        }
        let roles = decode::<Role>(store, ROLES, &mut errors)
            .into_iter()
            .map(|r| ((namespace(&r.metadata), name(&r.metadata)), r))
            .collect();
        Snapshot {
            cluster_role_bindings,
            cluster_roles,
            role_bindings,
            roles,
            errors,
        }
    }
}

#[derive(Default)]
struct Inner {
    watches: Vec<Watch>,
    snapshot: Option<Arc<Snapshot>>,
}

/// The cache: the current [`Snapshot`] and the watches that say when it is stale.
#[derive(Default)]
pub(crate) struct RbacCache {
    inner: Mutex<Inner>,
}

impl RbacCache {
    /// The snapshot, rebuilt if an RBAC object changed since it was read.
    pub(crate) fn snapshot(&self, store: &Store) -> Arc<Snapshot> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut stale = inner.snapshot.is_none() || inner.watches.is_empty();
        for w in &mut inner.watches {
            while w.try_next().is_some() {
                stale = true;
            }
            stale |= w.overflowed();
        }
        if stale {
            // Watch first, then read: a write between the two is seen again next time.
            let watches: Result<Vec<Watch>, _> =
                [ROLES, CLUSTERROLES, ROLEBINDINGS, CLUSTERROLEBINDINGS]
                    .into_iter()
                    .map(|res| db::watch(store, res, None, WatchFrom::Now))
                    .collect();
            let snapshot = Arc::new(Snapshot::read(store));
            match watches {
                Ok(w) => {
                    inner.watches = w;
                    inner.snapshot = Some(Arc::clone(&snapshot));
                }
                // Without watches nothing is cached: every use reads again.
                Err(_) => {
                    inner.watches.clear();
                    inner.snapshot = None;
                }
            }
            return snapshot;
        }
        Arc::clone(inner.snapshot.as_ref().expect("fresh snapshot"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podvisor_store::Key;
    use serde_json::json;

    #[test]
    fn a_snapshot_is_reused_until_an_rbac_object_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store.redb")).unwrap();
        let cache = RbacCache::default();
        let first = cache.snapshot(&store);
        assert!(first.cluster_role_bindings.is_empty());
        assert!(Arc::ptr_eq(&first, &cache.snapshot(&store)));
        // Other kinds do not make it stale.
        store
            .create(
                &Key::new("configmaps", "default", "c"),
                json!({"metadata": {"name": "c"}}),
            )
            .unwrap();
        assert!(Arc::ptr_eq(&first, &cache.snapshot(&store)));
        // A binding written now is in the very next snapshot.
        store
            .create(
                &Key::new("rolebindings", "team", "b"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": "b", "namespace": "team"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
            )
            .unwrap();
        let next = cache.snapshot(&store);
        assert!(!Arc::ptr_eq(&first, &next));
        assert_eq!(next.role_bindings["team"].len(), 1);
        assert!(Arc::ptr_eq(&next, &cache.snapshot(&store)));
    }
}
