//! The `Runtime` trait and the values that cross it.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

/// Identifies a container instance within its pod (assigned by the lifecycle core).
pub type InstanceId = u64;

/// A running container's log file, as the kubelet's container log manager finds it (CRI
/// `ListContainers` of running containers, each `ContainerStatus.logPath`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLog {
    /// The pod's UID.
    pub pod_uid: String,
    /// The instance.
    pub instance: InstanceId,
    /// Its log file (`<log_dir>/<name>/<restart_count>.log`).
    pub path: PathBuf,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The pod as it is now (the kubelet hands the current pod to every start): labels,
    /// annotations and the rest of the downward API are read from it, not from the pod the
    /// sandbox was created with.
    pub pod: Pod,
    /// The instance id (unique within the pod).
    pub instance: InstanceId,
    /// The container spec (defaulted).
    pub container: Container,
    /// Its restart count: the log file is `<log_dir>/<name>/<restart_count>.log`.
    pub restart_count: i32,
    /// The ConfigMaps and Secrets the container's environment and the pod's volumes refer
    /// to, as the node agent fetched them for this start (missing ones do not exist).
    pub objects: crate::config::objects::PodObjects,
}

/// A started instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// `<runtime>://<id>`, e.g. `podvisor://3f2a...`.
    pub container_id: String,
    /// The host pid of the container's main process.
    pub pid: u32,
    /// When the process started.
    pub started_at: Timestamp,
    /// What was done about the container's image first (`None`: this runtime has no images).
    pub image: Option<ImageReport>,
    /// Who the instance's process runs as (the container status' `user.linux`).
    pub user: Option<crate::config::ContainerUser>,
    /// The image the instance runs, as the runtime names it (`status.containerStatuses[].
    /// imageID`: `name@sha256:…`, or the image's id for one that never came from a
    /// registry); empty for a runtime without images.
    pub image_id: String,
}

/// What a runtime with images did about a container's image before creating it (the
/// kubelet's `EnsureImageExists`), for the `Pulling`/`Pulled` events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageReport {
    /// It was present and the pull policy asked for no pull.
    Present,
    /// It was pulled.
    Pulled {
        /// The pull itself.
        pull: Duration,
        /// From the request to the end, waiting for other pulls included.
        total: Duration,
        /// The image's size in bytes.
        size: u64,
    },
}

/// A failed start (the lifecycle core maps `reason` to the waiting reason, section 2.2; the
/// image reasons are `ErrImagePull`, `ErrImageNeverPull` and `InvalidImageName`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct StartError {
    /// `CreateContainerConfigError`, `CreateContainerError` or `RunContainerError`.
    pub reason: String,
    /// The detail, shown as the waiting message and in the `Failed` event.
    pub message: String,
    /// The container was created and failed to run (containerd records `StartError`, 128).
    pub created: bool,
    /// A pull of the image was tried before the failure (a `Pulling` event is due).
    pub pulling: bool,
}

/// A volume that could not be set up: the `FailedMount` event's
/// `MountVolume.SetUp failed for volume "<volume>" : <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {} : {message}", podvisor_api::gotext::quote(.volume))]
pub struct VolumeError {
    /// `spec.volumes[].name`.
    pub volume: String,
    /// Why (`configmap "x" not found`).
    pub message: String,
}

/// How an instance ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerExit {
    /// Exit code; 128 + n when killed by signal n.
    pub exit_code: i32,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// Killed by the OOM killer in its memory cgroup.
    pub oom_killed: bool,
    /// Process start time.
    pub started_at: Timestamp,
    /// Process exit time (as recorded by the shim, possibly while the agent was down).
    pub finished_at: Timestamp,
    /// The termination-message file's content (the last 4096 bytes), if non-empty.
    pub termination_message: Option<String>,
    /// The last lines of the container log (at most 80 lines / 2048 bytes), for
    /// `FallbackToLogsOnError`.
    pub log_tail: Option<String>,
}

/// Something that happened to a pod's containers, pushed by the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEvent {
    /// An instance exited (recorded durably by the shim before it is reported).
    Exited {
        /// The instance.
        instance: InstanceId,
        /// How it ended.
        exit: ContainerExit,
    },
    /// The sandbox died on its own (for the process backend: its shim was killed) and nothing
    /// of it runs any more. `exits` are the instances that had not reported an exit, in id
    /// order: with the exit the runtime recorded before the death, else killed now (137,
    /// SIGKILL). Nothing more comes from this sandbox; the next `create_sandbox` for the pod
    /// makes a new one.
    SandboxLost {
        /// The instances that ended with the sandbox.
        exits: Vec<(InstanceId, ContainerExit)>,
    },
}

/// The result of running a command inside a container (exec probes and hooks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    /// Exit code (128 + n when killed by signal n).
    pub exit_code: i32,
    /// Stdout followed by stderr, as the kubelet's `RunInContainer` appends them (what exec
    /// probes and hook messages show), at most 10 KiB of each.
    pub output: Vec<u8>,
    /// Stderr alone (what CRI's `ExecSync` error text carries after `exited with N:`).
    pub stderr: Vec<u8>,
    /// The timeout expired and the command's whole process group was killed.
    pub timed_out: bool,
}

/// What a streaming exec (`kubectl exec`) runs and which streams it gets, or what an attach
/// (`kubectl attach`) to the container's own stdio gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The command (empty for an attach).
    pub argv: Vec<String>,
    /// Attach to the container's own stdin, stdout and stderr (its spec's `stdin`, `tty`)
    /// instead of running `argv`. The output is what the container writes from now on; the
    /// input goes to its stdin (with `stdinOnce`, the end of this input closes it). The
    /// session's `exit` resolves (to 0) when it ends: the container exited, or the input
    /// ended without `stdinOnce`.
    pub attach: bool,
    /// Give the command a stdin to write to (else `/dev/null`).
    pub stdin: bool,
    /// Hand its stdout back (else `/dev/null`).
    pub stdout: bool,
    /// Hand its stderr back (else `/dev/null`; with a TTY, stderr is the terminal too).
    pub stderr: bool,
    /// Run it on a new pseudo-terminal, its controlling terminal.
    pub tty: bool,
    /// The terminal's size from the start (with `tty`), so a command that asks at once (`stty
    /// size`) does not read 0x0 before the first resize arrives.
    pub size: Option<TermSize>,
}

/// A terminal size, in characters (`remotecommand.TerminalSize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// One output stream of a streaming exec.
pub type ExecReader = Pin<Box<dyn AsyncRead + Send>>;
/// The input stream of a streaming exec: shutting it down (or dropping it) is end-of-file.
pub type ExecWriter = Pin<Box<dyn AsyncWrite + Send>>;
/// Resizes the terminal of a TTY exec.
pub type ExecResize = Box<dyn Fn(TermSize) -> Result<(), RuntimeError> + Send + Sync>;

/// A running streaming exec. Dropping `exit` before it resolves kills the command's whole
/// process group (the client went away).
pub struct ExecSession {
    /// Its stdin, when asked for.
    pub stdin: Option<ExecWriter>,
    /// Its stdout (with a TTY: the terminal's output), when asked for.
    pub stdout: Option<ExecReader>,
    /// Its stderr, when asked for without a TTY.
    pub stderr: Option<ExecReader>,
    /// With a TTY: sets the terminal's size.
    pub resize: Option<ExecResize>,
    /// Resolves to the exit code (128 + n when killed by signal n) once the command exited.
    /// The output streams may still hold its last bytes.
    pub exit: Pin<Box<dyn Future<Output = Result<i32, RuntimeError>> + Send>>,
}

impl std::fmt::Debug for ExecSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecSession")
            .field("stdin", &self.stdin.is_some())
            .field("stdout", &self.stdout.is_some())
            .field("stderr", &self.stderr.is_some())
            .field("tty", &self.resize.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a streaming exec did not start.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// No running instance of the container (the kubelet's `findContainer` found none).
    #[error("container not found ({0:?})")]
    ContainerNotFound(String),
    /// The runtime could not start the command (containerd-worded, e.g. `failed to exec in
    /// container: failed to start exec "...": OCI runtime exec failed: ...`).
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
}

/// A runtime failure (the engine's own, not the workload's).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// An OS call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The shim could not be reached or answered with an error.
    #[error("shim: {0}")]
    Shim(String),
    /// No such instance in this sandbox.
    #[error("no container instance {0}")]
    NotFound(InstanceId),
    /// Anything else, with a message that says what was being done.
    #[error("{0}")]
    Other(String),
}

/// A sandbox set-up failure (`FailedMount`, `FailedCreatePodSandBox`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SandboxError {
    /// The event reason: `FailedMount` or `FailedCreatePodSandBox`.
    pub reason: &'static str,
    /// The event message.
    pub message: String,
}

/// Where a pod's files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPaths {
    /// `<state>/pods/<uid>`: emptyDirs, termination-message files, the shim socket.
    pub pod_dir: PathBuf,
    /// `<state>/logs/<ns>_<name>_<uid>`.
    pub log_dir: PathBuf,
}

/// One container instance a runtime knows in a pod's sandbox, as recovery reads it (CRI's
/// `ListContainers` for one pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    /// The instance id.
    pub instance: InstanceId,
    /// The container name.
    pub name: String,
    /// The container ID the runtime reported when it started the instance.
    pub container_id: String,
    /// When its process started.
    pub started_at: Timestamp,
    /// How it ended, once it has.
    pub exit: Option<ContainerExit>,
    /// An agent acknowledged the exit: the runtime will not report it again.
    pub acked: bool,
}

/// A pod's sandbox as a restarted agent finds it, before it starts anything for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxState {
    /// The runtime never made a sandbox for the pod on this node (or nothing of it is left).
    Absent,
    /// The sandbox lives: every instance it knows, running or exited. Exits not acknowledged
    /// yet are reported again to the next [`Runtime::create_sandbox`] of the pod.
    Live(Vec<InstanceRecord>),
    /// The sandbox died while no agent watched it. What it left has been killed and every
    /// instance it started has its exit (recorded, else 137 now). The agent takes this as a
    /// lost sandbox ([`RuntimeEvent::SandboxLost`]): those instances ended, the pod needs a
    /// new sandbox.
    Lost(Vec<InstanceRecord>),
}

/// The kubelet's image garbage-collection policy (`imageGCHighThresholdPercent`,
/// `imageGCLowThresholdPercent`, `imageMinimumGCAge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Disk use (percent of the image file system) at which collection starts.
    pub high_threshold_percent: u8,
    /// Disk use collection frees down to.
    pub low_threshold_percent: u8,
    /// Images first seen more recently than this are never collected.
    pub min_age: Duration,
}

impl Default for ImageGcPolicy {
    /// The kubelet's defaults: 85 %, 80 %, 2 minutes.
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
        }
    }
}

/// What one image garbage collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageGcOutcome {
    /// Disk use of the image file system before, in percent.
    pub usage_percent: u64,
    /// Bytes it had to free to reach the low threshold (0 under the high one).
    pub wanted: u64,
    /// Bytes freed.
    pub freed: u64,
    /// The images removed (their ids), least recently used first.
    pub removed: Vec<String>,
}

impl ImageGcOutcome {
    /// The kubelet's error when not enough could be freed (`FreeDiskSpaceFailed`), if so.
    #[must_use]
    pub fn shortfall(&self) -> Option<String> {
        (self.freed < self.wanted).then(|| {
            format!(
                "Failed to garbage collect required amount of images. Attempted to free {} \
                 bytes, but only found {} bytes eligible to free.",
                self.wanted, self.freed
            )
        })
    }
}

/// A container runtime. Implementations must be cheap to share (`Arc` inside) and must never
/// leave a process behind: signals and kills go to a container's whole process group / cgroup.
pub trait Runtime: Send + Sync + 'static {
    /// The backend's handle for one pod.
    type Sandbox: Send + Sync + 'static;

    /// Prepares the pod (directories, volumes, the shim). Exits of the pod's containers are
    /// sent to `events` for as long as the sandbox lives; if it dies on its own (not through
    /// `remove_sandbox`), [`RuntimeEvent::SandboxLost`] is the last event.
    fn create_sandbox(
        &self,
        pod: &Pod,
        events: mpsc::UnboundedSender<RuntimeEvent>,
    ) -> impl Future<Output = Result<Self::Sandbox, SandboxError>> + Send;

    /// Creates and starts one container instance.
    fn start_container(
        &self,
        sandbox: &Self::Sandbox,
        request: StartRequest,
    ) -> impl Future<Output = Result<Started, StartError>> + Send;

    /// Writes what the pod's `configMap` and `secret` volumes must hold now, as `objects`
    /// (fetched by the node agent) say (the kubelet's `MountVolume.SetUp`, run before the
    /// first start and again every sync period; a container's `subPath` mount keeps what it
    /// bound). A runtime without such volumes has nothing to do.
    fn set_up_volumes(
        &self,
        sandbox: &Self::Sandbox,
        pod: &Pod,
        objects: &crate::config::objects::PodObjects,
    ) -> impl Future<Output = Result<(), VolumeError>> + Send {
        let _ = (sandbox, pod, objects);
        std::future::ready(Ok(()))
    }

    /// Sends `signal` (a signal number) to the instance's whole process group.
    fn signal(
        &self,
        sandbox: &Self::Sandbox,
        instance: InstanceId,
        signal: i32,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;

    /// Runs `argv` inside the instance's view (mount namespace, env, working directory). With a
    /// timeout, the command's whole process group is killed when it expires.
    fn exec(
        &self,
        sandbox: &Self::Sandbox,
        instance: InstanceId,
        argv: Vec<String>,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<ExecResult, RuntimeError>> + Send;

    /// Starts `request` inside the instance's view, like [`Runtime::exec`], with its streams
    /// handed back as they are (`kubectl exec`), or attaches to the instance's own stdio
    /// ([`ExecRequest::attach`], `kubectl attach`); see [`ExecSession`]. A command that cannot be
    /// started is an `Err` worded as containerd words it.
    fn exec_stream(
        &self,
        sandbox: &Self::Sandbox,
        instance: InstanceId,
        request: ExecRequest,
    ) -> impl Future<Output = Result<ExecSession, RuntimeError>> + Send {
        let _ = (sandbox, instance, request);
        std::future::ready(Err(RuntimeError::Other(
            "streaming exec is not supported by this runtime".to_owned(),
        )))
    }

    /// A TCP connection to `port` on the pod's loopback (`kubectl port-forward`; CRI
    /// `PortForward`). The default is this host's loopback, for a runtime whose pods share the
    /// host's network.
    fn port_forward(
        &self,
        sandbox: &Self::Sandbox,
        port: u16,
    ) -> impl Future<Output = Result<tokio::net::TcpStream, RuntimeError>> + Send {
        let _ = sandbox;
        crate::portforward::dial_localhost(None, String::new(), port)
    }

    /// In-place resize (CRI `UpdateContainerResources`): applies the cpu and memory requests
    /// and limits of `resources` to the running instance of container `name`, and returns
    /// the resources it now runs with. A memory limit below what the container uses is not
    /// applied: the `Err` is the kubelet's message for it.
    fn update_container_resources(
        &self,
        sandbox: &Self::Sandbox,
        instance: InstanceId,
        name: &str,
        resources: k8s_openapi::api::core::v1::ResourceRequirements,
    ) -> impl Future<Output = Result<k8s_openapi::api::core::v1::ResourceRequirements, RuntimeError>>
    + Send {
        let _ = (sandbox, instance, name, resources);
        std::future::ready(Err(RuntimeError::Other(
            "in-place resize is not supported by this runtime".to_owned(),
        )))
    }

    /// The pod's address for probes and hooks without a `host` (the process runtime shares the
    /// host network: 127.0.0.1).
    fn pod_ip(&self, sandbox: &Self::Sandbox) -> String;

    /// The pods (by UID) of which the runtime has a sandbox, or what is left of one, on this
    /// node (CRI's `ListPodSandbox`): after an agent restart, those no longer wanted are torn
    /// down.
    fn list_sandboxes(&self) -> impl Future<Output = Vec<String>> + Send;

    /// Reads what the runtime has of `pod`'s sandbox after an agent restart, before anything
    /// is started for it (see [`SandboxState`]). Only the pod's `metadata.uid`, `name` and
    /// `namespace` are read. Re-adopting a live sandbox is [`Runtime::create_sandbox`].
    fn sandbox_state(
        &self,
        pod: &Pod,
    ) -> impl Future<Output = Result<SandboxState, RuntimeError>> + Send;

    /// Removes what is left of a sandbox of which nothing runs ([`SandboxState::Absent`] or
    /// [`SandboxState::Lost`]).
    fn remove_dead_sandbox(
        &self,
        pod: &Pod,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;

    /// The pods (by UID) that have container logs on this node.
    fn pods_with_logs(&self) -> Vec<String>;

    /// What pod `uid` uses of the node's filesystem (CRI's pod sandbox stats: each container's
    /// logs and writable layer, the pod's local volumes), for the eviction manager's
    /// `nodefs` ranking and message. Blocking (it walks directories). A runtime that keeps
    /// nothing on the node's filesystem answers `None`.
    fn pod_disk_usage(&self, uid: &str) -> Option<PodDiskUsage> {
        let _ = uid;
        None
    }

    /// The log files of the running container instances of every pod, for the container log
    /// manager ([`crate::logs::manager`]). A runtime without log files has none.
    fn running_container_logs(&self) -> impl Future<Output = Vec<ContainerLog>> + Send {
        std::future::ready(Vec::new())
    }

    /// CRI `ReopenContainerLog`: the running instance writes its output to a new file at
    /// `log.path` from now on (the container log manager renamed the old one). `Err` when it
    /// does not run any more.
    fn reopen_container_log(
        &self,
        log: &ContainerLog,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send {
        let _ = log;
        std::future::ready(Err(RuntimeError::Other(
            "reopening container logs is not supported by this runtime".to_owned(),
        )))
    }

    /// Removes the container logs of pod `uid`, once its object is gone (the kubelet's
    /// container GC removes the logs of pods that no longer exist).
    fn remove_pod_logs(&self, uid: &str);

    /// The kubelet's image garbage collection (`ImageGCManager.GarbageCollect`): when the
    /// image file system is at least `policy.high_threshold_percent` full, removes images no
    /// container of the node uses and older than `policy.min_age`, least recently used
    /// first, until it is at `policy.low_threshold_percent`. A runtime without images has
    /// nothing to collect.
    fn garbage_collect_images(
        &self,
        policy: ImageGcPolicy,
    ) -> impl Future<Output = Result<ImageGcOutcome, RuntimeError>> + Send {
        let _ = policy;
        std::future::ready(Ok(ImageGcOutcome::default()))
    }

    /// Tears the pod down once every container is dead: stops the shim, removes cgroups and
    /// the pod directory (emptyDirs). Logs are kept.
    fn remove_sandbox(
        &self,
        sandbox: &Self::Sandbox,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
}

/// Signal number for a name like `SIGTERM` or `TERM` (Linux numbering).
pub fn signal_number(name: &str) -> Option<i32> {
    let n = name.strip_prefix("SIG").unwrap_or(name);
    Some(match n {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "ILL" => 4,
        "TRAP" => 5,
        "ABRT" => 6,
        "BUS" => 7,
        "FPE" => 8,
        "KILL" => 9,
        "USR1" => 10,
        "SEGV" => 11,
        "USR2" => 12,
        "PIPE" => 13,
        "ALRM" => 14,
        "TERM" => 15,
        "STKFLT" => 16,
        "CHLD" => 17,
        "CONT" => 18,
        "STOP" => 19,
        "TSTP" => 20,
        "TTIN" => 21,
        "TTOU" => 22,
        "URG" => 23,
        "XCPU" => 24,
        "XFSZ" => 25,
        "VTALRM" => 26,
        "PROF" => 27,
        "WINCH" => 28,
        "IO" | "POLL" => 29,
        "PWR" => 30,
        "SYS" => 31,
        _ => return None,
    })
}

/// A pod's use of the node's filesystem ([`Runtime::pod_disk_usage`]), in bytes allocated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDiskUsage {
    /// Each container's logs and writable layer, by container name.
    pub containers: std::collections::BTreeMap<String, u64>,
    /// The pod's local volumes and its other files on the node's filesystem (`emptyDir`s,
    /// `/etc/hosts`), the kubelet's `fsStatsLocalVolumeSource`.
    pub volumes: u64,
}
