//! The mounts of a container's OCI spec: the runtime's own (`/proc`, `/dev`, `/sys`, ...),
//! the pod's files (`/etc/hostname`, `/etc/hosts`, `/etc/resolv.conf`, `/dev/shm`), the
//! volumes and the termination-message file, as containerd's CRI plugin lays them out.

use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{Mount, MountBuilder};

use super::SpecError;

/// How a volume mount propagates (`mountPropagation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    /// `None`: `rprivate`.
    #[default]
    Private,
    /// `HostToContainer`: `rslave`.
    HostToContainer,
    /// `Bidirectional`: `rshared`.
    Bidirectional,
}

/// A bind mount into the container: a host path already resolved (a volume's directory, a
/// `subPath` prepared so that no container can swap it, a file the node wrote).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerMount {
    /// The host file or directory.
    pub host_path: PathBuf,
    /// Where it appears in the container (`mountPath`); the OCI runtime resolves it inside the
    /// root and creates what is missing.
    pub container_path: PathBuf,
    /// `readOnly`.
    pub read_only: bool,
    /// `mountPropagation`.
    pub propagation: Propagation,
}

impl ContainerMount {
    /// A private, read-write bind mount.
    pub fn bind(host_path: impl Into<PathBuf>, container_path: impl Into<PathBuf>) -> Self {
        ContainerMount {
            host_path: host_path.into(),
            container_path: container_path.into(),
            read_only: false,
            propagation: Propagation::Private,
        }
    }
}

/// Files of the pod sandbox each container sees, host paths; `None` for those the pod lacks.
/// Each is skipped when a volume mount already covers its path (containerd `isInCRIMounts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFiles {
    /// Bound at `/etc/hostname` (read-only with `readOnlyRootFilesystem`).
    pub hostname: Option<PathBuf>,
    /// Bound at `/etc/hosts` (read-only with `readOnlyRootFilesystem`). The kubelet usually
    /// passes its managed hosts file as a mount instead.
    pub hosts: Option<PathBuf>,
    /// Bound at `/etc/resolv.conf` (read-only with `readOnlyRootFilesystem`).
    pub resolv_conf: Option<PathBuf>,
    /// The pod's shared `/dev/shm` (a tmpfs the sandbox mounted); `None`: a private tmpfs.
    pub shm: Option<PathBuf>,
    /// The termination-message file, bound at the container's `terminationMessagePath`.
    pub termination_message: Option<PathBuf>,
}

/// The default `terminationMessagePath`.
pub use crate::config::DEFAULT_TERMINATION_MESSAGE_PATH;

fn special(
    destination: &str,
    typ: &str,
    source: &str,
    options: &[&str],
) -> Result<Mount, SpecError> {
    MountBuilder::default()
        .destination(destination)
        .typ(typ)
        .source(source)
        .options(options.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>())
        .build()
        .map_err(SpecError::internal)
}

/// containerd's default mounts without `/run` (the CRI plugin drops it) and with the
/// read-only cgroup filesystem it adds; `/sys` and `/sys/fs/cgroup` are writable when
/// privileged.
fn defaults(privileged: bool) -> Result<Vec<Mount>, SpecError> {
    let sys_mode = if privileged { "rw" } else { "ro" };
    Ok(vec![
        special("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        special(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        special(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        )?,
        special(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        special(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        )?,
        special(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", sys_mode],
        )?,
        special(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            &["nosuid", "noexec", "nodev", "relatime", sys_mode],
        )?,
    ])
}

/// `filepath.Clean` for the absolute container paths compared here.
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

fn depth(path: &Path) -> usize {
    clean(path).components().count()
}

/// All mounts, in order, and the root propagation the volumes need (`rshared` for a
/// bidirectional one, else `rslave` for a host-to-container one, else none).
pub(super) fn mounts(
    volumes: &[ContainerMount],
    files: &PodFiles,
    termination_message_path: &str,
    read_only_root: bool,
    privileged: bool,
) -> Result<(Vec<Mount>, Option<String>), SpecError> {
    let mut requested: Vec<ContainerMount> = Vec::new();
    let covered = |path: &str, list: &[ContainerMount]| {
        list.iter()
            .any(|m| clean(&m.container_path) == Path::new(path))
    };
    let pod_files = [
        ("/etc/hostname", &files.hostname, read_only_root),
        ("/etc/hosts", &files.hosts, read_only_root),
        ("/etc/resolv.conf", &files.resolv_conf, read_only_root),
        ("/dev/shm", &files.shm, false),
    ];
    for (path, host, read_only) in pod_files {
        if let Some(host) = host
            && !covered(path, volumes)
        {
            requested.push(ContainerMount {
                read_only,
                ..ContainerMount::bind(host, path)
            });
        }
    }
    requested.extend(volumes.iter().cloned());
    if let Some(host) = &files.termination_message {
        requested.push(ContainerMount::bind(host, termination_message_path));
    }
    let destinations: Vec<PathBuf> = requested.iter().map(|m| clean(&m.container_path)).collect();
    let replaces_dev = destinations.iter().any(|d| d == Path::new("/dev"));
    let mut out: Vec<Mount> = defaults(privileged)?
        .into_iter()
        .filter(|m| {
            let dst = clean(m.destination());
            !(destinations.contains(&dst) || (replaces_dev && dst.starts_with("/dev")))
        })
        .collect();
    // Parents before children, so that no mount hides a deeper one; stable for equal depths.
    requested.sort_by_key(|m| depth(&m.container_path));
    let mut root_propagation: Option<String> = None;
    for m in requested {
        let propagation = match m.propagation {
            Propagation::Private => "rprivate",
            Propagation::HostToContainer => {
                if root_propagation.as_deref() != Some("rshared") {
                    root_propagation = Some("rslave".into());
                }
                "rslave"
            }
            Propagation::Bidirectional => {
                root_propagation = Some("rshared".into());
                "rshared"
            }
        };
        let mode = if m.read_only { "ro" } else { "rw" };
        out.push(
            MountBuilder::default()
                .destination(m.container_path)
                .typ("bind")
                .source(m.host_path)
                .options(vec![
                    "rbind".to_owned(),
                    propagation.to_owned(),
                    mode.to_owned(),
                ])
                .build()
                .map_err(SpecError::internal)?,
        );
    }
    Ok((out, root_propagation))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn destinations(m: &[Mount]) -> Vec<String> {
        m.iter()
            .map(|m| m.destination().display().to_string())
            .collect()
    }

    #[test]
    fn defaults_pod_files_volumes_and_termination_log_in_order() {
        let files = PodFiles {
            hostname: Some("/pod/hostname".into()),
            hosts: Some("/pod/hosts".into()),
            resolv_conf: Some("/pod/resolv.conf".into()),
            shm: Some("/pod/shm".into()),
            termination_message: Some("/pod/c/termination-log".into()),
        };
        let volumes = [
            ContainerMount::bind("/pod/vol/a/b", "/data/deep/x"),
            ContainerMount::bind("/pod/vol/a", "/data"),
        ];
        let (mounts, propagation) =
            mounts(&volumes, &files, "/dev/termination-log", false, false).unwrap();
        assert_eq!(
            destinations(&mounts),
            [
                "/proc",
                "/dev",
                "/dev/pts",
                "/dev/mqueue",
                "/sys",
                "/sys/fs/cgroup",
                "/data",
                "/etc/hostname",
                "/etc/hosts",
                "/etc/resolv.conf",
                "/dev/shm",
                "/dev/termination-log",
                "/data/deep/x",
            ]
        );
        assert_eq!(propagation, None);
        let shm = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/dev/shm"))
            .unwrap();
        assert_eq!(shm.typ().as_deref(), Some("bind"));
        assert_eq!(shm.options().clone().unwrap(), ["rbind", "rprivate", "rw"]);
        let sys = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/sys"))
            .unwrap();
        assert!(sys.options().clone().unwrap().contains(&"ro".to_owned()));
    }

    #[test]
    fn volumes_cover_pod_files_and_read_only_root_locks_them() {
        let files = PodFiles {
            hosts: Some("/pod/hosts".into()),
            resolv_conf: Some("/pod/resolv.conf".into()),
            ..PodFiles::default()
        };
        let volumes = [ContainerMount {
            read_only: true,
            ..ContainerMount::bind("/kubelet/etc-hosts", "/etc/hosts/")
        }];
        let (mounts, _) = mounts(&volumes, &files, "/x", true, true).unwrap();
        let hosts: Vec<&Mount> = mounts
            .iter()
            .filter(|m| clean(m.destination()) == Path::new("/etc/hosts"))
            .collect();
        assert_eq!(hosts.len(), 1);
        assert_eq!(
            hosts[0].source().as_deref(),
            Some(Path::new("/kubelet/etc-hosts"))
        );
        let resolv = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/etc/resolv.conf"))
            .unwrap();
        assert_eq!(
            resolv.options().clone().unwrap(),
            ["rbind", "rprivate", "ro"]
        );
        // Privileged: /sys is writable; no /dev/shm file, so the tmpfs default stays.
        let sys = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/sys"))
            .unwrap();
        assert!(sys.options().clone().unwrap().contains(&"rw".to_owned()));
        let shm = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/dev/shm"))
            .unwrap();
        assert_eq!(shm.typ().as_deref(), Some("tmpfs"));
    }

    #[test]
    fn propagation_sets_the_root_propagation() {
        let m = |p: Propagation, dst: &str| ContainerMount {
            propagation: p,
            ..ContainerMount::bind("/h", dst)
        };
        let cases: [(&[ContainerMount], Option<&str>); 4] = [
            (&[m(Propagation::Private, "/a")], None),
            (&[m(Propagation::HostToContainer, "/a")], Some("rslave")),
            (
                &[
                    m(Propagation::Bidirectional, "/a"),
                    m(Propagation::HostToContainer, "/b"),
                ],
                Some("rshared"),
            ),
            (
                &[
                    m(Propagation::HostToContainer, "/a"),
                    m(Propagation::Bidirectional, "/b"),
                ],
                Some("rshared"),
            ),
        ];
        for (volumes, want) in cases {
            let (mounts, got) = mounts(volumes, &PodFiles::default(), "/t", false, false).unwrap();
            assert_eq!(got.as_deref(), want);
            let opts = mounts.last().unwrap().options().clone().unwrap();
            assert_eq!(opts[0], "rbind");
        }
        // A volume at /dev replaces every default under it.
        let (mounts, _) = mounts(
            &[ContainerMount::bind("/h", "/dev")],
            &PodFiles::default(),
            "/t",
            false,
            false,
        )
        .unwrap();
        assert_eq!(
            destinations(&mounts),
            ["/proc", "/sys", "/sys/fs/cgroup", "/dev"]
        );
    }
}
