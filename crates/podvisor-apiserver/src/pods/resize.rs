//! The `pods/resize` subresource (in-place resize, GA in 1.35): only the containers'
//! `resources` and `resizePolicy` are taken from the request (`dropNonResizeUpdates`), the
//! result is checked by `ValidatePodResize`, and a change of the spec bumps
//! `metadata.generation` (D10), which the kubelet's resize conditions then carry.
//! `kubectl patch pod x --subresource resize` sends a strategic merge patch here; `kubectl
//! edit`/`replace --subresource resize` a PUT.

use k8s_openapi::api::core::v1::Pod;
use podvisor_api::{apply_defaults, drop_non_resize_updates, validate_pod_resize};

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
