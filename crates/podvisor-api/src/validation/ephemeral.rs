//! Ephemeral containers (V12): common container checks plus the fields
//! they may not use.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, ResourceRequirements};

use crate::pod::ephemeral_as_container;

use super::Ctx;
use super::containers::{validate_container_common, validate_image_whitespace};
use super::field::{FieldError, Path};

/// `spec.ephemeralContainers` contents (V12); whether they may be set at all
/// is decided by the caller (never on create).
pub(crate) fn validate_ephemeral_containers(
    ephemeral: &[EphemeralContainer],
    containers: &[Container],
    inits: &[Container],
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let others: HashSet<&str> = containers
        .iter()
        .chain(inits)
        .map(|c| c.name.as_str())
        .collect();
    let mut all = others.clone();
    for (i, e) in ephemeral.iter().enumerate() {
        let p = path.index(i);
        let c = ephemeral_as_container(e);
        errs.extend(validate_container_common(&c, &p, ctx));
        errs.extend(validate_image_whitespace(&c, &p));
        if !all.insert(e.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), &e.name));
        }
        if let Some(target) = e.target_container_name.as_deref().filter(|t| !t.is_empty())
            && !others.contains(target)
        {
            errs.push(FieldError::not_found(
                &p.child("targetContainerName"),
                target,
            ));
        }
        // Fields an ephemeral container may not use, in struct order.
        let msg = "cannot be set for an Ephemeral Container";
        let set = [
            ("ports", e.ports.as_ref().is_some_and(|v| !v.is_empty())),
            (
                "resources",
                e.resources
                    .as_ref()
                    .is_some_and(|r| *r != ResourceRequirements::default()),
            ),
            (
                "resizePolicy",
                e.resize_policy.as_ref().is_some_and(|v| !v.is_empty()),
            ),
            ("restartPolicy", e.restart_policy.is_some()),
            (
                "restartPolicyRules",
                e.restart_policy_rules
                    .as_ref()
                    .is_some_and(|v| !v.is_empty()),
            ),
            ("livenessProbe", e.liveness_probe.is_some()),
            ("readinessProbe", e.readiness_probe.is_some()),
            ("startupProbe", e.startup_probe.is_some()),
            ("lifecycle", e.lifecycle.is_some()),
        ];
        for (field, is_set) in set {
            if is_set {
                errs.push(FieldError::forbidden(&p.child(field), msg));
            }
        }
        for (j, vm) in e.volume_mounts.iter().flatten().enumerate() {
            let mp = p.child("volumeMounts").index(j);
            if vm.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
                errs.push(FieldError::forbidden(&mp.child("subPath"), msg));
            }
            if vm.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
                errs.push(FieldError::forbidden(&mp.child("subPathExpr"), msg));
            }
        }
    }
    errs
}
