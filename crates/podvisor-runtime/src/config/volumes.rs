//! Volumes and mounts (`makeMounts`): `emptyDir` (on disk or in memory), `hostPath`,
//! `configMap`, `secret`, `downwardAPI` and `projected` (read-only),
//! `subPath` and `subPathExpr`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::env::limit;
use super::quantity::Quantity;
use super::{BuildOptions, Mount, MountKind, expand};
use crate::PodPaths;

/// The container's mounts (`makeMounts`), without the termination-message file.
pub(super) fn make_mounts(
    pod: &Pod,
    container: &Container,
    env: &HashMap<&str, &str>,
    paths: &PodPaths,
    opts: &BuildOptions,
) -> Result<Vec<Mount>, String> {
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default();
    let mut mounts = Vec::new();
    for vm in container.volume_mounts.iter().flatten() {
        let Some(volume) = volumes.iter().find(|v| v.name == vm.name) else {
            return Err(format!(
                "cannot find volume {:?} to mount into container {:?}",
                vm.name, container.name
            ));
        };
        let pv = pod_volume(pod, volume, paths, opts);
        let (source, kind) = match pv.kind.clone() {
            PodVolumeKind::EmptyDir => (pv.path, MountKind::Bind),
            PodVolumeKind::MemoryEmptyDir { size } => (pv.path, MountKind::Tmpfs { size }),
            PodVolumeKind::HostPath { .. } => (pv.path, MountKind::Bind),
            // Always read-only, as the kubelet mounts them.
            PodVolumeKind::ConfigMap | PodVolumeKind::Secret | PodVolumeKind::Projected => {
                (pv.path, MountKind::Bind)
            }
            PodVolumeKind::Unsupported { source } => {
                return Err(format!(
                    "volume {:?} ({source}) cannot be mounted into container {:?}: the process \
                     runtime does not support {source} volumes yet (only emptyDir, hostPath, \
                     configMap, secret, downwardAPI and projected)",
                    vm.name, container.name
                ));
            }
        };
        let sub_path = match vm.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            Some(expr) => expand_sub_path(expr, env)?,
            None => vm.sub_path.clone().unwrap_or_default(),
        };
        if !sub_path.is_empty() {
            if Path::new(&sub_path).is_absolute() {
                return Err(format!(
                    "error SubPath `{sub_path}` must not be an absolute path"
                ));
            }
            if sub_path.split('/').any(|part| part == "..") {
                return Err(format!(
                    "unable to provision SubPath `{sub_path}`: must not contain '..'"
                ));
            }
        }
        mounts.push(Mount {
            source,
            sub_path: PathBuf::from(sub_path),
            target: PathBuf::from(&vm.mount_path),
            read_only: vm.read_only.unwrap_or(false)
                || matches!(
                    pv.kind,
                    PodVolumeKind::ConfigMap | PodVolumeKind::Secret | PodVolumeKind::Projected
                ),
            kind,
        });
    }
    Ok(mounts)
}

/// `ExpandContainerVolumeMounts`: like [`expand`], but every referenced variable must be
/// defined and non-empty.
fn expand_sub_path(expr: &str, env: &HashMap<&str, &str>) -> Result<String, String> {
    let missing = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let expanded = expand(expr, |name| match env.get(name) {
        Some(v) if !v.is_empty() => Some((*v).to_owned()),
        _ => {
            missing.borrow_mut().insert(name.to_owned());
            Some(String::new())
        }
    });
    let missing = missing.into_inner();
    if missing.is_empty() {
        Ok(expanded)
    } else {
        Err(format!(
            "missing value for {}",
            missing.into_iter().collect::<Vec<_>>().join(", ")
        ))
    }
}

/// A pod-level volume: what the sandbox prepares before any container starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolume {
    /// `spec.volumes[].name`.
    pub name: String,
    /// The host directory containers bind: `<pod_dir>/volumes/<name>` for an `emptyDir`, the
    /// `hostPath.path` for a `hostPath`.
    pub path: PathBuf,
    /// What it is.
    pub kind: PodVolumeKind,
}

/// The kind of a [`PodVolume`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodVolumeKind {
    /// A disk-backed `emptyDir`: create [`PodVolume::path`].
    EmptyDir,
    /// A memory-backed `emptyDir`: create [`PodVolume::path`] and mount a tmpfs of `size`
    /// bytes there (`None`: the kernel default).
    MemoryEmptyDir {
        /// The tmpfs size in bytes.
        size: Option<u64>,
    },
    /// A `hostPath`; `type_` is `hostPath.type` (checked when mounting, not here).
    HostPath {
        /// `hostPath.type`, e.g. `DirectoryOrCreate`; empty when unset.
        type_: String,
    },
    /// A `configMap` volume: [`PodVolume::path`] holds its files, written by the node's
    /// atomic writer (`..data`).
    ConfigMap,
    /// A `secret` volume: like [`PodVolumeKind::ConfigMap`], on a tmpfs mounted at
    /// [`PodVolume::path`] (secrets never touch the disk).
    Secret,
    /// A `downwardAPI` or `projected` volume: like [`PodVolumeKind::Secret`] (the kubelet
    /// wraps both in a memory-backed `emptyDir`).
    Projected,
    /// A source the process runtime cannot provide yet; `source` is its API field name
    /// (`configMap`, `secret`, `projected`, ...).
    Unsupported {
        /// The volume source's field name.
        source: String,
    },
}

/// The pod's volumes in `spec.volumes` order, as the sandbox must prepare them.
pub fn pod_volumes(pod: &Pod, paths: &PodPaths, opts: &BuildOptions) -> Vec<PodVolume> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|v| pod_volume(pod, v, paths, opts))
        .collect()
}

fn pod_volume(pod: &Pod, volume: &Volume, paths: &PodPaths, opts: &BuildOptions) -> PodVolume {
    let empty_dir_path = || paths.pod_dir.join("volumes").join(&volume.name);
    let (path, kind) = if let Some(host) = &volume.host_path {
        (
            PathBuf::from(&host.path),
            PodVolumeKind::HostPath {
                type_: host.type_.clone().unwrap_or_default(),
            },
        )
    } else if let Some(dir) = &volume.empty_dir {
        match dir.medium.as_deref().unwrap_or_default() {
            "" => (empty_dir_path(), PodVolumeKind::EmptyDir),
            "Memory" => {
                let size_limit = dir
                    .size_limit
                    .as_ref()
                    .and_then(|q| Quantity::parse(&q.0))
                    .and_then(|q| u64::try_from(q.value()).ok());
                let size = memory_empty_dir_size(pod, size_limit, opts);
                (empty_dir_path(), PodVolumeKind::MemoryEmptyDir { size })
            }
            other => (
                empty_dir_path(),
                PodVolumeKind::Unsupported {
                    source: format!("emptyDir medium {other:?}"),
                },
            ),
        }
    } else if volume.config_map.is_some() {
        (empty_dir_path(), PodVolumeKind::ConfigMap)
    } else if volume.secret.is_some() {
        (empty_dir_path(), PodVolumeKind::Secret)
    } else if volume.downward_api.is_some() || volume.projected.is_some() {
        (empty_dir_path(), PodVolumeKind::Projected)
    } else if let Some(source) = volume_source_name(volume) {
        (
            empty_dir_path(),
            PodVolumeKind::Unsupported {
                source: source.to_owned(),
            },
        )
    } else {
        // No source at all: API defaulting makes it an emptyDir.
        (empty_dir_path(), PodVolumeKind::EmptyDir)
    };
    PodVolume {
        name: volume.name.clone(),
        path,
        kind,
    }
}

/// `calculateEmptyDirMemorySize` (`SizeMemoryBackedVolumes`): the node's allocatable memory,
/// lowered to the pod's memory limit when every container declares one, lowered to the
/// volume's `sizeLimit` when that is positive and smaller.
fn memory_empty_dir_size(pod: &Pod, size_limit: Option<u64>, opts: &BuildOptions) -> Option<u64> {
    let mut size = opts.node_allocatable.memory_bytes;
    if let Some(pod_limit) = pod_memory_limit(pod)
        && pod_limit > 0
        && size.is_none_or(|s| pod_limit <= s)
    {
        size = Some(pod_limit);
    }
    if let Some(limit) = size_limit
        && limit > 0
        && size.is_none_or(|s| limit <= s)
    {
        size = Some(limit);
    }
    size
}

/// The pod-level memory limit (`ResourceConfigForPod`): with pod-level `resources.limits`
/// (V15, PodLevelResources) the pod's own memory limit, if any; otherwise only when every
/// container, init containers included, declares one: regular containers and sidecars add
/// up, each other init container counts with the sidecars started before it, and the larger
/// total wins.
pub(crate) fn pod_memory_limit(pod: &Pod) -> Option<u64> {
    use podvisor_api::resources::{aggregate_container_limits, is_supported_pod_level_resource};
    let spec = pod.spec.as_ref()?;
    let bytes = |q: &Quantity| u64::try_from(q.value()).ok().filter(|v| *v > 0);
    let pod_limits = spec
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .filter(|l| l.keys().any(|k| is_supported_pod_level_resource(k)));
    if let Some(limits) = pod_limits {
        return bytes(&Quantity::parse(&limits.get("memory")?.0)?);
    }
    let declares = |c: &Container| {
        limit(c, "memory")
            .and_then(|q| Quantity::parse(&q))
            .is_some_and(|q| bytes(&q).is_some())
    };
    let mut all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    if !all.all(declares) {
        return None;
    }
    bytes(aggregate_container_limits(spec).get("memory")?)
}

/// The API field name of a volume's source, for the sources the process runtime lacks.
fn volume_source_name(v: &Volume) -> Option<&'static str> {
    let sources: [(bool, &'static str); 28] = [
        (v.config_map.is_some(), "configMap"),
        (v.secret.is_some(), "secret"),
        (v.projected.is_some(), "projected"),
        (v.downward_api.is_some(), "downwardAPI"),
        (v.persistent_volume_claim.is_some(), "persistentVolumeClaim"),
        (v.ephemeral.is_some(), "ephemeral"),
        (v.image.is_some(), "image"),
        (v.csi.is_some(), "csi"),
        (v.nfs.is_some(), "nfs"),
        (v.iscsi.is_some(), "iscsi"),
        (v.git_repo.is_some(), "gitRepo"),
        (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (v.azure_disk.is_some(), "azureDisk"),
        (v.azure_file.is_some(), "azureFile"),
        (v.cephfs.is_some(), "cephfs"),
        (v.cinder.is_some(), "cinder"),
        (v.fc.is_some(), "fc"),
        (v.flex_volume.is_some(), "flexVolume"),
        (v.flocker.is_some(), "flocker"),
        (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (v.glusterfs.is_some(), "glusterfs"),
        (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (v.portworx_volume.is_some(), "portworxVolume"),
        (v.quobyte.is_some(), "quobyte"),
        (v.rbd.is_some(), "rbd"),
        (v.scale_io.is_some(), "scaleIO"),
        (v.storageos.is_some(), "storageos"),
        (v.vsphere_volume.is_some(), "vsphereVolume"),
    ];
    sources.iter().find(|(set, _)| *set).map(|(_, name)| *name)
}
