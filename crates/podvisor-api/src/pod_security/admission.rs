//! The admission decisions (`admission/admission.go`) over objects the caller read: a pod's
//! create or update against its namespace's policy, a namespace's labels, and the warnings
//! for the existing pods when a namespace's enforce level becomes stricter. Upstream's
//! default configuration: no exemptions, every mode `privileged:latest` by default.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::api::{LABEL_PREFIX, Level, LevelVersion, policy_to_evaluate};
use super::registry::{AggregateCheckResult, evaluate_pod};
use crate::gotext::quote;
use crate::validation::{FieldError, ValidationErrors};

/// Upstream checks at most this many existing pods when a namespace's enforce level changes.
const NAMESPACE_MAX_PODS_TO_CHECK: usize = 3000;

/// What Pod Security admission says of one pod write.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Decision {
    /// The enforce level refused the pod: `violates PodSecurity "restricted:latest": ...`,
    /// the text after `pods "x" is forbidden: `.
    pub forbidden: Option<String>,
    /// `Warning` headers for the client (the warn level), when the pod is allowed.
    pub warnings: Vec<String>,
    /// The audit annotations upstream adds to the request's audit event, keys prefixed with
    /// `pod-security.kubernetes.io/` (`enforce-policy`, `audit-violations`, `error`).
    pub audit_annotations: BTreeMap<String, String>,
}

fn annotate(d: &mut Decision, key: &str, value: String) {
    d.audit_annotations
        .insert(format!("{LABEL_PREFIX}{key}"), value);
}

fn check(lv: LevelVersion, meta: &ObjectMeta, spec: &PodSpec) -> AggregateCheckResult {
    AggregateCheckResult::of(&evaluate_pod(lv, meta, spec))
}

/// `ValidatePod` + `EvaluatePod` for a pod create, or an update that
/// [`is_significant_pod_update`], in a namespace with `labels`.
#[must_use]
pub fn evaluate_pod_admission(
    labels: Option<&BTreeMap<String, String>>,
    meta: &ObjectMeta,
    spec: &PodSpec,
) -> Decision {
    let (policy, errs) = policy_to_evaluate(labels);
    let mut d = Decision::default();
    if errs.is_empty() && policy.fully_privileged() {
        annotate(
            &mut d,
            "enforce-policy",
            LevelVersion::PRIVILEGED_LATEST.to_string(),
        );
        return d;
    }
    if !errs.is_empty() {
        let aggregate = ValidationErrors::new("", "", errs).aggregate();
        annotate(
            &mut d,
            "error",
            format!("Failed to parse policy: {aggregate}"),
        );
    }
    annotate(&mut d, "enforce-policy", policy.enforce.to_string());
    let mut cache: HashMap<LevelVersion, AggregateCheckResult> = HashMap::new();
    let enforce = check(policy.enforce, meta, spec);
    if !enforce.allowed {
        d.forbidden = Some(format!(
            "violates PodSecurity {}: {}",
            quote(&policy.enforce.to_string()),
            enforce.forbidden_detail()
        ));
    }
    cache.insert(policy.enforce, enforce);
    let audit = cache
        .entry(policy.audit)
        .or_insert_with(|| check(policy.audit, meta, spec))
        .clone();
    if !audit.allowed {
        annotate(
            &mut d,
            "audit-violations",
            format!(
                "would violate PodSecurity {}: {}",
                quote(&policy.audit.to_string()),
                audit.forbidden_detail()
            ),
        );
    }
    if d.forbidden.is_none() {
        let warn = cache
            .entry(policy.warn)
            .or_insert_with(|| check(policy.warn, meta, spec));
        if !warn.allowed {
            d.warnings.push(format!(
                "would violate PodSecurity {}: {}",
                quote(&policy.warn.to_string()),
                warn.forbidden_detail()
            ));
        }
    }
    d
}

/// `isSignificantPodUpdate`: an update is evaluated only when it changes a container's
/// image, the number of containers or init containers, or adds or changes an ephemeral
/// container's image (metadata, status and resize updates are not evaluated).
#[must_use]
pub fn is_significant_pod_update(new: &Pod, old: &Pod) -> bool {
    let empty = PodSpec::default();
    let (n, o) = (
        new.spec.as_ref().unwrap_or(&empty),
        old.spec.as_ref().unwrap_or(&empty),
    );
    let image = |c: &Container| c.image.clone();
    let (ni, oi) = (
        n.init_containers.as_deref().unwrap_or_default(),
        o.init_containers.as_deref().unwrap_or_default(),
    );
    if n.containers.len() != o.containers.len() || ni.len() != oi.len() {
        return true;
    }
    let changed =
        |a: &[Container], b: &[Container]| a.iter().zip(b).any(|(x, y)| image(x) != image(y));
    if changed(&n.containers, &o.containers) || changed(ni, oi) {
        return true;
    }
    let old_ephemeral = o.ephemeral_containers.as_deref().unwrap_or_default();
    n.ephemeral_containers.iter().flatten().any(|e| {
        old_ephemeral
            .iter()
            .find(|oe| oe.name == e.name)
            .is_none_or(|oe| oe.image != e.image)
    })
}

/// The namespace's Pod Security labels on create: every bad label value, as
/// `metadata.labels[<label>]: Invalid value: ...` errors.
///
/// # Errors
/// The field errors, for an `Invalid` answer.
pub fn validate_namespace_labels(
    labels: Option<&BTreeMap<String, String>>,
) -> Result<(), Vec<FieldError>> {
    let (_, errs) = policy_to_evaluate(labels);
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// `ValidateNamespace` on update: bad labels are refused unless the namespace already had
/// the same errors; an enforce level made stricter (or at another version) returns warnings
/// for the existing `pods` that violate it, grouped by their violations.
///
/// # Errors
/// The field errors of the new labels, for an `Invalid` answer.
pub fn namespace_update_warnings(
    namespace: &str,
    old_labels: Option<&BTreeMap<String, String>>,
    new_labels: Option<&BTreeMap<String, String>>,
    pods: &[Pod],
) -> Result<Vec<String>, Vec<FieldError>> {
    let (new_policy, new_errs) = policy_to_evaluate(new_labels);
    let (old_policy, old_errs) = policy_to_evaluate(old_labels);
    if !new_errs.is_empty() && (old_errs.is_empty() || new_errs != old_errs) {
        return Err(new_errs);
    }
    let (new, old) = (new_policy.enforce, old_policy.enforce);
    if new == old
        || new.level == Level::Privileged
        || (new.version == old.version && new.level <= old.level)
    {
        return Ok(Vec::new());
    }
    Ok(existing_pod_warnings(namespace, new, pods))
}

/// `EvaluatePodsInNamespace` (without upstream's one-second budget: the pods are in hand).
fn existing_pod_warnings(namespace: &str, enforce: LevelVersion, pods: &[Pod]) -> Vec<String> {
    let prioritized = prioritize(pods);
    let total = prioritized.len();
    let checked = &prioritized[..total.min(NAMESPACE_MAX_PODS_TO_CHECK)];
    // Violations in first-seen order, each with its smallest pod name and pod count.
    let mut order: Vec<String> = Vec::new();
    let mut counts: HashMap<String, (String, usize)> = HashMap::new();
    let empty = PodSpec::default();
    for pod in checked {
        let r = check(enforce, &pod.metadata, pod.spec.as_ref().unwrap_or(&empty));
        if r.allowed {
            continue;
        }
        let reason = r.forbidden_reason();
        let name = pod.metadata.name.clone().unwrap_or_default();
        match counts.get_mut(&reason) {
            Some((first, n)) => {
                if name < *first {
                    *first = name;
                }
                *n += 1;
            }
            None => {
                order.push(reason.clone());
                counts.insert(reason, (name, 1));
            }
        }
    }
    let mut warnings = Vec::new();
    if checked.len() < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {} of {total} existing pods",
            checked.len()
        ));
    }
    if !order.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {} violate the new PodSecurity enforce level {}",
            quote(namespace),
            quote(&enforce.to_string())
        ));
    }
    let mut pod_warnings: Vec<String> = order
        .into_iter()
        .map(|reason| {
            let (name, n) = &counts[&reason];
            match n {
                1 => format!("{name}: {reason}"),
                2 => format!("{name} (and 1 other pod): {reason}"),
                _ => format!("{name} (and {} other pods): {reason}", n - 1),
            }
        })
        .collect();
    pod_warnings.sort();
    warnings.extend(pod_warnings);
    warnings
}

/// `prioritizePods`: one pod per controller first, the other replicas after.
fn prioritize(pods: &[Pod]) -> Vec<&Pod> {
    let mut first = Vec::new();
    let mut replicas = Vec::new();
    let mut seen_controllers = HashSet::new();
    for pod in pods {
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true));
        match controller {
            Some(c) if !seen_controllers.insert(c.uid.clone()) => replicas.push(pod),
            _ => first.push(pod),
        }
    }
    first.extend(replicas);
    first
}
