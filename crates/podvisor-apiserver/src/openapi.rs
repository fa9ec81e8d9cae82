//! The smallest OpenAPI documents that let kubectl's strict field validation, `create` and
//! `apply` work: `/openapi/v3` lists one group-version whose document declares, for Pod,
//! Namespace, Event, ConfigMap and Secret, the `post` and `patch` operations with their group-version-kind and
//! the `fieldValidation`, `dryRun` and `fieldManager` query parameters. kubectl then leaves
//! validation to the server (which is strict and exact here).
//!
//! The full schemas of the served kinds are published (from `k8s-openapi`'s types), so
//! `kubectl explain pod.spec.containers` works. kubectl still computes client-side apply
//! patches from its compiled-in types: the patch operations do not advertise
//! `strategic-merge-patch+json`.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::status::json_response;

/// Changes whenever the v3 document below changes, so kubectl's cache is refreshed.
const V3_HASH: &str = "podvisor-1-35-0-7";

/// `GET /openapi/v3`.
pub(crate) async fn v3_root() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "paths": {
                "api/v1": {"serverRelativeURL": format!("/openapi/v3/api/v1?hash={V3_HASH}")},
                "apis/events.k8s.io/v1": {"serverRelativeURL": format!("/openapi/v3/apis/events.k8s.io/v1?hash={V3_HASH}")},
                "apis/coordination.k8s.io/v1": {"serverRelativeURL": format!("/openapi/v3/apis/coordination.k8s.io/v1?hash={V3_HASH}")},
                "apis/rbac.authorization.k8s.io/v1": {"serverRelativeURL": format!("/openapi/v3/apis/rbac.authorization.k8s.io/v1?hash={V3_HASH}")},
                "apis/discovery.k8s.io/v1": {"serverRelativeURL": format!("/openapi/v3/apis/discovery.k8s.io/v1?hash={V3_HASH}")}
            }
        }),
    )
}

fn query_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": "string", "uniqueItems": true}
    })
}

/// `kind` is a core/v1 kind, or `<group>/<Kind>` (`coordination.k8s.io/Lease`).
fn split_kind(kind: &str) -> (&str, &str) {
    kind.rsplit_once('/').unwrap_or(("", kind))
}

/// The short name of a group in schema names (`rbac` of `rbac.authorization.k8s.io`).
fn schema_group(group: &str) -> &str {
    group.split('.').next().unwrap_or(group)
}

fn gvk(kind: &str) -> Value {
    let (group, kind) = split_kind(kind);
    json!({"group": group, "version": "v1", "kind": kind})
}

fn schema_ref(kind: &str) -> Value {
    match split_kind(kind) {
        ("", kind) => json!({"$ref": format!("#/components/schemas/io.k8s.api.core.v1.{kind}")}),
        (group, kind) => json!({"$ref": format!(
            "#/components/schemas/io.k8s.api.{}.v1.{kind}",
            schema_group(group)
        )}),
    }
}

/// The operation name's group part: `CoreV1`, `CoordinationV1`, `RbacAuthorizationV1`.
fn op_name(kind: &str) -> String {
    let (group, kind) = split_kind(kind);
    let group = if group.is_empty() { "core" } else { group };
    let camel: String = group
        .trim_end_matches(".k8s.io")
        .split('.')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect();
    format!("{camel}V1{kind}")
}

/// Whether the operation's kind lives in a namespace (its operation names say `Namespaced`).
fn namespaced_op(kind: &str) -> bool {
    !matches!(
        split_kind(kind).1,
        "Namespace" | "Node" | "ClusterRole" | "ClusterRoleBinding"
    )
}

fn write_params() -> Vec<Value> {
    vec![
        query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ),
        query_param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        query_param(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (default), Strict.",
        ),
    ]
}

fn post_op(kind: &str) -> Value {
    json!({
        "tags": ["core_v1"],
        "operationId": format!("create{}", if namespaced_op(kind) { op_name(kind).replacen("V1", "V1Namespaced", 1) } else { op_name(kind) }),
        "parameters": write_params(),
        "requestBody": {"content": {"*/*": {"schema": schema_ref(kind)}}, "required": true},
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": schema_ref(kind)}}},
            "201": {"description": "Created", "content": {"application/json": {"schema": schema_ref(kind)}}}
        },
        "x-kubernetes-action": "post",
        "x-kubernetes-group-version-kind": gvk(kind)
    })
}

fn patch_op(kind: &str) -> Value {
    let mut params = write_params();
    params.push(query_param(
        "force",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.",
    ));
    let patch_schema = json!({"schema": {"type": "object"}});
    json!({
        "tags": ["core_v1"],
        "operationId": format!("patch{}", if namespaced_op(kind) { op_name(kind).replacen("V1", "V1Namespaced", 1) } else { op_name(kind) }),
        "parameters": params,
        "requestBody": {
            "content": {
                "application/apply-patch+yaml": patch_schema,
                "application/json-patch+json": patch_schema,
                "application/merge-patch+json": patch_schema
            },
            "required": true
        },
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": schema_ref(kind)}}},
            "201": {"description": "Created", "content": {"application/json": {"schema": schema_ref(kind)}}}
        },
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": gvk(kind)
    })
}

/// The schemas of the served kinds and of every type they reach, as the API server
/// publishes them under `components.schemas` (`io.k8s.api.core.v1.Pod`, ...), generated from
/// the same `k8s-openapi` types the server decodes with; each served kind carries its
/// `x-kubernetes-group-version-kind`, which is how `kubectl explain` finds it.
fn schemas(
    kinds: &[(&str, &str, &str)],
    add: impl FnOnce(&mut schemars::SchemaGenerator),
) -> Value {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    add(&mut generator);
    let mut defs = generator.take_definitions(true);
    for (group, version, kind) in kinds {
        let prefix = if group.is_empty() {
            "io.k8s.api.core.v1".to_owned()
        } else {
            format!("io.k8s.api.{}.{version}", schema_group(group))
        };
        if let Some(schema) = defs.get_mut(&format!("{prefix}.{kind}")) {
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": group, "version": version, "kind": kind}]);
        }
    }
    Value::Object(defs)
}

fn core_v1_schemas() -> Value {
    use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, Service};
    schemas(
        &[
            ("", "v1", "Pod"),
            ("", "v1", "Namespace"),
            ("", "v1", "Event"),
            ("", "v1", "ConfigMap"),
            ("", "v1", "Secret"),
            ("", "v1", "Node"),
            ("", "v1", "Service"),
        ],
        |g| {
            g.subschema_for::<Pod>();
            g.subschema_for::<Namespace>();
            g.subschema_for::<Event>();
            g.subschema_for::<ConfigMap>();
            g.subschema_for::<Secret>();
            g.subschema_for::<Node>();
            g.subschema_for::<Service>();
        },
    )
}

/// The OpenAPI 3.0 document of `/apis/events.k8s.io/v1`.
pub(crate) fn v3_events_v1() -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": {
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events": {"post": post_op("events.k8s.io/Event")},
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}": {"patch": patch_op("events.k8s.io/Event")}
        },
        "components": {"schemas": schemas(&[("events.k8s.io", "v1", "Event")], |g| {
            g.subschema_for::<k8s_openapi::api::events::v1::Event>();
        })}
    })
}

/// `GET /openapi/v3/apis/events.k8s.io/v1[?hash=]`.
pub(crate) async fn v3_events() -> Response {
    immutable(json_response(StatusCode::OK, &v3_events_v1()))
}

/// The OpenAPI 3.0 document of a group the registry serves: each kind's create and patch,
/// and the schemas of its types.
pub(crate) fn v3_registry_group(group: &str) -> Value {
    let mut paths = serde_json::Map::new();
    let mut kinds = Vec::new();
    let mut adders = Vec::new();
    for s in crate::registry::group_kinds(group) {
        let kind = format!("{group}/{}", s.res.kind);
        let base = if s.res.namespaced {
            format!("/apis/{group}/v1/namespaces/{{namespace}}/{}", s.res.plural)
        } else {
            format!("/apis/{group}/v1/{}", s.res.plural)
        };
        if s.read_only.is_none() {
            paths.insert(base.clone(), json!({"post": post_op(&kind)}));
            paths.insert(
                format!("{base}/{{name}}"),
                json!({"patch": patch_op(&kind)}),
            );
        }
        kinds.push((group, "v1", s.res.kind));
        adders.push(s.schema);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas(&kinds, |g| {
            for add in adders {
                add(g);
            }
        })}
    })
}

/// `GET /openapi/v3/apis/<group>/v1` of a group the registry serves.
pub(crate) fn v3_registry(group: &str) -> Response {
    immutable(json_response(StatusCode::OK, &v3_registry_group(group)))
}

fn immutable(mut resp: Response) -> Response {
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("public, immutable"),
    );
    resp
}

/// The OpenAPI 3.0 document of `/api/v1`.
pub(crate) fn v3_api_v1() -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": {
            "/api/v1/namespaces": {"post": post_op("Namespace")},
            "/api/v1/namespaces/{name}": {"patch": patch_op("Namespace")},
            "/api/v1/namespaces/{namespace}/pods": {"post": post_op("Pod")},
            "/api/v1/namespaces/{namespace}/pods/{name}": {"patch": patch_op("Pod")},
            "/api/v1/namespaces/{namespace}/events": {"post": post_op("Event")},
            "/api/v1/namespaces/{namespace}/events/{name}": {"patch": patch_op("Event")},
            "/api/v1/namespaces/{namespace}/configmaps": {"post": post_op("ConfigMap")},
            "/api/v1/namespaces/{namespace}/configmaps/{name}": {"patch": patch_op("ConfigMap")},
            "/api/v1/namespaces/{namespace}/secrets": {"post": post_op("Secret")},
            "/api/v1/namespaces/{namespace}/secrets/{name}": {"patch": patch_op("Secret")},
            "/api/v1/nodes": {"post": post_op("Node")},
            "/api/v1/nodes/{name}": {"patch": patch_op("Node")}
        },
        "components": {"schemas": core_v1_schemas()}
    })
}

/// `GET /openapi/v3/api/v1[?hash=]`.
pub(crate) async fn v3_group() -> Response {
    immutable(json_response(StatusCode::OK, &v3_api_v1()))
}

/// The protobuf of an OpenAPI v2 `Document` (gnostic's `openapi_v2.Document`) with only
/// `swagger` (field 1) and `info` (field 2: `title` 1, `version` 2).
fn v2_protobuf() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8], out: &mut Vec<u8>) {
        out.push((number << 3) | 2);
        let mut len = bytes.len();
        loop {
            let byte = u8::try_from(len & 0x7f).unwrap_or(0);
            len >>= 7;
            if len == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(1, b"Kubernetes", &mut info);
    field(2, crate::discovery::GIT_VERSION.as_bytes(), &mut info);
    let mut doc = Vec::new();
    field(1, b"2.0", &mut doc);
    field(2, &info, &mut doc);
    doc
}

/// `GET /openapi/v2`: a document with no definitions (the schemas are published in v3).
/// kubectl asks for it as protobuf when validating a kind that `/openapi/v3` does not list
/// (a Deployment in a multi-document file): with no schema for the kind it skips client
/// validation, so the objects podvisor serves are applied and the others get kubectl's own
/// `no matches for kind "Deployment" in version "apps/v1"` instead of failing the whole
/// file. Old kubectl (1.20) reads only this document, and then applies with its compiled-in
/// types.
pub(crate) async fn v2(headers: axum::http::HeaderMap) -> Response {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.contains("protobuf") {
        let mut resp = Response::new(axum::body::Body::from(v2_protobuf()));
        resp.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static(
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            ),
        );
        return resp;
    }
    json_response(
        StatusCode::OK,
        &json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
            "paths": {},
            "definitions": {}
        }),
    )
}
