//! The one place that talks to `podvisor-store`: keys, and store errors turned into the
//! `Status` errors the API server returns for each resource.

use podvisor_store::{Key, Preconditions, Store, StoreError, Watch, WatchFrom};
use serde_json::Value;

use crate::status::{ApiError, ApiResult};

/// What the API knows about one resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resource {
    /// The object kind: `Pod`.
    pub kind: &'static str,
    /// The plural resource name used in URLs, error messages and store keys: `pods`.
    pub plural: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

/// `pods`.
pub(crate) const PODS: Resource = Resource {
    kind: "Pod",
    plural: "pods",
    namespaced: true,
};
/// `events`.
pub(crate) const EVENTS: Resource = Resource {
    kind: "Event",
    plural: "events",
    namespaced: true,
};
/// `configmaps`.
pub(crate) const CONFIGMAPS: Resource = Resource {
    kind: "ConfigMap",
    plural: "configmaps",
    namespaced: true,
};
/// `secrets`.
pub(crate) const SECRETS: Resource = Resource {
    kind: "Secret",
    plural: "secrets",
    namespaced: true,
};
/// `serviceaccounts`.
pub(crate) const SERVICEACCOUNTS: Resource = Resource {
    kind: "ServiceAccount",
    plural: "serviceaccounts",
    namespaced: true,
};
/// `namespaces`.
pub(crate) const NAMESPACES: Resource = Resource {
    kind: "Namespace",
    plural: "namespaces",
    namespaced: false,
};

/// `nodes` (cluster-scoped).
pub(crate) const NODES: Resource = Resource {
    kind: "Node",
    plural: "nodes",
    namespaced: false,
};
/// `leases` (`coordination.k8s.io/v1`).
pub(crate) const LEASES: Resource = Resource {
    kind: "Lease",
    plural: "leases",
    namespaced: true,
};

/// `roles` (`rbac.authorization.k8s.io/v1`).
pub(crate) const ROLES: Resource = Resource {
    kind: "Role",
    plural: "roles",
    namespaced: true,
};
/// `clusterroles` (`rbac.authorization.k8s.io/v1`).
pub(crate) const CLUSTERROLES: Resource = Resource {
    kind: "ClusterRole",
    plural: "clusterroles",
    namespaced: false,
};
/// `rolebindings` (`rbac.authorization.k8s.io/v1`).
pub(crate) const ROLEBINDINGS: Resource = Resource {
    kind: "RoleBinding",
    plural: "rolebindings",
    namespaced: true,
};
/// `clusterrolebindings` (`rbac.authorization.k8s.io/v1`).
pub(crate) const CLUSTERROLEBINDINGS: Resource = Resource {
    kind: "ClusterRoleBinding",
    plural: "clusterrolebindings",
    namespaced: false,
};
/// `services`.
pub(crate) const SERVICES: Resource = Resource {
    kind: "Service",
    plural: "services",
    namespaced: true,
};
/// `endpointslices` (`discovery.k8s.io/v1`).
pub(crate) const ENDPOINTSLICES: Resource = Resource {
    kind: "EndpointSlice",
    plural: "endpointslices",
    namespaced: true,
};

/// The `apiVersion` of a resource's objects and lists.
pub(crate) fn api_version(res: Resource) -> &'static str {
    match res.kind {
        "Lease" => "coordination.k8s.io/v1",
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => {
            "rbac.authorization.k8s.io/v1"
        }
        "EndpointSlice" => "discovery.k8s.io/v1",
        _ => "v1",
    }
}

/// The store key of an object: the resource plural, the namespace (`""` for cluster-scoped
/// resources) and the name.
pub(crate) fn key(res: Resource, namespace: &str, name: &str) -> Key {
    if res.namespaced {
        Key::new(res.plural, namespace, name)
    } else {
        Key::cluster(res.plural, name)
    }
}

/// The resource as errors name it: the plural, qualified by the group outside core
/// (`roles.rbac.authorization.k8s.io`).
pub(crate) fn qualified(res: Resource) -> String {
    match api_version(res).rsplit_once('/') {
        Some((group, _)) => format!("{}.{group}", res.plural),
        None => res.plural.to_owned(),
    }
}

/// Maps a store error to the API server's error for `res`/`name`.
pub(crate) fn api_error(res: Resource, name: &str, e: StoreError) -> ApiError {
    let resource = qualified(res);
    match e {
        StoreError::NotFound(_) => ApiError::not_found(&resource, name),
        StoreError::AlreadyExists(_) => ApiError::already_exists(&resource, name),
        StoreError::Conflict { message, .. } => ApiError::conflict(&resource, name, &message),
        e @ StoreError::Gone { .. } => ApiError::expired(e.to_string()),
        StoreError::Invalid(message) => ApiError::bad_request(message),
        StoreError::Db(message) => ApiError::internal(format!("storage error: {message}")),
        e @ (StoreError::Damaged { .. }
        | StoreError::EmptyFile { .. }
        | StoreError::Io { .. }
        | StoreError::NotOwned(_)) => ApiError::internal(format!("storage error: {e}")),
    }
}

/// Parses a `metadata.resourceVersion` the store understands.
pub(crate) fn parse_rv(rv: &str) -> ApiResult<u64> {
    rv.parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))
}

/// The `resourceVersion` query parameter of a list or watch: unset, `""` and `"0"` are `None`
/// ("any"); anything but a decimal number is a 400 worded as the API server's storage
/// words it (`APIObjectVersioner.ParseResourceVersion` inside `invalid resource version`).
pub(crate) fn query_rv(rv: Option<&str>) -> ApiResult<Option<u64>> {
    match rv {
        None | Some("" | "0") => Ok(None),
        Some(text) => match text.parse::<u64>() {
            Ok(n) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
            parsed => {
                let why = match parsed {
                    Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
                        "value out of range"
                    }
                    _ => "invalid syntax",
                };
                let quoted = podvisor_api::validation::go_quote(text);
                Err(ApiError::bad_request(format!(
                    "invalid resource version: resourceVersion: Invalid value: {quoted}: \
                     strconv.ParseUint: parsing {quoted}: {why}"
                )))
            }
        },
    }
}

/// The `metadata.resourceVersion` of a stored object, as a number.
pub(crate) fn object_rv(obj: &Value) -> Option<u64> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Reads one object; 404 when missing.
pub(crate) fn get(store: &Store, res: Resource, ns: &str, name: &str) -> ApiResult<Value> {
    match store.get(&key(res, ns, name)) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(ApiError::not_found(&qualified(res), name)),
        Err(e) => Err(api_error(res, name, e)),
    }
}

/// Reads one object if present.
pub(crate) fn try_get(
    store: &Store,
    res: Resource,
    ns: &str,
    name: &str,
) -> ApiResult<Option<Value>> {
    store
        .get(&key(res, ns, name))
        .map_err(|e| api_error(res, name, e))
}

/// Lists a kind, in one namespace or all; returns the list's resourceVersion too.
pub(crate) fn list(store: &Store, res: Resource, ns: Option<&str>) -> ApiResult<(Vec<Value>, u64)> {
    let ns = if res.namespaced { ns } else { None };
    store
        .list(res.plural, ns)
        .map_err(|e| api_error(res, "", e))
}

/// Lists the objects of a kind that `keep` accepts, deciding as it reads (see
/// [`Store::list_filtered`]); unsorted.
pub(crate) fn list_filtered(
    store: &Store,
    res: Resource,
    ns: Option<&str>,
    keep: impl FnMut(&Value) -> bool,
) -> ApiResult<(Vec<Value>, u64)> {
    let ns = if res.namespaced { ns } else { None };
    store
        .list_filtered(res.plural, ns, keep)
        .map_err(|e| api_error(res, "", e))
}

/// Creates an object; 409 `AlreadyExists` when the name is taken.
pub(crate) fn create(
    store: &Store,
    res: Resource,
    ns: &str,
    name: &str,
    obj: Value,
) -> ApiResult<Value> {
    store
        .create(&key(res, ns, name), obj)
        .map_err(|e| api_error(res, name, e))
}

/// Replaces an object if its resourceVersion is still `rv` (when given).
pub(crate) fn update(
    store: &Store,
    res: Resource,
    ns: &str,
    name: &str,
    obj: Value,
    rv: Option<u64>,
) -> ApiResult<Value> {
    let pre = Preconditions {
        uid: None,
        resource_version: rv.map(|v| v.to_string()),
    };
    store
        .update(&key(res, ns, name), obj, pre)
        .map_err(|e| api_error(res, name, e))
}

/// Removes an object under preconditions; returns the removed object.
pub(crate) fn delete(
    store: &Store,
    res: Resource,
    ns: &str,
    name: &str,
    uid: Option<String>,
    rv: Option<u64>,
) -> ApiResult<Value> {
    let pre = Preconditions {
        uid,
        resource_version: rv.map(|v| v.to_string()),
    };
    store
        .delete(&key(res, ns, name), pre)
        .map_err(|e| api_error(res, name, e))
}

/// Opens a watch on a kind.
pub(crate) fn watch(
    store: &Store,
    res: Resource,
    ns: Option<&str>,
    from: WatchFrom,
) -> Result<Watch, StoreError> {
    let ns = if res.namespaced { ns } else { None };
    store.watch(res.plural, ns, from)
}
