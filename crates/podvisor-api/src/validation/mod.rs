//! API-server validation of Pods (`pkg/apis/core/validation/validation.go`),
//! returning every error with Kubernetes' field paths and messages.
//!
//! Run [`crate::defaults::apply_defaults`] first, as the API server does:
//! several checks (probe thresholds, pull policy, grace period) assume
//! defaulted input.
//!
//! Feature gates are those of Kubernetes 1.35 with two spec-mandated
//! exceptions (see [`ValidationOptions`]): `ContainerRestartRules` and
//! `SidecarContainers` are on, `RestartAllContainersOnContainerExits` is off.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Pod, PodSpec};

mod containers;
mod env;
mod ephemeral;
mod field;
mod handlers;
mod meta;
mod names;
mod paths;
mod resources;
mod spec;
mod update;

pub use field::{BadValue, ErrorKind, FieldError, Path, ValidationErrors, go_quote};
pub use names::{is_qualified_name, is_valid_label_value};
pub use update::{validate_pod_update, validate_status_update};

/// Switches for behaviour that depends on feature gates. The defaults follow
/// the podvisor behaviour reference (section 11).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValidationOptions {
    /// Accept any printable-ASCII env var name except `=`
    /// (`RelaxedEnvironmentVariableValidation`). Off: names must match
    /// `[-._a-zA-Z][-._a-zA-Z0-9]*` (V11).
    pub relaxed_env_var_names: bool,
    /// Accept `sleep.seconds: 0` in lifecycle hooks
    /// (`PodLifecycleSleepActionAllowZero`). Off: it must be > 0 (V8).
    pub allow_zero_sleep: bool,
}

/// What container-level checks need to know about the pod around them.
pub(crate) struct Ctx<'a> {
    pub(crate) opts: &'a ValidationOptions,
    /// `spec.terminationGracePeriodSeconds`, bounding `sleep` hooks.
    pub(crate) grace_period: Option<i64>,
    /// Names of the volumes that validated cleanly.
    pub(crate) volumes: HashSet<&'a str>,
    /// `spec.restartPolicy`.
    pub(crate) pod_restart_policy: &'a str,
    /// `spec.os.name`, if set.
    pub(crate) os: Option<&'a str>,
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
/// with the default [`ValidationOptions`]. Call after defaulting.
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_pod(pod: &Pod) -> Result<(), ValidationErrors> {
    validate_pod_with(pod, &ValidationOptions::default())
}

/// [`validate_pod`] with explicit options.
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_pod_with(pod: &Pod, opts: &ValidationOptions) -> Result<(), ValidationErrors> {
    into_result(pod, pod_create_errors(pod, opts))
}

/// `validatePodMetadataAndSpec`: shared by create and update.
pub(crate) fn pod_metadata_and_spec_errors(pod: &Pod, opts: &ValidationOptions) -> Vec<FieldError> {
    let empty = PodSpec::default();
    let spec_value = pod.spec.as_ref().unwrap_or(&empty);
    let mut errs = meta::validate_object_meta(&pod.metadata, &Path::new("metadata"));
    errs.extend(meta_pod_annotations(pod, spec_value));
    errs.extend(spec::validate_pod_spec(spec_value, opts));
    errs.extend(spec::pod_only_checks(spec_value));
    errs
}

/// `ValidatePodSpecificAnnotations`: a mirror pod must be bound to a node.
fn meta_pod_annotations(pod: &Pod, spec: &PodSpec) -> Vec<FieldError> {
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(meta::MIRROR_POD_ANNOTATION))
    else {
        return Vec::new();
    };
    if spec.node_name.as_deref().unwrap_or("").is_empty() {
        vec![FieldError::invalid(
            &Path::new("metadata")
                .child("annotations")
                .key(meta::MIRROR_POD_ANNOTATION),
            value,
            "must set spec.nodeName if mirror pod annotation is set",
        )]
    } else {
        Vec::new()
    }
}

fn pod_create_errors(pod: &Pod, opts: &ValidationOptions) -> Vec<FieldError> {
    let mut errs = pod_metadata_and_spec_errors(pod, opts);
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
