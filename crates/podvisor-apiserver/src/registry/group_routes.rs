//! The URLs of an API group the registry serves (`/apis/<group>/v1/...`): discovery, the
//! cluster-wide and namespaced collections, objects, their subresources, and watches.

use axum::Router;
use axum::extract::Path;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, get, on};

use super::{Strategy, lookup, rest};
use crate::ApiState;
use crate::req::{Body, Req};
use crate::status::{ApiError, ApiResult, json_response};

fn finish(r: ApiResult<Response>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

fn kind(group: &str, resource: &str) -> ApiResult<&'static Strategy> {
    lookup(group, resource).ok_or_else(ApiError::path_not_found)
}

/// Cluster-scoped kinds' objects live at `/apis/<group>/v1/<resource>/<name>`; a namespaced
/// kind there is not found.
fn cluster_kind(group: &str, resource: &str) -> ApiResult<&'static Strategy> {
    kind(group, resource).and_then(|s| {
        if s.res.namespaced {
            Err(ApiError::path_not_found())
        } else {
            Ok(s)
        }
    })
}

fn namespaced_kind(group: &str, resource: &str) -> ApiResult<&'static Strategy> {
    kind(group, resource).and_then(|s| {
        if s.res.namespaced {
            Ok(s)
        } else {
            Err(ApiError::path_not_found())
        }
    })
}

/// The routes of `group` (state not yet attached).
pub(crate) fn group_routes(group: &'static str) -> Router<ApiState> {
    let any = MethodFilter::GET
        .or(MethodFilter::POST)
        .or(MethodFilter::PUT)
        .or(MethodFilter::PATCH)
        .or(MethodFilter::DELETE);
    let base = format!("/apis/{group}/v1");
    Router::new()
        .route(
            &format!("/apis/{group}"),
            get(move || async move {
                json_response(
                    axum::http::StatusCode::OK,
                    &crate::discovery::group(group),
                )
            }),
        )
        .route(
            &base,
            get(move || async move {
                json_response(
                    axum::http::StatusCode::OK,
                    &crate::discovery::group_resources(group),
                )
            }),
        )
        .route(
            &format!("{base}/{{resource}}"),
            on(
                any,
                move |req: Req, Path(resource): Path<String>, method: Method, Body(body): Body| async move {
                    finish(kind(group, &resource).and_then(|s| {
                        rest::collection(&req, s, None, &method, &body)
                    }))
                },
            ),
        )
        .route(
            &format!("{base}/{{resource}}/{{name}}"),
            on(
                any,
                move |req: Req,
                      Path((resource, name)): Path<(String, String)>,
                      method: Method,
                      Body(body): Body| async move {
                    finish(cluster_kind(group, &resource).and_then(|s| {
                        rest::object(&req, s, ("", &name), None, &method, &body)
                    }))
                },
            ),
        )
        .route(
            &format!("{base}/{{resource}}/{{name}}/{{sub}}"),
            on(
                any,
                move |req: Req,
                      Path((resource, name, sub)): Path<(String, String, String)>,
                      method: Method,
                      Body(body): Body| async move {
                    finish(cluster_kind(group, &resource).and_then(|s| {
                        rest::object(&req, s, ("", &name), Some(&sub), &method, &body)
                    }))
                },
            ),
        )
        .route(
            &format!("{base}/watch/{{resource}}"),
            get(move |req: Req, Path(resource): Path<String>| async move {
                finish(kind(group, &resource).and_then(|s| rest::watch(&req, s, None, None)))
            }),
        )
        .route(
            &format!("{base}/watch/{{resource}}/{{name}}"),
            get(
                move |req: Req, Path((resource, name)): Path<(String, String)>| async move {
                    finish(
                        cluster_kind(group, &resource)
                            .and_then(|s| rest::watch(&req, s, None, Some(&name))),
                    )
                },
            ),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/{{resource}}"),
            on(
                any,
                move |req: Req,
                      Path((ns, resource)): Path<(String, String)>,
                      method: Method,
                      Body(body): Body| async move {
                    finish(namespaced_kind(group, &resource).and_then(|s| {
                        rest::collection(&req, s, Some(&ns), &method, &body)
                    }))
                },
            ),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/{{resource}}/{{name}}"),
            on(
                any,
                move |req: Req,
                      Path((ns, resource, name)): Path<(String, String, String)>,
                      method: Method,
                      Body(body): Body| async move {
                    finish(namespaced_kind(group, &resource).and_then(|s| {
                        rest::object(&req, s, (&ns, &name), None, &method, &body)
                    }))
                },
            ),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/{{resource}}/{{name}}/{{sub}}"),
            on(
                any,
                move |req: Req,
                      Path((ns, resource, name, sub)): Path<(String, String, String, String)>,
                      method: Method,
                      Body(body): Body| async move {
                    finish(namespaced_kind(group, &resource).and_then(|s| {
                        rest::object(&req, s, (&ns, &name), Some(&sub), &method, &body)
                    }))
                },
            ),
        )
        .route(
            &format!("{base}/watch/namespaces/{{ns}}/{{resource}}"),
            get(
                move |req: Req, Path((ns, resource)): Path<(String, String)>| async move {
                    finish(
                        namespaced_kind(group, &resource)
                            .and_then(|s| rest::watch(&req, s, Some(&ns), None)),
                    )
                },
            ),
        )
        .route(
            &format!("{base}/watch/namespaces/{{ns}}/{{resource}}/{{name}}"),
            get(
                move |req: Req,
                      Path((ns, resource, name)): Path<(String, String, String)>| async move {
                    finish(
                        namespaced_kind(group, &resource)
                            .and_then(|s| rest::watch(&req, s, Some(&ns), Some(&name))),
                    )
                },
            ),
        )
}
