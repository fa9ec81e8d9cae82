//! A container's `/sys/fs/cgroup` on a cgroup v1 (legacy or hybrid) host, laid out in the
//! spec for the embedded youki (`podvisor youki`) instead of by libcontainer.
//!
//! For a mount of type `cgroup` on such a host, libcontainer 0.7 mounts a tmpfs and binds the
//! container's own cgroup of each hierarchy into it, but first it reads
//! `/proc/<pid>/cgroup` where `<pid>` is the container process's pid *in the container's PID
//! namespace*, looked up in the helper's `/proc` (the host's). For a container with a PID
//! namespace of its own that pid is 1, which always exists; for one that joins a pod's
//! namespace (`shareProcessNamespace`, a debug container's `--target`) it is 2, 3, ...: on a
//! host that entry is a kernel thread or some other process, and in a nested PID namespace
//! (podvisor in a container) it is often missing, and the container fails with "failed to
//! prepare rootfs". So the shim replaces the mount in the spec with the same layout,
//! computed here from its own `/proc/self` (the helper that runs libcontainer is its child,
//! in its cgroups and mount namespace), before it writes `config.json`: a tmpfs and, for each v1 hierarchy, a
//! bind of the container's cgroup (`linux.cgroupsPath` for the hierarchies libcontainer's v1
//! manager places the container in, the cgroup inherited from the shim for the others, such
//! as `name=systemd`), read-only when the mount was (containerd asks for `ro` unless
//! privileged); a comounted hierarchy (`cpu,cpuacct`) is bound under each controller's name
//! too, where libcontainer makes symlinks. Every container gets this layout, so containers of
//! one pod see the same `/sys/fs/cgroup` however they join it.

use std::path::{Path, PathBuf};

use oci_spec::runtime::{Mount, MountBuilder, Spec};

/// The controllers libcontainer's v1 manager places a container in (libcgroups'
/// `CONTROLLERS`): its hierarchies are bound at `linux.cgroupsPath`.
const MANAGED: [&str; 12] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "hugetlb",
    "memory",
    "pids",
    "perf_event",
    "blkio",
    "net_prio",
    "net_cls",
    "freezer",
];

/// A v1 hierarchy as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// Where it is mounted (`/sys/fs/cgroup/cpu,cpuacct`).
    pub(crate) mount_point: PathBuf,
    /// The mount's root within the hierarchy (`/` on a host, deeper in a container).
    pub(crate) root: String,
    /// Its controllers, and `name=...` for a named one.
    pub(crate) controllers: Vec<String>,
    /// This process's cgroup in it (`/proc/self/cgroup`).
    pub(crate) own: String,
}

/// The v1 hierarchies mounted under `/sys/fs/cgroup`, from `mountinfo` and `cgroup` texts of
/// `/proc/self`. Empty on a cgroup v2 (unified) host.
pub(crate) fn hierarchies(mountinfo: &str, cgroup: &str) -> Vec<Hierarchy> {
    let own: Vec<(Vec<&str>, &str)> = cgroup
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            (!controllers.is_empty()).then(|| (controllers.split(',').collect(), path))
        })
        .collect();
    crate::cgroup::parse_mount_table(mountinfo)
        .into_iter()
        .filter(|m| m.fstype == "cgroup" && m.mount_point.starts_with("/sys/fs/cgroup"))
        .filter_map(|m| {
            let options: Vec<&str> = m.super_options.split(',').collect();
            let (controllers, path) = own
                .iter()
                .find(|(controllers, _)| controllers.iter().all(|c| options.contains(c)))?;
            Some(Hierarchy {
                controllers: controllers.iter().map(|c| (*c).to_owned()).collect(),
                own: (*path).to_owned(),
                mount_point: m.mount_point,
                root: m.root,
            })
        })
        .collect()
}

/// `path` below `base`, without leaving it (`..` components are dropped, as a cgroup path
/// never has them).
fn beneath(base: &Path, path: &str) -> PathBuf {
    let mut out = base.to_path_buf();
    for part in path
        .split('/')
        .filter(|p| !p.is_empty() && *p != "." && *p != "..")
    {
        out.push(part);
    }
    out
}

/// The mounts that replace `cgroup` (a mount of type `cgroup`) for a container whose cgroup
/// path is `cgroups_path`.
pub(crate) fn replacement(
    cgroup: &Mount,
    hierarchies: &[Hierarchy],
    cgroups_path: &str,
) -> Result<Vec<Mount>, String> {
    let dest = cgroup.destination();
    let read_only = cgroup
        .options()
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o == "ro"));
    let mut mounts = vec![
        MountBuilder::default()
            .destination(dest)
            .typ("tmpfs")
            .source("tmpfs")
            .options(
                ["nosuid", "noexec", "nodev", "mode=755"]
                    .map(String::from)
                    .to_vec(),
            )
            .build()
            .map_err(|e| e.to_string())?,
    ];
    let bind_options: Vec<String> = [
        "rbind",
        if read_only { "ro" } else { "rw" },
        "nosuid",
        "noexec",
        "nodev",
    ]
    .map(String::from)
    .to_vec();
    for h in hierarchies {
        let Some(name) = h.mount_point.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let managed = h.controllers.iter().any(|c| MANAGED.contains(&c.as_str()));
        let source = if managed {
            beneath(&h.mount_point, cgroups_path)
        } else {
            let relative = Path::new(&h.own)
                .strip_prefix(&h.root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| h.own.clone());
            beneath(&h.mount_point, &relative)
        };
        let mut names = vec![name];
        if name.contains(',') {
            names.extend(name.split(',').filter(|n| !n.is_empty()));
        }
        for name in names {
            mounts.push(
                MountBuilder::default()
                    .destination(dest.join(name))
                    .typ("bind")
                    .source(&source)
                    .options(bind_options.clone())
                    .build()
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(mounts)
}

/// This process's v1 hierarchies, read once: neither its cgroups nor the node's cgroup
/// mounts change while a shim lives.
fn own_hierarchies() -> Result<&'static [Hierarchy], String> {
    static OWN: std::sync::OnceLock<Vec<Hierarchy>> = std::sync::OnceLock::new();
    if let Some(own) = OWN.get() {
        return Ok(own);
    }
    let read = |name: &str| {
        std::fs::read_to_string(Path::new("/proc/self").join(name))
            .map_err(|e| format!("reading /proc/self/{name}: {e}"))
    };
    let found = hierarchies(&read("mountinfo")?, &read("cgroup")?);
    Ok(OWN.get_or_init(|| found))
}

/// Replaces every `cgroup` mount of `spec` (see the module), on a host with v1 hierarchies;
/// leaves it alone on a unified one or when it has no such mount.
///
/// # Errors
///
/// `/proc/self` cannot be read, or the spec has no `linux.cgroupsPath`.
pub fn rewrite(spec: &mut Spec) -> Result<(), String> {
    let Some((hierarchies, cgroups_path)) = layout_inputs(spec)? else {
        return Ok(());
    };
    let mut out = Vec::new();
    for mount in spec.mounts().iter().flatten() {
        if is_cgroup(mount) {
            out.extend(replacement(mount, hierarchies, &cgroups_path)?);
        } else {
            out.push(mount.clone());
        }
    }
    spec.set_mounts(Some(out));
    Ok(())
}

fn is_cgroup(mount: &Mount) -> bool {
    mount.typ().as_deref() == Some("cgroup")
}

/// What a layout of `spec`'s `cgroup` mounts is made from: this process's v1 hierarchies
/// and the container's cgroup path. `None`: nothing to lay out (no such mount, or a unified
/// host).
fn layout_inputs(spec: &Spec) -> Result<Option<(&'static [Hierarchy], String)>, String> {
    if !spec.mounts().iter().flatten().any(is_cgroup) {
        return Ok(None);
    }
    let hierarchies = own_hierarchies()?;
    if hierarchies.is_empty() {
        return Ok(None);
    }
    let cgroups_path = spec
        .linux()
        .as_ref()
        .and_then(|l| l.cgroups_path().as_ref())
        .map(|p| p.to_string_lossy().into_owned())
        .ok_or("the spec has no linux.cgroupsPath")?;
    Ok(Some((hierarchies, cgroups_path)))
}

/// Where the shim lays out a container's `/sys/fs/cgroup` ([`rewrite_prepared`]): in the
/// instance's directory.
#[must_use]
pub fn view_dir(instance_dir: &Path) -> PathBuf {
    instance_dir.join("cgroup")
}

/// As [`rewrite`], but the layout is made here, in the calling process's mount namespace (the
/// shim's, which the OCI runtime it starts shares), under `dir`, and the spec asks for one
/// recursive bind of it: a tmpfs, and in it each hierarchy's bind (its cgroup made if missing,
/// as libcontainer's v1 manager would make it a moment later), read-only when the mount was.
///
/// The layout is the same; what changes is who mounts it. libcontainer makes each spec mount
/// through libpathrs's checked opens, some thirty system calls each, and a read-only bind
/// twice: one bind instead of ten there, against ten plain mount calls here, about 2 ms less
/// of a container's create on the reference machine. [`remove_view`] undoes it.
///
/// # Errors
///
/// As [`rewrite`], or a mount failed (nothing of the layout is left then).
pub fn rewrite_prepared(spec: &mut Spec, dir: &Path) -> Result<(), String> {
    let Some((hierarchies, cgroups_path)) = layout_inputs(spec)? else {
        return Ok(());
    };
    let mut out = Vec::new();
    let mut laid_out = false;
    for mount in spec.mounts().iter().flatten() {
        if !is_cgroup(mount) {
            out.push(mount.clone());
            continue;
        }
        if !laid_out {
            let layout = replacement(mount, hierarchies, &cgroups_path)?;
            lay_out(&layout, dir).inspect_err(|_| remove_view(dir))?;
            laid_out = true;
        }
        out.push(
            MountBuilder::default()
                .destination(mount.destination())
                .typ("bind")
                .source(dir)
                .options(
                    // The tmpfs stays writable, as runc leaves it (its binds are read-only).
                    ["rbind", "rw", "nosuid", "noexec", "nodev"]
                        .map(String::from)
                        .to_vec(),
                )
                .build()
                .map_err(|e| e.to_string())?,
        );
    }
    spec.set_mounts(Some(out));
    Ok(())
}

/// Mounts `layout` ([`replacement`]'s tmpfs, then its binds, each read-only when its options
/// say so) at `dir` instead of its destination.
fn lay_out(layout: &[Mount], dir: &Path) -> Result<(), String> {
    use rustix::mount::{MountFlags, mount, mount_bind_recursive, mount_remount};
    let Some((tmpfs, binds)) = layout.split_first() else {
        return Ok(());
    };
    let at = |what: &str, path: &Path| {
        let path = path.display().to_string();
        let what = what.to_owned();
        move |e: rustix::io::Errno| format!("{what} {path}: {e}")
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let flags = MountFlags::NOSUID | MountFlags::NOEXEC | MountFlags::NODEV;
    mount("tmpfs", dir, "tmpfs", flags, Some(c"mode=755"))
        .map_err(at("mounting a tmpfs on", dir))?;
    let root = tmpfs.destination();
    for bind in binds {
        let name = bind.destination().strip_prefix(root).map_err(|_| {
            format!(
                "{} is not below {}",
                bind.destination().display(),
                root.display()
            )
        })?;
        let target = dir.join(name);
        std::fs::create_dir(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
        let source = bind.source().as_deref().unwrap_or(Path::new(""));
        std::fs::create_dir_all(source)
            .map_err(|e| format!("creating cgroup {}: {e}", source.display()))?;
        mount_bind_recursive(source, &target).map_err(at("binding", &target))?;
        let read_only = bind
            .options()
            .as_ref()
            .is_some_and(|o| o.iter().any(|o| o == "ro"));
        let ro = if read_only {
            MountFlags::RDONLY
        } else {
            MountFlags::empty()
        };
        mount_remount(&target, MountFlags::BIND | flags | ro, c"")
            .map_err(at("remounting", &target))?;
    }
    Ok(())
}

/// Unmounts what [`rewrite_prepared`] laid out in `dir` (lazily: the binds go with the tmpfs),
/// if anything.
pub fn remove_view(dir: &Path) {
    let _ = rustix::mount::unmount(
        dir,
        rustix::mount::UnmountFlags::DETACH | rustix::mount::UnmountFlags::NOFOLLOW,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /outer /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /mnt/other\\040dir rw,relatime - cgroup cgroup rw,pids
";
    const CGROUP: &str = "\
9:name=systemd:/user.slice/shim
4:memory:/outer/pod
2:cpu,cpuacct:/
8:pids:/
0::/
";

    /// Only the v1 hierarchies under `/sys/fs/cgroup`, each with its mount's root and this
    /// process's cgroup; cgroup2 and mounts elsewhere are not among them.
    #[test]
    fn v1_hierarchies_from_mountinfo_and_own_cgroups() {
        let got = hierarchies(MOUNTINFO, CGROUP);
        assert_eq!(
            got,
            vec![
                Hierarchy {
                    mount_point: "/sys/fs/cgroup/cpu,cpuacct".into(),
                    root: "/".into(),
                    controllers: vec!["cpu".into(), "cpuacct".into()],
                    own: "/".into(),
                },
                Hierarchy {
                    mount_point: "/sys/fs/cgroup/memory".into(),
                    root: "/outer".into(),
                    controllers: vec!["memory".into()],
                    own: "/outer/pod".into(),
                },
                Hierarchy {
                    mount_point: "/sys/fs/cgroup/systemd".into(),
                    root: "/".into(),
                    controllers: vec!["name=systemd".into()],
                    own: "/user.slice/shim".into(),
                },
            ]
        );
        assert!(
            hierarchies(
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                "0::/\n"
            )
            .is_empty()
        );
    }

    /// A tmpfs, then each hierarchy's container cgroup bound read-only (the managed ones at
    /// `cgroupsPath`, `name=systemd` at the inherited cgroup below the mount's root), a
    /// comounted one under each controller's name too.
    #[test]
    fn the_cgroup_mount_becomes_a_tmpfs_and_read_only_binds_of_the_containers_cgroups() {
        let cgroup = MountBuilder::default()
            .destination("/sys/fs/cgroup")
            .typ("cgroup")
            .source("cgroup")
            .options(
                ["nosuid", "noexec", "nodev", "relatime", "ro"]
                    .map(String::from)
                    .to_vec(),
            )
            .build()
            .unwrap();
        let got = replacement(&cgroup, &hierarchies(MOUNTINFO, CGROUP), "/podvisor/u1/c1").unwrap();
        let got: Vec<(String, String, String, String)> = got
            .iter()
            .map(|m| {
                (
                    m.destination().display().to_string(),
                    m.typ().clone().unwrap_or_default(),
                    m.source()
                        .as_ref()
                        .map(|s| s.display().to_string())
                        .unwrap_or_default(),
                    m.options()
                        .as_ref()
                        .map(|o| o.join(","))
                        .unwrap_or_default(),
                )
            })
            .collect();
        let bind = |dest: &str, source: &str| {
            (
                dest.to_owned(),
                "bind".to_owned(),
                source.to_owned(),
                "rbind,ro,nosuid,noexec,nodev".to_owned(),
            )
        };
        assert_eq!(
            got,
            vec![
                (
                    "/sys/fs/cgroup".to_owned(),
                    "tmpfs".to_owned(),
                    "tmpfs".to_owned(),
                    "nosuid,noexec,nodev,mode=755".to_owned()
                ),
                bind(
                    "/sys/fs/cgroup/cpu,cpuacct",
                    "/sys/fs/cgroup/cpu,cpuacct/podvisor/u1/c1"
                ),
                bind(
                    "/sys/fs/cgroup/cpu",
                    "/sys/fs/cgroup/cpu,cpuacct/podvisor/u1/c1"
                ),
                bind(
                    "/sys/fs/cgroup/cpuacct",
                    "/sys/fs/cgroup/cpu,cpuacct/podvisor/u1/c1"
                ),
                bind(
                    "/sys/fs/cgroup/memory",
                    "/sys/fs/cgroup/memory/podvisor/u1/c1"
                ),
                bind(
                    "/sys/fs/cgroup/systemd",
                    "/sys/fs/cgroup/systemd/user.slice/shim"
                ),
            ]
        );
    }
}
