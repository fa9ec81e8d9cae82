//! The restricted level's own checks (`policy/check_*.go`), sorted by ID; the restricted
//! level also runs every baseline check none of these overrides.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::baseline::{proc_mount, valid_seccomp};
use super::registry::{Check, CheckFn, CheckResult, VersionedCheck};
use super::{containers, containers_phrase, in_user_namespace, is_windows, join_quote, pluralize};

const fn since(minimum: u32, check: CheckFn, overrides: &'static [&'static str]) -> VersionedCheck {
    VersionedCheck {
        minimum,
        check,
        overrides,
    }
}

const fn restricted(id: &'static str, versions: &'static [VersionedCheck]) -> Check {
    Check { id, versions }
}

pub(crate) const CHECKS: &[Check] = &[
    restricted(
        "allowPrivilegeEscalation",
        &[
            since(8, allow_privilege_escalation_1_8, &[]),
            since(25, allow_privilege_escalation_1_25, &[]),
        ],
    ),
    restricted(
        "capabilities_restricted",
        &[
            since(22, capabilities_restricted_1_22, &["capabilities_baseline"]),
            since(25, capabilities_restricted_1_25, &["capabilities_baseline"]),
        ],
    ),
    restricted(
        "procMount_restricted",
        &[since(35, proc_mount, &["procMount"])],
    ),
    restricted(
        "restrictedVolumes",
        &[since(0, restricted_volumes, &["hostPathVolumes"])],
    ),
    restricted(
        "runAsNonRoot",
        &[
            since(0, run_as_non_root_1_0, &[]),
            since(35, run_as_non_root_1_35, &[]),
        ],
    ),
    restricted(
        "runAsUser",
        &[
            since(23, run_as_user_1_23, &[]),
            since(35, run_as_user_1_35, &[]),
        ],
    ),
    restricted(
        "seccompProfile_restricted",
        &[
            since(
                19,
                seccomp_profile_restricted_1_19,
                &["seccompProfile_baseline"],
            ),
            since(
                25,
                seccomp_profile_restricted_1_25,
                &["seccompProfile_baseline"],
            ),
        ],
    ),
];

/// `allowPrivilegeEscalation`: every container sets it to false.
fn allow_privilege_escalation_1_8(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let bad: Vec<&str> = containers(spec)
        .filter(|c| {
            c.security_context
                .and_then(|s| s.allow_privilege_escalation)
                != Some(false)
        })
        .map(|c| c.name)
        .collect();
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

/// 1.25: Windows pods are not checked.
fn allow_privilege_escalation_1_25(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    if is_windows(spec) {
        return CheckResult::allowed();
    }
    allow_privilege_escalation_1_8(meta, spec)
}

/// `capabilities_restricted`: drop `ALL`, add nothing but `NET_BIND_SERVICE`.
fn capabilities_restricted_1_22(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut missing_drop_all = Vec::new();
    let mut adding_forbidden = Vec::new();
    let mut forbidden_caps = BTreeSet::new();
    for c in containers(spec) {
        let Some(caps) = c.security_context.and_then(|s| s.capabilities.as_ref()) else {
            missing_drop_all.push(c.name);
            continue;
        };
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            missing_drop_all.push(c.name);
        }
        let mut added_forbidden = false;
        for a in caps.add.iter().flatten() {
            if a != "NET_BIND_SERVICE" {
                added_forbidden = true;
                forbidden_caps.insert(a.as_str());
            }
        }
        if added_forbidden {
            adding_forbidden.push(c.name);
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            r#"{} must set securityContext.capabilities.drop=["ALL"]"#,
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding_forbidden.is_empty() {
        let caps: Vec<&str> = forbidden_caps.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding_forbidden),
            join_quote(&caps)
        ));
    }
    if details.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden("unrestricted capabilities", details.join("; "))
}

/// 1.25: Windows pods are not checked.
fn capabilities_restricted_1_25(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    if is_windows(spec) {
        return CheckResult::allowed();
    }
    capabilities_restricted_1_22(meta, spec)
}

/// `restrictedVolumes`: only configMap, csi, downwardAPI, emptyDir, ephemeral, image,
/// persistentVolumeClaim, projected and secret volumes.
fn restricted_volumes(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_volumes = Vec::new();
    let mut bad_types = BTreeSet::new();
    for v in spec.volumes.iter().flatten() {
        let allowed = v.config_map.is_some()
            || v.csi.is_some()
            || v.downward_api.is_some()
            || v.empty_dir.is_some()
            || v.ephemeral.is_some()
            || v.image.is_some()
            || v.persistent_volume_claim.is_some()
            || v.projected.is_some()
            || v.secret.is_some();
        if allowed {
            continue;
        }
        bad_volumes.push(v.name.as_str());
        let kinds = [
            (v.host_path.is_some(), "hostPath"),
            (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
            (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
            (v.git_repo.is_some(), "gitRepo"),
            (v.nfs.is_some(), "nfs"),
            (v.iscsi.is_some(), "iscsi"),
            (v.glusterfs.is_some(), "glusterfs"),
            (v.rbd.is_some(), "rbd"),
            (v.flex_volume.is_some(), "flexVolume"),
            (v.cinder.is_some(), "cinder"),
            (v.cephfs.is_some(), "cephfs"),
            (v.flocker.is_some(), "flocker"),
            (v.fc.is_some(), "fc"),
            (v.azure_file.is_some(), "azureFile"),
            (v.vsphere_volume.is_some(), "vsphereVolume"),
            (v.quobyte.is_some(), "quobyte"),
            (v.azure_disk.is_some(), "azureDisk"),
            (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
            (v.portworx_volume.is_some(), "portworxVolume"),
            (v.scale_io.is_some(), "scaleIO"),
            (v.storageos.is_some(), "storageos"),
        ];
        let kind = kinds
            .iter()
            .find(|(set, _)| *set)
            .map_or("unknown", |(_, k)| k);
        bad_types.insert(kind);
    }
    if bad_volumes.is_empty() {
        return CheckResult::allowed();
    }
    let types: Vec<&str> = bad_types.into_iter().collect();
    CheckResult::forbidden(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad_volumes.len()),
            join_quote(&bad_volumes),
            pluralize("uses", "use", bad_volumes.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

/// `runAsNonRoot`: true on the pod (containers may leave it unset) or on every container;
/// never false.
fn run_as_non_root_1_0(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_setters = Vec::new();
    let pod_value = spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root);
    if pod_value == Some(false) {
        bad_setters.push("pod".to_owned());
    }
    let pod_non_root = pod_value == Some(true);
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in containers(spec) {
        match c.security_context.and_then(|s| s.run_as_non_root) {
            Some(false) => explicitly_bad.push(c.name),
            Some(true) => {}
            None if !pod_non_root => implicitly_bad.push(c.name),
            None => {}
        }
    }
    if !explicitly_bad.is_empty() {
        bad_setters.push(containers_phrase(&explicitly_bad));
    }
    if !bad_setters.is_empty() {
        return CheckResult::forbidden(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                bad_setters.join(" and ")
            ),
        );
    }
    if !implicitly_bad.is_empty() {
        return CheckResult::forbidden(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&implicitly_bad)
            ),
        );
    }
    CheckResult::allowed()
}

/// 1.35: relaxed in a user namespace.
fn run_as_non_root_1_35(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    if in_user_namespace(spec) {
        return CheckResult::allowed();
    }
    run_as_non_root_1_0(meta, spec)
}

/// `runAsUser`: never `runAsUser: 0`.
fn run_as_user_1_23(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_setters = Vec::new();
    if spec.security_context.as_ref().and_then(|s| s.run_as_user) == Some(0) {
        bad_setters.push("pod".to_owned());
    }
    let bad: Vec<&str> = containers(spec)
        .filter(|c| c.security_context.and_then(|s| s.run_as_user) == Some(0))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        bad_setters.push(containers_phrase(&bad));
    }
    if bad_setters.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", bad_setters.join(" and ")),
    )
}

/// 1.35: relaxed in a user namespace.
fn run_as_user_1_35(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    if in_user_namespace(spec) {
        return CheckResult::allowed();
    }
    run_as_user_1_23(meta, spec)
}

/// `seccompProfile_restricted`: `RuntimeDefault` or `Localhost` on the pod (containers may
/// leave it unset) or on every container.
fn seccomp_profile_restricted_1_19(_: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    let mut bad_setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let mut pod_set = false;
    if let Some(p) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        if valid_seccomp(&p.type_) {
            pod_set = true;
        } else {
            bad_setters.push("pod".to_owned());
            bad_values.insert(p.type_.as_str());
        }
    }
    let mut explicitly_bad = Vec::new();
    let mut implicitly_bad = Vec::new();
    for c in containers(spec) {
        match c.security_context.and_then(|s| s.seccomp_profile.as_ref()) {
            Some(p) if !valid_seccomp(&p.type_) => {
                explicitly_bad.push(c.name);
                bad_values.insert(p.type_.as_str());
            }
            Some(_) => {}
            None if !pod_set => implicitly_bad.push(c.name),
            None => {}
        }
    }
    if !explicitly_bad.is_empty() {
        bad_setters.push(containers_phrase(&explicitly_bad));
    }
    if !bad_setters.is_empty() {
        let values: Vec<&str> = bad_values.into_iter().collect();
        return CheckResult::forbidden(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                bad_setters.join(" and "),
                join_quote(&values)
            ),
        );
    }
    if !implicitly_bad.is_empty() {
        return CheckResult::forbidden(
            "seccompProfile",
            format!(
                r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                containers_phrase(&implicitly_bad)
            ),
        );
    }
    CheckResult::allowed()
}

/// 1.25: Windows pods are not checked.
fn seccomp_profile_restricted_1_25(meta: &ObjectMeta, spec: &PodSpec) -> CheckResult {
    if is_windows(spec) {
        return CheckResult::allowed();
    }
    seccomp_profile_restricted_1_19(meta, spec)
}
