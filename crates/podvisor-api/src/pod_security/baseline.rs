//! The baseline level's checks (`policy/check_*.go`), sorted by ID. Each returns upstream's
//! forbidden reason and detail word for word; sets upstream sorts are `BTreeSet`s.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{LifecycleHandler, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::registry::{Check, CheckResult, VersionedCheck};
use super::{containers, containers_phrase, in_user_namespace, join_quote, pluralize};
use crate::gotext::quote;

const fn since(minimum: u32, check: super::registry::CheckFn) -> VersionedCheck {
    VersionedCheck {
        minimum,
        check,
        overrides: &[],
    }
}

const fn baseline(id: &'static str, versions: &'static [VersionedCheck]) -> Check {
    Check { id, versions }
}

pub(crate) const CHECKS: &[Check] = &[
    baseline("appArmorProfile", &[since(0, app_armor_profile)]),
    baseline("capabilities_baseline", &[since(0, capabilities_baseline)]),
    baseline("hostNamespaces", &[since(0, host_namespaces)]),
    baseline("hostPathVolumes", &[since(0, host_path_volumes)]),
    baseline("hostPorts", &[since(0, host_ports)]),
    baseline(
        "hostProbesAndHostLifecycle",
        &[since(34, host_probes_and_host_lifecycle)],
    ),
    baseline("privileged", &[since(0, privileged)]),
    baseline(
        "procMount",
        &[since(0, proc_mount), since(35, proc_mount_1_35_baseline)],
    ),
    baseline(
        "seLinuxOptions",
        &[
            since(0, se_linux_options_1_0),
            since(31, se_linux_options_1_31),
        ],
    ),
    baseline(
        "seccompProfile_baseline",
        &[
            since(0, seccomp_profile_baseline_1_0),
            since(19, seccomp_profile_baseline_1_19),
        ],
    ),
    baseline(
        "sysctls",
        &[
            since(0, sysctls_1_0),
            since(27, sysctls_1_27),
            since(29, sysctls_1_29),
            since(32, sysctls_1_32),
        ],
    ),
    baseline("windowsHostProcess", &[since(0, windows_host_process)]),
];

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `appArmorProfile`: the profile type `RuntimeDefault` or `Localhost`, or an annotation
/// value `runtime/default`, `localhost/*` or empty.
fn app_armor_profile(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let allowed_type = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut bad_setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    if let Some(p) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
        && !allowed_type(&p.type_)
    {
        bad_setters.push("pod".to_owned());
        bad_values.insert(p.type_.clone());
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(p) = c
            .security_context
            .and_then(|s| s.app_armor_profile.as_ref())
            && !allowed_type(&p.type_)
        {
            bad_containers.push(c.name);
            bad_values.insert(p.type_.clone());
        }
    }
    if !bad_containers.is_empty() {
        bad_setters.push(containers_phrase(&bad_containers));
    }
    let mut forbidden_annotations: Vec<String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    let mut bad_value_list: Vec<String> = bad_values.into_iter().collect();
    if !forbidden_annotations.is_empty() {
        forbidden_annotations.sort();
        bad_setters
            .push(pluralize("annotation", "annotations", forbidden_annotations.len()).to_owned());
        bad_value_list.extend(forbidden_annotations);
    }
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            bad_value_list.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            bad_setters.join(" and "),
            join_quote(&bad_value_list)
        ),
    )
}

const CAPABILITIES_ALLOWED: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// `capabilities_baseline`: only the default set may be added.
fn capabilities_baseline(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = Vec::new();
    let mut non_default = BTreeSet::new();
    for c in containers(spec) {
        let added = c
            .security_context
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|caps| caps.add.as_ref());
        let mut valid = true;
        for cap in added.into_iter().flatten() {
            if !CAPABILITIES_ALLOWED.contains(&cap.as_str()) {
                valid = false;
                non_default.insert(cap.as_str());
            }
        }
        if !valid {
            bad_containers.push(c.name);
        }
    }
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let caps: Vec<&str> = non_default.into_iter().collect();
    CheckResult::forbidden(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad_containers),
            join_quote(&caps)
        ),
    )
}

/// `hostNamespaces`: no `hostNetwork`, `hostPID` or `hostIPC`.
fn host_namespaces(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let shared: Vec<&str> = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(set, _)| *set == Some(true))
    .map(|(_, text)| text)
    .collect();
    if shared.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("host namespaces", shared.join(", "))
}

/// `hostPathVolumes`: no `hostPath` volume.
fn host_path_volumes(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let names: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.as_str())
        .collect();
    if names.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names)
        ),
    )
}

/// `hostPorts`: no `hostPort` (the ports listed in string order, as upstream's set).
fn host_ports(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for p in c.ports {
            if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
                valid = false;
                ports.insert(hp.to_string());
            }
        }
        if !valid {
            bad_containers.push(c.name);
        }
    }
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let ports: Vec<String> = ports.into_iter().collect();
    CheckResult::forbidden(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad_containers),
            pluralize("uses", "use", bad_containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn probe_hosts(probe: Option<&Probe>) -> Vec<&str> {
    let Some(p) = probe else { return Vec::new() };
    let http = p.http_get.as_ref().and_then(|h| h.host.as_deref());
    let tcp = p.tcp_socket.as_ref().and_then(|t| t.host.as_deref());
    [http, tcp]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
        .collect()
}

fn handler_hosts(handler: Option<&LifecycleHandler>) -> Vec<&str> {
    let Some(h) = handler else { return Vec::new() };
    let http = h.http_get.as_ref().and_then(|a| a.host.as_deref());
    let tcp = h.tcp_socket.as_ref().and_then(|a| a.host.as_deref());
    [http, tcp]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
        .collect()
}

/// `hostProbesAndHostLifecycle` (1.34+): probes and lifecycle handlers may not name a host.
fn host_probes_and_host_lifecycle(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in containers(spec) {
        let lifecycle = c.lifecycle;
        let found = [
            probe_hosts(c.liveness_probe),
            probe_hosts(c.readiness_probe),
            probe_hosts(c.startup_probe),
            handler_hosts(lifecycle.and_then(|l| l.post_start.as_ref())),
            handler_hosts(lifecycle.and_then(|l| l.pre_stop.as_ref())),
        ];
        for h in found.into_iter().flatten() {
            bad_containers.insert(c.name);
            hosts.insert(h);
        }
    }
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let names: Vec<&str> = bad_containers.into_iter().collect();
    let hosts: Vec<&str> = hosts.into_iter().collect();
    CheckResult::forbidden(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_phrase(&names),
            pluralize("uses", "use", names.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quote(&hosts)
        ),
    )
}

/// `privileged`: no privileged container.
fn privileged(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| c.security_context.and_then(|s| s.privileged) == Some(true))
        .map(|c| c.name)
        .collect();
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    )
}

/// `procMount` (1.0; restricted's `procMount_restricted` from 1.35): only `Default`.
pub(super) fn proc_mount(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_containers = Vec::new();
    let mut types = BTreeSet::new();
    for c in containers(spec) {
        if let Some(pm) = c.security_context.and_then(|s| s.proc_mount.as_deref())
            && pm != "Default"
        {
            bad_containers.push(c.name);
            types.insert(pm);
        }
    }
    if bad_containers.is_empty() {
        return CheckResult::allowed();
    }
    let types: Vec<&str> = types.into_iter().collect();
    CheckResult::forbidden(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad_containers),
            join_quote(&types)
        ),
    )
}

/// `procMount` 1.35: any value in a user namespace.
fn proc_mount_1_35_baseline(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    if in_user_namespace(spec) {
        return CheckResult::allowed();
    }
    proc_mount(meta, spec)
}

const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const SELINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn se_linux_options_1_0(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    se_linux_options(meta, spec, SELINUX_TYPES_1_0)
}

fn se_linux_options_1_31(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    se_linux_options(meta, spec, SELINUX_TYPES_1_31)
}

/// `seLinuxOptions`: an allowed type, no user, no role.
fn se_linux_options(_: &ObjectMeta, spec: &PodSpec, allowed_types: &[&str]) -> CheckResult {
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |o: &k8s_openapi::api::core::v1::SELinuxOptions| {
        let t = o.type_.as_deref().unwrap_or("");
        let mut ok = true;
        if !allowed_types.contains(&t) {
            ok = false;
            bad_types.insert(t.to_owned());
        }
        if o.user.as_deref().is_some_and(|u| !u.is_empty()) {
            ok = false;
            set_user = true;
        }
        if o.role.as_deref().is_some_and(|r| !r.is_empty()) {
            ok = false;
            set_role = true;
        }
        ok
    };
    let mut bad_setters = Vec::new();
    if let Some(o) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.se_linux_options.as_ref())
        && !valid(o)
    {
        bad_setters.push("pod".to_owned());
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(o) = c.security_context.and_then(|s| s.se_linux_options.as_ref())
            && !valid(o)
        {
            bad_containers.push(c.name);
        }
    }
    if !bad_containers.is_empty() {
        bad_setters.push(containers_phrase(&bad_containers));
    }
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    let mut bad_data = Vec::new();
    if !bad_types.is_empty() {
        let types: Vec<String> = bad_types.into_iter().collect();
        bad_data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if set_user {
        bad_data.push("user may not be set".to_owned());
    }
    if set_role {
        bad_data.push("role may not be set".to_owned());
    }
    CheckResult::forbidden(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            bad_setters.join(" and "),
            bad_data.join("; ")
        ),
    )
}

pub(super) fn valid_seccomp(t: &str) -> bool {
    matches!(t, "Localhost" | "RuntimeDefault")
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// `seccompProfile_baseline` before 1.19: the alpha annotations.
fn seccomp_profile_baseline_1_0(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let annotations = meta.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k));
    let mut forbidden = BTreeSet::new();
    if let Some(v) = get(SECCOMP_POD_ANNOTATION)
        && !valid(v)
    {
        forbidden.insert(format!("{SECCOMP_POD_ANNOTATION}={}", quote(v)));
    }
    for c in containers(spec) {
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name);
        if let Some(v) = get(&key)
            && !valid(v)
        {
            forbidden.insert(format!("{key}={}", quote(v)));
        }
    }
    if forbidden.is_empty() {
        return CheckResult::allowed();
    }
    let list: Vec<String> = forbidden.into_iter().collect();
    CheckResult::forbidden(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", list.len()),
            list.join(", ")
        ),
    )
}

/// `seccompProfile_baseline` 1.19: a set profile type is `RuntimeDefault` or `Localhost`.
fn seccomp_profile_baseline_1_19(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    if let Some(p) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
        && !valid_seccomp(&p.type_)
    {
        bad_setters.push("pod".to_owned());
        bad_values.insert(p.type_.as_str());
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(p) = c.security_context.and_then(|s| s.seccomp_profile.as_ref())
            && !valid_seccomp(&p.type_)
        {
            bad_containers.push(c.name);
            bad_values.insert(p.type_.as_str());
        }
    }
    if !bad_containers.is_empty() {
        bad_setters.push(containers_phrase(&bad_containers));
    }
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    let values: Vec<&str> = bad_values.into_iter().collect();
    CheckResult::forbidden(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            bad_setters.join(" and "),
            join_quote(&values)
        ),
    )
}

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn sysctls_1_0(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(meta, spec, &[SYSCTLS_1_0])
}

fn sysctls_1_27(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(meta, spec, &[SYSCTLS_1_0, SYSCTLS_1_27])
}

fn sysctls_1_29(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(meta, spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}

fn sysctls_1_32(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    sysctls(
        meta,
        spec,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}

/// `sysctls`: only the safe set (the names in the pod's order).
fn sysctls(_: &ObjectMeta, spec: &PodSpec, allowed: &[&[&str]]) -> CheckResult {
    let forbidden: Vec<&str> = spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .filter(|name| !allowed.iter().any(|set| set.contains(name)))
        .collect();
    if forbidden.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("forbidden sysctls", forbidden.join(", "))
}

/// `windowsHostProcess`: no `windowsOptions.hostProcess=true`.
fn windows_host_process(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| {
            c.security_context
                .and_then(|s| s.windows_options.as_ref())
                .and_then(|w| w.host_process)
                == Some(true)
        })
        .map(|c| c.name)
        .collect();
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let mut setters = Vec::new();
    if pod {
        setters.push("pod".to_owned());
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}
