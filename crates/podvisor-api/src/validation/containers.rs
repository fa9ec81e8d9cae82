//! Containers: names (V1, V2), images and policies (V3), ports (V4), init
//! containers (V6), container restart policy and rules (V7), volume mounts
//! (V10), env (V11), ephemeral containers (V12) and resources.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerRestartRule, EnvFromSource, EnvVar, EphemeralContainer,
    ObjectFieldSelector, ResourceRequirements, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use super::Ctx;
use super::field::{FieldError, Path};
use super::handlers::{ProbeKind, validate_lifecycle, validate_probe_of};
use super::names::{
    is_config_map_key, is_dns1123_label, is_env_var_name, is_qualified_name,
    is_relaxed_env_var_name, is_valid_port_name, is_valid_port_num, name_is_dns_subdomain,
};
use super::paths::validate_local_descending_path;
use super::quantity::{QUANTITY_SYNTAX_MSG, Quantity};

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

        let sidecar = c.restart_policy.as_deref() == Some("Always");
        let rules = c.restart_policy_rules.as_deref().unwrap_or_default();
        if sidecar {
            // RestartAllContainersOnContainerExits (alpha, off) is what would
            // allow rules on sidecars.
            if !rules.is_empty() {
                errs.push(FieldError::forbidden(
                    &p.child("restartPolicyRules"),
                    "may not be set for init containers with restartPolicy=Always",
                ));
            }
        } else {
            errs.extend(validate_container_restart_policy(
                c.restart_policy.as_deref(),
                rules,
                &p,
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
/// `ContainerRestartRules` gate on (V7).
fn validate_container_restart_policy(
    policy: Option<&str>,
    rules: &[ContainerRestartRule],
    path: &Path,
) -> Vec<FieldError> {
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
    if rules.len() > MAX_RESTART_RULES {
        errs.push(FieldError::too_many(
            &rules_path,
            rules.len(),
            MAX_RESTART_RULES,
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = rules_path.index(i);
        // `RestartAllContainers` needs RestartAllContainersOnContainerExits
        // (alpha, off).
        if rule.action != "Restart" {
            errs.push(FieldError::not_supported(
                &rp.child("action"),
                &rule.action,
                &["Restart"],
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
        // An empty list is valid: it means "any exit code".
        let values = codes.values.as_deref().unwrap_or_default();
        if values.len() > MAX_RESTART_RULE_VALUES {
            errs.push(FieldError::too_many(
                &cp.child("values"),
                values.len(),
                MAX_RESTART_RULE_VALUES,
            ));
        }
        let mut seen = HashSet::new();
        for (j, v) in values.iter().enumerate() {
            if !seen.insert(*v) {
                errs.push(FieldError::duplicate(&cp.child("values").index(j), *v));
            }
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
        ctx,
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

fn validate_env(vars: &[EnvVar], path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in vars.iter().enumerate() {
        let p = path.index(i);
        if ev.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            let msgs = if ctx.opts.relaxed_env_var_names {
                is_relaxed_env_var_name(&ev.name)
            } else {
                is_env_var_name(&ev.name)
            };
            for m in msgs {
                errs.push(FieldError::invalid(&p.child("name"), &ev.name, m));
            }
        }
        errs.extend(validate_env_value_from(ev, &p.child("valueFrom")));
    }
    errs
}

const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Field paths that the downward API can expose for a v1 Pod.
const DOWNWARD_API_LABELS: [&str; 14] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const CONTAINER_RESOURCE_FIELD_PATHS: [&str; 6] = [
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// Splits `metadata.labels['key']` into the path and the subscript.
fn split_subscripted(fp: &str) -> Option<(&str, &str)> {
    let open = fp.find("['")?;
    let inner = fp[open + 2..].strip_suffix("']")?;
    Some((&fp[..open], inner))
}

/// Kubernetes' `validateObjectFieldSelector` for a given set of plain paths.
pub(crate) fn validate_object_field_selector(
    fs: &ObjectFieldSelector,
    allowed: &[&str],
    path: &Path,
) -> Vec<FieldError> {
    let api_version = fs.api_version.as_deref().unwrap_or("");
    if api_version.is_empty() {
        return vec![FieldError::required(&path.child("apiVersion"), "")];
    }
    if fs.field_path.is_empty() {
        return vec![FieldError::required(&path.child("fieldPath"), "")];
    }
    let conversion = if api_version == "v1" {
        let base = split_subscripted(&fs.field_path).map_or(fs.field_path.as_str(), |(p, _)| p);
        if DOWNWARD_API_LABELS.contains(&base) {
            Ok(())
        } else {
            Err(format!("field label not supported: {}", fs.field_path))
        }
    } else {
        Err(format!("unsupported pod version: {api_version}"))
    };
    if let Err(e) = conversion {
        return vec![FieldError::invalid(
            &path.child("fieldPath"),
            &fs.field_path,
            format!("error converting fieldPath: {e}"),
        )];
    }
    if let Some((base, subscript)) = split_subscripted(&fs.field_path) {
        return match base {
            "metadata.annotations" => is_qualified_name(&subscript.to_lowercase())
                .into_iter()
                .map(|m| FieldError::invalid(path, subscript.to_lowercase(), m))
                .collect(),
            "metadata.labels" => is_qualified_name(subscript)
                .into_iter()
                .map(|m| FieldError::invalid(path, subscript, m))
                .collect(),
            _ => vec![FieldError::invalid(path, base, "does not support subscript")],
        };
    }
    if allowed.contains(&fs.field_path.as_str()) {
        Vec::new()
    } else {
        let mut sorted = allowed.to_vec();
        sorted.sort_unstable();
        vec![FieldError::not_supported(
            &path.child("fieldPath"),
            &fs.field_path,
            &sorted,
        )]
    }
}

fn validate_env_value_from(ev: &EnvVar, path: &Path) -> Vec<FieldError> {
    let Some(from) = &ev.value_from else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let mut sources = 0;
    if let Some(fr) = &from.field_ref {
        sources += 1;
        errs.extend(validate_object_field_selector(
            fr,
            &ENV_FIELD_PATHS,
            &path.child("fieldRef"),
        ));
    }
    if let Some(rf) = &from.resource_field_ref {
        sources += 1;
        let rp = path.child("resourceFieldRef");
        if rf.resource.is_empty() {
            errs.push(FieldError::required(&rp.child("resource"), ""));
        } else if !CONTAINER_RESOURCE_FIELD_PATHS.contains(&rf.resource.as_str())
            && !rf.resource.starts_with("requests.hugepages-")
            && !rf.resource.starts_with("limits.hugepages-")
        {
            errs.push(FieldError::not_supported(
                &rp.child("resource"),
                &rf.resource,
                &CONTAINER_RESOURCE_FIELD_PATHS,
            ));
        }
    }
    if let Some(cm) = &from.config_map_key_ref {
        sources += 1;
        errs.extend(validate_key_selector(
            &cm.name,
            &cm.key,
            &path.child("configMapKeyRef"),
        ));
    }
    if let Some(s) = &from.secret_key_ref {
        sources += 1;
        errs.extend(validate_key_selector(
            &s.name,
            &s.key,
            &path.child("secretKeyRef"),
        ));
    }
    // EnvFiles: counted as a source; its own fields are not checked here.
    if from.file_key_ref.is_some() {
        sources += 1;
    }
    let has_value = ev.value.as_deref().is_some_and(|v| !v.is_empty());
    if sources == 0 {
        errs.push(FieldError::invalid(
            path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ));
    } else if has_value {
        errs.push(FieldError::invalid(
            path,
            "",
            "may not be specified when `value` is not empty",
        ));
    } else if sources > 1 {
        errs.push(FieldError::invalid(
            path,
            "",
            "may not have more than one field specified at a time",
        ));
    }
    errs
}

fn validate_key_selector(name: &str, key: &str, path: &Path) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = name_is_dns_subdomain(name, false)
        .into_iter()
        .map(|m| FieldError::invalid(&path.child("name"), name, m))
        .collect();
    if key.is_empty() {
        errs.push(FieldError::required(&path.child("key"), ""));
    } else {
        for m in is_config_map_key(key) {
            errs.push(FieldError::invalid(&path.child("key"), key, m));
        }
    }
    errs
}

fn validate_env_from(vars: &[EnvFromSource], path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in vars.iter().enumerate() {
        let p = path.index(i);
        if let Some(prefix) = ev.prefix.as_deref().filter(|s| !s.is_empty()) {
            let msgs = if ctx.opts.relaxed_env_var_names {
                is_relaxed_env_var_name(prefix)
            } else {
                is_env_var_name(prefix)
            };
            for m in msgs {
                errs.push(FieldError::invalid(&p.child("prefix"), prefix, m));
            }
        }
        let mut sources = 0;
        let mut check_name = |name: &str, sp: Path, errs: &mut Vec<FieldError>| {
            sources += 1;
            if name.is_empty() {
                errs.push(FieldError::required(&sp.child("name"), ""));
            } else {
                for m in name_is_dns_subdomain(name, true) {
                    errs.push(FieldError::invalid(&sp.child("name"), name, m));
                }
            }
        };
        if let Some(cm) = &ev.config_map_ref {
            check_name(&cm.name, p.child("configMapRef"), &mut errs);
        }
        if let Some(s) = &ev.secret_ref {
            check_name(&s.name, p.child("secretRef"), &mut errs);
        }
        if sources == 0 {
            errs.push(FieldError::invalid(
                path,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if sources > 1 {
            errs.push(FieldError::invalid(
                path,
                "",
                "may not have more than one field specified at a time",
            ));
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
        if !ctx.volumes.contains(m.name.as_str()) {
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

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || is_hugepages(name)
}

fn is_standard_resource(name: &str) -> bool {
    is_standard_container_resource(name)
        || matches!(
            name,
            "requests.cpu"
                | "requests.memory"
                | "requests.ephemeral-storage"
                | "limits.cpu"
                | "limits.memory"
                | "limits.ephemeral-storage"
                | "pods"
                | "services"
                | "replicationcontrollers"
                | "resourcequotas"
                | "secrets"
                | "configmaps"
                | "persistentvolumeclaims"
                | "storage"
                | "requests.storage"
                | "services.nodeports"
                | "services.loadbalancers"
        )
        || name.starts_with("requests.hugepages-")
}

fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

fn is_overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !is_hugepages(name)
}

fn validate_resource_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> = is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path, name, m))
        .collect();
    if errs.is_empty() && !name.contains('/') && !is_standard_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "must be a standard resource type or fully qualified",
        ));
    }
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native_resource(name) && !is_extended_resource(name) {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errs
}

fn validate_quantity_value(name: &str, q: &Quantity, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if q.is_negative() {
        errs.push(FieldError::invalid(
            path,
            q.canonical(),
            "must be greater than or equal to 0",
        ));
    }
    if is_extended_resource(name) && !q.is_integer() {
        errs.push(FieldError::invalid(path, q.canonical(), "must be an integer"));
    }
    errs
}

fn parse_list<'a>(
    list: Option<&'a BTreeMap<String, WireQuantity>>,
    path: &Path,
    errs: &mut Vec<FieldError>,
) -> BTreeMap<&'a str, Quantity> {
    let mut out = BTreeMap::new();
    for (name, raw) in list.into_iter().flatten() {
        let p = path.key(name);
        errs.extend(validate_resource_name(name, &p));
        match Quantity::parse(&raw.0) {
            Some(q) => {
                errs.extend(validate_quantity_value(name, &q, &p));
                out.insert(name.as_str(), q);
            }
            None => errs.push(FieldError::invalid(&p, &raw.0, QUANTITY_SYNTAX_MSG)),
        }
    }
    out
}

/// Kubernetes' `ValidateContainerResourceRequirements` (without claims).
fn validate_resources(r: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let limits = parse_list(r.limits.as_ref(), &lim_path, &mut errs);
    let requests = parse_list(r.requests.as_ref(), &req_path, &mut errs);
    for (name, q) in &requests {
        match limits.get(name) {
            Some(limit) => {
                if q != limit && !is_overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.canonical(),
                        format!("must be equal to {name} limit of {}", limit.canonical()),
                    ));
                } else if q > limit {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.canonical(),
                        format!(
                            "must be less than or equal to {name} limit of {}",
                            limit.canonical()
                        ),
                    ));
                }
            }
            None if !is_overcommit_allowed(name) => errs.push(FieldError::required(
                &lim_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
    let cpu_or_memory = |m: &BTreeMap<&str, Quantity>| {
        m.contains_key("cpu") || m.contains_key("memory")
    };
    let hugepages = |m: &BTreeMap<&str, Quantity>| m.keys().any(|k| is_hugepages(k));
    if !cpu_or_memory(&limits)
        && !cpu_or_memory(&requests)
        && (hugepages(&limits) || hugepages(&requests))
    {
        errs.push(FieldError::forbidden(path, "HugePages require cpu or memory"));
    }
    errs
}

fn validate_resize_policy(c: &Container, path: &Path, ctx: &Ctx<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = HashSet::new();
    for (i, p) in c.resize_policy.iter().flatten().enumerate() {
        if !seen.insert(p.resource_name.as_str()) {
            errs.push(FieldError::duplicate(&path.index(i), &p.resource_name));
        }
        match p.resource_name.as_str() {
            "cpu" | "memory" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(path, other, &["cpu", "memory"])),
        }
        match p.restart_policy.as_str() {
            "NotRequired" | "RestartContainer" => {}
            "" => errs.push(FieldError::required(path, "")),
            other => errs.push(FieldError::not_supported(
                path,
                other,
                &["NotRequired", "RestartContainer"],
            )),
        }
        if ctx.pod_restart_policy == "Never" && p.restart_policy != "NotRequired" {
            errs.push(FieldError::invalid(
                path,
                &p.restart_policy,
                "must be 'NotRequired' when `restartPolicy` is 'Never'",
            ));
        }
    }
    errs
}

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
                e.restart_policy_rules.as_ref().is_some_and(|v| !v.is_empty()),
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
