//! One OCI container instance, from the agent's request to runc's bundle.
//!
//! The agent (the `oci` class of [`crate::process::ProcessRuntime`]) resolves the image and
//! the pod sandbox and sends an [`OciLaunch`] with the instance's
//! `ContainerConfig`. The shim, in its own mount namespace,
//! then `prepare`s the bundle: the root filesystem over the image's layers, the `subPath`
//! sources, the image's users, the runtime spec ([`super::spec::build_spec`]) and the
//! termination-message file owned by the container's user; runs it with runc
//! ([`super::executor`]); and [`cleanup`]s after the instance's exit.

use super::executor::{OciExecutor, Runc};
use super::rootfs::{self, Strategy};
use super::spec::{
    self, ContainerMount, HostFacts, Namespace, PodFiles, PodNamespaces, SpecError, SpecInput,
};
use super::user::{UserDb, UserError, resolve_user};
use crate::config::ContainerConfig;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// What the shim needs, besides the [`ContainerConfig`], to run an instance as an OCI
/// container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OciLaunch {
    /// runc's container ID (the hex part of the container ID the kubelet sees).
    pub id: String,
    /// The instance's directory (`<pod dir>/oci/<instance>`): root filesystem, upper and work
    /// directories, `subPath` sources, the bundle's `config.json`.
    pub dir: PathBuf,
    /// The directory runc keeps its state under (`<state>/runc`, `<state>/runc-log`).
    pub runc_state: PathBuf,
    /// The pod as it is now, without its status and managed fields.
    pub pod: Pod,
    /// The container (defaulted).
    pub container: Container,
    /// The image's config (`ENTRYPOINT`, `CMD`, `Env`, `WorkingDir`, `User`).
    pub image: Option<oci_spec::image::Config>,
    /// The image's unpacked layers, bottom first.
    pub layers: Vec<PathBuf>,
    /// The kubelet's environment for the container (no image env yet).
    pub env: Vec<(String, String)>,
    /// The pod sandbox's namespaces to join (`None`: the host's).
    pub network: Option<PathBuf>,
    /// The pod's IPC namespace.
    pub ipc: Option<PathBuf>,
    /// The pod's UTS namespace.
    pub uts: Option<PathBuf>,
    /// The PID namespace the container runs in.
    #[serde(default)]
    pub pid: PidNamespace,
    /// The pod's host name.
    pub hostname: String,
    /// The pod's `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname`.
    pub hosts: Option<PathBuf>,
    /// The pod's `/etc/resolv.conf`.
    pub resolv_conf: Option<PathBuf>,
    /// The pod's `/etc/hostname`.
    pub hostname_file: Option<PathBuf>,
    /// The OCI runtime and how it creates and starts the container (`--oci-executor`).
    #[serde(default)]
    pub executor: super::executor::RuncMode,
}

/// The PID namespace of a container, as the kubelet asks the runtime for it (CRI
/// `NamespaceOption.pid`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PidNamespace {
    /// Its own (`CONTAINER`): the container's process is PID 1 there.
    #[default]
    Container,
    /// The pod's (`POD`, `shareProcessNamespace: true`): one namespace for all the pod's
    /// containers, whose PID 1 is the shim's holder process (the pause container's part).
    Pod,
    /// The host's (`NODE`, `hostPID: true`).
    Node,
    /// The namespace of the pod's running container of this name (`TARGET`: an ephemeral
    /// container's `targetContainerName`).
    Target(String),
}

impl PidNamespace {
    /// The PID namespace of `pod`'s containers (the kubelet's `pidNamespaceForPod`):
    /// `hostPID` wins over `shareProcessNamespace`.
    #[must_use]
    pub fn for_pod(pod: &Pod) -> PidNamespace {
        let spec = pod.spec.as_ref();
        if spec.and_then(|s| s.host_pid) == Some(true) {
            PidNamespace::Node
        } else if spec.and_then(|s| s.share_process_namespace) == Some(true) {
            PidNamespace::Pod
        } else {
            PidNamespace::Container
        }
    }

    /// The PID namespace of `pod`'s container `name`: the pod's, except that an ephemeral
    /// container with a `targetContainerName` joins its target's where the pod's containers
    /// each have their own (the kubelet's `generateLinuxContainerConfig`: `TARGET` replaces
    /// `CONTAINER` only; with `shareProcessNamespace` or `hostPID` every container already
    /// sees the target).
    #[must_use]
    pub fn for_container(pod: &Pod, name: &str) -> PidNamespace {
        let pod_wide = PidNamespace::for_pod(pod);
        let target = pod
            .spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.as_ref())
            .and_then(|list| list.iter().find(|e| e.name == name))
            .and_then(|e| e.target_container_name.as_deref())
            .filter(|t| !t.is_empty());
        match (pod_wide, target) {
            (PidNamespace::Container, Some(t)) => PidNamespace::Target(t.to_owned()),
            (pod_wide, _) => pod_wide,
        }
    }
}

/// Why a bundle could not be prepared: the waiting reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchError {
    /// `CreateContainerConfigError` or `CreateContainerError`.
    pub reason: &'static str,
    /// The detail.
    pub message: String,
}

impl LaunchError {
    /// A `CreateContainerError` with `message`.
    pub(crate) fn create(message: impl Into<String>) -> LaunchError {
        LaunchError {
            reason: "CreateContainerError",
            message: message.into(),
        }
    }
}

impl From<SpecError> for LaunchError {
    fn from(e: SpecError) -> LaunchError {
        LaunchError {
            reason: e.reason(),
            message: e.to_string(),
        }
    }
}

/// A prepared bundle.
#[derive(Debug)]
pub struct Prepared {
    /// The bundle directory (`config.json`, `rootfs/`).
    pub bundle: PathBuf,
    /// The spec's process: what execs start from ([`super::spec::exec_process`]).
    pub process: oci_spec::runtime::Process,
    /// Who the container runs as.
    pub user: crate::config::ContainerUser,
}

impl OciLaunch {
    /// The executor over this instance's state (runc, or the embedded youki of the shim's
    /// own binary), commands run by `runner`. For the shim only: youki is `/proc/self/exe`.
    pub fn runc<R: super::executor::CommandRunner>(&self, runner: R) -> Runc<R> {
        self.executor.executor(
            Path::new(super::executor::SELF_EXE),
            &self.runc_state,
            runner,
        )
    }

    /// The pid file runc writes for the instance's init process.
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("init.pid")
    }

    /// Where an exec's process spec and pid file go.
    pub fn exec_dir(&self) -> PathBuf {
        self.dir.join("exec")
    }
}

/// The first half of a bundle ([`draft`]): the root filesystem is mounted and the spec built;
/// nothing is written into the shim's per-container files yet.
pub struct Draft {
    spec: oci_spec::runtime::Spec,
    user: crate::config::ContainerUser,
}

/// Prepares the bundle of `launch` for `config` (in the shim), the part that needs nothing
/// of the container's cgroup, log or termination-message file, so the shim makes those
/// meanwhile: the root filesystem, the `subPath` sources, the spec and the user the container
/// runs as. `pid` is the container's PID namespace, resolved by the shim from
/// [`OciLaunch::pid`]. [`finish`] completes it. On error nothing of the root filesystem is
/// left.
///
/// # Errors
///
/// The kubelet's `CreateContainerConfigError` (`runAsNonRoot`, ...) or containerd's
/// `CreateContainerError` (the image's user, no command, a failed mount).
pub fn draft(
    launch: &OciLaunch,
    config: &ContainerConfig,
    cgroups_path: &str,
    pid: Namespace,
) -> Result<Draft, LaunchError> {
    let result = draft_inner(launch, config, cgroups_path, pid);
    if result.is_err() {
        let _ = rootfs::remove_rootfs(&launch.dir);
    }
    result
}

/// Completes [`draft`] once the container's cgroup and termination-message file exist: the
/// cgroup view (youki), the spec written as `<dir>/config.json`, and the termination-message
/// file made the container user's. On error nothing of the root filesystem is left.
///
/// # Errors
///
/// containerd's `CreateContainerError` (the cgroup view, the spec, the file's owner).
pub fn finish(
    launch: &OciLaunch,
    config: &ContainerConfig,
    draft: Draft,
) -> Result<Prepared, LaunchError> {
    let result = finish_inner(launch, config, draft);
    if result.is_err() {
        // The cgroup view too (`spec::cgroup_mount::rewrite_prepared`).
        let _ = rootfs::remove_rootfs(&launch.dir);
    }
    result
}

/// Undoes a bundle at `dir` that will not be used ([`draft`]ed or [`finish`]ed for a start
/// that failed before it): its root filesystem and cgroup view.
///
/// # Errors
///
/// The root filesystem cannot be unmounted or removed.
pub fn abandon(dir: &Path) -> io::Result<()> {
    rootfs::remove_rootfs(dir)
}

fn draft_inner(
    launch: &OciLaunch,
    config: &ContainerConfig,
    cgroups_path: &str,
    pid: Namespace,
) -> Result<Draft, LaunchError> {
    let fs = rootfs::mount_rootfs(&launch.dir, &launch.layers, Strategy::Overlay).map_err(|e| {
        LaunchError::create(format!(
            "failed to create containerd container: mounting the image's layers: {e}"
        ))
    })?;
    let users = UserDb::read(&fs.path).map_err(|e| {
        LaunchError::create(format!(
            "reading the image's /etc/passwd and /etc/group: {e}"
        ))
    })?;
    // Volumes (the termination-message file is the spec's own mount, not a volume).
    let mut mounts = Vec::new();
    let volumes = config
        .mounts
        .iter()
        .filter(|m| m.source != config.termination_message_host_path);
    for (index, m) in volumes.enumerate() {
        let host_path = if m.sub_path.as_os_str().is_empty() {
            m.source.clone()
        } else {
            rootfs::prepare_sub_path(&launch.dir, index, &m.source, &m.sub_path).map_err(|e| {
                LaunchError::create(format!(
                    "failed to prepare subPath for volumeMount of container {:?}: {e}",
                    config.name
                ))
            })?
        };
        mounts.push(ContainerMount {
            host_path,
            container_path: m.target.clone(),
            read_only: m.read_only,
            propagation: spec::mounts::Propagation::Private,
        });
    }
    let join = |path: &Option<PathBuf>| match path {
        Some(p) => Namespace::Join(p.clone()),
        None => Namespace::Host,
    };
    let namespaces = PodNamespaces {
        network: join(&launch.network),
        ipc: join(&launch.ipc),
        uts: join(&launch.uts),
        pid,
    };
    let pod_files = PodFiles {
        hostname: launch.hostname_file.clone(),
        hosts: launch.hosts.clone(),
        resolv_conf: launch.resolv_conf.clone(),
        shm: None,
        termination_message: Some(config.termination_message_host_path.clone()),
    };
    let host =
        host_facts().map_err(|e| LaunchError::create(format!("reading the node's facts: {e}")))?;
    let spec = spec::build_spec(&SpecInput {
        pod: &launch.pod,
        container: &launch.container,
        container_id: &launch.id,
        image: launch.image.as_ref(),
        rootfs: &fs.path,
        users: &users,
        env: &launch.env,
        mounts: &mounts,
        pod_files: &pod_files,
        namespaces: &namespaces,
        cgroups_path,
        hostname: &launch.hostname,
        seccomp_localhost: None,
        host,
    })?;
    // The termination-message file belongs to the container's user alone (0600): `finish`
    // gives it to this user.
    let user = resolve_user(
        &launch.pod,
        &launch.container,
        launch.image.as_ref().and_then(|c| c.user().as_deref()),
        &users,
    )
    .map_err(|e| match e {
        UserError::Config(m) => LaunchError {
            reason: "CreateContainerConfigError",
            message: m,
        },
        UserError::Runtime(m) => LaunchError::create(m),
    })?;
    Ok(Draft {
        spec,
        user: crate::config::ContainerUser {
            uid: user.uid,
            gid: user.gid,
            groups: user.additional_gids,
        },
    })
}

fn finish_inner(
    launch: &OciLaunch,
    config: &ContainerConfig,
    draft: Draft,
) -> Result<Prepared, LaunchError> {
    let Draft { mut spec, user } = draft;
    if launch.executor == super::executor::RuncMode::Youki {
        // runc lays `/sys/fs/cgroup` out itself; libcontainer cannot for every container
        // (see `spec::cgroup_mount`), and is slower at it: the shim lays it out (binds of the
        // container's cgroup, which exists now).
        let view = spec::cgroup_mount::view_dir(&launch.dir);
        spec::cgroup_mount::rewrite_prepared(&mut spec, &view).map_err(LaunchError::create)?;
    }
    // The container's stdio is the shim's (pipes, or a terminal it holds): runc passes it
    // through rather than making a terminal of its own.
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_terminal(Some(false));
    spec.set_process(Some(process.clone()));
    let path = launch.dir.join("config.json");
    spec.save(&path)
        .map_err(|e| LaunchError::create(format!("writing {}: {e}", path.display())))?;
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(
            &config.termination_message_host_path,
            Some(user.uid),
            Some(user.gid),
        )
        .map_err(|e| LaunchError::create(format!("owning the termination-message file: {e}")))?;
    }
    Ok(Prepared {
        bundle: launch.dir.clone(),
        process,
        user,
    })
}

/// The node's facts, read once per process: a shim's do not change while it lives (its own
/// capabilities and `oom_score_adj`, the node's memory, its cgroup mounts).
fn host_facts() -> io::Result<&'static HostFacts> {
    static FACTS: std::sync::OnceLock<HostFacts> = std::sync::OnceLock::new();
    if let Some(facts) = FACTS.get() {
        return Ok(facts);
    }
    let facts = HostFacts::detect()?;
    Ok(FACTS.get_or_init(|| facts))
}

/// After a create that failed: the OCI runtime forgets the container (killing whatever of it
/// runs, its state and cgroup), the root filesystem and the instance's directory go.
///
/// # Errors
///
/// The root filesystem cannot be unmounted or removed.
pub fn cleanup<R: super::executor::CommandRunner>(launch: &OciLaunch, runner: R) -> io::Result<()> {
    remove(launch, |runc| runc.delete(&launch.id, true), runner)
}

/// [`cleanup`] after the instance's exit, once its init process was reaped and its cgroup
/// (`cgroups_path`) killed ([`OciExecutor::delete_exited`]).
///
/// # Errors
///
/// The root filesystem cannot be unmounted or removed.
pub fn cleanup_exited<R: super::executor::CommandRunner>(
    launch: &OciLaunch,
    cgroups_path: &str,
    runner: R,
) -> io::Result<()> {
    remove(
        launch,
        |runc| runc.delete_exited(&launch.id, cgroups_path),
        runner,
    )
}

fn remove<R: super::executor::CommandRunner>(
    launch: &OciLaunch,
    delete: impl FnOnce(&super::executor::Runc<R>) -> Result<(), super::executor::ExecutorError>,
    runner: R,
) -> io::Result<()> {
    // First: its binds would keep the cgroups the delete removes alive.
    spec::cgroup_mount::remove_view(&spec::cgroup_mount::view_dir(&launch.dir));
    if let Err(e) = delete(&launch.runc(runner)) {
        eprintln!("podvisor shim: runc delete {}: {e}", launch.id);
    }
    rootfs::remove_rootfs(&launch.dir)
}

#[cfg(test)]
mod tests {
    use super::PidNamespace;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
            .unwrap()
    }

    /// The kubelet's `generateLinuxContainerConfig`: an ephemeral container's target replaces
    /// the `CONTAINER` mode only; `POD` and `NODE` stay; regular containers, and ephemeral
    /// ones without a target, get the pod's mode.
    #[test]
    fn an_ephemeral_container_joins_its_target_where_each_container_has_its_own() {
        let spec = |extra: serde_json::Value| {
            let mut s = serde_json::json!({
                "containers": [{"name": "app", "image": "busybox"}],
                "ephemeralContainers": [
                    {"name": "dbg", "image": "busybox", "targetContainerName": "app"},
                    {"name": "alone", "image": "busybox"},
                ],
            });
            s.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            pod(s)
        };
        let plain = spec(serde_json::json!({}));
        assert_eq!(
            PidNamespace::for_container(&plain, "dbg"),
            PidNamespace::Target("app".to_owned())
        );
        assert_eq!(
            PidNamespace::for_container(&plain, "alone"),
            PidNamespace::Container
        );
        assert_eq!(
            PidNamespace::for_container(&plain, "app"),
            PidNamespace::Container
        );
        let shared = spec(serde_json::json!({"shareProcessNamespace": true}));
        assert_eq!(
            PidNamespace::for_container(&shared, "dbg"),
            PidNamespace::Pod
        );
        let host = spec(serde_json::json!({"hostPID": true}));
        assert_eq!(
            PidNamespace::for_container(&host, "dbg"),
            PidNamespace::Node
        );
    }
}
