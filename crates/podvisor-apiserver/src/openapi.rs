//! The smallest OpenAPI documents that let kubectl's strict field validation, `create` and
//! `apply` work: `/openapi/v3` lists one group-version whose document declares, for Pod,
//! Namespace, Event, ConfigMap and Secret, the `post` and `patch` operations with their group-version-kind and
//! the `fieldValidation`, `dryRun` and `fieldManager` query parameters. kubectl then leaves
//! validation to the server (which is strict and exact here).
//!
//! No schema is published: kubectl computes client-side apply patches from its compiled-in
//! Pod type (the patch operation does not advertise `strategic-merge-patch+json`, and
//! `/openapi/v2` is not served), and `kubectl explain` has nothing to explain.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::status::{ApiError, json_response};

/// Changes whenever the v3 document below changes, so kubectl's cache is refreshed.
const V3_HASH: &str = "podvisor-1-35-0-4";

/// `GET /openapi/v3`.
pub(crate) async fn v3_root() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "paths": {
                "api/v1": {"serverRelativeURL": format!("/openapi/v3/api/v1?hash={V3_HASH}")}
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

fn gvk(kind: &str) -> Value {
    json!({"group": "", "version": "v1", "kind": kind})
}

fn schema_ref(kind: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/io.k8s.api.core.v1.{kind}")})
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
        "operationId": format!("createCoreV1{kind}"),
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
        "operationId": format!("patchCoreV1Namespaced{kind}"),
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

fn object_schema(kind: &str, description: &str) -> Value {
    json!({
        "description": description,
        "type": "object",
        "x-kubernetes-group-version-kind": [gvk(kind)]
    })
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
            "/api/v1/namespaces/{namespace}/secrets/{name}": {"patch": patch_op("Secret")}
        },
        "components": {
            "schemas": {
                "io.k8s.api.core.v1.Pod": object_schema("Pod", "Pod is a collection of containers that can run on a host. This resource is created by clients and scheduled onto hosts."),
                "io.k8s.api.core.v1.Namespace": object_schema("Namespace", "Namespace provides a scope for Names. Use of multiple namespaces is optional."),
                "io.k8s.api.core.v1.Event": object_schema("Event", "Event is a report of an event somewhere in the cluster."),
                "io.k8s.api.core.v1.ConfigMap": object_schema("ConfigMap", "ConfigMap holds configuration data for pods to consume."),
                "io.k8s.api.core.v1.Secret": object_schema("Secret", "Secret holds secret data of a certain type. The total bytes of the values in the Data field must be less than MaxSecretSize bytes.")
            }
        }
    })
}

/// `GET /openapi/v3/api/v1[?hash=]`.
pub(crate) async fn v3_group() -> Response {
    let mut resp = json_response(StatusCode::OK, &v3_api_v1());
    resp.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("public, immutable"),
    );
    resp
}

/// `GET /openapi/v2`: not served (kubectl only wants it as protobuf, and copes without it).
pub(crate) async fn v2() -> Response {
    axum::response::IntoResponse::into_response(ApiError::path_not_found())
}
