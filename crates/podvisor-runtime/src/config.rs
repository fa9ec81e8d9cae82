//! How a Kubernetes container becomes a host process: argv, environment, working directory,
//! mounts, memory limit and file locations, computed the way the kubelet computes them
//! (`makeEnvironmentVariables`, `ExpandContainerCommandAndArgs`, `makeMounts`).
//!
//! Pure: no IO, no clock. Whatever needs the machine (the node's allocatable resources, the
//! real pod IP) comes in through [`BuildOptions`] or the pod's status. An `Err` from
//! [`build`] is the message of a `CreateContainerConfigError`.
//!
//! Deliberate differences from a kubelet with containerd, all because there is no image and
//! no API store yet:
//! - a container without `command` is an error (there is no image entrypoint to fall back to);
//! - `secretKeyRef`, `configMapKeyRef` and `envFrom` read the objects the node agent fetched
//!   ([`objects::PodObjects`] in [`BuildOptions`]); a missing one is `configmap "x" not found`
//!   unless `optional: true`;
//! - only `emptyDir` and `hostPath` volumes can be mounted;
//! - of the service-link variables only the `kubernetes` Service's (`KUBERNETES_SERVICE_HOST`,
//!   ...) are injected, when the node knows the API's address: podvisor serves no Services;
//! - like containerd's default spec, `PATH` (and `HOSTNAME`, from `spec.nodeName`) are set
//!   unless the container defines them;
//! - without an image user, a container without `runAsUser` runs as uid 0 (and gid 0 without
//!   `runAsGroup`), so `runAsNonRoot: true` needs an explicit non-zero `runAsUser`
//!   ([`security`]); `HOME` is not set here but by the shim ([`security::home_dir`]).

mod env;
pub mod objects;
pub mod projection;
pub mod quantity;
pub mod security;
mod volumes;

use std::collections::HashMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};

use crate::PodPaths;
use env::{limit, make_environment, parse_quantity, with_runtime_defaults};
pub use security::ContainerUser;
use volumes::make_mounts;
pub use volumes::{PodVolume, PodVolumeKind, pod_volumes};

/// Everything the process backend needs to start one container instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerConfig {
    /// The container name.
    pub name: String,
    /// `command` followed by `args`, with `$(VAR)` references expanded.
    pub argv: Vec<String>,
    /// The process environment, in declaration order, each name once (a later definition
    /// replaces the value of an earlier one in place, as containerd's `WithEnv` does).
    pub env: Vec<(String, String)>,
    /// `workingDir`, if set and non-empty.
    pub working_dir: Option<String>,
    /// Mounts to make in the container's mount namespace, in order; the termination-message
    /// file is last.
    pub mounts: Vec<Mount>,
    /// `resources.limits.memory` in bytes (rounded up); `None` when unset or zero.
    pub memory_limit: Option<u64>,
    /// Host file bound at [`ContainerConfig::termination_message_path`]:
    /// `<pod_dir>/containers/<name>/<instance>/termination-log`.
    pub termination_message_host_path: PathBuf,
    /// `terminationMessagePath` inside the container (default `/dev/termination-log`).
    pub termination_message_path: String,
    /// The CRI log file: `<log_dir>/<name>/<restart_count>.log`.
    pub log_path: PathBuf,
    /// The cgroup parent, relative to each hierarchy's root: `podvisor/<pod uid>`.
    pub cgroup_parent: String,
    /// The instance id this configuration was built for.
    pub instance: u64,
    /// Who the container's processes (and its exec probes and hooks) run as.
    #[serde(default)]
    pub user: ContainerUser,
    /// The attempt (`restartCount`) this instance is: the shim starts each attempt of a
    /// container once.
    #[serde(default)]
    pub restart_count: Option<i32>,
    /// `stdin`, `stdinOnce` and `tty`: what the container's own stdio is, for `kubectl attach`.
    #[serde(default)]
    pub stdio: ContainerStdio,
    /// Run as an OCI container from an image (the `oci` runtime class) rather than as a host
    /// process; `argv`, `env`, `working_dir` and `user` are then the image's and the spec's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<Box<crate::oci::launch::OciLaunch>>,
    /// The pod's memory limit (`ResourceConfigForPod`: pod-level `resources.limits.memory`,
    /// else the containers' when every one declares one), set on the pod's cgroup
    /// ([`ContainerConfig::cgroup_parent`]).
    #[serde(default)]
    pub pod_memory_limit: Option<u64>,
}

/// A container's own standard streams (`stdin`, `stdinOnce`, `tty` of its spec).
///
/// Without `stdin` the container reads `/dev/null`. With it, its stdin is a pipe the shim
/// holds open for attaches, so the container never sees end-of-file before someone attaches
/// (with `stdinOnce`, the first attach's end of input closes it for good). With `tty`, stdin,
/// stdout and stderr are one pseudo-terminal, its controlling terminal; its output is logged
/// as stdout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerStdio {
    /// `stdin`.
    pub stdin: bool,
    /// `stdinOnce`.
    pub stdin_once: bool,
    /// `tty`.
    pub tty: bool,
}

/// One mount in the container's mount namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// The host path to bind (file or directory): the volume's directory, the
    /// termination-message file.
    pub source: PathBuf,
    /// `subPath` (or the expanded `subPathExpr`) inside [`Mount::source`]; empty when none.
    /// Containers can write there, so it is resolved beneath the source and never through a
    /// symbolic link out of it.
    #[serde(default)]
    pub sub_path: PathBuf,
    /// Where it appears (`mountPath`).
    pub target: PathBuf,
    /// `readOnly`.
    pub read_only: bool,
    /// What backs it.
    pub kind: MountKind,
}

/// What backs a [`Mount`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MountKind {
    /// A bind mount of `source`.
    Bind,
    /// `source` lives in a memory-backed `emptyDir` (`medium: Memory`). The kubelet mounts one
    /// tmpfs per volume at the volume directory and every container binds it, so containers
    /// share its content: the sandbox should mount a tmpfs of `size` bytes at the volume's
    /// [`PodVolume::path`] (see [`pod_volumes`]) and the container then binds `source` like a
    /// [`MountKind::Bind`]. `size` is `None` when the kernel default (half of RAM) applies.
    Tmpfs {
        /// The tmpfs size in bytes, as the kubelet computes it.
        size: Option<u64>,
    },
}

/// Machine facts the kubelet uses while building a container's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildOptions {
    /// The node's allocatable resources.
    pub node_allocatable: NodeAllocatable,
    /// The ConfigMaps and Secrets the node agent fetched for this start.
    pub objects: objects::PodObjects,
}

/// The node's allocatable resources. The kubelet substitutes them for unset limits in
/// `resourceFieldRef` (`limits.cpu`, `limits.memory`, `limits.ephemeral-storage`) and uses the
/// memory as the upper bound of memory-backed `emptyDir` sizes. Unknown values behave like a
/// node object without that allocatable entry (an unset limit reads as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeAllocatable {
    /// CPU in millicores.
    pub cpu_millis: Option<u64>,
    /// Memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage_bytes: Option<u64>,
}

impl NodeAllocatable {
    /// This machine's allocatable cpu and memory as a kubelet with default settings computes
    /// them: every cpu, and the memory less the default hard eviction threshold
    /// (`memory.available<100Mi`), nothing reserved for the system (in-place resize checks a
    /// resize against it). Ephemeral storage is left unknown.
    #[must_use]
    pub fn detect() -> NodeAllocatable {
        const EVICTION_HARD: u64 = 100 << 20;
        let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map(|kb| (kb * 1024).saturating_sub(EVICTION_HARD));
        NodeAllocatable {
            cpu_millis: (cpus > 0).then(|| cpus as u64 * 1000),
            memory_bytes: memory,
            ephemeral_storage_bytes: None,
        }
    }

    /// [`NodeAllocatable::detect`], once per process, as the kubelet reads its machine's
    /// capacity once at start: the volume set-up of every start asks for it (a read of
    /// `/proc/meminfo`, and of the cgroup and mount tables for the cpus, on the start's path).
    #[must_use]
    pub fn of_this_machine() -> &'static NodeAllocatable {
        static DETECTED: std::sync::OnceLock<NodeAllocatable> = std::sync::OnceLock::new();
        DETECTED.get_or_init(NodeAllocatable::detect)
    }
}

/// The default `terminationMessagePath`.
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// `PATH` when the container does not set one (containerd's default OCI spec).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The pod and host address when `pod.status` has none (the process runtime shares the host
/// network and answers on loopback).
pub const DEFAULT_IP: &str = "127.0.0.1";

/// Builds the configuration of one container instance with default [`BuildOptions`].
/// `Err` is the `CreateContainerConfigError` message.
pub fn build(
    pod: &Pod,
    container: &Container,
    instance: u64,
    restart_count: i32,
    paths: &PodPaths,
) -> Result<ContainerConfig, String> {
    build_with(
        pod,
        container,
        instance,
        restart_count,
        paths,
        &BuildOptions::default(),
    )
}

/// [`build`] with machine facts.
pub fn build_with(
    pod: &Pod,
    container: &Container,
    instance: u64,
    restart_count: i32,
    paths: &PodPaths,
    opts: &BuildOptions,
) -> Result<ContainerConfig, String> {
    build_inner(pod, container, instance, restart_count, paths, opts, false)
}

/// [`build`] for a container that runs from its image (the `oci` class): no `command` runs
/// the image's entrypoint, which the spec resolves ([`crate::oci::spec`]).
pub fn build_for_image(
    pod: &Pod,
    container: &Container,
    instance: u64,
    restart_count: i32,
    paths: &PodPaths,
    opts: &BuildOptions,
) -> Result<ContainerConfig, String> {
    build_inner(pod, container, instance, restart_count, paths, opts, true)
}

fn build_inner(
    pod: &Pod,
    container: &Container,
    instance: u64,
    restart_count: i32,
    paths: &PodPaths,
    opts: &BuildOptions,
    image: bool,
) -> Result<ContainerConfig, String> {
    let command = container.command.as_deref().unwrap_or_default();
    if command.is_empty() && !image {
        return Err(format!(
            "container {:?} has no command: the process runtime runs host processes and cannot \
             run an image's entrypoint; set {}.command, or run the image with the oci runtime \
             (runtimeClassName: oci in the pod, or serve/run --runtime oci)",
            container.name,
            container_field_path(pod, &container.name)
        ));
    }

    let env = make_environment(pod, container, opts)?;
    let env_map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (command, args) = expand_command_and_args(container, &env);
    let argv = command.into_iter().chain(args).collect();

    let mut mounts = make_mounts(pod, container, &env_map, paths, opts)?;
    // After the environment and the mounts, as in the kubelet's `generateContainerConfig`.
    let user = security::container_user(pod, container)?;
    let termination_message_path = match container.termination_message_path.as_deref() {
        Some(p) if !p.is_empty() => p.to_owned(),
        _ => DEFAULT_TERMINATION_MESSAGE_PATH.to_owned(),
    };
    let termination_message_host_path = paths
        .pod_dir
        .join("containers")
        .join(&container.name)
        .join(instance.to_string())
        .join("termination-log");
    mounts.push(Mount {
        source: termination_message_host_path.clone(),
        sub_path: PathBuf::new(),
        target: PathBuf::from(&termination_message_path),
        read_only: false,
        kind: MountKind::Bind,
    });

    let memory_limit = memory_limit(container)?;

    Ok(ContainerConfig {
        name: container.name.clone(),
        argv,
        env: with_runtime_defaults(pod, container.tty == Some(true), env),
        working_dir: container.working_dir.clone().filter(|w| !w.is_empty()),
        mounts,
        memory_limit,
        termination_message_host_path,
        termination_message_path,
        log_path: paths
            .log_dir
            .join(&container.name)
            .join(format!("{restart_count}.log")),
        cgroup_parent: format!("podvisor/{}", pod_key(pod)),
        instance,
        user,
        restart_count: Some(restart_count),
        stdio: ContainerStdio {
            stdin: container.stdin == Some(true),
            stdin_once: container.stdin_once == Some(true),
            tty: container.tty == Some(true),
        },
        oci: None,
        pod_memory_limit: volumes::pod_memory_limit(pod),
    })
}

/// The environment the kubelet hands the runtime for a container (`makeEnvironmentVariables`:
/// `envFrom`, then `env` with `$(VAR)` expanded and the downward API), in order, each name once.
/// Runtime defaults (`PATH`, `HOSTNAME`, an image's `Env`) are not in it: each backend adds
/// its own. `Err` is the `CreateContainerConfigError` message.
pub fn kubelet_environment(
    pod: &Pod,
    container: &Container,
    opts: &BuildOptions,
) -> Result<Vec<(String, String)>, String> {
    make_environment(pod, container, opts)
}

/// `ExpandContainerCommandAndArgs`: `command` and `args`, each with `$(VAR)` references
/// expanded against `env` (the [`kubelet_environment`]), kept apart because an image's
/// `ENTRYPOINT`/`CMD` fill in whichever is missing.
pub fn expand_command_and_args(
    container: &Container,
    env: &[(String, String)],
) -> (Vec<String>, Vec<String>) {
    let env_map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let lookup = |name: &str| env_map.get(name).map(|v| (*v).to_owned());
    let expand_all = |list: Option<&Vec<String>>| -> Vec<String> {
        list.into_iter()
            .flatten()
            .map(|s| expand(s, lookup))
            .collect()
    };
    (
        expand_all(container.command.as_ref()),
        expand_all(container.args.as_ref()),
    )
}

/// `resources.limits.memory` in bytes; `None` when unset or zero. `Err` is the
/// `CreateContainerConfigError` message of an unparsable quantity.
pub fn memory_limit(container: &Container) -> Result<Option<u64>, String> {
    Ok(match limit(container, "memory") {
        Some(q) => {
            let q = parse_quantity(&q, "resources.limits.memory")?;
            u64::try_from(q.value()).ok().filter(|v| *v > 0)
        }
        None => None,
    })
}

/// Sets each of `overrides` in `base`: a name already there keeps its position and takes the
/// new value, a new name is appended (containerd's `WithEnv`, `replaceOrAppendEnvValues`; the
/// same rule as the kubelet's own environment).
pub fn merge_environment(
    base: Vec<(String, String)>,
    overrides: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    env::merge(base, overrides)
}

/// Expands `$(VAR)` references exactly like Kubernetes
/// (`third_party/forked/golang/expansion`): `$$` is an escaped `$`, `$(NAME)` is replaced by
/// `lookup(NAME)` or left as written when undefined, an unterminated `$(` and any other `$`
/// are copied as they are. References do not nest: in `$(A$(B))` the name is `A$(B`.
pub fn expand(s: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&s[checkpoint..cursor]);
            let rest = &s[cursor + 1..];
            let advance = match rest.as_bytes()[0] {
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest.find(')') {
                    Some(close) => {
                        let name = &rest[1..close];
                        match lookup(name) {
                            Some(value) => out.push_str(&value),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        close + 1
                    }
                    None => {
                        out.push_str("$(");
                        1
                    }
                },
                _ => {
                    // Go copies `$` and the next byte; copying the whole next character keeps
                    // the text valid UTF-8 (identical for ASCII).
                    let c = rest.chars().next().unwrap_or('$');
                    out.push('$');
                    out.push(c);
                    c.len_utf8()
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.push_str(&s[checkpoint.min(s.len())..]);
    out
}

/// Where the container sits in the pod spec, e.g. `spec.initContainers[1]`.
fn container_field_path(pod: &Pod, name: &str) -> String {
    if let Some(spec) = pod.spec.as_ref() {
        if let Some(i) = spec.containers.iter().position(|c| c.name == name) {
            return format!("spec.containers[{i}]");
        }
        if let Some(i) = spec
            .init_containers
            .iter()
            .flatten()
            .position(|c| c.name == name)
        {
            return format!("spec.initContainers[{i}]");
        }
        if let Some(i) = spec
            .ephemeral_containers
            .iter()
            .flatten()
            .position(|c| c.name == name)
        {
            return format!("spec.ephemeralContainers[{i}]");
        }
    }
    "spec.containers[]".to_owned()
}

/// The pod's cgroup key: its uid, else `<namespace>_<name>` for pods that never went through
/// the API server.
fn pod_key(pod: &Pod) -> String {
    match pod.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => uid.to_owned(),
        _ => format!(
            "{}_{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}
