//! `nodes` (core/v1, cluster-scoped) and `coordination.k8s.io/v1` `leases`: create, update
//! and patch (JSON, merge, strategic, apply), delete, and the `nodes/status` subresource.
//! The node agent registers its Node and renews its Lease through the store; these handlers
//! are what kubectl (`cordon`, `label`, `taint`, `describe`) and other clients use.
//!
//! The REST strategies are upstream's (`pkg/registry/core/node`, `pkg/registry/coordination/
//! lease`): a write of the main resource keeps the stored `status`, a write of `nodes/status`
//! takes only `status`; the system metadata (uid, creationTimestamp, resourceVersion) is the
//! store's.

use axum::http::StatusCode;
use axum::response::Response;
use podvisor_api::ValidationErrors;
use podvisor_api::validation::{FieldError, Path};
use serde_json::{Value, json};

use crate::db::{self, LEASES, NODES, Resource};
use crate::meta::{check_name, check_namespace, pinned_rv, resource_type_meta};
use crate::objects::respond;
use crate::patch::{PatchType, apply_patch, plain_lists};
use crate::req::Req;
use crate::request::{content_type, name_suffix, new_uid, now, parse_body, time_text};
use crate::status::{ApiError, ApiResult};

/// How many times a write is retried when the object changed underneath it.
const MAX_RETRIES: usize = 5;

/// Which part of the object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main resource: everything but `status`.
    Main,
    /// The `status` subresource: only `status`.
    Status,
}

fn is_dns1123_subdomain(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| ok(c) || c == '-')
                && part.starts_with(ok)
                && part.ends_with(ok)
        })
}

/// The name must be a DNS subdomain (both kinds' `ValidateObjectMeta` name rule).
fn validate(res: Resource, obj: &Value) -> ApiResult<()> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let path = Path::new("metadata").child("name");
    let err = if name.is_empty() {
        FieldError::required(&path, "name or generateName is required")
    } else if !is_dns1123_subdomain(name) {
        FieldError::invalid(
            &path,
            name,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )
    } else if res.kind == "Lease"
        && obj
            .pointer("/spec/leaseDurationSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|d| d <= 0)
    {
        FieldError::invalid(
            &Path::new("spec").child("leaseDurationSeconds"),
            obj["spec"]["leaseDurationSeconds"].to_string(),
            "must be greater than 0",
        )
    } else if let Some(err) = invalid_taint(obj) {
        err
    } else {
        return Ok(());
    };
    Err(ApiError::invalid(&ValidationErrors::new(
        res.kind,
        name,
        vec![err],
    )))
}

/// `validateNodeTaints`: every taint has a key and one of the three effects.
fn invalid_taint(obj: &Value) -> Option<FieldError> {
    let taints = obj.pointer("/spec/taints")?.as_array()?;
    taints.iter().enumerate().find_map(|(i, t)| {
        let path = Path::new("spec").child("taints").index(i);
        let key = t["key"].as_str().unwrap_or("");
        let effect = t["effect"].as_str().unwrap_or("");
        if key.is_empty() {
            Some(FieldError::required(&path.child("key"), ""))
        } else if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            Some(FieldError::not_supported(
                &path.child("effect"),
                effect,
                &["NoExecute", "NoSchedule", "PreferNoSchedule"],
            ))
        } else {
            None
        }
    })
}

/// `POST` of a Node (`ns` empty) or a Lease.
pub(crate) fn create(req: &Req, res: Resource, ns: &str, body: &[u8]) -> ApiResult<Response> {
    create_value(req, res, ns, parse_body(body)?)
}

fn create_value(req: &Req, res: Resource, ns: &str, mut value: Value) -> ApiResult<Response> {
    let dry_run = req.params.dry_run()?;
    resource_type_meta(&mut value, res)?;
    if res.namespaced {
        check_namespace(&value, ns)?;
    }
    let meta = value.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if meta["resourceVersion"]
        .as_str()
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = meta["name"].as_str().unwrap_or("").to_owned();
    if name.is_empty()
        && let Some(g) = meta["generateName"].as_str().filter(|g| !g.is_empty())
    {
        name = format!("{g}{}", name_suffix());
    }
    if res.namespaced {
        crate::namespace_controller::admit_create(req.state.store(), res.plural, &name, ns)?;
    }
    let m = &mut value["metadata"];
    m["name"] = json!(name);
    if res.namespaced {
        m["namespace"] = json!(ns);
    }
    m["uid"] = json!(new_uid());
    m["creationTimestamp"] = json!(time_text(now()));
    if let Some(m) = m.as_object_mut() {
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            m.remove(k);
        }
    }
    validate(res, &value)?;
    let stored = if dry_run {
        value
    } else {
        db::create(req.state.store(), res, ns, &name, value)?
    };
    Ok(respond(req, res, StatusCode::CREATED, &stored, &[]))
}

/// The object to store from the stored `old` and the written `new`: the part written comes
/// from `new`, the rest and the system metadata from `old`.
fn merge(old: &Value, new: &Value, part: Part) -> Value {
    // The main resource keeps the stored status; `nodes/status` writes only the status.
    let (base, status_from) = match part {
        Part::Main => (new, old),
        Part::Status => (old, new),
    };
    let mut out = base.clone();
    match status_from.get("status") {
        Some(s) => out["status"] = s.clone(),
        None => {
            if let Some(o) = out.as_object_mut() {
                o.remove("status");
            }
        }
    }
    for k in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
    ] {
        match old["metadata"].get(k) {
            Some(v) => out["metadata"][k] = v.clone(),
            None => {
                if let Some(m) = out["metadata"].as_object_mut() {
                    m.remove(k);
                }
            }
        }
    }
    out
}

/// The optimistic write loop of PUT and PATCH.
fn write_loop(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    part: Part,
    client_rv: Option<u64>,
    mut compute: impl FnMut(&Value) -> ApiResult<Value>,
) -> ApiResult<Response> {
    let store = req.state.store();
    let dry_run = req.params.dry_run()?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let old = db::get(store, res, ns, name)?;
        let old_rv = db::object_rv(&old);
        if client_rv.is_some() && client_rv != old_rv {
            return Err(ApiError::stale(res.plural, name));
        }
        let mut new = compute(&old)?;
        resource_type_meta(&mut new, res)?;
        let new = merge(&old, &new, part);
        validate(res, &new)?;
        if new == old || dry_run {
            return Ok(respond(req, res, StatusCode::OK, &new, &[]));
        }
        match db::update(store, res, ns, name, new, old_rv) {
            Ok(stored) => return Ok(respond(req, res, StatusCode::OK, &stored, &[])),
            Err(e) if e.code == 409 && client_rv.is_none() && attempt < MAX_RETRIES => {}
            Err(e) => return Err(e),
        }
    }
}

/// `PUT` of a Node, its status, or a Lease.
pub(crate) fn update(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    body: &[u8],
    part: Part,
) -> ApiResult<Response> {
    let mut value = parse_body(body)?;
    resource_type_meta(&mut value, res)?;
    if res.namespaced {
        check_namespace(&value, ns)?;
    }
    check_name(&value, name)?;
    let client_rv = pinned_rv(&value)?;
    write_loop(req, res, ns, name, part, client_rv, |_| Ok(value.clone()))
}

/// `PATCH` of a Node, its status, or a Lease (an apply of a missing one creates it).
pub(crate) fn patch(
    req: &Req,
    res: Resource,
    ns: &str,
    name: &str,
    body: &[u8],
    part: Part,
) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    if patch_type == PatchType::Apply
        && part == Part::Main
        && db::try_get(req.state.store(), res, ns, name)?.is_none()
    {
        let mut value = parse_body(body)?;
        check_name(&value, name)?;
        if let Some(m) = value.as_object_mut() {
            m.remove("status");
        }
        return create_value(req, res, ns, value);
    }
    write_loop(req, res, ns, name, part, None, |old| {
        apply_patch(old, patch_type, body, plain_lists)
    })
}

/// `DELETE` of a Node or a Lease.
pub(crate) fn delete(req: &Req, res: Resource, ns: &str, name: &str) -> ApiResult<Response> {
    let store = req.state.store();
    let old = db::get(store, res, ns, name)?;
    if req.params.dry_run()? {
        return Ok(respond(req, res, StatusCode::OK, &old, &[]));
    }
    let uid = old
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let removed = db::delete(store, res, ns, name, uid, None)?;
    Ok(respond(req, res, StatusCode::OK, &removed, &[]))
}

/// `nodes` requests: `/api/v1/nodes/{name}` and `/api/v1/nodes/{name}/status`.
pub(crate) fn node(
    req: &Req,
    name: &str,
    sub: Option<&str>,
    method: &axum::http::Method,
    body: &[u8],
) -> ApiResult<Response> {
    use axum::http::Method;
    let part = match sub {
        None => Part::Main,
        Some("status") => Part::Status,
        Some(_) => return Err(ApiError::path_not_found()),
    };
    match (part, method) {
        (_, &Method::GET) => crate::objects::get(req, NODES, "", name),
        (_, &Method::PUT) => update(req, NODES, "", name, body, part),
        (_, &Method::PATCH) => patch(req, NODES, "", name, body, part),
        (Part::Main, &Method::DELETE) => delete(req, NODES, "", name),
        (Part::Main, m) => Err(ApiError::method_not_supported("nodes", m.as_str())),
        (Part::Status, m) => Err(ApiError::method_not_supported("nodes/status", m.as_str())),
    }
}

/// `leases` requests in a namespace: the collection (`name` `None`) or one Lease.
pub(crate) fn lease(
    req: &Req,
    ns: &str,
    name: Option<&str>,
    method: &axum::http::Method,
    body: &[u8],
) -> ApiResult<Response> {
    use axum::http::Method;
    match (name, method) {
        (None, &Method::GET) => crate::objects::list(req, LEASES, Some(ns), None),
        (None, &Method::POST) => create(req, LEASES, ns, body),
        (Some(n), &Method::GET) => crate::objects::get(req, LEASES, ns, n),
        (Some(n), &Method::PUT) => update(req, LEASES, ns, n, body, Part::Main),
        (Some(n), &Method::PATCH) => patch(req, LEASES, ns, n, body, Part::Main),
        (Some(n), &Method::DELETE) => delete(req, LEASES, ns, n),
        (_, m) => Err(ApiError::method_not_supported(
            "leases.coordination.k8s.io",
            m.as_str(),
        )),
    }
}

/// `GET /apis/coordination.k8s.io` (and its version).
pub(crate) fn coordination_group() -> Value {
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "coordination.k8s.io",
        "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
    })
}

/// `GET /apis/coordination.k8s.io/v1`.
pub(crate) fn coordination_resources() -> Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "coordination.k8s.io/v1",
        "resources": [{
            "name": "leases",
            "singularName": "lease",
            "namespaced": true,
            "kind": "Lease",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }],
    })
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
    fn main_writes_keep_status_and_status_writes_keep_the_rest() {
        let old = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "uid": "u", "resourceVersion": "5"},
            "spec": {}, "status": {"phase": "Running"}});
        let new = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "uid": "other", "labels": {"a": "b"}},
            "spec": {"unschedulable": true}, "status": {"phase": "Gone"}});
        let main = merge(&old, &new, Part::Main);
        assert_eq!(main["spec"]["unschedulable"], json!(true));
        assert_eq!(main["status"]["phase"], json!("Running"));
        assert_eq!(main["metadata"]["uid"], json!("u"));
        assert_eq!(main["metadata"]["labels"]["a"], json!("b"));
        let status = merge(&old, &new, Part::Status);
        assert_eq!(status["spec"], json!({}));
        assert_eq!(status["status"]["phase"], json!("Gone"));
        assert!(status["metadata"].get("labels").is_none());
    }

    #[test]
    fn names_are_dns_subdomains() {
        assert!(is_dns1123_subdomain("node-1.example"));
        assert!(!is_dns1123_subdomain("Node"));
        assert!(!is_dns1123_subdomain("a..b"));
        let bad = json!({"metadata": {"name": "x"}, "spec": {"leaseDurationSeconds": 0}});
        assert_eq!(validate(LEASES, &bad).unwrap_err().code, 422);
        let taint = |effect: &str| json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": effect}]}});
        assert!(validate(NODES, &taint("NoSchedule")).is_ok());
        let err = validate(NODES, &taint("Sometimes")).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message.contains("spec.taints[0].effect"),
            "{}",
            err.message
        );
    }
}
