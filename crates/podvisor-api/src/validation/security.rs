//! Security contexts (V14): user and group ranges, `supplementalGroupsPolicy`,
//! `seLinuxChangePolicy`, `procMount`, and what `hostUsers: false` (a user
//! namespace, `UserNamespacesSupport` GA in 1.35) rules out.

use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

use super::field::{FieldError, Path};
use super::names::inclusive_range_error;

/// Largest user or group ID (`IsValidUserID`, `IsValidGroupID`).
const MAX_ID: i64 = i32::MAX as i64;

fn validate_id(id: Option<i64>, path: &Path) -> Option<FieldError> {
    id.filter(|v| !(0..=MAX_ID).contains(v))
        .map(|v| FieldError::invalid(path, v, inclusive_range_error(0, MAX_ID)))
}

/// Whether the pod shares the host's user namespace (`hostUsers` defaults
/// to true).
pub(crate) fn host_users(spec: &PodSpec) -> bool {
    spec.host_users.unwrap_or(true)
}

/// `validatePodSpecSecurityContext`, for the fields podvisor checks.
pub(crate) fn validate_pod_security_context(
    sc: Option<&PodSecurityContext>,
    path: &Path,
) -> Vec<FieldError> {
    let Some(sc) = sc else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    errs.extend(validate_id(sc.fs_group, &path.child("fsGroup")));
    errs.extend(validate_id(sc.run_as_user, &path.child("runAsUser")));
    errs.extend(validate_id(sc.run_as_group, &path.child("runAsGroup")));
    for (i, gid) in sc.supplemental_groups.iter().flatten().enumerate() {
        errs.extend(validate_id(
            Some(*gid),
            &path.child("supplementalGroups").index(i),
        ));
    }
    // SupplementalGroupsPolicy (GA in 1.35).
    if let Some(policy) = sc.supplemental_groups_policy.as_deref()
        && !matches!(policy, "Merge" | "Strict")
    {
        errs.push(FieldError::not_supported(
            &path.child("supplementalGroupsPolicy"),
            policy,
            &["Merge", "Strict"],
        ));
    }
    // SELinuxChangePolicy is GA; with SELinuxMount off only `Recursive` is
    // accepted (`AllowOnlyRecursiveSELinuxChangePolicy`).
    if let Some(policy) = sc.se_linux_change_policy.as_deref()
        && policy != "Recursive"
    {
        errs.push(FieldError::not_supported(
            &path.child("seLinuxChangePolicy"),
            policy,
            &["Recursive"],
        ));
    }
    errs
}

/// `validateHostUsers`: a pod in its own user namespace may not share the
/// host's network, PID or IPC namespace, nor use raw block devices. The
/// paths are upstream's, capitals included.
pub(crate) fn validate_host_users(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    if host_users(spec) {
        return Vec::new();
    }
    const MSG: &str = "when `hostUsers` is false";
    let mut errs = Vec::new();
    // UserNamespacesHostNetworkSupport (alpha, off) would allow this one.
    if spec.host_network.unwrap_or(false) {
        errs.push(FieldError::forbidden(&path.child("hostNetwork"), MSG));
    }
    if spec.host_pid.unwrap_or(false) {
        errs.push(FieldError::forbidden(&path.child("HostPID"), MSG));
    }
    if spec.host_ipc.unwrap_or(false) {
        errs.push(FieldError::forbidden(&path.child("HostIPC"), MSG));
    }
    // VisitContainersWithPath: init containers, then regular ones.
    let kinds = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", spec.containers.as_slice()),
    ];
    for (kind, list) in kinds {
        for (i, c) in list.iter().enumerate() {
            if c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
                errs.push(FieldError::forbidden(
                    &path.child(kind).index(i).child("volumeDevices"),
                    MSG,
                ));
            }
        }
    }
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        if c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
            errs.push(FieldError::forbidden(
                &path
                    .child("ephemeralContainers")
                    .index(i)
                    .child("volumeDevices"),
                MSG,
            ));
        }
    }
    errs
}

/// `ValidateSecurityContext` of one container, for the fields podvisor
/// checks: user and group ranges and `procMount` (ProcMountType, GA in
/// 1.35).
pub(crate) fn validate_security_context(
    sc: Option<&SecurityContext>,
    path: &Path,
    host_users: bool,
) -> Vec<FieldError> {
    let Some(sc) = sc else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    errs.extend(validate_id(sc.run_as_user, &path.child("runAsUser")));
    errs.extend(validate_id(sc.run_as_group, &path.child("runAsGroup")));
    if let Some(pm) = sc.proc_mount.as_deref() {
        let p = path.child("procMount");
        if !matches!(pm, "Default" | "Unmasked") {
            errs.push(FieldError::not_supported(&p, pm, &["Default", "Unmasked"]));
        }
        if host_users && pm == "Unmasked" {
            errs.push(FieldError::invalid(
                &p,
                pm,
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    errs
}
