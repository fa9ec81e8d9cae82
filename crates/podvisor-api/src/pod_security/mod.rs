//! Pod Security Admission's pure part, as `k8s.io/pod-security-admission` 1.35 has it (the
//! admission plugin the API server runs by default): the Pod Security Standards' levels
//! (`privileged`, `baseline`, `restricted`) and versions (`latest`, `v1.x`, each check with
//! the revisions upstream has), every check with upstream's forbidden reason and detail text,
//! the policy a namespace's `pod-security.kubernetes.io/*` labels set, and the admission
//! decisions for a pod and for a namespace whose enforce level becomes stricter.
//!
//! What it does not do: read namespaces or pods (the API server hands them in), exemptions
//! (upstream's default configuration has none), the pod controllers' templates (podvisor
//! serves no workload kinds), or an audit log (the decision carries the audit annotations
//! upstream would record; what the caller does with them is its choice).

pub mod admission;
pub mod api;
mod baseline;
pub mod registry;
mod restricted;

pub use admission::{
    Decision, evaluate_pod_admission, is_significant_pod_update, namespace_update_warnings,
    validate_namespace_labels,
};
pub use api::{Level, LevelVersion, Policy, Version, policy_to_evaluate};
pub use registry::{AggregateCheckResult, CheckResult, evaluate_pod, run_check};

use k8s_openapi::api::core::v1::{ContainerPort, Lifecycle, PodSpec, Probe, SecurityContext};

/// What the checks read of a container, init, regular or ephemeral alike (upstream casts an
/// ephemeral container's common part to a `Container`).
pub(crate) struct ContainerView<'a> {
    pub(crate) name: &'a str,
    pub(crate) security_context: Option<&'a SecurityContext>,
    pub(crate) ports: &'a [ContainerPort],
    pub(crate) liveness_probe: Option<&'a Probe>,
    pub(crate) readiness_probe: Option<&'a Probe>,
    pub(crate) startup_probe: Option<&'a Probe>,
    pub(crate) lifecycle: Option<&'a Lifecycle>,
}

/// `visitContainers`: init containers, then containers, then ephemeral containers.
pub(crate) fn containers(spec: &PodSpec) -> impl Iterator<Item = ContainerView<'_>> {
    let regular = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
            liveness_probe: c.liveness_probe.as_ref(),
            readiness_probe: c.readiness_probe.as_ref(),
            startup_probe: c.startup_probe.as_ref(),
            lifecycle: c.lifecycle.as_ref(),
        });
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
            liveness_probe: c.liveness_probe.as_ref(),
            readiness_probe: c.readiness_probe.as_ref(),
            startup_probe: c.startup_probe.as_ref(),
            lifecycle: c.lifecycle.as_ref(),
        });
    regular.chain(ephemeral)
}

/// `joinQuote`: `"a", "b"` (no escaping, as upstream).
pub(crate) fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

/// `pluralize`.
pub(crate) fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// `container "a"` / `containers "a", "b"`.
pub(crate) fn containers_phrase<S: AsRef<str>>(names: &[S]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// `relaxPolicyForUserNamespacePod`: a pod in a user namespace (`hostUsers: false`), for the
/// checks whose 1.35 revision relaxes them there.
pub(crate) fn in_user_namespace(spec: &PodSpec) -> bool {
    spec.host_users == Some(false)
}

/// A Windows pod (`spec.os.name: windows`), which some restricted revisions skip.
pub(crate) fn is_windows(spec: &PodSpec) -> bool {
    spec.os.as_ref().is_some_and(|os| os.name == "windows")
}
