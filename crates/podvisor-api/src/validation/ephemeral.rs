//! Ephemeral containers (V12): common container checks plus the fields
//! they may not use.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, ResourceRequirements};

use super::Ctx;
use super::containers::{validate_container_common, validate_image_whitespace};
use super::field::{FieldError, Path};

/// The fields of an ephemeral container as a [`Container`], so the common
/// checks apply unchanged.
pub(crate) fn ephemeral_as_container(e: &EphemeralContainer) -> Container {
    Container {
        args: e.args.clone(),
        command: e.command.clone(),
        env: e.env.clone(),
        env_from: e.env_from.clone(),
        image: e.image.clone(),
        image_pull_policy: e.image_pull_policy.clone(),
        lifecycle: e.lifecycle.clone(),
        liveness_probe: e.liveness_probe.clone(),
        name: e.name.clone(),
        ports: e.ports.clone(),
        readiness_probe: e.readiness_probe.clone(),
        resize_policy: e.resize_policy.clone(),
        resources: e.resources.clone(),
        restart_policy: e.restart_policy.clone(),
        restart_policy_rules: e.restart_policy_rules.clone(),
        security_context: e.security_context.clone(),
        startup_probe: e.startup_probe.clone(),
        stdin: e.stdin,
        stdin_once: e.stdin_once,
        termination_message_path: e.termination_message_path.clone(),
        termination_message_policy: e.termination_message_policy.clone(),
        tty: e.tty,
        volume_devices: e.volume_devices.clone(),
        volume_mounts: e.volume_mounts.clone(),
        working_dir: e.working_dir.clone(),
    }
}

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
