//! The `pods/ephemeralcontainers` subresource (`kubectl debug`): GET answers the pod; PUT and
//! PATCH (JSON, merge, strategic merge — kubectl sends a strategic merge patch of
//! `spec.ephemeralContainers` — and apply, taken as a strategic merge) change nothing of the
//! pod but `spec.ephemeralContainers` (`podEphemeralContainersStrategy.PrepareForUpdate`:
//! `dropNonEphemeralContainerUpdates`), bump `metadata.generation` when they change it, and are
//! validated by `validate_ephemeral_containers_update` (only additions, V12's field rules,
//! names unique across every container list, `targetContainerName` naming a container, no
//! static pods).

use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use podvisor_api::defaults::default_ephemeral_container;
use podvisor_api::{drop_disabled_fields, validate_ephemeral_containers_update};
use serde_json::{Value, json};

use super::{
    CREATE_PREFIX, Subresource, Write, check_name, check_namespace, decode_pod, patched_pod,
    pinned_rv, type_meta, update_loop,
};
use crate::managed;
use crate::patch::{ListStrategy, PatchType};
use crate::request::{content_type, duplicate_fields, parse_body};
use crate::routes::Req;
use crate::status::{ApiError, ApiResult};

/// `PrepareForUpdate` + `ValidatePodEphemeralContainersUpdate`: the old pod with the new
/// ephemeral containers (defaulted, as decoding defaults them), its generation bumped when
/// they changed.
pub(crate) fn admit(old: &Pod, new: Pod) -> ApiResult<Pod> {
    let mut ephemeral = new.spec.and_then(|s| s.ephemeral_containers);
    for e in ephemeral.iter_mut().flatten() {
        default_ephemeral_container(e);
    }
    let mut out = old.clone();
    out.spec
        .get_or_insert_with(Default::default)
        .ephemeral_containers = ephemeral;
    drop_disabled_fields(&mut out, Some(old));
    if out.spec != old.spec {
        out.metadata.generation = Some(old.metadata.generation.unwrap_or(0) + 1);
    }
    validate_ephemeral_containers_update(old, &out).map_err(|e| ApiError::invalid(&e))?;
    Ok(out)
}

/// The managed fields of a write to the subresource: what it set of
/// `spec.ephemeralContainers` (the rest of the object is not taken).
pub(crate) fn fields_v1(known: &Value, lists: ListStrategy) -> Value {
    match known.pointer("/spec/ephemeralContainers") {
        Some(list) => managed::fields_v1(
            &json!({"spec": {"ephemeralContainers": list}}),
            false,
            lists,
        ),
        None => json!({}),
    }
}

/// `PUT .../pods/{name}/ephemeralcontainers`: a Pod whose `spec.ephemeralContainers` is taken.
pub(crate) fn update(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let fv = req.params.field_validation()?;
    let mut value = parse_body(body)?;
    type_meta(&mut value, "Pod")?;
    check_namespace(&value, ns)?;
    check_name(&value, name)?;
    let client_rv = pinned_rv(&value)?;
    let (pod, warnings) = decode_pod(&value, &duplicate_fields(body), fv, CREATE_PREFIX)?;
    let write = Write {
        operation: "Update",
        source: Some(value.clone()),
        subresource: Subresource::EphemeralContainers,
    };
    update_loop(req, ns, name, client_rv, &write, |_| {
        Ok((pod.clone(), warnings.clone()))
    })
}

/// `PATCH .../pods/{name}/ephemeralcontainers`.
pub(crate) fn patch(req: &Req, ns: &str, name: &str, body: &[u8]) -> ApiResult<Response> {
    let patch_type = PatchType::from_content_type(&content_type(&req.headers))?;
    let source = match patch_type {
        PatchType::Json => None,
        _ => Some(parse_body(body)?),
    };
    let write = Write {
        operation: if patch_type == PatchType::Apply {
            "Apply"
        } else {
            "Update"
        },
        source,
        subresource: Subresource::EphemeralContainers,
    };
    update_loop(req, ns, name, None, &write, |current| {
        patched_pod(req, current, patch_type, body)
    })
}
