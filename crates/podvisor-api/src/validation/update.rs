//! Updates: spec mutability (M11, `ValidatePodUpdate`) and status
//! transitions (V13, `ValidatePodStatusUpdate`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerStatus, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm,
    Pod, PodSpec,
};
use serde::Serialize;
use serde_json::Value;

use super::field::{FieldError, Path};
use super::meta::{validate_mirror_annotation_update, validate_object_meta_update};
use super::names::inclusive_range_error;
use super::spec::validate_tolerations;
use super::{ValidationErrors, into_result, pod_metadata_and_spec_errors};

const UPDATABLE_POD_SPEC_FIELDS: [&str; 5] = [
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
];

/// Validates an update of a Pod as the API server does
/// (`ValidatePodUpdate`, M11): the new pod must be valid, and only images,
/// `activeDeadlineSeconds` (set or lowered), toleration additions,
/// scheduling-gate removals (plus node-selector additions while gated) and
/// a negative grace period turning into 1 may change.
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_pod_update(old: &Pod, new: &Pod) -> Result<(), ValidationErrors> {
    into_result(new, pod_update_errors(old, new))
}

fn container_update_errors(
    new: &[Container],
    old: &[Container],
    path: &Path,
) -> Result<Vec<FieldError>, Vec<FieldError>> {
    if new.len() != old.len() {
        return Err(vec![FieldError::forbidden(
            path,
            "pod updates may not add or remove containers",
        )]);
    }
    let mut errs = Vec::new();
    for (i, c) in new.iter().enumerate() {
        let image = c.image.as_deref().unwrap_or("");
        if image.is_empty() {
            errs.push(FieldError::required(&path.index(i).child("image"), ""));
        }
        if image.trim() != image {
            errs.push(FieldError::invalid(
                &path.index(i).child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
    Ok(errs)
}

fn pod_update_errors(old: &Pod, new: &Pod) -> Vec<FieldError> {
    let mut errs =
        validate_object_meta_update(&new.metadata, &old.metadata, &Path::new("metadata"));
    // An update may keep what the stored pod uses with its gate off.
    let gates = crate::FeatureGates::default().for_update(old.spec.as_ref());
    errs.extend(pod_metadata_and_spec_errors(new, gates));
    errs.extend(validate_mirror_annotation_update(
        &new.metadata,
        &old.metadata,
        &Path::new("metadata"),
    ));

    let empty = PodSpec::default();
    let new_spec = new.spec.as_ref().unwrap_or(&empty);
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    let spec_path = Path::new("spec");

    for (field, n, o) in [
        (
            "containers",
            &new_spec.containers[..],
            &old_spec.containers[..],
        ),
        (
            "initContainers",
            new_spec.init_containers.as_deref().unwrap_or_default(),
            old_spec.init_containers.as_deref().unwrap_or_default(),
        ),
    ] {
        match container_update_errors(n, o, &spec_path.child(field)) {
            Ok(e) => errs.extend(e),
            Err(e) => {
                errs.extend(e);
                return errs;
            }
        }
    }

    // activeDeadlineSeconds: nil -> value, or value -> smaller value.
    let ads_path = spec_path.child("activeDeadlineSeconds");
    match (
        new_spec.active_deadline_seconds,
        old_spec.active_deadline_seconds,
    ) {
        (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            errs.push(FieldError::invalid(
                &ads_path,
                n,
                inclusive_range_error(0, i64::from(i32::MAX)),
            ));
            return errs;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid(
                &ads_path,
                n,
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (None, Some(_)) => errs.push(FieldError::invalid(
            &ads_path,
            super::field::BadValue::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    errs.extend(only_added_tolerations(
        new_spec,
        old_spec,
        &spec_path.child("tolerations"),
    ));
    errs.extend(only_deleted_scheduling_gates(
        new_spec,
        old_spec,
        &spec_path.child("schedulingGates"),
    ));

    if normalized(new_spec) == normalized(old_spec) {
        return errs;
    }

    // Overwrite the mutable fields with their old values, then any
    // remaining difference is forbidden.
    let mut munged = new_spec.clone();
    for (c, o) in munged.containers.iter_mut().zip(&old_spec.containers) {
        c.image.clone_from(&o.image);
    }
    if let (Some(inits), Some(old_inits)) = (&mut munged.init_containers, &old_spec.init_containers)
    {
        for (c, o) in inits.iter_mut().zip(old_inits) {
            c.image.clone_from(&o.image);
        }
    }
    munged.active_deadline_seconds = old_spec.active_deadline_seconds;
    munged
        .scheduling_gates
        .clone_from(&old_spec.scheduling_gates);
    munged.tolerations.clone_from(&old_spec.tolerations);
    if old_spec
        .termination_grace_period_seconds
        .is_some_and(|g| g < 0)
        && munged.termination_grace_period_seconds == Some(1)
    {
        munged.termination_grace_period_seconds = old_spec.termination_grace_period_seconds;
    }
    let gated = old_spec
        .scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty());
    if gated && munged.node_selector != old_spec.node_selector {
        errs.extend(node_selector_mutation(
            munged.node_selector.as_ref(),
            old_spec.node_selector.as_ref(),
            &spec_path.child("nodeSelector"),
        ));
        munged.node_selector.clone_from(&old_spec.node_selector);
    }
    if gated {
        let old_na = old_spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.clone());
        let munged_na = munged
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.clone());
        if semantic(&old_na) != semantic(&munged_na) {
            errs.extend(node_affinity_mutation(
                &spec_path.child("affinity").child("nodeAffinity"),
                munged_na.as_ref(),
                old_na.as_ref(),
            ));
            match (&mut munged.affinity, &old_na) {
                (None, None) => {}
                (None, Some(_)) => {
                    munged.affinity = Some(Affinity {
                        node_affinity: old_na,
                        ..Affinity::default()
                    });
                }
                (Some(a), _)
                    if old_spec.affinity.is_none()
                        && a.pod_anti_affinity.is_none()
                        && a.pod_affinity.is_none() =>
                {
                    munged.affinity = None;
                }
                (Some(a), _) => a.node_affinity = old_na,
            }
        }
    }

    let (old_v, new_v) = (normalized(old_spec), normalized(&munged));
    if old_v != new_v {
        let mut diff = Vec::new();
        diff_values("spec", &old_v, &new_v, &mut diff);
        errs.push(FieldError::forbidden(
            &spec_path,
            format!(
                "pod updates may not change fields other than {}\n{}",
                UPDATABLE_POD_SPEC_FIELDS.join(","),
                diff.join("\n")
            ),
        ));
    }
    errs
}

/// Validates an update through the `ephemeralcontainers` subresource as the API server does
/// (`ValidatePodEphemeralContainersUpdate`, M11/V12): the new pod must be valid (names unique
/// across every container list, `targetContainerName` naming a container, no forbidden
/// fields), a static pod's mirror takes none, and existing ephemeral containers may be neither
/// removed nor changed (order does not matter: a patch may reorder them). The caller keeps
/// everything of the old pod but `spec.ephemeralContainers` (`dropNonEphemeralContainerUpdates`).
///
/// # Errors
///
/// Every problem found, in the API server's order.
pub fn validate_ephemeral_containers_update(old: &Pod, new: &Pod) -> Result<(), ValidationErrors> {
    let meta_path = Path::new("metadata");
    let mut errs = validate_object_meta_update(&new.metadata, &old.metadata, &meta_path);
    // An update may keep what the stored pod uses with its gate off.
    let gates = crate::FeatureGates::default().for_update(old.spec.as_ref());
    errs.extend(pod_metadata_and_spec_errors(new, gates));
    errs.extend(validate_mirror_annotation_update(
        &new.metadata,
        &old.metadata,
        &meta_path,
    ));
    if old
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(super::meta::MIRROR_POD_ANNOTATION))
    {
        // kubernetes#113935; Go prints the empty root path as `[]`.
        let errs = vec![FieldError::forbidden(
            &Path::new("[]"),
            "static pods do not support ephemeral containers",
        )];
        return into_result(new, errs);
    }
    let ephemeral = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.clone())
            .unwrap_or_default()
    };
    let (old_list, new_list) = (ephemeral(old), ephemeral(new));
    let path = Path::new("spec").child("ephemeralContainers");
    for o in &old_list {
        let quoted = super::go_quote(&o.name);
        match new_list.iter().find(|n| n.name == o.name) {
            None => errs.push(FieldError::forbidden(
                &path,
                format!("existing ephemeral containers {quoted} may not be removed\n"),
            )),
            Some(n) => {
                let as_value = |e| {
                    normalized(&PodSpec {
                        ephemeral_containers: Some(vec![e]),
                        ..PodSpec::default()
                    })
                };
                let (ov, nv) = (as_value(o.clone()), as_value(n.clone()));
                if ov != nv {
                    let mut diff = Vec::new();
                    diff_values("spec", &ov, &nv, &mut diff);
                    errs.push(FieldError::forbidden(
                        &path,
                        format!(
                            "existing ephemeral containers {quoted} may not be changed\n{}",
                            diff.join("\n")
                        ),
                    ));
                }
            }
        }
    }
    into_result(new, errs)
}

fn only_added_tolerations(new: &PodSpec, old: &PodSpec, path: &Path) -> Vec<FieldError> {
    let new_t = new.tolerations.as_deref().unwrap_or_default();
    for o in old.tolerations.iter().flatten() {
        // tolerationSeconds may change; everything else must survive.
        let found = new_t.iter().any(|n| {
            let mut o = o.clone();
            o.toleration_seconds = n.toleration_seconds;
            o == *n
        });
        if !found {
            return vec![FieldError::forbidden(
                path,
                "existing toleration can not be modified except its tolerationSeconds",
            )];
        }
    }
    validate_tolerations(new_t, path)
}

fn only_deleted_scheduling_gates(new: &PodSpec, old: &PodSpec, path: &Path) -> Vec<FieldError> {
    let old_names: Vec<&str> = old
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect();
    new.scheduling_gates
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, g)| !old_names.contains(&g.name.as_str()))
        .map(|(i, g)| {
            FieldError::forbidden(
                &path.index(i).child("name"),
                format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    g.name
                ),
            )
        })
        .collect()
}

fn node_selector_mutation(
    new: Option<&BTreeMap<String, String>>,
    old: Option<&BTreeMap<String, String>>,
    path: &Path,
) -> Vec<FieldError> {
    let empty = BTreeMap::new();
    let new = new.unwrap_or(&empty);
    for (k, v) in old.unwrap_or(&empty) {
        if new.get(k) != Some(v) {
            // Go prints the whole map with %#v.
            let rendered: Vec<String> = new
                .iter()
                .map(|(k, v)| format!("{}:{}", super::go_quote(k), super::go_quote(v)))
                .collect();
            return vec![FieldError::invalid(
                path,
                super::field::BadValue::Raw(format!(
                    "map[string]string{{{}}}",
                    rendered.join(", ")
                )),
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            )];
        }
    }
    Vec::new()
}

/// `validateNodeAffinityMutation`: while gated, required node affinity may
/// only grow: no term added to or removed from a non-empty list, and each
/// term may only gain `matchExpressions`/`matchFields` at the end.
fn node_affinity_mutation(
    path: &Path,
    new: Option<&NodeAffinity>,
    old: Option<&NodeAffinity>,
) -> Vec<FieldError> {
    let Some(old_required) = old.and_then(|o| {
        o.required_during_scheduling_ignored_during_execution
            .as_ref()
    }) else {
        return Vec::new();
    };
    let old_terms = &old_required.node_selector_terms;
    let new_terms: &[NodeSelectorTerm] = new
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map_or(&[], |r| &r.node_selector_terms[..]);
    let terms_path = path
        .child("requiredDuringSchedulingIgnoredDuringExecution")
        .child("nodeSelectorTerms");
    if !old_terms.is_empty() && old_terms.len() != new_terms.len() {
        return vec![FieldError::invalid(
            &terms_path,
            super::field::BadValue::Raw(go_terms(new_terms)),
            "no additions/deletions to non-empty NodeSelectorTerms list are allowed",
        )];
    }
    old_terms
        .iter()
        .zip(new_terms)
        .enumerate()
        .filter(|(_, (o, n))| !term_has_only_additions(n, o))
        .map(|(i, (_, n))| {
            FieldError::invalid(
                &terms_path.index(i),
                super::field::BadValue::Raw(go_term(n)),
                "only additions are allowed (no mutations or deletions)",
            )
        })
        .collect()
}

/// `validateNodeSelectorTermHasOnlyAdditions`.
fn term_has_only_additions(new: &NodeSelectorTerm, old: &NodeSelectorTerm) -> bool {
    let len = |v: &Option<Vec<NodeSelectorRequirement>>| v.as_ref().map_or(0, Vec::len);
    if len(&old.match_expressions) == 0
        && len(&old.match_fields) == 0
        && (len(&new.match_expressions) > 0 || len(&new.match_fields) > 0)
    {
        return false;
    }
    let prefix_kept = |n: &Option<Vec<NodeSelectorRequirement>>,
                       o: &Option<Vec<NodeSelectorRequirement>>| {
        let (n, o) = (
            n.as_deref().unwrap_or_default(),
            o.as_deref().unwrap_or_default(),
        );
        o.is_empty() || (n.len() >= o.len() && semantic(&n[..o.len()]) == semantic(o))
    };
    prefix_kept(&new.match_expressions, &old.match_expressions)
        && prefix_kept(&new.match_fields, &old.match_fields)
}

/// Go's `%#v` of an internal `[]core.NodeSelectorTerm`.
fn go_terms(terms: &[NodeSelectorTerm]) -> String {
    if terms.is_empty() {
        return "[]core.NodeSelectorTerm(nil)".to_owned();
    }
    let items: Vec<String> = terms.iter().map(go_term).collect();
    format!("[]core.NodeSelectorTerm{{{}}}", items.join(", "))
}

/// Go's `%#v` of an internal `core.NodeSelectorTerm`.
fn go_term(term: &NodeSelectorTerm) -> String {
    fn requirements(r: Option<&Vec<NodeSelectorRequirement>>) -> String {
        let Some(r) = r.filter(|r| !r.is_empty()) else {
            return "[]core.NodeSelectorRequirement(nil)".to_owned();
        };
        let items: Vec<String> = r
            .iter()
            .map(|q| {
                let values = match q.values.as_deref() {
                    None | Some([]) => "[]string(nil)".to_owned(),
                    Some(v) => {
                        let quoted: Vec<String> = v.iter().map(|s| super::go_quote(s)).collect();
                        format!("[]string{{{}}}", quoted.join(", "))
                    }
                };
                format!(
                    "core.NodeSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                    super::go_quote(&q.key),
                    super::go_quote(&q.operator)
                )
            })
            .collect();
        format!("[]core.NodeSelectorRequirement{{{}}}", items.join(", "))
    }
    format!(
        "core.NodeSelectorTerm{{MatchExpressions:{}, MatchFields:{}}}",
        requirements(term.match_expressions.as_ref()),
        requirements(term.match_fields.as_ref())
    )
}

/// A value as JSON with empty lists and nulls dropped: Kubernetes' semantic
/// equality treats nil and empty slices alike.
fn semantic<T: Serialize + ?Sized>(value: &T) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, v| !matches!(v, Value::Array(a) if a.is_empty()) && !v.is_null());
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(value).unwrap_or(Value::Null);
    strip(&mut v);
    v
}

/// The spec as JSON with empty lists dropped: Kubernetes' semantic
/// equality treats nil and empty slices alike.
fn normalized(spec: &PodSpec) -> Value {
    semantic(spec)
}

/// A line-per-leaf diff, `- path: old` / `+ path: new`.
fn diff_values(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = format!("{path}.{k}");
                match (o.get(k), n.get(k)) {
                    (Some(a), Some(b)) => diff_values(&sub, a, b, out),
                    (Some(a), None) => out.push(format!("- {sub}: {a}")),
                    (None, Some(b)) => out.push(format!("+ {sub}: {b}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(o), Value::Array(n)) if o.len() == n.len() => {
            for (i, (a, b)) in o.iter().zip(n).enumerate() {
                diff_values(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ => {
            out.push(format!("- {path}: {old}"));
            out.push(format!("+ {path}: {new}"));
        }
    }
}

/// Validates a status update (V13, the transition part of
/// `ValidatePodStatusUpdate`): a terminated container may not become
/// non-terminated unless it may be restarted - pod `restartPolicy: Always`,
/// `OnFailure` after a non-zero exit, sidecars, and (with
/// `ContainerRestartRules`) a container-level policy or a matching restart
/// rule; ephemeral containers never restart. `spec.nodeName` may not change.
///
/// # Errors
///
/// Every problem found.
pub fn validate_status_update(old: &Pod, new: &Pod) -> Result<(), ValidationErrors> {
    let meta_path = Path::new("metadata");
    let mut errs = validate_object_meta_update(&new.metadata, &old.metadata, &meta_path);
    errs.extend(validate_mirror_annotation_update(
        &new.metadata,
        &old.metadata,
        &meta_path,
    ));
    let empty_spec = PodSpec::default();
    let old_spec = old.spec.as_ref().unwrap_or(&empty_spec);
    let new_spec = new.spec.as_ref().unwrap_or(&empty_spec);
    let status_path = Path::new("status");
    if new_spec.node_name != old_spec.node_name {
        errs.push(FieldError::forbidden(
            &status_path.child("nodeName"),
            "may not be changed directly",
        ));
    }
    let pod_policy = old_spec.restart_policy.as_deref().unwrap_or("");
    let default_status = Default::default();
    let old_status = old.status.as_ref().unwrap_or(&default_status);
    let new_status = new.status.as_ref().unwrap_or(&default_status);
    let inits = old_spec.init_containers.as_deref().unwrap_or_default();

    errs.extend(state_transitions(
        new_status.container_statuses.as_deref().unwrap_or_default(),
        old_status.container_statuses.as_deref().unwrap_or_default(),
        &status_path.child("containerStatuses"),
        |name, exit| {
            may_restart(
                old_spec.containers.iter().find(|c| c.name == name),
                pod_policy,
                exit,
            )
        },
    ));
    errs.extend(state_transitions(
        new_status
            .init_container_statuses
            .as_deref()
            .unwrap_or_default(),
        old_status
            .init_container_statuses
            .as_deref()
            .unwrap_or_default(),
        &status_path.child("initContainerStatuses"),
        |name, exit| may_restart(inits.iter().find(|c| c.name == name), pod_policy, exit),
    ));
    errs.extend(state_transitions(
        new_status
            .ephemeral_container_statuses
            .as_deref()
            .unwrap_or_default(),
        old_status
            .ephemeral_container_statuses
            .as_deref()
            .unwrap_or_default(),
        &status_path.child("ephemeralContainerStatuses"),
        |_, _| false,
    ));
    into_result(new, errs)
}

/// Whether the kubelet may restart a container that exited with `exit`.
fn may_restart(container: Option<&Container>, pod_policy: &str, exit: i32) -> bool {
    let policy = container
        .and_then(|c| c.restart_policy.as_deref())
        .unwrap_or(pod_policy);
    let rule_says_restart = container
        .and_then(|c| c.restart_policy_rules.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|r| {
            r.exit_codes.as_ref().is_some_and(|codes| {
                let values = codes.values.as_deref().unwrap_or_default();
                match codes.operator.as_str() {
                    "In" => values.contains(&exit),
                    "NotIn" => !values.contains(&exit),
                    _ => false,
                }
            })
        })
        .map(|r| r.action == "Restart");
    if let Some(decision) = rule_says_restart {
        return decision;
    }
    match policy {
        "Always" => true,
        "OnFailure" => exit != 0,
        _ => false,
    }
}

fn state_transitions(
    new: &[ContainerStatus],
    old: &[ContainerStatus],
    path: &Path,
    may_restart: impl Fn(&str, i32) -> bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, o) in old.iter().enumerate() {
        let Some(term) = o.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
            continue;
        };
        if may_restart(&o.name, term.exit_code) {
            continue;
        }
        for n in new.iter().filter(|n| n.name == o.name) {
            if n.state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_none()
            {
                errs.push(FieldError::forbidden(
                    &path.index(i).child("state"),
                    "may not be transitioned to non-terminated state",
                ));
            }
        }
    }
    errs
}
