//! A container's OCI runtime spec (`config.json`), built from the pod, the container, the
//! image's config and what the node prepared, the way the kubelet asks containerd's CRI
//! plugin for a container and containerd writes the spec for runc.
//!
//! Pure: [`build_spec`] does no IO. What needs the machine comes in as values: the image's
//! user database ([`UserDb::read`](super::user::UserDb::read)), the node's facts
//! ([`HostFacts::detect`]), the environment the kubelet computes
//! ([`crate::config::kubelet_environment`]), mounts whose host paths are already resolved.
//!
//! The rules, each upstream's:
//! - process: `command` replaces `ENTRYPOINT` and drops `CMD`, `args` alone replace `CMD`,
//!   neither runs `ENTRYPOINT` + `CMD` (containerd `WithProcessArgs`); nothing at all is
//!   containerd's `no command specified`;
//! - environment: `PATH` (containerd's default), `HOSTNAME`, the image's `Env`, then the
//!   kubelet's variables, each name once at its first position with its last value;
//! - working directory: `workingDir`, else the image's `WorkingDir`, else `/`;
//! - user: [`super::user`]; capabilities, seccomp, masked paths: [`security`]; cgroup
//!   resources and `oomScoreAdj`: [`resources`] (the score clamped to the runtime's own, as
//!   containerd's `restrict_oom_score_adj`); mounts: [`mounts`];
//! - `readOnlyRootFilesystem` → `root.readonly`; `allowPrivilegeEscalation: false` →
//!   `noNewPrivileges` (the kubelet's `AddNoNewPrivileges`); `tty` → `terminal`;
//! - namespaces: a new mount namespace (and cgroup namespace on cgroup v2), the pod's
//!   network, IPC and UTS namespaces joined by path (or the host's), the PID namespace
//!   private, the pod's (`shareProcessNamespace`) or the host's;
//! - `hostname` only where the container gets a UTS namespace of its own (a joined one is the
//!   sandbox's to name); no `rlimits`: like containerd's CRI plugin, containers inherit the
//!   runtime's limits (this machine cannot raise them anyway).
//!
//! Not done: AppArmor and SELinux labels, host devices for privileged containers, sysctls
//! (the sandbox's), hugepages, the per-CPU `thermal_throttle` masks of newer kubelets.

pub mod cgroup_mount;
pub mod mounts;
pub mod resources;
pub mod security;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use oci_spec::image::Config as ImageConfig;
use oci_spec::runtime::{
    Capabilities, LinuxBuilder, LinuxNamespace, LinuxNamespaceBuilder, LinuxNamespaceType, Process,
    ProcessBuilder, RootBuilder, Spec, SpecBuilder, UserBuilder,
};

pub use mounts::{ContainerMount, PodFiles, Propagation};

use super::user::{ResolvedUser, UserDb, UserError, resolve_user};
use crate::config::{DEFAULT_PATH, DEFAULT_TERMINATION_MESSAGE_PATH, merge_environment};

/// The OCI runtime-spec version written.
pub const OCI_VERSION: &str = "1.0.2";

/// Why no spec could be built, with the kubelet's reason for the container's `waiting` state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The kubelet refuses the container before asking the runtime (`runAsNonRoot`, an
    /// invalid id or quantity): `CreateContainerConfigError`.
    #[error("{0}")]
    Config(String),
    /// The runtime cannot make the spec (no command, an unknown user or capability):
    /// `CreateContainerError`. The message is the bare cause; [`build_spec`] words it as
    /// containerd (`failed to generate container "<id>" spec: failed to generate spec: …`).
    #[error("{0}")]
    Create(String),
}

impl SpecError {
    /// The container's waiting reason.
    pub fn reason(&self) -> &'static str {
        match self {
            SpecError::Config(_) => "CreateContainerConfigError",
            SpecError::Create(_) => "CreateContainerError",
        }
    }

    pub(crate) fn internal(e: impl std::fmt::Display) -> SpecError {
        SpecError::Create(e.to_string())
    }
}

/// A namespace of the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespace {
    /// The host's (no entry in the spec).
    Host,
    /// A new one, the container's own.
    Private,
    /// An existing one, joined through this path (`/proc/<pid>/ns/net`, a bind-mounted
    /// namespace file).
    Join(PathBuf),
}

/// The namespaces a container shares with its pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNamespaces {
    /// The pod's network namespace (`Host` for `hostNetwork`).
    pub network: Namespace,
    /// The pod's IPC namespace (`Host` for `hostIPC`).
    pub ipc: Namespace,
    /// The pod's UTS namespace (`Host` with `hostNetwork`).
    pub uts: Namespace,
    /// `Private` by default, the pod's with `shareProcessNamespace`, `Host` for `hostPID`.
    pub pid: Namespace,
}

impl Default for PodNamespaces {
    /// Every namespace private.
    fn default() -> Self {
        PodNamespaces {
            network: Namespace::Private,
            ipc: Namespace::Private,
            uts: Namespace::Private,
            pid: Namespace::Private,
        }
    }
}

/// Facts of the node the spec depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// The runtime's own capabilities: what privileged containers and `add: [ALL]` get.
    pub capabilities: Capabilities,
    /// The runtime's own `oom_score_adj`: a container's is never lower (a lower one needs
    /// `CAP_SYS_RESOURCE`, which this machine does not have).
    pub oom_score_adj_min: i32,
    /// The node's memory in bytes (the `Burstable` OOM score).
    pub memory_capacity: Option<u64>,
    /// cgroup v2 only (no v1 hierarchies).
    pub cgroup_v2: bool,
    /// The memory controller can limit swap (`memory.memsw.*` on v1, `memory.swap.max` on v2).
    pub swap_controller: bool,
    /// The kubelet's `podPidsLimit`, applied to each container here; `None`: unlimited.
    pub pids_limit: Option<i64>,
}

impl HostFacts {
    /// Reads the facts of this machine: `/proc/self/status`, `/proc/self/oom_score_adj`,
    /// `/proc/meminfo` and the cgroup mounts.
    pub fn detect() -> std::io::Result<HostFacts> {
        let oom = std::fs::read_to_string("/proc/self/oom_score_adj")?;
        let meminfo = std::fs::read_to_string("/proc/meminfo")?;
        let memory_capacity = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024);
        let mode = crate::cgroup::detect();
        let cgroup_v2 = matches!(mode, crate::cgroup::CgroupMode::Unified { .. });
        let swap_controller = if cgroup_v2 {
            // The root has no memory.swap.max: the kubelet looks in its own cgroup.
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
            own.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .is_some_and(|p| {
                    Path::new("/sys/fs/cgroup")
                        .join(p.trim_start_matches('/'))
                        .join("memory.swap.max")
                        .exists()
                })
        } else {
            Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists()
        };
        Ok(HostFacts {
            capabilities: security::current_capabilities()?,
            oom_score_adj_min: oom.trim().parse().unwrap_or(0),
            memory_capacity,
            cgroup_v2,
            swap_controller,
            pids_limit: None,
        })
    }
}

/// Everything one container's spec is built from.
#[derive(Debug, Clone, Copy)]
pub struct SpecInput<'a> {
    /// The pod (defaulted).
    pub pod: &'a Pod,
    /// The container (defaulted).
    pub container: &'a Container,
    /// The container's ID, for containerd's error wording.
    pub container_id: &'a str,
    /// The image's config, `None` for an image without one.
    pub image: Option<&'a ImageConfig>,
    /// The mounted root filesystem (`root.path`).
    pub rootfs: &'a Path,
    /// The image's `/etc/passwd` and `/etc/group`.
    pub users: &'a UserDb,
    /// The kubelet's environment for the container ([`crate::config::kubelet_environment`]).
    pub env: &'a [(String, String)],
    /// Volume mounts with resolved host paths (`subPath` included), the kubelet's
    /// `/etc/hosts` among them when it manages one.
    pub mounts: &'a [ContainerMount],
    /// The pod's files and the termination-message file.
    pub pod_files: &'a PodFiles,
    /// The namespaces to join.
    pub namespaces: &'a PodNamespaces,
    /// `linux.cgroupsPath` (for runc's cgroupfs driver: `/podvisor/<pod uid>/<container>`).
    pub cgroups_path: &'a str,
    /// The pod's hostname: `HOSTNAME`, and the UTS name when the container has its own.
    pub hostname: &'a str,
    /// The JSON text of the `Localhost` seccomp profile, when the container asks for one.
    pub seccomp_localhost: Option<&'a str>,
    /// Facts of the node.
    pub host: &'a HostFacts,
}

/// Builds the container's runtime spec. See the module documentation for the rules.
pub fn build_spec(input: &SpecInput<'_>) -> Result<Spec, SpecError> {
    build(input).map_err(|e| match e {
        SpecError::Create(m) => SpecError::Create(format!(
            "failed to generate container {:?} spec: failed to generate spec: {m}",
            input.container_id
        )),
        config @ SpecError::Config(_) => config,
    })
}

fn build(input: &SpecInput<'_>) -> Result<Spec, SpecError> {
    let SpecInput { pod, container, .. } = *input;
    let image = input.image;
    let sc = container.security_context.as_ref();
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);
    let read_only_root = sc
        .and_then(|s| s.read_only_root_filesystem)
        .unwrap_or(false);

    // The kubelet's own checks come first (generateContainerConfig).
    let memory_limit = crate::config::memory_limit(container).map_err(SpecError::Config)?;
    let user = resolve_user(
        pod,
        container,
        image.and_then(|i| i.user().as_deref()),
        input.users,
    )
    .map_err(|e| match e {
        UserError::Config(m) => SpecError::Config(m),
        UserError::Runtime(m) => SpecError::Create(m),
    })?;

    let (command, args) = crate::config::expand_command_and_args(container, input.env);
    let argv = process_args(command, args, image)?;
    let env = environment(input.hostname, image, input.env);
    let cwd = container
        .working_dir
        .clone()
        .filter(|w| !w.is_empty())
        .or_else(|| {
            image
                .and_then(|i| i.working_dir().clone())
                .filter(|w| !w.is_empty())
        })
        .unwrap_or_else(|| "/".to_owned());

    let capabilities = security::capabilities(container, privileged, &input.host.capabilities)?;
    let effective = capabilities.effective().clone().unwrap_or_default();
    let no_new_privileges = sc.and_then(|s| s.allow_privilege_escalation) == Some(false);
    let oom_score_adj = resources::oom_score_adj(pod, container, input.host.memory_capacity)
        .max(input.host.oom_score_adj_min);

    // The builders start from oci-spec's defaults (a `youki` hostname, a 1024 file limit):
    // whatever is not set here is cleared below.
    let mut process = ProcessBuilder::default()
        .terminal(container.tty.unwrap_or(false))
        .user(oci_user(&user)?)
        .args(argv)
        .env(
            env.into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        )
        .cwd(cwd)
        .capabilities(capabilities)
        .no_new_privileges(no_new_privileges)
        .oom_score_adj(oom_score_adj)
        .build()
        .map_err(SpecError::internal)?;
    process.set_rlimits(None);
    // Absent is false (the runtime spec); youki's libcontainer loads seccomp while it still
    // holds CAP_SYS_ADMIN only when the field is absent, and an explicit false would have it
    // load the filter after dropping capabilities, which the kernel refuses.
    if !no_new_privileges {
        process.set_no_new_privileges(None);
    }

    let termination_message_path = container
        .termination_message_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_TERMINATION_MESSAGE_PATH);
    let (mounts, root_propagation) = mounts::mounts(
        input.mounts,
        input.pod_files,
        termination_message_path,
        read_only_root,
        privileged,
    )?;
    let (masked, readonly) = security::proc_paths(container, privileged);
    let seccomp = security::seccomp(
        pod,
        container,
        privileged,
        &effective,
        input.seccomp_localhost,
    )?;

    let mut linux = LinuxBuilder::default()
        .namespaces(namespaces(input.namespaces, input.host.cgroup_v2)?)
        .resources(resources::linux_resources(
            container,
            memory_limit,
            privileged,
            input.host,
        )?)
        .cgroups_path(PathBuf::from(input.cgroups_path))
        .masked_paths(masked)
        .readonly_paths(readonly);
    if let Some(seccomp) = seccomp {
        linux = linux.seccomp(seccomp);
    }
    if let Some(propagation) = root_propagation {
        linux = linux.rootfs_propagation(propagation);
    }

    let mut spec = SpecBuilder::default()
        .version(OCI_VERSION)
        .root(
            RootBuilder::default()
                .path(input.rootfs)
                .readonly(read_only_root)
                .build()
                .map_err(SpecError::internal)?,
        )
        .process(process)
        .mounts(mounts)
        .linux(linux.build().map_err(SpecError::internal)?)
        .annotations(annotations(pod, container, image))
        .build()
        .map_err(SpecError::internal)?;
    spec.set_hostname(
        (input.namespaces.uts == Namespace::Private).then(|| input.hostname.to_owned()),
    );
    Ok(spec)
}

/// The process's argv (containerd `WithProcessArgs`): `command` (else the image's
/// `ENTRYPOINT`, unless it is the single empty string `[""]` that clears it), then `args`
/// (else, only when `command` is empty, the image's `CMD`).
pub fn process_args(
    command: Vec<String>,
    args: Vec<String>,
    image: Option<&ImageConfig>,
) -> Result<Vec<String>, SpecError> {
    let (mut command, mut args) = (command, args);
    if command.is_empty() {
        if args.is_empty() {
            args = image.and_then(|i| i.cmd().clone()).unwrap_or_default();
        }
        let entrypoint = image
            .and_then(|i| i.entrypoint().clone())
            .unwrap_or_default();
        if !(entrypoint.len() == 1 && entrypoint[0].is_empty()) {
            command = entrypoint;
        }
    }
    if command.is_empty() && args.is_empty() {
        return Err(SpecError::Create("no command specified".into()));
    }
    command.extend(args);
    Ok(command)
}

/// `PATH`, `HOSTNAME`, the image's `Env` (entries without `=` are ignored), then the
/// kubelet's variables, merged name by name.
pub fn environment(
    hostname: &str,
    image: Option<&ImageConfig>,
    kubelet_env: &[(String, String)],
) -> Vec<(String, String)> {
    let image_env = image
        .and_then(|i| i.env().clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        });
    merge_environment(
        vec![("PATH".to_owned(), DEFAULT_PATH.to_owned())],
        std::iter::once(("HOSTNAME".to_owned(), hostname.to_owned()))
            .chain(image_env)
            .chain(kubelet_env.iter().cloned()),
    )
}

/// The process of an exec in a container whose init process is `init` (from
/// [`build_spec`]): the same user, environment, working directory, capabilities and
/// `noNewPrivileges`, running `argv`; with `tty` a terminal and `TERM=xterm` (containerd's
/// exec does both).
pub fn exec_process(init: &Process, argv: Vec<String>, tty: bool) -> Process {
    let mut process = init.clone();
    process.set_args(Some(argv));
    process.set_terminal(Some(tty));
    if tty {
        let env = init
            .env()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
            })
            .collect();
        let env = merge_environment(env, [("TERM".to_owned(), "xterm".to_owned())]);
        process.set_env(Some(
            env.into_iter().map(|(k, v)| format!("{k}={v}")).collect(),
        ));
    }
    process
}

fn oci_user(user: &ResolvedUser) -> Result<oci_spec::runtime::User, SpecError> {
    UserBuilder::default()
        .uid(user.uid)
        .gid(user.gid)
        .additional_gids(user.additional_gids.clone())
        .build()
        .map_err(SpecError::internal)
}

fn namespaces(ns: &PodNamespaces, cgroup_v2: bool) -> Result<Vec<LinuxNamespace>, SpecError> {
    let entry = |typ: LinuxNamespaceType, path: Option<&PathBuf>| {
        let mut b = LinuxNamespaceBuilder::default().typ(typ);
        if let Some(path) = path {
            b = b.path(path.clone());
        }
        b.build().map_err(SpecError::internal)
    };
    let mut out = vec![entry(LinuxNamespaceType::Mount, None)?];
    for (typ, which) in [
        (LinuxNamespaceType::Network, &ns.network),
        (LinuxNamespaceType::Ipc, &ns.ipc),
        (LinuxNamespaceType::Uts, &ns.uts),
        (LinuxNamespaceType::Pid, &ns.pid),
    ] {
        match which {
            Namespace::Host => {}
            Namespace::Private => out.push(entry(typ, None)?),
            Namespace::Join(path) => out.push(entry(typ, Some(path))?),
        }
    }
    if cgroup_v2 {
        out.push(entry(LinuxNamespaceType::Cgroup, None)?);
    }
    Ok(out)
}

/// containerd's CRI annotations, so tools that know them can tell containers apart.
fn annotations(
    pod: &Pod,
    container: &Container,
    image: Option<&ImageConfig>,
) -> HashMap<String, String> {
    let meta = &pod.metadata;
    let mut a = HashMap::from([
        (
            "io.kubernetes.cri.container-type".to_owned(),
            "container".to_owned(),
        ),
        (
            "io.kubernetes.cri.container-name".to_owned(),
            container.name.clone(),
        ),
        (
            "io.kubernetes.cri.sandbox-name".to_owned(),
            meta.name.clone().unwrap_or_default(),
        ),
        (
            "io.kubernetes.cri.sandbox-namespace".to_owned(),
            meta.namespace.clone().unwrap_or_default(),
        ),
        (
            "io.kubernetes.cri.sandbox-uid".to_owned(),
            meta.uid.clone().unwrap_or_default(),
        ),
    ]);
    if let Some(name) = container.image.as_ref().filter(|_| image.is_some()) {
        a.insert("io.kubernetes.cri.image-name".to_owned(), name.clone());
    }
    a
}

#[cfg(test)]
mod tests;
