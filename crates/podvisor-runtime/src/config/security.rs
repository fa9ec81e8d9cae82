//! The identity a container's processes run as, from `securityContext`, the way the kubelet
//! and a CRI runtime compute it:
//! - the container's `securityContext` overrides the pod's `spec.securityContext` field by
//!   field (kubelet `DetermineEffectiveSecurityContext`, pkg/securitycontext/util.go);
//! - the supplementary groups are the primary group, then the pod's `fsGroup`, then the pod's
//!   `supplementalGroups` (kubelet `determineEffectiveSecurityContext` appends `fsGroup` and
//!   `supplementalGroups`; containerd puts the primary gid first in `AdditionalGids`);
//! - `runAsNonRoot` is checked against the uid the container would run as (kubelet
//!   `verifyRunAsNonRoot`, pkg/kubelet/kuberuntime/security_context_others.go).
//!
//! The process runtime has no image, so no image user: without `runAsUser` the uid is 0 and
//! without `runAsGroup` the gid is 0, as for an image without `USER`. Groups listed for the
//! user in an image's `/etc/group` (containerd's `Merge` policy) have no counterpart here.

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};

/// The credentials of a container's processes (main process, exec probes and exec hooks).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerUser {
    /// The uid (`runAsUser`, else 0).
    pub uid: u32,
    /// The primary gid (`runAsGroup`, else 0).
    pub gid: u32,
    /// The supplementary groups, each once: `gid`, the pod's `fsGroup`, the pod's
    /// `supplementalGroups`.
    pub groups: Vec<u32>,
}

/// The effective user fields: the container's value where set, else the pod's.
struct Effective {
    run_as_user: Option<i64>,
    run_as_group: Option<i64>,
    run_as_non_root: Option<bool>,
}

fn effective(pod: &Pod, container: &Container) -> Effective {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = container.security_context.as_ref();
    Effective {
        run_as_user: sc
            .and_then(|s| s.run_as_user)
            .or_else(|| pod_sc.and_then(|s| s.run_as_user)),
        run_as_group: sc
            .and_then(|s| s.run_as_group)
            .or_else(|| pod_sc.and_then(|s| s.run_as_group)),
        run_as_non_root: sc
            .and_then(|s| s.run_as_non_root)
            .or_else(|| pod_sc.and_then(|s| s.run_as_non_root)),
    }
}

/// The kubelet's `format.Pod`: `<name>_<namespace>(<uid>)`.
fn format_pod(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

fn id(value: i64, field: &str) -> Result<u32, String> {
    u32::try_from(value).map_err(|_| format!("{field} {value} is not a valid id"))
}

/// The container's user. `Err` is the `CreateContainerConfigError` message, verbatim from
/// the kubelet's `verifyRunAsNonRoot` when `runAsNonRoot` forbids the uid.
pub fn container_user(pod: &Pod, container: &Container) -> Result<ContainerUser, String> {
    // No image: the image user is root.
    verify_run_as_non_root(pod, container, Some(0), "")?;
    let sc = effective(pod, container);
    let uid = sc.run_as_user.map_or(Ok(0), |u| id(u, "runAsUser"))?;
    let gid = sc.run_as_group.map_or(Ok(0), |g| id(g, "runAsGroup"))?;
    let mut groups = vec![gid];
    groups.extend(pod_supplemental_groups(pod)?);
    let mut seen = std::collections::HashSet::new();
    groups.retain(|g| seen.insert(*g));
    Ok(ContainerUser { uid, gid, groups })
}

/// The groups the pod adds to every container's supplementary groups: `fsGroup`, then
/// `supplementalGroups`, in order (kubelet `determineEffectiveSecurityContext`).
pub fn pod_supplemental_groups(pod: &Pod) -> Result<Vec<u32>, String> {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let mut groups = Vec::new();
    if let Some(fs_group) = pod_sc.and_then(|s| s.fs_group) {
        groups.push(id(fs_group, "fsGroup")?);
    }
    for g in pod_sc
        .and_then(|s| s.supplemental_groups.as_ref())
        .into_iter()
        .flatten()
    {
        groups.push(id(*g, "supplementalGroups")?);
    }
    Ok(groups)
}

/// The kubelet's `verifyRunAsNonRoot` (pkg/kubelet/kuberuntime/security_context_others.go):
/// with `runAsNonRoot`, an explicit `runAsUser` must not be 0; without one, the image's user
/// decides: `image_uid` is the image's numeric user (`Some(0)` for an image without `USER`),
/// `image_username` its user name when it is not numeric. `Err` is the kubelet's message.
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    image_uid: Option<i64>,
    image_username: &str,
) -> Result<(), String> {
    let sc = effective(pod, container);
    if sc.run_as_non_root != Some(true) {
        return Ok(());
    }
    if let Some(uid) = sc.run_as_user {
        if uid == 0 {
            return Err(format!(
                "container's runAsUser breaks non-root policy (pod: {:?}, container: {})",
                format_pod(pod),
                container.name
            ));
        }
        return Ok(());
    }
    match image_uid {
        None if !image_username.is_empty() => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({image_username}), \
             cannot verify user is non-root (pod: {:?}, container: {})",
            format_pod(pod),
            container.name
        )),
        Some(0) => Err(format!(
            "container has runAsNonRoot and image will run as root (pod: {:?}, container: {})",
            format_pod(pod),
            container.name
        )),
        Some(uid) if !(0..=i64::from(i32::MAX)).contains(&uid) => Err(format!(
            "container has runAsNonRoot and image has an invalid user id ({uid}). (Must be \
             1-({})): must be between 0 and {}, inclusive (pod: {:?}, container: {})",
            i32::MAX,
            i32::MAX,
            format_pod(pod),
            container.name
        )),
        _ => Ok(()),
    }
}

/// The effective `runAsUser`, `runAsGroup` and `runAsNonRoot`: the container's where set, else
/// the pod's (`DetermineEffectiveSecurityContext`).
pub fn effective_run_as(
    pod: &Pod,
    container: &Container,
) -> (Option<i64>, Option<i64>, Option<bool>) {
    let sc = effective(pod, container);
    (sc.run_as_user, sc.run_as_group, sc.run_as_non_root)
}

/// `HOME` for a container that does not set it. runc takes the home directory of the
/// image's `/etc/passwd` entry for the uid; the process runtime has no image and reads the
/// host's `passwd` (its text, if readable) instead: the uid's home there, else `/root` for
/// uid 0 and `/` for any other uid.
pub fn home_dir(uid: u32, passwd: Option<&str>) -> String {
    let from_passwd = passwd.and_then(|text| {
        text.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 6 && fields[2].parse() == Ok(uid) && !fields[5].is_empty())
                .then(|| fields[5].to_owned())
        })
    });
    from_passwd.unwrap_or_else(|| if uid == 0 { "/root" } else { "/" }.to_owned())
}

impl super::ContainerConfig {
    /// Appends `HOME` ([`home_dir`] of the container's uid) unless the container sets it, as
    /// runc does when it sets up the process's user.
    pub fn set_default_home(&mut self, passwd: Option<&str>) {
        if !self.env.iter().any(|(name, _)| name == "HOME") {
            let home = home_dir(self.user.uid, passwd);
            self.env.push(("HOME".to_owned(), home));
        }
    }
}
