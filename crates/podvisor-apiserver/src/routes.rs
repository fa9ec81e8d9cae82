//! URL routing: which handler serves which path and verb. Resource names in the path are
//! dispatched here so handlers stay per resource.

use axum::Router;
use axum::extract::Path;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, get, on};

use crate::db::{EVENTS, NAMESPACES, NODES, PODS, Resource};
use crate::registry::{self, rest};
use crate::req::{Body, Req};
use crate::status::ApiError;
use crate::{
    ApiState, discovery, events_v1, exec, logs, namespaces, objects, openapi, pods, reviews,
};

/// The core kinds with their own handlers (pods, events).
fn namespaced(resource: &str) -> Option<Resource> {
    match resource {
        "pods" => Some(PODS),
        "events" => Some(EVENTS),
        _ => None,
    }
}

/// The registry's Nodes.
fn node_kind() -> &'static registry::Strategy {
    registry::lookup("", "nodes").expect("the registry serves nodes")
}

/// A core `v1` kind the registry serves.
fn core_kind(resource: &str) -> Option<&'static registry::Strategy> {
    registry::lookup("", resource)
}

fn finish(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

/// `/api/v1/{resource}`: lists across namespaces (and the namespaces themselves).
async fn cluster_collection(
    req: Req,
    Path(resource): Path<String>,
    method: Method,
    Body(body): Body,
) -> Response {
    finish(match (resource.as_str(), method) {
        // Namespaces go through `Terminating` one by one, never as a collection.
        ("namespaces", Method::DELETE) => {
            Err(ApiError::method_not_supported("namespaces", "DELETE"))
        }
        (r, m) if core_kind(r).is_some() => {
            rest::collection(&req, core_kind(r).expect("just found"), None, &m, &body)
        }
        (r, Method::GET) => match namespaced(r) {
            Some(res) => objects::list(&req, res, None, None),
            None => Err(ApiError::path_not_found()),
        },
        (r, m) if namespaced(r).is_some() || r == "namespaces" => {
            Err(ApiError::method_not_supported(r, m.as_str()))
        }
        _ => Err(ApiError::path_not_found()),
    })
}

/// `/api/v1/watch/{resource}`.
async fn cluster_watch(req: Req, Path(resource): Path<String>) -> Response {
    let res = match resource.as_str() {
        "namespaces" => Some(NAMESPACES),
        "nodes" => Some(NODES),
        r => namespaced(r).or_else(|| core_kind(r).map(|s| s.res)),
    };
    finish(match res {
        Some(res) => objects::watch(&req, res, None, None),
        None => Err(ApiError::path_not_found()),
    })
}

/// `/api/v1/namespaces/{name}`: one namespace.
async fn namespace_object(
    req: Req,
    Path(name): Path<String>,
    method: Method,
    Body(body): Body,
) -> Response {
    finish(match method {
        // Not the registry's: the namespace is marked `Terminating` for its controller.
        Method::DELETE => namespaces::delete(&req, &name),
        m => {
            let s = core_kind("namespaces").expect("the registry serves namespaces");
            rest::object(&req, s, ("", &name), None, &m, &body)
        }
    })
}

/// `/api/v1/watch/namespaces/{name}`.
async fn namespace_watch(req: Req, Path(name): Path<String>) -> Response {
    finish(objects::watch(&req, NAMESPACES, None, Some(&name)))
}

/// `/api/v1/namespaces/{ns}/{resource}`.
async fn collection(
    req: Req,
    Path((ns, resource)): Path<(String, String)>,
    method: Method,
    Body(body): Body,
) -> Response {
    if let Some(s) = core_kind(&resource).filter(|s| s.res.namespaced) {
        return finish(rest::collection(&req, s, Some(&ns), &method, &body));
    }
    let Some(res) = namespaced(&resource) else {
        return ApiError::path_not_found().into_response();
    };
    finish(match (res.kind, method) {
        (_, Method::GET) => objects::list(&req, res, Some(&ns), None),
        ("Pod", Method::POST) => pods::create(&req, &ns, &body),
        ("Pod", Method::DELETE) => pods::delete_collection(&req, &ns, &body),
        (_, m) => Err(ApiError::method_not_supported(res.plural, m.as_str())),
    })
}

/// `/api/v1/watch/namespaces/{ns}/{resource}`.
async fn collection_watch(req: Req, Path((ns, resource)): Path<(String, String)>) -> Response {
    finish(
        match namespaced(&resource).or_else(|| core_kind(&resource).map(|s| s.res)) {
            Some(res) => objects::watch(&req, res, Some(&ns), None),
            None => Err(ApiError::path_not_found()),
        },
    )
}

/// `/api/v1/namespaces/{ns}/{resource}/{name}`.
async fn object(
    req: Req,
    Path((ns, resource, name)): Path<(String, String, String)>,
    method: Method,
    Body(body): Body,
) -> Response {
    if let Some(s) = core_kind(&resource).filter(|s| s.res.namespaced) {
        return finish(rest::object(&req, s, (&ns, &name), None, &method, &body));
    }
    let Some(res) = namespaced(&resource) else {
        return ApiError::path_not_found().into_response();
    };
    finish(match (res.kind, method) {
        (_, Method::GET) => objects::get(&req, res, &ns, &name),
        ("Pod", Method::PUT) => pods::update(&req, &ns, &name, &body),
        ("Pod", Method::PATCH) => pods::patch(&req, &ns, &name, &body),
        ("Pod", Method::DELETE) => pods::delete(&req, &ns, &name, &body),
        (_, m) => Err(ApiError::method_not_supported(res.plural, m.as_str())),
    })
}

/// `/api/v1/watch/namespaces/{ns}/{resource}/{name}`.
async fn object_watch(
    req: Req,
    Path((ns, resource, name)): Path<(String, String, String)>,
) -> Response {
    finish(
        match namespaced(&resource).or_else(|| core_kind(&resource).map(|s| s.res)) {
            Some(res) => objects::watch(&req, res, Some(&ns), Some(&name)),
            None => Err(ApiError::path_not_found()),
        },
    )
}

/// `/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}`: `pods/status`, `pods/log`,
/// `pods/exec`, `pods/attach`, `pods/binding`, `pods/ephemeralcontainers`, and podvisor's
/// read-only `pods/history` (the node's recorded status transitions, for the dashboard).
async fn subresource(
    req: Req,
    Path((ns, resource, name, sub)): Path<(String, String, String, String)>,
    method: Method,
    uri: Uri,
    upgrade: exec::Upgrade,
    Body(body): Body,
) -> Response {
    finish(match (resource.as_str(), sub.as_str(), method) {
        ("pods", "status", Method::GET) => objects::get(&req, PODS, &ns, &name),
        ("pods", "status", Method::PUT) => {
            pods::update_subresource(&req, &ns, &name, &body, pods::Subresource::Status)
        }
        ("pods", "status", Method::PATCH) => {
            pods::patch_subresource(&req, &ns, &name, &body, pods::Subresource::Status)
        }
        ("pods", "resize", Method::GET) => objects::get(&req, PODS, &ns, &name),
        ("pods", "resize", Method::PUT) => {
            pods::update_subresource(&req, &ns, &name, &body, pods::Subresource::Resize)
        }
        ("pods", "resize", Method::PATCH) => {
            pods::patch_subresource(&req, &ns, &name, &body, pods::Subresource::Resize)
        }
        ("serviceaccounts", "token", Method::POST) => {
            crate::serviceaccounts::create_token(&req, &ns, &name, &body)
        }
        (r, _, m) if core_kind(r).is_some_and(|s| s.res.namespaced) && r != "pods" => {
            let s = core_kind(r).expect("just found");
            rest::object(&req, s, (&ns, &name), Some(&sub), &m, &body)
        }
        ("pods", "log", Method::GET) => logs::get(&req, &ns, &name).await,
        ("pods", "history", Method::GET) => crate::history::get(&req, &ns, &name),
        ("pods", "portforward", Method::GET | Method::POST) => {
            crate::portforward::portforward(&req, &ns, &name, &uri, upgrade)
        }
        ("pods", "exec", Method::GET | Method::POST) => {
            exec::exec(&req, &ns, &name, &uri, upgrade, false)
        }
        ("pods", "attach", Method::GET | Method::POST) => {
            exec::exec(&req, &ns, &name, &uri, upgrade, true)
        }
        ("pods", "binding", Method::POST) => {
            crate::scheduler::create_binding(&req, &ns, &name, &body)
        }
        ("pods", "ephemeralcontainers", Method::GET) => objects::get(&req, PODS, &ns, &name),
        ("pods", "ephemeralcontainers", Method::PUT) => pods::update_subresource(
            &req,
            &ns,
            &name,
            &body,
            pods::Subresource::EphemeralContainers,
        ),
        ("pods", "ephemeralcontainers", Method::PATCH) => pods::patch_subresource(
            &req,
            &ns,
            &name,
            &body,
            pods::Subresource::EphemeralContainers,
        ),
        (
            "pods",
            "status"
            | "resize"
            | "log"
            | "exec"
            | "attach"
            | "portforward"
            | "binding"
            | "ephemeralcontainers"
            | "history",
            m,
        ) => Err(ApiError::method_not_supported(
            &format!("pods/{sub}"),
            m.as_str(),
        )),
        _ => Err(ApiError::path_not_found()),
    })
}

/// `/api/v1/nodes/{name}`.
async fn node_object(
    req: Req,
    Path(name): Path<String>,
    method: Method,
    Body(body): Body,
) -> Response {
    finish(rest::object(
        &req,
        node_kind(),
        ("", &name),
        None,
        &method,
        &body,
    ))
}

/// `/api/v1/nodes/{name}/{sub}`: `nodes/status`.
async fn node_subresource(
    req: Req,
    Path((name, sub)): Path<(String, String)>,
    method: Method,
    Body(body): Body,
) -> Response {
    finish(rest::object(
        &req,
        node_kind(),
        ("", &name),
        Some(&sub),
        &method,
        &body,
    ))
}

/// `/api/v1/watch/nodes/{name}`.
async fn node_watch(req: Req, Path(name): Path<String>) -> Response {
    finish(objects::watch(&req, NODES, None, Some(&name)))
}

/// Unknown paths: a 404 `Status`.
/// The media types a create or update body may have (what [`crate::request::parse_body`]
/// decodes); none at all is taken as JSON, as the API server takes the first it serves.
const BODY_MEDIA_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// A POST or PUT body in a media type the server does not decode is the API server's 415
/// `Status` (its input serializer negotiation), never decoded as JSON on a guess. PATCH has
/// its own media types (`patch.rs`); an upgrade (`exec`, `attach`, `portforward` over SPDY)
/// carries no body.
pub(crate) async fn body_media_type(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let with_body = matches!(*request.method(), Method::POST | Method::PUT);
    if with_body && !request.headers().contains_key(axum::http::header::UPGRADE) {
        let media = crate::request::content_type(request.headers());
        if !media.is_empty() && !BODY_MEDIA_TYPES.contains(&media.as_str()) {
            let given = request
                .headers()
                .get(axum::http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            return ApiError::unsupported_body_media_type(&given).into_response();
        }
    }
    next.run(request).await
}

pub(crate) async fn fallback() -> Response {
    ApiError::path_not_found().into_response()
}

/// The API routes (state not yet attached).
pub(crate) fn api_routes() -> Router<ApiState> {
    let any = MethodFilter::GET
        .or(MethodFilter::POST)
        .or(MethodFilter::PUT)
        .or(MethodFilter::PATCH)
        .or(MethodFilter::DELETE);
    let groups = registry::GROUPS
        .into_iter()
        .fold(Router::new(), |r, g| r.merge(registry::group_routes(g)));
    groups
        .route("/version", get(discovery::version))
        .route("/version/", get(discovery::version))
        .route("/api", get(discovery::api))
        .route("/api/", get(discovery::api))
        .route("/api/v1", get(discovery::api_v1))
        .route("/api/v1/", get(discovery::api_v1))
        .route("/apis", get(discovery::apis))
        .route("/apis/", get(discovery::apis))
        .route("/apis/node.k8s.io", get(discovery::node_group))
        .route("/apis/node.k8s.io/v1", get(discovery::node_v1))
        .route(
            "/apis/node.k8s.io/v1/runtimeclasses",
            on(
                any,
                |method: axum::http::Method, headers: axum::http::HeaderMap| async move {
                    crate::runtimeclasses::serve(&method, &headers, None)
                },
            ),
        )
        .route(
            "/apis/node.k8s.io/v1/runtimeclasses/{name}",
            on(
                any,
                |method: axum::http::Method,
                 headers: axum::http::HeaderMap,
                 axum::extract::Path(name): axum::extract::Path<String>| async move {
                    crate::runtimeclasses::serve(&method, &headers, Some(&name))
                },
            ),
        )
        .route("/api/v1/nodes/{name}", on(any, node_object))
        .route("/api/v1/nodes/{name}/{sub}", on(any, node_subresource))
        .route("/api/v1/watch/nodes/{name}", get(node_watch))
        .route("/apis/events.k8s.io", get(events_v1::discovery))
        .route("/apis/events.k8s.io/v1", get(events_v1::discovery))
        .route("/apis/events.k8s.io/v1/events", on(any, events_v1::all))
        .route(
            "/apis/events.k8s.io/v1/watch/events",
            get(events_v1::watch_all),
        )
        .route(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events",
            on(any, events_v1::collection),
        )
        .route(
            "/apis/events.k8s.io/v1/watch/namespaces/{ns}/events",
            get(events_v1::watch_collection),
        )
        .route(
            "/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}",
            on(any, events_v1::object),
        )
        .route("/apis/authentication.k8s.io", get(reviews::authn_discovery))
        .route(
            "/apis/authentication.k8s.io/v1",
            get(reviews::authn_discovery),
        )
        .route(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            axum::routing::post(reviews::self_subject_review),
        )
        .route("/apis/authorization.k8s.io", get(reviews::authz_discovery))
        .route(
            "/apis/authorization.k8s.io/v1",
            get(reviews::authz_discovery),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            axum::routing::post(reviews::self_subject_access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            axum::routing::post(reviews::self_subject_rules_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            axum::routing::post(reviews::subject_access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/namespaces/{ns}/localsubjectaccessreviews",
            axum::routing::post(reviews::local_subject_access_review),
        )
        .merge(crate::unserved::routes())
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::v3_root))
        .route("/openapi/v3/api/{version}", get(openapi::v3_core))
        .route("/openapi/v3/apis/{group}/{version}", get(openapi::v3_group))
        .route("/api/v1/{resource}", on(any, cluster_collection))
        .route("/api/v1/watch/{resource}", get(cluster_watch))
        .route("/api/v1/namespaces/{name}", on(any, namespace_object))
        .route("/api/v1/watch/namespaces/{name}", get(namespace_watch))
        .route("/api/v1/namespaces/{ns}/{resource}", on(any, collection))
        .route(
            "/api/v1/watch/namespaces/{ns}/{resource}",
            get(collection_watch),
        )
        .route("/api/v1/namespaces/{ns}/{resource}/{name}", on(any, object))
        .route(
            "/api/v1/watch/namespaces/{ns}/{resource}/{name}",
            get(object_watch),
        )
        .route(
            "/api/v1/namespaces/{ns}/{resource}/{name}/{sub}",
            on(any, subresource),
        )
}
