//! The OpenAPI documents: `/openapi/v3` (one document per group-version) and `/openapi/v2`
//! (one document, JSON or gnostic's protobuf), both made from one list of the served kinds,
//! [`SERVED`], and the schemas `schemars` generates from `k8s-openapi`'s types (the types the
//! server decodes with). A kind added to [`SERVED`] is in both documents.
//!
//! What clients read in them:
//! - the definitions with their `x-kubernetes-group-version-kind`: `kubectl explain` (v3 for
//!   kubectl ≥ 1.27, v2 before), and kubectl 1.20's client-side validation (`unknown field
//!   "x" in io.k8s.api.core.v1.ConfigMap`), which skips kinds the document does not have;
//! - the `post` and `patch` operations with their kind and the `dryRun`, `fieldManager` and
//!   `fieldValidation` parameters: kubectl's checks that the server supports server-side
//!   dry-run (1.20 reads v2) and field validation.
//!
//! The patch operations do not advertise `strategic-merge-patch+json` and the schemas carry
//! no patch merge keys (`k8s-openapi` has none), so kubectl computes client-side apply
//! patches from its compiled-in types (kubectl 1.20 falls back to them when the document
//! offers no strategic merge; newer ones for lack of merge keys).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::status::{ApiError, json_response};

mod v2;
mod v2_proto;
mod v3;

/// One kind the API serves, as the documents publish it.
pub(crate) struct ServedKind {
    /// The API group (`""` for core).
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource (plural) in paths.
    pub plural: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether clients create and patch it (its `post` and `patch` operations are
    /// published; a read-only kind has `get` only).
    pub writable: bool,
    /// Adds the kind's schema, and those of every type it reaches, to a generator; returns
    /// its definition's name (`io.k8s.api.core.v1.Pod`).
    pub schema: fn(&mut SchemaGenerator) -> String,
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

const fn kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    writable: bool,
    schema: fn(&mut SchemaGenerator) -> String,
) -> ServedKind {
    ServedKind {
        group,
        version: "v1",
        kind,
        plural,
        namespaced,
        writable,
        schema,
    }
}

/// Every kind the API serves (add new kinds here: both documents follow).
pub(crate) static SERVED: &[ServedKind] = {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{
        ConfigMap, Event, Namespace, Node, Pod, Secret, ServiceAccount,
    };
    use k8s_openapi::api::node::v1::RuntimeClass;
    &[
        kind("", "Pod", "pods", true, true, schema_of::<Pod>),
        kind(
            "",
            "Namespace",
            "namespaces",
            false,
            true,
            schema_of::<Namespace>,
        ),
        kind("", "Event", "events", true, true, schema_of::<Event>),
        kind(
            "",
            "ConfigMap",
            "configmaps",
            true,
            true,
            schema_of::<ConfigMap>,
        ),
        kind("", "Secret", "secrets", true, true, schema_of::<Secret>),
        kind(
            "",
            "ServiceAccount",
            "serviceaccounts",
            true,
            true,
            schema_of::<ServiceAccount>,
        ),
        kind("", "Node", "nodes", false, true, schema_of::<Node>),
        kind(
            "events.k8s.io",
            "Event",
            "events",
            true,
            true,
            schema_of::<k8s_openapi::api::events::v1::Event>,
        ),
        kind(
            "coordination.k8s.io",
            "Lease",
            "leases",
            true,
            true,
            schema_of::<Lease>,
        ),
        kind(
            "",
            "Service",
            "services",
            true,
            false,
            schema_of::<k8s_openapi::api::core::v1::Service>,
        ),
        kind(
            "discovery.k8s.io",
            "EndpointSlice",
            "endpointslices",
            true,
            false,
            schema_of::<k8s_openapi::api::discovery::v1::EndpointSlice>,
        ),
        kind(
            "rbac.authorization.k8s.io",
            "Role",
            "roles",
            true,
            true,
            schema_of::<k8s_openapi::api::rbac::v1::Role>,
        ),
        kind(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "clusterroles",
            false,
            true,
            schema_of::<k8s_openapi::api::rbac::v1::ClusterRole>,
        ),
        kind(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            true,
            true,
            schema_of::<k8s_openapi::api::rbac::v1::RoleBinding>,
        ),
        kind(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            true,
            schema_of::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>,
        ),
        kind(
            "node.k8s.io",
            "RuntimeClass",
            "runtimeclasses",
            false,
            false,
            schema_of::<RuntimeClass>,
        ),
    ]
};

impl ServedKind {
    /// The document's key under `/openapi/v3`: `api/v1` or `apis/events.k8s.io/v1`.
    fn v3_key(&self) -> String {
        if self.group.is_empty() {
            format!("api/{}", self.version)
        } else {
            format!("apis/{}/{}", self.group, self.version)
        }
    }

    /// The collection's path (`/api/v1/namespaces/{namespace}/pods`, `/api/v1/nodes`).
    fn collection_path(&self) -> String {
        let prefix = format!("/{}", self.v3_key());
        if self.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", self.plural)
        } else {
            format!("{prefix}/{}", self.plural)
        }
    }

    /// An object's path.
    fn object_path(&self) -> String {
        format!("{}/{{name}}", self.collection_path())
    }

    /// `x-kubernetes-group-version-kind` of an operation.
    fn gvk(&self) -> Value {
        json!({"group": self.group, "version": self.version, "kind": self.kind})
    }

    /// The operation id of `verb` (`createCoreV1NamespacedPod`, `patchNodeV1RuntimeClass`).
    fn operation_id(&self, verb: &str) -> String {
        let group = if self.group.is_empty() {
            "Core".to_owned()
        } else {
            self.group
                .trim_end_matches(".k8s.io")
                .split('.')
                .map(capitalized)
                .collect()
        };
        let scope = if self.namespaced { "Namespaced" } else { "" };
        format!(
            "{verb}{group}{}{scope}{}",
            capitalized(self.version),
            self.kind
        )
    }

    /// The operations' tag (`core_v1`, `events_v1`).
    fn tag(&self) -> String {
        let group = if self.group.is_empty() {
            "core".to_owned()
        } else {
            let mut words = self.group.trim_end_matches(".k8s.io").split('.');
            let first = words.next().unwrap_or_default().to_owned();
            first + &words.map(capitalized).collect::<String>()
        };
        format!("{group}_{}", self.version)
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The definitions of `kinds` and every type they reach, as the generator makes them
/// (OpenAPI 3 form: references to `#/components/schemas/...`), each served kind's carrying
/// its `x-kubernetes-group-version-kind`; and the kinds' definition names, in their order.
fn definitions<'a>(
    kinds: impl IntoIterator<Item = &'a ServedKind>,
) -> (Map<String, Value>, Vec<String>) {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let named: Vec<(String, &ServedKind)> = kinds
        .into_iter()
        .map(|k| ((k.schema)(&mut generator), k))
        .collect();
    let mut defs = generator.take_definitions(true);
    for (name, k) in &named {
        if let Some(schema) = defs.get_mut(name) {
            schema["x-kubernetes-group-version-kind"] = json!([k.gvk()]);
        }
    }
    (defs, named.into_iter().map(|(n, _)| n).collect())
}

/// A query parameter's name and description.
const WRITE_PARAMS: [(&str, &str); 3] = [
    (
        "dryRun",
        "When present, indicates that modifications should not be persisted.",
    ),
    (
        "fieldManager",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    (
        "fieldValidation",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict.",
    ),
];
const FORCE_PARAM: (&str, &str) = (
    "force",
    "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
);
/// The patch types the patch operations accept (strategic merge deliberately left out; see
/// the module docs).
const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// The documents, made once.
struct Documents {
    /// `/openapi/v3`'s documents by key (`api/v1`), with their hashes.
    v3: BTreeMap<String, (Vec<u8>, String)>,
    v2_json: Vec<u8>,
    v2_protobuf: Vec<u8>,
}

static DOCUMENTS: LazyLock<Documents> = LazyLock::new(|| {
    let mut keys: Vec<String> = SERVED.iter().map(ServedKind::v3_key).collect();
    keys.sort();
    keys.dedup();
    let v3 = keys
        .into_iter()
        .map(|key| {
            let kinds = SERVED.iter().filter(|k| k.v3_key() == key);
            let bytes = serde_json::to_vec(&v3::document(kinds)).unwrap_or_default();
            let hash = hash(&bytes);
            (key, (bytes, hash))
        })
        .collect();
    let v2 = v2::document(SERVED);
    Documents {
        v3,
        v2_json: serde_json::to_vec(&v2).unwrap_or_default(),
        v2_protobuf: v2_proto::encode(&v2),
    }
});

/// The hash clients cache a v3 document by (upper-case hex of its SHA-256, as the API
/// server's SHA-512).
fn hash(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

fn with_type(body: Vec<u8>, content_type: &'static str) -> Response {
    let mut resp = Response::new(axum::body::Body::from(body));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// `GET /openapi/v3`.
pub(crate) async fn v3_root() -> Response {
    let paths: Map<String, Value> = DOCUMENTS
        .v3
        .iter()
        .map(|(key, (_, hash))| {
            (
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
            )
        })
        .collect();
    json_response(StatusCode::OK, &json!({ "paths": paths }))
}

fn v3_document(key: &str) -> Response {
    match DOCUMENTS.v3.get(key) {
        Some((bytes, _)) => {
            let mut resp = with_type(bytes.clone(), "application/json");
            // The URL carries the hash: what it names never changes.
            resp.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            resp
        }
        None => ApiError::path_not_found().into_response(),
    }
}

/// `GET /openapi/v3/api/{version}`.
pub(crate) async fn v3_core(Path(version): Path<String>) -> Response {
    v3_document(&format!("api/{version}"))
}

/// `GET /openapi/v3/apis/{group}/{version}`.
pub(crate) async fn v3_group(Path((group, version)): Path<(String, String)>) -> Response {
    v3_document(&format!("apis/{group}/{version}"))
}

/// `GET /openapi/v2`: JSON, or gnostic's `openapi.v2.Document` protobuf when asked for it
/// (kubectl and client-go's `OpenAPISchema` send
/// `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`).
pub(crate) async fn v2(headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.contains("protobuf") {
        return with_type(
            DOCUMENTS.v2_protobuf.clone(),
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        );
    }
    with_type(DOCUMENTS.v2_json.clone(), "application/json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_api_servers() {
        let pod = &SERVED[0];
        assert_eq!(pod.operation_id("create"), "createCoreV1NamespacedPod");
        assert_eq!(pod.tag(), "core_v1");
        assert_eq!(
            pod.object_path(),
            "/api/v1/namespaces/{namespace}/pods/{name}"
        );
        let rc = SERVED.iter().find(|k| k.kind == "RuntimeClass").unwrap();
        assert_eq!(rc.operation_id("read"), "readNodeV1RuntimeClass");
        assert_eq!(rc.collection_path(), "/apis/node.k8s.io/v1/runtimeclasses");
        assert_eq!(rc.tag(), "node_v1");
    }

    /// Every served kind is in both documents with its group-version-kind, and every
    /// reference of the v2 document resolves.
    #[test]
    fn both_documents_hold_every_served_kind() {
        let v2: Value = serde_json::from_slice(&DOCUMENTS.v2_json).unwrap();
        let defs = v2["definitions"].as_object().unwrap();
        for k in SERVED {
            let gvk = json!([k.gvk()]);
            assert!(
                defs.values()
                    .any(|d| d["x-kubernetes-group-version-kind"] == gvk),
                "{} not in v2",
                k.kind
            );
            let (bytes, _) = &DOCUMENTS.v3[&k.v3_key()];
            let v3: Value = serde_json::from_slice(bytes).unwrap();
            assert!(
                v3["components"]["schemas"]
                    .as_object()
                    .unwrap()
                    .values()
                    .any(|d| d["x-kubernetes-group-version-kind"] == gvk),
                "{} not in v3",
                k.kind
            );
        }
        let text = String::from_utf8(DOCUMENTS.v2_json.clone()).unwrap();
        assert!(!text.contains("#/components/"));
        for part in text.split("\"$ref\":\"#/definitions/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(defs.contains_key(name), "{name}");
        }
    }
}
