//! The `pods/status` subresource: only `status` (plus labels and annotations, as the API
//! server's status strategy allows) changes; the QoS class is kept; transitions are
//! checked by `validate_status_update` (V13). Conditions of readiness gates set by clients
//! are accepted like any other condition.

use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use podvisor_api::validate_status_update;
use serde_json::Value;

use podvisor_store::Store;

use super::{
    CREATE_PREFIX, MAX_RETRIES, Write, check_name, check_namespace, decode_pod, patched_pod,
    pinned_rv, pod_of, type_meta, update_loop, value_of,
};
use crate::db::{self, PODS};
use crate::managed;
use crate::patch::{PatchType, pod_lists};
use crate::request::{content_type, duplicate_fields, now, parse_body};
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
        status: true,
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
        status: true,
    };
    update_loop(req, ns, name, None, &write, |current| {
        patched_pod(req, current, patch_type, body)
    })
}

/// The conditions the kubelet owns (D1); all others (readiness gates set by controllers,
/// `DisruptionTarget`) are kept from the stored status unless the node sends them.
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// Writes the status the node computed for `pod` (its namespace, name, uid and `status`)
/// the way the kubelet's status manager does (`mergePodStatus`): the kubelet-owned
/// conditions come from `pod`, every other condition is kept from the stored pod (or
/// replaced when `pod` carries it too), the QoS class stays, the transition is checked by
/// `validate_status_update` (V13), and a write that changes nothing writes nothing. The
/// managed-fields entry is `kubelet`, `Update`, subresource `status`.
///
/// Returns the stored pod.
///
/// # Errors
///
/// 404 when the pod is gone, 409 when the stored pod has another uid (a new pod under the
/// same name), 422 for a forbidden transition, 500 for store failures.
pub fn update_pod_status(store: &Store, pod: &Pod) -> Result<Value, ApiError> {
    let meta = &pod.metadata;
    let ns = meta.namespace.as_deref().unwrap_or("default");
    let name = meta.name.as_deref().unwrap_or("");
    let uid = meta.uid.as_deref().unwrap_or("");
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = db::get(store, PODS, ns, name)?;
        let old = pod_of(&current)?;
        let have = old.metadata.uid.as_deref().unwrap_or("");
        if !uid.is_empty() && uid != have {
            return Err(ApiError::conflict(
                PODS.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                ),
            ));
        }
        let mut status = pod.status.clone().unwrap_or_default();
        let reported = status.conditions.take().unwrap_or_default();
        let mut conditions: Vec<_> = old
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| {
                !KUBELET_CONDITIONS.contains(&c.type_.as_str())
                    && !reported.iter().any(|r| r.type_ == c.type_)
            })
            .collect();
        conditions.extend(reported);
        status.conditions = Some(conditions);
        let mut proposed = old.clone();
        proposed.status = Some(status);
        let new = admit_status(&old, proposed)?;
        let mut value = value_of(&new);
        if value == current {
            return Ok(current);
        }
        let fields = managed::fields_v1(&value, true, pod_lists);
        managed::record(
            &mut value,
            "kubelet",
            "Update",
            Some("status"),
            fields,
            now(),
        );
        match db::update(store, PODS, ns, name, value, db::object_rv(&current)) {
            Err(e) if e.code == 409 && attempt < MAX_RETRIES => {}
            other => return other,
        }
    }
}
