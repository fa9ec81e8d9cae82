//! Namespaces' delete (create, get, update and patch are the registry's, `registry/
//! namespace.rs`): a delete marks the namespace `Terminating`; [`crate::namespace_controller`]
//! empties and removes it. `default`, `kube-system` and `kube-public` may not be deleted. And
//! the system namespaces `serve` makes at start.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use crate::db::{self, NAMESPACES};
use crate::objects::respond;
use crate::req::Req;
use crate::request::{new_uid, now, time_text};
use crate::status::{ApiError, ApiResult};

/// `DELETE /api/v1/namespaces/{name}`: marks it `Terminating`; the namespace controller
/// ([`crate::namespace_controller`]) deletes its content and then the namespace.
pub(crate) fn delete(req: &Req, name: &str) -> ApiResult<Response> {
    let store = req.state.store();
    db::get(store, NAMESPACES, "", name)?;
    if matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::forbidden(
            NAMESPACES.plural,
            name,
            "this namespace may not be deleted",
        ));
    }
    let marked = crate::namespace_controller::mark_terminating(store, name, req.params.dry_run()?)?;
    Ok(respond(req, NAMESPACES, StatusCode::OK, &marked, &[]))
}

/// The namespace of the nodes' Leases.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Creates the namespace `name` if it does not exist (as `POST /api/v1/namespaces` would).
pub(crate) fn ensure_namespace(store: &podvisor_store::Store, name: &str) -> ApiResult<()> {
    if db::try_get(store, db::NAMESPACES, "", name)?.is_some() {
        return Ok(());
    }
    let obj = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": new_uid(),
            "creationTimestamp": time_text(now()),
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    });
    match db::create(store, db::NAMESPACES, "", name, obj) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
