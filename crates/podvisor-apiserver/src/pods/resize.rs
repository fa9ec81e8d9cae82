//! The `pods/resize` subresource (in-place resize, GA in 1.35): only the containers'
//! `resources` and `resizePolicy` are taken from the request (`dropNonResizeUpdates`), the
//! result is checked by `ValidatePodResize`, and a change of the spec bumps
//! `metadata.generation` (D10), which the kubelet's resize conditions then carry.
//! `kubectl patch pod x --subresource resize` sends a strategic merge patch here; `kubectl
//! edit`/`replace --subresource resize` a PUT.

use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use podvisor_api::{apply_defaults, drop_non_resize_updates, validate_pod_resize};

use super::{
    CREATE_PREFIX, Write, check_name, check_namespace, decode_pod, patched_pod, pinned_rv,
    type_meta, update_loop,
};
use crate::patch::PatchType;
use crate::request::{content_type, duplicate_fields, parse_body};
use crate::routes::Req;
use crate::status::{ApiError, ApiResult};

/// `podResizeStrategy.PrepareForUpdate` + `ValidatePodResize`: the old pod (metadata and
/// status included) with the request's container resources and resize policies.
pub(crate) fn admit_resize(old: &Pod, mut new: Pod) -> ApiResult<Pod> {
    // The request is decoded (and so defaulted: a limit alone sets its request) first.
    apply_defaults(&mut new);
    let mut out = drop_non_resize_updates(&new, old);
    out.metadata = old.metadata.clone();
    out.status = old.status.clone();
    if out.spec != old.spec {
        out.metadata.generation = Some(old.metadata.generation.unwrap_or(0) + 1);
    }
    validate_pod_resize(&out, old).map_err(|e| ApiError::invalid(&e))?;
    Ok(out)
}

/// `PUT .../pods/{name}/resize`.
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
        subresource: super::Subresource::Resize,
    };
    update_loop(req, ns, name, client_rv, &write, |_| {
        Ok((pod.clone(), warnings.clone()))
    })
}

/// `PATCH .../pods/{name}/resize` (JSON, merge and strategic patches; apply is treated as a
/// strategic merge of the applied resources).
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
        subresource: super::Subresource::Resize,
    };
    update_loop(req, ns, name, None, &write, |current| {
        patched_pod(req, current, patch_type, body)
    })
}
