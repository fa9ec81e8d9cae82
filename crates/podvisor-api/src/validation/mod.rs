//! API-server validation of Pods (`pkg/apis/core/validation/validation.go`),
//! returning every error with Kubernetes' field paths and messages.
//!
//! Run [`crate::defaults::apply_defaults`] first, as the API server does:
//! several checks (probe thresholds, pull policy, grace period) assume
//! defaulted input.
//!
//! Feature gates are Kubernetes 1.35's defaults (behaviour reference §0):
//! among others `ContainerRestartRules`, `EnvFiles`, `HostnameOverride`,
//! `ImageVolume` and `PodLevelResources` are on;
//! `RestartAllContainersOnContainerExits` and `ContainerStopSignals` are off
//! (fields of gates that are off are removed before validation by
//! [`crate::drop_disabled_fields`]). [`validate_pod_with_gates`] turns on the
//! gates of [`crate::FeatureGates`]; updates allow what the stored pod uses.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, Volume};

use crate::feature_gates::FeatureGates;

mod config;
mod containers;
mod env;
mod ephemeral;
mod field;
mod handlers;
mod meta;
mod names;
mod namespace;
mod network;
mod node;
mod paths;
mod rbac;
mod resize;
mod resources;
mod security;
mod spec;
mod static_pod;
mod update;

pub use config::{
    validate_config_map, validate_config_map_update, validate_secret, validate_secret_update,
    validate_service_account, validate_service_account_update,
};
pub use field::{BadValue, ErrorKind, FieldError, Path, ValidationErrors, go_quote};
pub use names::{
    is_config_map_key, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_relaxed_env_var_name, is_valid_label_value,
};
pub use namespace::{validate_namespace, validate_namespace_update};
pub use node::{validate_lease, validate_lease_update, validate_node, validate_node_update};
pub use rbac::{
    RBAC_GROUP, default_binding, is_valid_path_segment_name, validate_cluster_role,
    validate_cluster_role_binding, validate_cluster_role_binding_update,
    validate_cluster_role_update, validate_role, validate_role_binding,
    validate_role_binding_update, validate_role_update,
};
pub use resize::{drop_non_resize_updates, validate_pod_resize};
pub use static_pod::validate_static_pod_references;
pub use update::{
    validate_ephemeral_containers_update, validate_pod_update, validate_status_update,
};

/// What container-level checks need to know about the pod around them.
pub(crate) struct Ctx<'a> {
    /// `spec.terminationGracePeriodSeconds`, bounding `sleep` hooks.
    pub(crate) grace_period: Option<i64>,
    /// The volumes that validated cleanly, by name (only those can be
    /// mounted or referenced).
    pub(crate) volumes: HashMap<&'a str, &'a Volume>,
    /// `spec.restartPolicy`.
    pub(crate) pod_restart_policy: &'a str,
    /// `spec.os.name`, if set.
    pub(crate) os: Option<&'a str>,
    /// Whether the pod shares the host's user namespace (`hostUsers`).
    pub(crate) host_users: bool,
    /// The feature gates validation follows (`--feature-gates`).
    pub(crate) gates: FeatureGates,
}

/// The name used in the error summary: `metadata.name`, else `generateName`.
fn pod_name(pod: &Pod) -> String {
    pod.metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| pod.metadata.generate_name.clone())
        .unwrap_or_default()
}

pub(crate) fn into_result(pod: &Pod, errors: Vec<FieldError>) -> Result<(), ValidationErrors> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors::new("Pod", pod_name(pod), errors))
    }
}

/// Validates a Pod as the API server does on create (`ValidatePodCreate`),
/// with Kubernetes 1.35's default feature gates. Call after defaulting and
/// [`crate::drop_disabled_fields`].
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_pod(pod: &Pod) -> Result<(), ValidationErrors> {
    validate_pod_with_gates(pod, FeatureGates::default())
}

/// [`validate_pod`] with the feature gates `gates` (`--feature-gates`): with
/// `RestartAllContainersOnContainerExits` on, a restart rule may have the action
/// `RestartAllContainers` and sidecars may carry rules (KEP-5532).
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_pod_with_gates(pod: &Pod, gates: FeatureGates) -> Result<(), ValidationErrors> {
    into_result(pod, pod_create_errors(pod, gates))
}

/// `validatePodMetadataAndSpec`: shared by create and update.
pub(crate) fn pod_metadata_and_spec_errors(pod: &Pod, gates: FeatureGates) -> Vec<FieldError> {
    let empty = PodSpec::default();
    let spec_value = pod.spec.as_ref().unwrap_or(&empty);
    let mut errs = meta::validate_object_meta(&pod.metadata, &Path::new("metadata"));
    errs.extend(meta_pod_annotations(pod, spec_value));
    errs.extend(spec::validate_pod_spec(spec_value, gates));
    errs.extend(spec::pod_only_checks(spec_value));
    errs
}

/// The annotation that ranks pods for scale-down (V19).
const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// `ValidatePodSpecificAnnotations`: a mirror pod must be bound to a node;
/// a pod-deletion cost must be an int32 (V19).
fn meta_pod_annotations(pod: &Pod, spec: &PodSpec) -> Vec<FieldError> {
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return Vec::new();
    };
    let path = Path::new("metadata").child("annotations");
    let mut errs = Vec::new();
    if let Some(value) = annotations.get(meta::MIRROR_POD_ANNOTATION)
        && spec.node_name.as_deref().unwrap_or("").is_empty()
    {
        errs.push(FieldError::invalid(
            &path.key(meta::MIRROR_POD_ANNOTATION),
            value,
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    if let Some(value) = annotations.get(POD_DELETION_COST)
        && !is_deletion_cost(value)
    {
        errs.push(FieldError::invalid(
            &path.key(POD_DELETION_COST),
            value,
            "must be a 32bit integer",
        ));
    }
    errs
}

/// `GetDeletionCostFromPodAnnotations`: a base-10 int32 without a `+` sign
/// or leading zeros (`0` itself, and `-` followed by digits, are fine).
fn is_deletion_cost(value: &str) -> bool {
    let first_ok = match value.as_bytes().first() {
        None => false,
        Some(b'-') => true,
        Some(b'0') => value == "0",
        Some(c) => c.is_ascii_digit(),
    };
    first_ok && value.parse::<i32>().is_ok()
}

fn pod_create_errors(pod: &Pod, gates: FeatureGates) -> Vec<FieldError> {
    let mut errs = pod_metadata_and_spec_errors(pod, gates);
    let spec_path = Path::new("spec");
    if let Some(spec) = &pod.spec {
        // Ephemeral containers are added through their subresource only (V12).
        if spec
            .ephemeral_containers
            .as_ref()
            .is_some_and(|e| !e.is_empty())
        {
            errs.push(FieldError::forbidden(
                &spec_path.child("ephemeralContainers"),
                "cannot be set on create",
            ));
        }
        if !spec.node_name.as_deref().unwrap_or("").is_empty()
            && spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty())
        {
            errs.push(FieldError::forbidden(
                &spec_path.child("nodeName"),
                "cannot be set until all schedulingGates have been cleared",
            ));
        }
    }
    errs
}
