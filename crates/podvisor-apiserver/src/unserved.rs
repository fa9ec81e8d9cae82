//! The workload groups `serve` does not serve (`apps/v1`, `batch/v1`), answered with the words
//! kubectl's own REST mapper uses for a manifest of such a kind (`no matches for kind
//! "Deployment" in version "apps/v1"`), so that `kubectl create deployment|job`, whose typed
//! clients post straight to the group's path, say what `kubectl apply` of the same kind says
//! instead of the API server's bare `the server could not find the requested resource`.
//!
//! Discovery does not list these groups: kubectl and client libraries see them as absent,
//! as they are; only a request that names one of their resources gets this 404.
//!
//! The list of CustomResourceDefinitions (`apiextensions.k8s.io/v1`) is answered, empty:
//! podvisor has none and takes none. kubectl and helm ask for it when a manifest's kind is in
//! neither OpenAPI document (`HasCRD` of their `fieldValidation`/dry-run checks, once the
//! documents say that Namespaces take the parameter); a 404 there fails the whole file with
//! `failed to check CRD`, where the empty list lets them say `no matches for kind`. The group
//! stays out of discovery, so a CustomResourceDefinition manifest gets the same words.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{any, get};
use serde_json::json;

use crate::ApiState;
use crate::status::{ApiError, json_response};

/// The kinds of the unserved workload groups, by group-version and plural.
const KINDS: &[(&str, &str, &str)] = &[
    ("apps/v1", "deployments", "Deployment"),
    ("apps/v1", "replicasets", "ReplicaSet"),
    ("apps/v1", "statefulsets", "StatefulSet"),
    ("apps/v1", "daemonsets", "DaemonSet"),
    ("apps/v1", "controllerrevisions", "ControllerRevision"),
    ("batch/v1", "jobs", "Job"),
    ("batch/v1", "cronjobs", "CronJob"),
];

/// The answer to any request for `resource` of `group_version` (a path nobody serves when
/// the resource is not one of [`KINDS`]).
pub(crate) fn refuse(group_version: &str, resource: &str) -> ApiError {
    match KINDS
        .iter()
        .find(|(gv, plural, _)| *gv == group_version && *plural == resource)
    {
        Some((gv, _, kind)) => ApiError::no_kind_match(kind, gv),
        None => ApiError::path_not_found(),
    }
}

/// The routes of `apps/v1` and `batch/v1`: collections across namespaces, namespaced
/// collections, objects and their subresources.
pub(crate) fn routes() -> Router<ApiState> {
    let mut router = Router::new();
    for gv in ["apps/v1", "batch/v1"] {
        let answer = move |resource: &str| refuse(gv, resource).into_response();
        router = router
            .route(
                &format!("/apis/{gv}/{{resource}}"),
                any(move |Path(r): Path<String>| async move { answer(&r) }),
            )
            .route(
                &format!("/apis/{gv}/namespaces/{{ns}}/{{resource}}"),
                any(move |Path((_, r)): Path<(String, String)>| async move { answer(&r) }),
            )
            .route(
                &format!("/apis/{gv}/namespaces/{{ns}}/{{resource}}/{{*rest}}"),
                any(
                    move |Path((_, r, _)): Path<(String, String, String)>| async move {
                        answer(&r)
                    },
                ),
            );
    }
    router.route(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        get(|State(state): State<ApiState>| async move {
            json_response(
                StatusCode::OK,
                &json!({
                    "kind": "CustomResourceDefinitionList",
                    "apiVersion": "apiextensions.k8s.io/v1",
                    "metadata": {"resourceVersion": state.store().resource_version().to_string()},
                    "items": [],
                }),
            )
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_kinds_get_the_rest_mappers_words() {
        let e = refuse("apps/v1", "deployments");
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                404,
                "no matches for kind \"Deployment\" in version \"apps/v1\""
            )
        );
        assert_eq!(
            refuse("batch/v1", "jobs").message,
            "no matches for kind \"Job\" in version \"batch/v1\""
        );
        assert_eq!(refuse("apps/v1", "widgets"), ApiError::path_not_found());
    }
}
