//! The `PodSecurity` admission plugin, on by default in the API server: the pure decisions of
//! `podvisor_api::pod_security` applied to the namespace and pods in the store.
//!
//! - Pod creates, and pod updates (the pod itself and `pods/ephemeralcontainers`) that change
//!   an image or the containers: the enforce level refuses (403, `pods "x" is forbidden:
//!   violates PodSecurity "restricted:latest": ...`), the warn level adds `Warning` headers.
//!   `pods/status`, `pods/resize` and the other subresources are not evaluated, as upstream's
//!   `ignoredPodSubresources` and `isSignificantPodUpdate` have it. The node writes its
//!   status and mirror pods to the store directly, never through this admission.
//! - Namespace creates and updates: bad `pod-security.kubernetes.io/*` label values are
//!   refused (422 `Invalid value`); an enforce level made stricter returns warnings for the
//!   existing pods that violate it.
//! - The audit level: podvisor keeps no audit log; the annotations upstream adds to the audit
//!   event (`pod-security.kubernetes.io/audit-violations`, `error`) go to the server's log at
//!   info level instead.
//!
//! No exemptions are configured, as in upstream's default configuration.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use podvisor_api::ValidationErrors;
use podvisor_api::pod_security::{self, Decision};
use podvisor_store::Store;
use serde_json::Value;

use crate::db::{self, NAMESPACES, PODS};
use crate::status::{ApiError, ApiResult};

/// An object's `metadata.labels` as a map (values that are not strings are ignored; the
/// stored objects were validated).
fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The labels of namespace `ns`, as the plugin's namespace getter reads them.
fn namespace_labels(store: &Store, ns: &str) -> ApiResult<BTreeMap<String, String>> {
    match db::try_get(store, NAMESPACES, "", ns)? {
        Some(obj) => Ok(labels_of(&obj)),
        None => Err(ApiError::internal(format!(
            "failed to lookup namespace {}",
            podvisor_api::gotext::quote(ns)
        ))),
    }
}

/// Turns a decision into the answer: the refusal, or the warnings to send.
fn apply(ns: &str, pod: &Pod, d: Decision) -> ApiResult<Vec<String>> {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (key, value) in &d.audit_annotations {
        if !key.ends_with("/enforce-policy") {
            tracing::info!("audit: pod {ns}/{name}: {key}: {value}");
        }
    }
    match d.forbidden {
        Some(detail) => Err(ApiError::forbidden(PODS.plural, name, &detail)),
        None => Ok(d.warnings),
    }
}

/// Admission of a new pod (after validation, as a validating plugin): the warnings to send.
///
/// # Errors
/// 403 when the namespace's enforce level refuses the pod.
pub(crate) fn admit_pod_create(store: &Store, ns: &str, pod: &Pod) -> ApiResult<Vec<String>> {
    let labels = namespace_labels(store, ns)?;
    let spec = pod.spec.clone().unwrap_or_default();
    let d = pod_security::evaluate_pod_admission(Some(&labels), &pod.metadata, &spec);
    apply(ns, pod, d)
}

/// Admission of a pod update (the pod or `pods/ephemeralcontainers`): evaluated only when
/// it is significant (an image or the containers changed).
///
/// # Errors
/// 403 when the namespace's enforce level refuses the updated pod.
pub(crate) fn admit_pod_update(
    store: &Store,
    ns: &str,
    old: &Pod,
    new: &Pod,
) -> ApiResult<Vec<String>> {
    if !pod_security::is_significant_pod_update(new, old) {
        return Ok(Vec::new());
    }
    admit_pod_create(store, ns, new)
}

fn invalid(name: &str, errors: Vec<podvisor_api::FieldError>) -> ApiError {
    ApiError::invalid(&ValidationErrors::new("Namespace", name, errors))
}

/// A new namespace's Pod Security labels.
///
/// # Errors
/// 422 naming each bad label value.
pub(crate) fn admit_namespace_create(name: &str, obj: &Value) -> ApiResult<()> {
    pod_security::validate_namespace_labels(Some(&labels_of(obj))).map_err(|e| invalid(name, e))
}

/// A namespace update: the warnings for its existing pods when its enforce level becomes
/// stricter.
///
/// # Errors
/// 422 when a label value is bad (and was not already).
pub(crate) fn admit_namespace_update(
    store: &Store,
    name: &str,
    old: &Value,
    new: &Value,
) -> ApiResult<Vec<String>> {
    let (old_labels, new_labels) = (labels_of(old), labels_of(new));
    // Only a changed enforce level needs the pods; skip the listing otherwise.
    let (old_policy, _) = pod_security::policy_to_evaluate(Some(&old_labels));
    let (new_policy, _) = pod_security::policy_to_evaluate(Some(&new_labels));
    let pods = if old_policy.enforce == new_policy.enforce {
        Vec::new()
    } else {
        db::list(store, PODS, Some(name))?
            .0
            .iter()
            .filter_map(|v| serde_json::from_value::<Pod>(v.clone()).ok())
            .collect()
    };
    pod_security::namespace_update_warnings(name, Some(&old_labels), Some(&new_labels), &pods)
        .map_err(|e| invalid(name, e))
}
