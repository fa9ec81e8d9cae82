//! Containers: names (V1, V2), images and policies (V3), ports (V4), init
//! containers (V6), container restart policy and rules (V7) and volume
//! mounts (V10). Env, resources and ephemeral containers have their own
//! modules.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, ContainerPort, ContainerRestartRule, VolumeMount};

use super::Ctx;
use super::env::{validate_env, validate_env_from};
use super::field::{FieldError, Path};
use super::handlers::{ProbeKind, validate_lifecycle, validate_probe_of};
use super::names::{is_dns1123_label, is_valid_port_name, is_valid_port_num};
use super::paths::validate_local_descending_path;
use super::resources::{validate_resize_policy, validate_resources};
use super::security::validate_security_context;

/// `spec.containers` (V1-V5, V7, V8).
pub(crate) fn validate_containers(
    containers: &[Container],
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    if containers.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    let mut names = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        errs.extend(validate_container_common(c, &p, ctx));
        // Collisions with init and ephemeral names are reported there.
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), &c.name));
        }
        errs.extend(validate_probes_and_lifecycle(c, &p, ctx));
        // ContainerRestartRules (beta, on in 1.35): regular containers may
        // carry their own restartPolicy and rules.
        errs.extend(validate_container_restart_policy(
            c.restart_policy.as_deref(),
            c.restart_policy_rules.as_deref().unwrap_or_default(),
            &p,
            ctx,
        ));
    }
    errs.extend(check_host_port_conflicts(containers, path));
    errs
}

/// `spec.initContainers` (V2, V6, V7).
pub(crate) fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: HashSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let p = path.index(i);
        errs.extend(validate_container_common(c, &p, ctx));

        let sidecar = crate::pod::is_sidecar(c);
        let rules = c.restart_policy_rules.as_deref().unwrap_or_default();
        if sidecar && !ctx.gates.restart_all_containers() {
            // RestartAllContainersOnContainerExits (alpha, off by default) is
            // what allows rules on sidecars.
            if !rules.is_empty() {
                errs.push(FieldError::forbidden(
                    &p.child("restartPolicyRules"),
                    "restartPolicyRules are not allowed for init containers with restart policy Always",
                ));
            }
        } else {
            errs.extend(validate_container_restart_policy(
                c.restart_policy.as_deref(),
                rules,
                &p,
                ctx,
            ));
        }

        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), &c.name));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }

        // Init containers run one by one, so each is checked alone; Kubernetes
        // passes a one-element list, hence the index 0 in the reported path.
        errs.extend(check_host_port_conflicts(std::slice::from_ref(c), path));

        if sidecar {
            errs.extend(validate_probes_and_lifecycle(c, &p, ctx));
        } else {
            let msg = "may not be set for init containers without restartPolicy=Always";
            if c.lifecycle.is_some() {
                errs.push(FieldError::forbidden(&p.child("lifecycle"), msg));
            }
            if c.liveness_probe.is_some() {
                errs.push(FieldError::forbidden(&p.child("livenessProbe"), msg));
            }
            if c.readiness_probe.is_some() {
                errs.push(FieldError::forbidden(&p.child("readinessProbe"), msg));
            }
            if c.startup_probe.is_some() {
                errs.push(FieldError::forbidden(&p.child("startupProbe"), msg));
            }
        }
    }
    errs
}

fn validate_probes_and_lifecycle(c: &Container, p: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(l) = &c.lifecycle {
        errs.extend(validate_lifecycle(l, &p.child("lifecycle"), ctx));
    }
    errs.extend(validate_probe_of(
        ProbeKind::Liveness,
        c.liveness_probe.as_ref(),
        &p.child("livenessProbe"),
        ctx,
    ));
    errs.extend(validate_probe_of(
        ProbeKind::Readiness,
        c.readiness_probe.as_ref(),
        &p.child("readinessProbe"),
        ctx,
    ));
    errs.extend(validate_probe_of(
        ProbeKind::Startup,
        c.startup_probe.as_ref(),
        &p.child("startupProbe"),
        ctx,
    ));
    errs
}

const CONTAINER_RESTART_POLICIES: [&str; 3] = ["Always", "Never", "OnFailure"];
const MAX_RESTART_RULES: usize = 20;
const MAX_RESTART_RULE_VALUES: usize = 255;

/// Container-level `restartPolicy` and `restartPolicyRules` with the
/// `ContainerRestartRules` gate on (V7); `RestartAllContainers` is an action
/// only with `RestartAllContainersOnContainerExits` on (KEP-5532).
fn validate_container_restart_policy(
    policy: Option<&str>,
    rules: &[ContainerRestartRule],
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    let actions: &[&str] = if ctx.gates.restart_all_containers() {
        &["Restart", crate::feature_gates::RESTART_ALL_CONTAINERS]
    } else {
        &["Restart"]
    };
    let mut errs = Vec::new();
    let policy_path = path.child("restartPolicy");
    match policy {
        None if rules.is_empty() => return errs,
        None => errs.push(FieldError::required(
            &policy_path,
            "must specify restartPolicy when restart rules are used",
        )),
        Some(p) if !CONTAINER_RESTART_POLICIES.contains(&p) => {
            errs.push(FieldError::not_supported(
                &policy_path,
                p,
                &CONTAINER_RESTART_POLICIES,
            ));
        }
        Some(_) => {}
    }
    let rules_path = path.child("restartPolicyRules");
    // Upstream reports the list length with `field.TooLong`, hence "bytes".
    if rules.len() > MAX_RESTART_RULES {
        errs.push(FieldError::too_long(&rules_path, MAX_RESTART_RULES));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = rules_path.index(i);
        // `RestartAllContainers` needs RestartAllContainersOnContainerExits
        // (alpha, off by default).
        if !actions.contains(&rule.action.as_str()) {
            errs.push(FieldError::not_supported(
                &rp.child("action"),
                &rule.action,
                actions,
            ));
        }
        let Some(codes) = &rule.exit_codes else {
            errs.push(FieldError::required(
                &rp.child("exitCodes"),
                "must be specified",
            ));
            continue;
        };
        let cp = rp.child("exitCodes");
        if codes.operator != "In" && codes.operator != "NotIn" {
            errs.push(FieldError::not_supported(
                &cp.child("operator"),
                &codes.operator,
                &["In", "NotIn"],
            ));
        }
        // An empty list is valid, and upstream does not reject repeated
        // values.
        let values = codes.values.as_deref().unwrap_or_default();
        if values.len() > MAX_RESTART_RULE_VALUES {
            errs.push(FieldError::too_long(
                &cp.child("values"),
                MAX_RESTART_RULE_VALUES,
            ));
        }
    }
    errs
}

/// Kubernetes' `validateContainerCommon`: what every container kind shares.
pub(crate) fn validate_container_common(
    c: &Container,
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name_path = path.child("name");
    if c.name.is_empty() {
        errs.push(FieldError::required(&name_path, ""));
    } else {
        for msg in is_dns1123_label(&c.name) {
            errs.push(FieldError::invalid(&name_path, &c.name, msg));
        }
    }
    if c.image.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(&path.child("image"), ""));
    }
    match c.termination_message_policy.as_deref().unwrap_or("") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(
            &path.child("terminationMessagePolicy"),
            "",
        )),
        other => errs.push(FieldError::not_supported(
            &path.child("terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    errs.extend(validate_ports(
        c.ports.as_deref().unwrap_or_default(),
        &path.child("ports"),
    ));
    errs.extend(validate_env(
        c.env.as_deref().unwrap_or_default(),
        &path.child("env"),
        ctx,
    ));
    errs.extend(validate_env_from(
        c.env_from.as_deref().unwrap_or_default(),
        &path.child("envFrom"),
    ));
    errs.extend(validate_volume_mounts(
        c.volume_mounts.as_deref().unwrap_or_default(),
        c,
        &path.child("volumeMounts"),
        ctx,
    ));
    match c.image_pull_policy.as_deref().unwrap_or("") {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errs.push(FieldError::required(&path.child("imagePullPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    if let Some(r) = &c.resources {
        errs.extend(validate_resources(r, &path.child("resources")));
    }
    errs.extend(validate_resize_policy(c, &path.child("resizePolicy"), ctx));
    errs.extend(validate_security_context(
        c.security_context.as_ref(),
        &path.child("securityContext"),
        ctx.host_users,
    ));
    errs
}

/// Kubernetes' `validateContainerOnlyForPod`: no surrounding whitespace in
/// images of pods (templates are exempt).
pub(crate) fn validate_image_whitespace(c: &Container, path: &Path) -> Option<FieldError> {
    let image = c.image.as_deref().unwrap_or("");
    (image.trim() != image).then(|| {
        FieldError::invalid(
            &path.child("image"),
            image,
            "must not have leading or trailing whitespace",
        )
    })
}

fn validate_ports(ports: &[ContainerPort], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let p = path.index(i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(FieldError::invalid(&p.child("name"), name, m));
                }
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(&p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            for m in is_valid_port_num(i64::from(port.container_port)) {
                errs.push(FieldError::invalid(
                    &p.child("containerPort"),
                    port.container_port,
                    m,
                ));
            }
        }
        let host_port = port.host_port.unwrap_or(0);
        if host_port != 0 {
            for m in is_valid_port_num(i64::from(host_port)) {
                errs.push(FieldError::invalid(&p.child("hostPort"), host_port, m));
            }
        }
        match port.protocol.as_deref().unwrap_or("") {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(&p.child("protocol"), "")),
            other => errs.push(FieldError::not_supported(
                &p.child("protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
    errs
}

/// Kubernetes' `AccumulateUniqueHostPorts` over one list of containers.
pub(crate) fn check_host_port_conflicts(containers: &[Container], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in c.ports.iter().flatten().enumerate() {
            let host_port = port.host_port.unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{}",
                port.protocol.as_deref().unwrap_or(""),
                port.host_ip.as_deref().unwrap_or(""),
                host_port
            );
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(
                    &path.index(ci).child("ports").index(pi).child("hostPort"),
                    key,
                ));
            }
        }
    }
    errs
}
fn validate_volume_mounts(
    mounts: &[VolumeMount],
    c: &Container,
    path: &Path,
    ctx: &Ctx<'_>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut mount_points = HashSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let p = path.index(i);
        if m.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        }
        if !ctx.volumes.contains_key(m.name.as_str()) {
            errs.push(FieldError::not_found(&p.child("name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(&p.child("mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                &p.child("mountPath"),
                &m.mount_path,
                "must be unique",
            ));
        }
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        let sub_path_expr = m.sub_path_expr.as_deref().unwrap_or("");
        // Kubernetes reports these two under the list path, not the item.
        if !sub_path.is_empty() {
            errs.extend(validate_local_descending_path(
                sub_path,
                &path.child("subPath"),
            ));
        }
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    &p.child("subPathExpr"),
                    sub_path_expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            errs.extend(validate_local_descending_path(
                sub_path_expr,
                &path.child("subPathExpr"),
            ));
        }
        if let Some(prop) = m.mount_propagation.as_deref() {
            let pp = path.child("mountPropagation");
            let supported = ["Bidirectional", "HostToContainer", "None"];
            if !supported.contains(&prop) {
                errs.push(FieldError::not_supported(&pp, prop, &supported));
            }
            let privileged = c
                .security_context
                .as_ref()
                .and_then(|s| s.privileged)
                .unwrap_or(false);
            if prop == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &pp,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
        if let Some(rro) = m.recursive_read_only.as_deref() {
            let rp = path.child("recursiveReadOnly");
            match rro {
                "Disabled" => {}
                "Enabled" | "IfPossible" => {
                    if !m.read_only.unwrap_or(false) {
                        errs.push(FieldError::forbidden(
                            &rp,
                            "may only be specified when readOnly is true",
                        ));
                    }
                    if m.mount_propagation.as_deref().is_some_and(|p| p != "None") {
                        errs.push(FieldError::forbidden(
                            &rp,
                            "may only be specified when mountPropagation is None or not specified",
                        ));
                    }
                }
                other => errs.push(FieldError::not_supported(
                    &rp,
                    other,
                    &["Disabled", "Enabled", "IfPossible"],
                )),
            }
        }
    }
    errs
}
