//! What the core asks its driver to do ([`Action`]) and what the driver reports back.

use k8s_openapi::api::core::v1::{LifecycleHandler, Probe};
use k8s_openapi::jiff::Timestamp;
use std::fmt;
use std::time::Duration;

/// Identifies one runtime instance of a spec container (one container ID). Assigned by the core,
/// unique within a pod, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(pub u64);

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Which list of the spec a container comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// A regular init container (`initContainers` without `restartPolicy: Always`).
    Init,
    /// A sidecar (`initContainers` with `restartPolicy: Always`).
    Sidecar,
    /// A regular container (`containers`).
    Regular,
    /// An ephemeral container (`ephemeralContainers`, added through the
    /// `pods/ephemeralcontainers` subresource): started once, never restarted (A14).
    Ephemeral,
}

impl ContainerKind {
    /// An init container: a regular one or a sidecar.
    pub fn is_init(self) -> bool {
        matches!(self, ContainerKind::Init | ContainerKind::Sidecar)
    }

    /// The event `involvedObject.fieldPath` for a container of this kind.
    pub fn field_path(self, name: &str) -> String {
        match self {
            ContainerKind::Regular => format!("spec.containers{{{name}}}"),
            ContainerKind::Ephemeral => format!("spec.ephemeralContainers{{{name}}}"),
            ContainerKind::Init | ContainerKind::Sidecar => {
                format!("spec.initContainers{{{name}}}")
            }
        }
    }
}

/// The three probe types (section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    /// `startupProbe`.
    Startup,
    /// `livenessProbe`.
    Liveness,
    /// `readinessProbe`.
    Readiness,
}

impl ProbeKind {
    /// `Liveness`, `Readiness` or `Startup`, as used in event messages.
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }

    /// All three kinds, in the order workers are created.
    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Startup,
        ProbeKind::Liveness,
        ProbeKind::Readiness,
    ];
}

/// Lifecycle hook kinds (section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookKind {
    /// `lifecycle.postStart`.
    PostStart,
    /// `lifecycle.preStop`.
    PreStop,
}

/// The result of running one probe (R16–R21). `Error` means the probe could not be executed
/// after the prober's retries: the attempt is discarded (R16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The check passed.
    Success,
    /// The check passed with a warning (HTTP redirect to another host, R19): counts as success.
    Warning(String),
    /// The check failed; the text is the probe output.
    Failure(String),
    /// The check could not be run (unresolvable port, exec error, ...).
    Error(String),
}

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// A Kubernetes event the kubelet would record for this pod (10.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// The event reason, verbatim (`Started`, `BackOff`, `Unhealthy`, ...).
    pub reason: &'static str,
    /// The event message, verbatim.
    pub message: String,
    /// The container the event is about (`involvedObject.fieldPath`), if any.
    pub container: Option<(ContainerKind, String)>,
}

/// Why a running instance is being stopped; the text is the `Killing` event message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillReason {
    /// The `Killing` event message (`Stopping container app`, `Container app failed liveness
    /// probe, will be restarted`, ...).
    pub message: String,
    /// Set for probe-caused kills, which may use the probe's `terminationGracePeriodSeconds` (T2).
    pub probe: Option<ProbeKind>,
    /// The container is started again once it has exited (A11 `, will be restarted`).
    pub restart: bool,
}

/// An effect the driver must perform. Each carries what it needs; results come back as inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the pod sandbox (volumes, namespaces); answer with
    /// [`crate::PodMachine::handle_sandbox_ready`] or `handle_sandbox_failed`.
    CreateSandbox,
    /// Create and start a new instance of a container; answer with `handle_container_started`
    /// or `handle_container_start_failed`, and later `handle_container_exited`.
    StartContainer {
        /// Spec container name.
        name: String,
        /// Which list it comes from.
        kind: ContainerKind,
        /// The new instance.
        instance: InstanceId,
        /// Its restart count (S10): the log file is `<name>/<restart_count>.log`.
        restart_count: i32,
    },
    /// Run a hook handler against an instance; answer with `handle_hook_result`.
    RunHook {
        /// Spec container name.
        name: String,
        /// The instance.
        instance: InstanceId,
        /// postStart or preStop.
        hook: HookKind,
        /// The handler to run.
        handler: LifecycleHandler,
    },
    /// Run one probe against an instance; answer with `handle_probe_result`.
    RunProbe {
        /// Spec container name.
        name: String,
        /// The instance.
        instance: InstanceId,
        /// Which probe.
        kind: ProbeKind,
        /// The probe definition (defaults applied).
        probe: Probe,
    },
    /// Send the stop signal to an instance's whole process group. The core sends
    /// [`Action::KillContainer`] itself when `grace` has passed.
    StopContainer {
        /// Spec container name.
        name: String,
        /// The instance.
        instance: InstanceId,
        /// The signal name (`SIGTERM`, or `lifecycle.stopSignal`).
        signal: String,
        /// The time allowed between this signal and SIGKILL (already at least 2 s, T3).
        grace: Duration,
    },
    /// SIGKILL an instance's whole process group (grace period over).
    KillContainer {
        /// Spec container name.
        name: String,
        /// The instance.
        instance: InstanceId,
    },
    /// Change a running instance's cpu and memory in place (CRI `UpdateContainerResources`,
    /// in-place resize); answer with `handle_resources_updated` (the values now applied) or
    /// `handle_resources_update_failed`.
    UpdateContainerResources {
        /// Spec container name.
        name: String,
        /// The instance.
        instance: InstanceId,
        /// Its allocated requests and limits (only cpu and memory are applied).
        resources: k8s_openapi::api::core::v1::ResourceRequirements,
    },
    /// Record an event.
    EmitEvent(Event),
    /// The pod object changed (status, or deletion metadata): publish this snapshot. Several may
    /// be queued by one input (the status before and after a sync's actions); publish each.
    PublishStatus(Box<k8s_openapi::api::core::v1::Pod>),
    /// Every container is dead and the final status is written: release the pod's resources
    /// (volumes, cgroups, sandbox). When the pod was deleted, the API object can now be removed.
    PodTerminated,
}

/// How an instance ended, as reported by the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExitStatus {
    /// The exit code (128 + signal for a signal death, as the runtime reports it).
    pub exit_code: i32,
    /// The kernel OOM killer ended it (reason `OOMKilled`).
    pub oom_killed: bool,
    /// When the process exited (may be earlier than `now` after an agent restart).
    pub finished_at: Option<Timestamp>,
    /// Contents of the termination-message file, if any (M3: the core keeps the last 4096 bytes).
    pub termination_message: Option<String>,
    /// The tail of the container log, for `FallbackToLogsOnError` (M4).
    pub log_tail: Option<String>,
}

/// What the runtime did about a container's image before creating it (the kubelet's
/// `EnsureImageExists`, A19), for the `Pulled` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImagePull {
    /// The image was there and the pull policy did not ask for a pull.
    Present,
    /// The image was pulled.
    Pulled {
        /// How long the pull itself took.
        pull: std::time::Duration,
        /// From the request to the end, waiting for other pulls included.
        total: std::time::Duration,
        /// The image's size in bytes.
        size: u64,
    },
}

/// Why a start failed (2.2); the core turns this into a waiting reason and a `Failed` event.
/// The image reasons (`ErrImagePull`, `ErrImageNeverPull`, `InvalidImageName`) carry the
/// runtime's detail as `message` and get the kubelet's image events; a failed pull starts or
/// doubles the image back-off (B9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// The waiting reason (`CreateContainerConfigError`, `CreateContainerError`,
    /// `RunContainerError`, ...).
    pub reason: String,
    /// The detail message.
    pub message: String,
    /// True when the container was created (and then failed to run): the instance is recorded as
    /// terminated with reason `StartError` and exit code 128, like containerd.
    pub created: bool,
}
