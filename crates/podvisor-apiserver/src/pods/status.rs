//! The `pods/status` subresource: only `status` (plus labels and annotations, as the API
//! server's status strategy allows) changes; the QoS class is kept; transitions are
//! checked by `validate_status_update` (V13). Conditions of readiness gates set by clients
//! are accepted like any other condition.

use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use podvisor_api::validate_status_update;

use super::{
    CREATE_PREFIX, Subresource, Write, check_name, check_namespace, decode_pod, patched_pod,
    pinned_rv, type_meta, update_loop,
};

use crate::patch::PatchType;
use crate::request::{content_type, duplicate_fields, parse_body};
use crate::routes::Req;
use crate::status::{ApiError, ApiResult};

/// `podStatusStrategy.PrepareForUpdate` + `ValidatePodStatusUpdate`: the old pod with the
/// new status, labels and annotations.
pub(crate) fn admit_status(old: &Pod, new: Pod) -> ApiResult<Pod> {
    let mut out = old.clone();
    let qos = old.status.as_ref().and_then(|s| s.qos_class.clone());
    out.status = new.status;
    if let Some(s) = out.status.as_mut() {
        s.qos_class = qos;
    }
    out.metadata.labels = new.metadata.labels;
    out.metadata.annotations = new.metadata.annotations;
    validate_status_update(old, &out).map_err(|e| ApiError::invalid(&e))?;
    Ok(out)
}

/// `PUT .../pods/{name}/status`.
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
        subresource: Subresource::Status,
    };
    update_loop(req, ns, name, client_rv, &write, |_| {
        Ok((pod.clone(), warnings.clone()))
    })
}

/// `PATCH .../pods/{name}/status` (JSON, merge and strategic patches; apply is treated as
/// a strategic merge of the applied status).
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
        subresource: Subresource::Status,
    };
    update_loop(req, ns, name, None, &write, |current| {
        patched_pod(req, current, patch_type, body)
    })
}
