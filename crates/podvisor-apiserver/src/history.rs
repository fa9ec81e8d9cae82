//! `GET /api/v1/namespaces/{ns}/pods/{name}/history`: podvisor's read-only subresource with the
//! pod's recorded status transitions, oldest first, for the timeline of `podvisor dashboard`.
//!
//! The transitions belong to the node (its agent records them as it publishes statuses); the
//! server only reads them through [`PodHistory`], keyed by the pod's UID, so a pod replaced by
//! another of the same name never shows the old one's history. Without a history source the
//! list is empty (the dashboard then draws what the object and its events say).

use crate::db::{self, PODS};
use crate::req::Req;
use crate::status::{ApiError, ApiResult, json_response};
use axum::http::StatusCode;
use axum::response::Response;
use podvisor_lifecycle::timeline::Transition;
use serde_json::{Value, json};

/// Where the server reads pods' status transitions (the node agent's history store).
pub trait PodHistory: Send + Sync + 'static {
    /// The transitions of the pod with this UID, oldest first.
    ///
    /// # Errors
    ///
    /// The history could not be read (the message is the API's `InternalError`).
    fn history(&self, pod_uid: &str) -> Result<Vec<Transition>, String>;
}

/// The subresource's answer: a `PodStatusHistory` of the pod, whose `items` are
/// [`Transition`]s.
pub(crate) fn get(req: &Req, ns: &str, name: &str) -> ApiResult<Response> {
    let pod = db::get(req.state.store(), PODS, ns, name)?;
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let items = match req.state.history() {
        Some(source) => source.history(uid).map_err(ApiError::internal)?,
        None => Vec::new(),
    };
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "apiVersion": "podvisor.io/v1alpha1",
            "kind": "PodStatusHistory",
            "metadata": {"name": name, "namespace": ns, "uid": uid},
            "items": items,
        }),
    ))
}
