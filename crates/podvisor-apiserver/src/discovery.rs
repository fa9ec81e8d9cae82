//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`. Only the legacy (`APIVersions`,
//! `APIResourceList`, `APIGroupList`) documents are served; kubectl asks for aggregated
//! discovery first and falls back to them when the answer is plain `application/json`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::ApiState;
use crate::status::json_response;

/// The Kubernetes version podvisor speaks.
pub const GIT_VERSION: &str = "v1.35.0-podvisor";

/// `GET /version`.
pub(crate) async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "35",
            "emulationMajor": "1",
            "emulationMinor": "35",
            "minCompatibilityMajor": "1",
            "minCompatibilityMinor": "34",
            "gitVersion": GIT_VERSION,
            "gitCommit": env!("CARGO_PKG_VERSION"),
            "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "go1.25.0",
            "compiler": "gc",
            "platform": format!("linux/{}", go_arch()),
        }),
    )
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `GET /api`.
pub(crate) async fn api(State(state): State<ApiState>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": state.inner.advertise.clone()}
            ],
        }),
    )
}

/// `GET /apis`: `node.k8s.io` (the node's RuntimeClasses, read-only), and the review
/// groups `authentication.k8s.io` and `authorization.k8s.io`.
pub(crate) async fn apis() -> Response {
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            crate::runtimeclasses::group(),
            crate::events_v1::group(),
            group(crate::registry::GROUPS[0]),
            crate::reviews::groups()[0].clone(),
            crate::reviews::groups()[1].clone(),
            group(crate::registry::GROUPS[1]),
            group(crate::registry::GROUPS[2]),
        ]}),
    )
}

/// `GET /apis/node.k8s.io`.
pub(crate) async fn node_group() -> Response {
    json_response(StatusCode::OK, &crate::runtimeclasses::group())
}

/// `GET /apis/node.k8s.io/v1`.
pub(crate) async fn node_v1() -> Response {
    json_response(StatusCode::OK, &crate::runtimeclasses::resources())
}

fn resource(
    name: &str,
    singular: &str,
    namespaced: bool,
    kind: &str,
    verbs: &[&str],
    short: &[&str],
    categories: &[&str],
) -> Value {
    let mut r = json!({
        "name": name,
        "singularName": singular,
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    });
    if !short.is_empty() {
        r["shortNames"] = json!(short);
    }
    if !categories.is_empty() {
        r["categories"] = json!(categories);
    }
    r
}

/// `serviceaccounts/token`: a subresource of another group's kind.
fn token_request_resource() -> Value {
    let mut r = resource(
        "serviceaccounts/token",
        "",
        true,
        "TokenRequest",
        &["create"],
        &[],
        &[],
    );
    r["group"] = json!("authentication.k8s.io");
    r["version"] = json!("v1");
    r
}

/// Every verb of a kind that takes all writes.
pub(crate) const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The `APIResourceList` for `v1`.
pub(crate) fn v1_resources() -> Value {
    let all = ALL_VERBS;
    json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            resource("configmaps", "configmap", true, "ConfigMap", &all, &["cm"], &[]),
            resource("events", "event", true, "Event", &all, &["ev"], &[]),
            resource(
                "namespaces", "namespace", false, "Namespace",
                &["create", "delete", "get", "list", "patch", "update", "watch"], &["ns"], &[],
            ),
            resource(
                "nodes", "node", false, "Node",
                &["create", "delete", "get", "list", "patch", "update", "watch"], &["no"], &[],
            ),
            resource("nodes/status", "", false, "Node", &["get", "patch", "update"], &[], &[]),
            resource("pods", "pod", true, "Pod", &all, &["po"], &["all"]),
            resource("pods/attach", "", true, "PodAttachOptions", &["create", "get"], &[], &[]),
            resource("pods/binding", "", true, "Binding", &["create"], &[], &[]),
            resource(
                "pods/ephemeralcontainers", "", true, "Pod", &["get", "patch", "update"], &[], &[],
            ),
            resource("pods/exec", "", true, "PodExecOptions", &["create", "get"], &[], &[]),
            resource("pods/log", "", true, "Pod", &["get"], &[], &[]),
            resource("pods/resize", "", true, "Pod", &["get", "patch", "update"], &[], &[]),
            resource("pods/status", "", true, "Pod", &["get", "patch", "update"], &[], &[]),
            resource("secrets", "secret", true, "Secret", &all, &[], &[]),
            resource("serviceaccounts", "serviceaccount", true, "ServiceAccount", &all, &["sa"], &[]),
            token_request_resource(),
            resource(
                "services", "service", true, "Service", &["get", "list", "watch"], &["svc"], &["all"],
            ),
        ],
    })
}

/// `GET /api/v1`.
pub(crate) async fn api_v1() -> Response {
    json_response(StatusCode::OK, &v1_resources())
}

/// The `APIGroup` of a group the registry serves (one version, `v1`).
pub(crate) fn group(name: &str) -> Value {
    let version = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": [version.clone()],
        "preferredVersion": version,
    })
}

/// The `APIResourceList` of a group the registry serves: its kinds, and the `status`
/// subresource of those that have one.
pub(crate) fn group_resources(name: &str) -> Value {
    let mut resources = Vec::new();
    for s in crate::registry::group_kinds(name) {
        resources.push(resource(
            s.res.plural,
            s.singular,
            s.res.namespaced,
            s.res.kind,
            s.verbs(),
            s.short_names,
            &[],
        ));
        if s.status {
            resources.push(resource(
                &format!("{}/status", s.res.plural),
                "",
                s.res.namespaced,
                s.res.kind,
                &["get", "patch", "update"],
                &[],
                &[],
            ));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{name}/v1"),
        "resources": resources,
    })
}
