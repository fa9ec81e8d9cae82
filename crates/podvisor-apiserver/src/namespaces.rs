//! Namespaces: create, update and patch (labels and annotations), delete. A delete marks the
//! namespace `Terminating`; [`crate::namespace_controller`] empties and removes it.
//! `default`, `kube-system` and `kube-public` may not be deleted.

use axum::http::StatusCode;
use axum::response::Response;
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};
use serde_json::{Value, json};

use crate::db::{self, NAMESPACES};
use crate::meta::{check_name, pinned_rv, type_meta};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, plain_lists};
use crate::req::Req;
use crate::request::{content_type, name_suffix, new_uid, now, parse_body, time_text};
use crate::status::{ApiError, ApiResult};

const DNS1123_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns1123_label(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| ok_char(c) || c == '-')
        && s.starts_with(ok_char)
        && s.ends_with(ok_char)
}

fn validate_name(name: &str) -> ApiResult<()> {
    let path = Path::new("metadata").child("name");
    let err = if name.is_empty() {
        FieldError::required(&path, "name or generateName is required")
    } else if !is_dns1123_label(name) {
        let detail = if name.len() > 63 {
            "must be no more than 63 characters"
        } else {
            DNS1123_LABEL_ERROR
        };
        FieldError::invalid(&path, name, detail)
    } else {
        return Ok(());
    };
    Err(ApiError::invalid(&ValidationErrors::new(
        "Namespace",
        name,
        vec![err],
    )))
}

/// `POST /api/v1/namespaces`.
pub(crate) fn create(req: &Req, body: &[u8]) -> ApiResult<Response> {
    let dry_run = req.params.dry_run()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Namespace")?;
    let meta = value.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut name = meta["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty()
        && let Some(g) = meta["generateName"].as_str().filter(|g| !g.is_empty())
    {
        name = format!("{g}{}", name_suffix());
    }
    validate_name(&name)?;
    let mut labels = meta.get("labels").cloned().unwrap_or_else(|| json!({}));
    labels["kubernetes.io/metadata.name"] = json!(name);
    let mut new_meta = json!({
        "name": name,
        "uid": new_uid(),
        "creationTimestamp": time_text(now()),
        "labels": labels,
    });
    if let Some(a) = meta.get("annotations") {
        new_meta["annotations"] = a.clone();
    }
    let obj = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": new_meta,
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    });
    let stored = if dry_run {
        obj
    } else {
        let stored = db::create(req.state.store(), NAMESPACES, "", &name, obj)?;
        // The service account controller and the root CA publisher.
        if let Some(ca) = req.state.root_ca() {
            crate::serviceaccounts::ensure_namespace_objects(req.state.store(), &name, ca)?;
        }
        stored
    };
    Ok(respond(req, NAMESPACES, StatusCode::CREATED, &stored, &[]))
}

/// Takes only labels and annotations from `new`.
fn write(req: &Req, name: &str, old: &Value, new: &Value, rv: Option<u64>) -> ApiResult<Response> {
    let mut out = old.clone();
    for k in ["labels", "annotations"] {
        match new.pointer(&format!("/metadata/{k}")) {
            Some(v) if !v.is_null() => out["metadata"][k] = v.clone(),
            _ => {
                if let Some(m) = out["metadata"].as_object_mut() {
                    m.remove(k);
                }
            }
        }
    }
    out["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
    if out == *old || req.params.dry_run()? {
        return Ok(respond(req, NAMESPACES, StatusCode::OK, &out, &[]));
    }
    let stored = db::update(req.state.store(), NAMESPACES, "", name, out, rv)?;
    Ok(respond(req, NAMESPACES, StatusCode::OK, &stored, &[]))
}

/// `PUT /api/v1/namespaces/{name}`.
pub(crate) fn update(req: &Req, name: &str, body: &[u8]) -> ApiResult<Response> {
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Namespace")?;
    check_name(&value, name)?;
    let old = db::get(req.state.store(), NAMESPACES, "", name)?;
    let rv = pinned_rv(&value)?;
    if rv.is_some() && rv != db::object_rv(&old) {
        return Err(ApiError::stale(NAMESPACES.plural, name));
    }
    write(req, name, &old, &value, db::object_rv(&old))
}

/// `PATCH /api/v1/namespaces/{name}`.
pub(crate) fn patch(req: &Req, name: &str, body: &[u8]) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    let store = req.state.store();
    let Some(old) = db::try_get(store, NAMESPACES, "", name)? else {
        if patch_type == PatchType::Apply {
            return create(req, body);
        }
        return Err(ApiError::not_found(NAMESPACES.plural, name));
    };
    let new = apply_patch(&old, patch_type, body, plain_lists)?;
    write(req, name, &old, &new, db::object_rv(&old))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names() {
        assert!(is_dns1123_label("team-a"));
        assert!(!is_dns1123_label("Team"));
        assert!(!is_dns1123_label("-a"));
        assert_eq!(validate_name("Bad").unwrap_err().code, 422);
    }
}
