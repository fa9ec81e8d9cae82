//! The `pods/ephemeralcontainers` subresource (`kubectl debug`): GET answers the pod; PUT and
//! PATCH (JSON, merge, strategic merge — kubectl sends a strategic merge patch of
//! `spec.ephemeralContainers` — and apply, taken as a strategic merge) change nothing of the
//! pod but `spec.ephemeralContainers` (`podEphemeralContainersStrategy.PrepareForUpdate`:
//! `dropNonEphemeralContainerUpdates`), bump `metadata.generation` when they change it, and are
//! validated by `validate_ephemeral_containers_update` (only additions, V12's field rules,
//! names unique across every container list, `targetContainerName` naming a container, no
//! static pods).

use k8s_openapi::api::core::v1::Pod;
use podvisor_api::defaults::default_ephemeral_container;
use podvisor_api::{drop_disabled_fields, validate_ephemeral_containers_update};
use serde_json::{Value, json};

use crate::managed;
use crate::patch::ListStrategy;
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
