//! [`PodMachine`]: one pod's lifecycle as a pure state machine (quinn-proto style).
//!
//! Inputs (`handle_*`) take `now`; effects are queued as [`Action`]s and drained with
//! [`PodMachine::poll_action`]; [`PodMachine::poll_timeout`] says when to call
//! [`PodMachine::handle_timeout`] next. After every input the machine runs one *sync* (the
//! kubelet's `SyncPod` or `SyncTerminatingPod`, depending on the pod worker state) and then
//! regenerates the pod status, queueing [`Action::PublishStatus`] when it changed.

mod compute;
mod evict;
mod probing;
mod recover;
mod resize;
mod restart_all;
mod status;
mod stop;

use crate::action::{
    Action, ContainerKind, Event, EventType, ExitStatus, HookKind, ImagePull, InstanceId,
    ProbeKind, ProbeOutcome, StartFailure,
};
use crate::backoff::{Backoff, ImageBackoff};
use crate::config::MachineConfig;
use crate::probe::{ProbeResult, ProbeWorker};
use crate::status::phase::is_sidecar;
use crate::time::trunc_secs;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
pub use recover::{PastInstance, RecoveredInstance};
pub use resize::{POD_RESIZE_IN_PROGRESS, POD_RESIZE_PENDING};
use std::collections::VecDeque;
use stop::Stop;

/// How one instance ended (the runtime's terminated record, S4/S7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExitRecord {
    pub exit_code: i32,
    pub reason: String,
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
}

/// The runtime state of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InstState {
    /// `StartContainer` was issued; no answer yet. Invisible in the API.
    Starting,
    /// The process runs and its postStart hook runs; invisible in the API until the hook is done
    /// (H2).
    PostStart { started_at: Timestamp },
    /// Running and visible.
    Running { started_at: Timestamp },
    /// Exited.
    Exited(ExitRecord),
}

/// One runtime instance of a spec container.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub id: InstanceId,
    pub container_id: String,
    pub restart_count: i32,
    /// The image it was created from: stands in for the spec hash (A12).
    pub image: String,
    /// The runtime's reference of that image (`imageID`: `name@sha256:…`), when it has images.
    pub image_id: String,
    /// Who its process runs as, as the runtime reports it (S15 `user.linux`).
    pub user: Option<k8s_openapi::api::core::v1::LinuxContainerUser>,
    pub state: InstState,
    /// Probe results for this instance (R3), indexed by `ProbeKind as usize`.
    pub results: [ProbeResult; 3],
    /// A stop (kill) in progress.
    pub stop: Option<Stop>,
    /// Exited after a kill with the restart flag (A11): the kubelet starts the replacement in
    /// the same sync as the kill, whatever the restart policy. Cleared when that start is
    /// blocked or fails; later syncs decide by policy again.
    pub restart_on_exit: bool,
    /// The startup Success was published by the deletion (R10), not by a probe. The kubelet
    /// records it with `SetContainerStartup`, which sets `started` only: no status is generated
    /// again until the containers have stopped (T6), so `ready` is not re-derived from it.
    pub quiet_started: bool,
    /// The cpu and memory the runtime applied (started with, or updated to in place).
    pub resources: k8s_openapi::api::core::v1::ResourceRequirements,
    /// An in-place resize of this instance in flight, or failed.
    pub resize: Option<resize::InstanceResize>,
    /// KEP-5532: removed from the runtime by an in-place restart of the whole pod: decisions
    /// see no record (the container starts again, no back-off); the status keeps it as history.
    pub removed: bool,
}

impl Instance {
    pub fn result(&self, kind: ProbeKind) -> ProbeResult {
        self.results[kind as usize]
    }

    /// The process exists (running, possibly in postStart or being stopped).
    pub fn is_alive(&self) -> bool {
        matches!(
            self.state,
            InstState::PostStart { .. } | InstState::Running { .. }
        )
    }

    /// Running and visible in the API.
    pub fn is_running(&self) -> bool {
        matches!(self.state, InstState::Running { .. })
    }

    pub fn exit(&self) -> Option<&ExitRecord> {
        match &self.state {
            InstState::Exited(e) => Some(e),
            _ => None,
        }
    }

    /// A start step in progress (blocks the next sync, A20).
    pub fn is_starting(&self) -> bool {
        matches!(
            self.state,
            InstState::Starting | InstState::PostStart { .. }
        )
    }
}

/// Per spec container bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct ContainerState {
    pub name: String,
    pub kind: ContainerKind,
    /// Index in its spec list.
    pub index: usize,
    /// Oldest first; only the newest two matter for status (S3), older ones are pruned.
    pub instances: Vec<Instance>,
    /// The last failed start step (S6): (reason, message). Cleared by a successful start.
    pub reason_cache: Option<(String, String)>,
    /// When the current back-off wait ends, while a start is blocked.
    pub backoff_until: Option<Timestamp>,
    /// While a start is blocked: the pod worker's requeue of the errored sync (`backOffPeriod`,
    /// 10 s), which finds it blocked again and repeats the `BackOff` event (10.6).
    pub backoff_resync: Option<Timestamp>,
    /// A start that failed before anything was created is retried at the next sync, which the
    /// pod worker requeues 10 s after an errored sync (`backOffPeriod`); the start is skipped
    /// until then (A18: the other containers still start).
    pub retry_at: Option<Timestamp>,
}

impl ContainerState {
    pub fn newest(&self) -> Option<&Instance> {
        self.instances.last()
    }

    /// The newest instance that is visible in the API (not in a start step).
    pub fn newest_visible(&self) -> Option<&Instance> {
        self.instances.iter().rev().find(|i| !i.is_starting())
    }

    pub fn newest_exited(&self) -> Option<&ExitRecord> {
        self.instances.iter().rev().find_map(Instance::exit)
    }
}

/// The pod worker state (`pod_workers.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Worker {
    /// Normal operation: `SyncPod` on every input.
    Syncing,
    /// Stopping every container with the pod grace period (T1): `SyncTerminatingPod`.
    Terminating { grace: i64 },
    /// Final status written; nothing runs any more.
    Terminated,
}

/// The pod sandbox (A1); for the process runtime this is volumes and the pod directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sandbox {
    /// Not created; a failed attempt is retried at `retry_at` (the sync error requeue, 10 s).
    None {
        retry_at: Option<Timestamp>,
    },
    Creating,
    Ready,
    Gone,
}

/// One pod's lifecycle. See the module docs.
#[derive(Debug, Clone)]
pub struct PodMachine {
    config: MachineConfig,
    pod: Pod,
    /// `spec.ephemeralContainers` as containers (`EphemeralContainerCommon`), by index: what
    /// [`PodMachine::container_spec_of`] answers for a [`ContainerKind::Ephemeral`].
    ephemeral: Vec<Container>,
    worker: Worker,
    sandbox: Sandbox,
    containers: Vec<ContainerState>,
    next_instance: u64,
    backoff: Backoff,
    /// In-place resize: allocated resources and the resize conditions.
    resize: resize::ResizeState,
    /// B9: failed pulls back off per image.
    image_backoff: ImageBackoff,
    probes: Vec<ProbeWorker>,
    actions: VecDeque<Action>,
    /// Pod-level reason/message forced by a sync handler (P13: DeadlineExceeded).
    evicted: Option<(String, String)>,
    /// Set when `KillPod` was decided while syncing (A5 Never-policy init failure, A13).
    kill_pod: bool,
    /// A settling sidecar holds initialization until then (A8).
    sidecar_settle_until: Option<Timestamp>,
    /// Instances with a lower id ran in an earlier sandbox (A2): their init-container records
    /// count as purged, and P5's `podHasInitialized` looks at the current sandbox only.
    sandbox_floor: u64,
    /// T6: the container statuses (init, regular) written as termination began; the kubelet
    /// writes no other until every container has stopped, but readiness results.
    terminating_view: Option<(
        Vec<k8s_openapi::api::core::v1::ContainerStatus>,
        Vec<k8s_openapi::api::core::v1::ContainerStatus>,
    )>,
    /// KEP-5532: the containers are being killed for a `RestartAllContainers` rule
    /// (`AllContainersRestarting` True); entered at the matching exit, left when all are dead.
    restarting_all: bool,
}

impl PodMachine {
    /// A machine for `pod` (already defaulted and validated), admitted at `now`: it queues the
    /// sandbox creation and writes the first status (`startTime`, P16).
    pub fn new(pod: Pod, config: MachineConfig, now: Timestamp) -> PodMachine {
        let mut m = PodMachine::blank(pod, config, now);
        m.step(now);
        m
    }

    /// A machine with no instance records and probe workers starting at `now`; no sync yet.
    fn blank(mut pod: Pod, config: MachineConfig, now: Timestamp) -> PodMachine {
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        if spec.node_name.as_deref().unwrap_or("").is_empty() {
            spec.node_name = Some(config.node_name.clone());
        }
        let mut containers = Vec::new();
        for (index, c) in spec.init_containers.iter().flatten().enumerate() {
            let kind = if is_sidecar(c) {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            };
            containers.push(ContainerState::new(&c.name, kind, index));
        }
        for (index, c) in spec.containers.iter().enumerate() {
            containers.push(ContainerState::new(&c.name, ContainerKind::Regular, index));
        }
        let ephemeral = ephemeral_specs(spec);
        for (index, c) in ephemeral.iter().enumerate() {
            containers.push(ContainerState::new(
                &c.name,
                ContainerKind::Ephemeral,
                index,
            ));
        }
        let mut probes = Vec::new();
        // Ephemeral containers have no probes (V12).
        for c in containers
            .iter()
            .filter(|c| matches!(c.kind, ContainerKind::Regular | ContainerKind::Sidecar))
        {
            let spec_c = container_spec(spec, c.kind, c.index);
            for kind in ProbeKind::ALL {
                if let Some(p) = probe_of(spec_c, kind) {
                    probes.push(ProbeWorker::new(&c.name, kind, p, now));
                }
            }
        }
        let kinds: Vec<(ContainerKind, usize)> =
            containers.iter().map(|c| (c.kind, c.index)).collect();
        let allocated = PodMachine::initial_allocation(spec, &kinds);
        let status = pod.status.get_or_insert_with(Default::default);
        status.start_time.get_or_insert(Time(trunc_secs(now)));
        let backoff = Backoff::new(config.backoff);
        let image_backoff = ImageBackoff::new(config.backoff);
        PodMachine {
            config,
            pod,
            ephemeral,
            worker: Worker::Syncing,
            sandbox: Sandbox::None { retry_at: None },
            containers,
            next_instance: 1,
            backoff,
            resize: resize::ResizeState {
                allocated,
                ..Default::default()
            },
            image_backoff,
            probes,
            actions: VecDeque::new(),
            evicted: None,
            kill_pod: false,
            sidecar_settle_until: None,
            terminating_view: None,
            sandbox_floor: 0,
            restarting_all: false,
        }
    }

    // ----- getters -----

    /// The pod object with its current status.
    pub fn pod(&self) -> &Pod {
        &self.pod
    }

    /// The current phase.
    pub fn phase(&self) -> crate::Phase {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .and_then(crate::Phase::parse)
            .unwrap_or(crate::Phase::Pending)
    }

    /// True once the final status is written and every container is gone.
    pub fn is_terminated(&self) -> bool {
        self.worker == Worker::Terminated
    }

    /// True from deletion (or deadline, or completion) until terminated.
    pub fn is_terminating(&self) -> bool {
        matches!(self.worker, Worker::Terminating { .. })
    }

    /// The next queued action.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When the driver must call [`PodMachine::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        let mut t: Option<Timestamp> = None;
        let mut consider = |x: Timestamp| t = Some(t.map_or(x, |t| t.min(x)));
        if self.worker == Worker::Terminated {
            return None;
        }
        for w in &self.probes {
            if !w.stopped && w.in_flight.is_none() {
                consider(w.next_tick);
            }
        }
        // A start step in progress triggers the next sync itself; a back-off expiring meanwhile
        // is not a timer to wake for. Neither is one once nothing will be started any more
        // (terminating, or KillPod decided): it would stay due forever.
        let starting = self
            .containers
            .iter()
            .any(|c| c.instances.iter().any(Instance::is_starting));
        let may_start = self.worker == Worker::Syncing && !self.kill_pod;
        if let Some(u) = self.sidecar_settle_until.filter(|_| !starting && may_start) {
            consider(u);
        }
        for c in &self.containers {
            if let Some(u) = c.backoff_until.filter(|_| !starting && may_start) {
                consider(u);
            }
            if let Some(r) = c.backoff_resync.filter(|_| !starting && may_start) {
                consider(r);
            }
            if let Some(r) = c.retry_at.filter(|_| !starting && may_start) {
                consider(r);
            }
            for i in &c.instances {
                if let Some(d) = i.stop.as_ref().and_then(Stop::deadline) {
                    consider(d);
                }
            }
        }
        if let Some(d) = self.active_deadline() {
            consider(d);
        }
        if let Some(r) = self.resize_retry_at().filter(|_| may_start) {
            consider(r);
        }
        if let (Sandbox::None { retry_at: Some(r) }, Worker::Syncing) = (self.sandbox, &self.worker)
        {
            consider(r);
        }
        t
    }

    // ----- inputs -----

    /// Timers fired: probe ticks, back-off expiry, grace deadlines, the active deadline.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        self.step(now);
    }

    /// Who a started instance's process runs as (S15: the container status' `user.linux`, as
    /// the runtime reports it; the kubelet shows it with `SupplementalGroupsPolicy`, on by
    /// default). Given before [`PodMachine::handle_container_started`].
    pub fn set_container_user(
        &mut self,
        instance: InstanceId,
        uid: i64,
        gid: i64,
        groups: Vec<i64>,
    ) {
        if let Some((ci, ii)) = self.find_instance(instance) {
            self.containers[ci].instances[ii].user =
                Some(k8s_openapi::api::core::v1::LinuxContainerUser {
                    uid,
                    gid,
                    supplemental_groups: (!groups.is_empty()).then_some(groups),
                });
        }
    }

    /// The sandbox's address (`status.podIP`, `podIPs`), as its runtime reports it once the
    /// sandbox exists (the kubelet reads it from the sandbox status).
    pub fn set_pod_ip(&mut self, ip: Option<String>) {
        self.config.pod_ip = ip;
    }

    /// The sandbox (pod directory, volumes) is ready.
    pub fn handle_sandbox_ready(&mut self, now: Timestamp) {
        if self.sandbox == Sandbox::Creating {
            self.sandbox = Sandbox::Ready;
        }
        self.step(now);
    }

    /// Creating the sandbox failed (M8: `FailedMount`, or `FailedCreatePodSandBox`); the
    /// sandbox is requested again 10 s later (the kubelet requeues a failed sync after 10 s).
    pub fn handle_sandbox_failed(&mut self, reason: &'static str, message: String, now: Timestamp) {
        if self.sandbox == Sandbox::Creating {
            self.sandbox = Sandbox::None {
                retry_at: Some(now + crate::time::secs(10)),
            };
        }
        self.emit(EventType::Warning, reason, message, None);
        self.step(now);
    }

    /// The sandbox is gone on its own (the shim died, the node rebooted): it is no longer READY
    /// (A1). `exits` are the instances that ended with it (the runtime's last word on them); one
    /// sync then sees them all exited and the sandbox not ready, as the kubelet's does after a
    /// relist. A2: what still runs is killed; a new sandbox is created (`SandboxChanged`) unless
    /// the pod must not run again (`Never` with a container record, or nothing left to start
    /// once initialized), with the init-container records purged so that initialization re-runs
    /// from the first; restart counts continue. `PodReadyToStartContainers` is False until the
    /// new sandbox is ready (D2).
    pub fn handle_sandbox_lost(&mut self, exits: Vec<(InstanceId, ExitStatus)>, now: Timestamp) {
        for (instance, exit) in exits {
            self.record_exit(instance, exit, now);
        }
        self.kick_unready_readiness(now);
        if self.sandbox != Sandbox::Ready {
            self.step(now);
            return;
        }
        if self.worker != Worker::Syncing {
            // `SyncTerminatingPod` creates no sandbox and kills with the pod's grace itself.
            self.sandbox = Sandbox::Gone;
            self.step(now);
            return;
        }
        if self.recreate_sandbox() {
            self.emit(
                EventType::Normal,
                "SandboxChanged",
                "Pod sandbox changed, it will be killed and re-created.".to_string(),
                None,
            );
            self.sandbox = Sandbox::None { retry_at: None };
            self.sandbox_floor = self.next_instance;
            self.sidecar_settle_until = None;
        } else {
            self.sandbox = Sandbox::Gone;
        }
        self.kill_all(None, now);
        self.step(now);
    }

    /// The instance's process is running (after CRI Create + Start). `container_id` is
    /// `<runtime>://<id>`; `started_at` the process start time.
    pub fn handle_container_started(
        &mut self,
        instance: InstanceId,
        container_id: String,
        started_at: Timestamp,
        now: Timestamp,
    ) {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return;
        };
        if self.containers[ci].instances[ii].state != InstState::Starting {
            return;
        }
        let (name, kind) = (self.containers[ci].name.clone(), self.containers[ci].kind);
        self.emit(
            EventType::Normal,
            "Created",
            format!("Created container: {name}"),
            Some(ci),
        );
        self.emit(
            EventType::Normal,
            "Started",
            format!("Started container {name}"),
            Some(ci),
        );
        let post_start = self
            .container_spec_of(ci)
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.clone());
        let inst = &mut self.containers[ci].instances[ii];
        inst.container_id = container_id;
        match post_start {
            Some(handler) => {
                inst.state = InstState::PostStart { started_at };
                self.actions.push_back(Action::RunHook {
                    name,
                    instance,
                    hook: HookKind::PostStart,
                    handler,
                });
            }
            None => {
                inst.state = InstState::Running { started_at };
                self.containers[ci].reason_cache = None;
                self.on_instance_running(ci, now);
            }
        }
        let _ = kind;
        self.step(now);
    }

    /// The runtime started pulling the image of a starting instance (`Pulling`).
    pub fn handle_image_pulling(&mut self, instance: InstanceId, now: Timestamp) {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return;
        };
        if self.containers[ci].instances[ii].state != InstState::Starting {
            return;
        }
        let image = podvisor_api::gotext::quote(&self.containers[ci].instances[ii].image);
        self.emit(
            EventType::Normal,
            "Pulling",
            format!("Pulling image {image}"),
            Some(ci),
        );
        self.step(now);
    }

    /// The image of a starting instance is ready (`Pulled`): it was present, or pulled;
    /// `image_id` is the runtime's reference of it, the container status' `imageID`.
    pub fn handle_image_pulled(
        &mut self,
        instance: InstanceId,
        pull: ImagePull,
        image_id: &str,
        now: Timestamp,
    ) {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return;
        };
        if self.containers[ci].instances[ii].state != InstState::Starting {
            return;
        }
        image_id.clone_into(&mut self.containers[ci].instances[ii].image_id);
        let image = podvisor_api::gotext::quote(&self.containers[ci].instances[ii].image);
        let message = match pull {
            ImagePull::Present => format!(
                "Container image {image} already present on machine and can be accessed by the pod"
            ),
            ImagePull::Pulled { pull, total, size } => podvisor_api::pod::image_pulled_message(
                &self.containers[ci].instances[ii].image,
                pull,
                total,
                size,
            ),
        };
        self.emit(EventType::Normal, "Pulled", message, Some(ci));
        self.step(now);
    }

    /// A start step failed (2.2). With `created`, the instance is recorded as terminated with
    /// reason `StartError` and exit code 128 (containerd); otherwise it never existed.
    pub fn handle_container_start_failed(
        &mut self,
        instance: InstanceId,
        failure: StartFailure,
        now: Timestamp,
    ) {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return;
        };
        if self.containers[ci].instances[ii].state != InstState::Starting {
            return;
        }
        let image = self.containers[ci].instances[ii].image.clone();
        let quoted = podvisor_api::gotext::quote(&image);
        // The image manager's own events come first (`EnsureImageExists`).
        match failure.reason.as_str() {
            "ErrImagePull" => {
                self.emit(
                    EventType::Warning,
                    "Failed",
                    format!("Failed to pull image {quoted}: {}", failure.message),
                    Some(ci),
                );
                self.image_backoff.failed(&image, now);
            }
            "ErrImageNeverPull" => self.emit(
                EventType::Warning,
                "ErrImageNeverPull",
                failure.message.clone(),
                Some(ci),
            ),
            "InvalidImageName" => self.emit(
                EventType::Warning,
                "InspectFailed",
                failure.message.clone(),
                Some(ci),
            ),
            _ => {}
        }
        // The sync's error: an image error's text is its reason.
        let error = match failure.reason.as_str() {
            "ErrImagePull" | "ErrImageNeverPull" | "InvalidImageName" => failure.reason.clone(),
            _ => failure.message.clone(),
        };
        if failure.created {
            let name = self.containers[ci].name.clone();
            self.emit(
                EventType::Normal,
                "Created",
                format!("Created container: {name}"),
                Some(ci),
            );
            self.containers[ci].instances[ii].state = InstState::Exited(ExitRecord {
                exit_code: 128,
                reason: "StartError".to_string(),
                message: Some(failure.message.clone()),
                started_at: None,
                finished_at: now,
            });
        } else {
            self.containers[ci].instances.remove(ii);
            self.containers[ci].retry_at = Some(now + crate::time::secs(10));
        }
        for inst in &mut self.containers[ci].instances {
            inst.restart_on_exit = false;
        }
        self.emit(
            EventType::Warning,
            "Failed",
            format!("Error: {error}"),
            Some(ci),
        );
        self.containers[ci].reason_cache = Some((failure.reason, failure.message));
        self.step(now);
    }

    /// The instance exited.
    pub fn handle_container_exited(
        &mut self,
        instance: InstanceId,
        exit: ExitStatus,
        now: Timestamp,
    ) {
        if self.record_exit(instance, exit, now) {
            self.kick_unready_readiness(now);
            self.step(now);
        }
    }

    /// Records the exit of `instance`; false if it is unknown or already exited.
    fn record_exit(&mut self, instance: InstanceId, exit: ExitStatus, now: Timestamp) -> bool {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return false;
        };
        let policy_fallback = self
            .container_spec_of(ci)
            .termination_message_policy
            .as_deref()
            == Some("FallbackToLogsOnError");
        let inst = &mut self.containers[ci].instances[ii];
        let started_at = match inst.state {
            InstState::Running { started_at } | InstState::PostStart { started_at } => {
                Some(started_at)
            }
            InstState::Starting => Some(now),
            InstState::Exited(_) => return false,
        };
        let reason = if exit.oom_killed {
            "OOMKilled"
        } else if exit.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        };
        let message = termination_message(&exit, policy_fallback, reason);
        inst.state = InstState::Exited(ExitRecord {
            exit_code: exit.exit_code,
            reason: reason.to_string(),
            message,
            started_at,
            finished_at: exit.finished_at.unwrap_or(now),
        });
        inst.restart_on_exit = inst.stop.as_ref().is_some_and(|s| s.restart);
        inst.stop = None;
        true
    }

    /// A hook finished (`Err` carries the failure text, H3/H4).
    pub fn handle_hook_result(
        &mut self,
        instance: InstanceId,
        hook: HookKind,
        result: Result<(), String>,
        now: Timestamp,
    ) {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return;
        };
        match hook {
            HookKind::PostStart => self.post_start_done(ci, ii, result, now),
            HookKind::PreStop => {
                if result.is_err() {
                    self.emit(
                        EventType::Warning,
                        "FailedPreStopHook",
                        "PreStopHook failed".to_string(),
                        Some(ci),
                    );
                }
                if let Some(stop) = self.containers[ci].instances[ii].stop.as_mut() {
                    stop.pre_stop_done = true;
                }
            }
        }
        self.step(now);
    }

    /// A probe finished.
    pub fn handle_probe_result(
        &mut self,
        name: &str,
        instance: InstanceId,
        kind: ProbeKind,
        outcome: ProbeOutcome,
        now: Timestamp,
    ) {
        self.probe_done(name, instance, kind, outcome, now);
        self.step(now);
    }

    /// A graceful delete with `grace_seconds` (None: the pod's own grace period). The API server
    /// part: `deletionTimestamp` = now + grace, `deletionGracePeriodSeconds` = grace; a later
    /// delete may only shorten it (T1). `Some(0)` is a forced delete (T10).
    pub fn handle_delete(&mut self, grace_seconds: Option<i64>, now: Timestamp) {
        let spec_grace = self.spec().termination_grace_period_seconds.unwrap_or(30);
        let requested = grace_seconds.unwrap_or(spec_grace).max(0);
        let meta = &mut self.pod.metadata;
        let grace = match meta.deletion_grace_period_seconds {
            Some(prev) if prev <= requested => prev,
            _ => requested,
        };
        if meta.deletion_grace_period_seconds != Some(grace) || meta.deletion_timestamp.is_none() {
            meta.deletion_grace_period_seconds = Some(grace);
            meta.deletion_timestamp = Some(Time(trunc_secs(now) + crate::time::secs(grace)));
            // The object changed (K6 `Terminating`) even if the status did not.
            self.actions
                .push_back(Action::PublishStatus(Box::new(self.pod.clone())));
        }
        self.begin_termination(now);
        self.kick_unready_readiness(now);
        self.step(now);
    }

    /// A spec update already accepted by API validation (10.5): image changes restart
    /// containers (M12), `activeDeadlineSeconds` may be set or shortened, labels and
    /// annotations change; the next status observes the pod's new `metadata.generation` (D10,
    /// which a graceful delete increments too).
    pub fn handle_spec_update(&mut self, pod: Pod, now: Timestamp) {
        let node = self.spec().node_name.clone();
        self.pod.metadata.generation = pod.metadata.generation;
        self.pod.metadata.labels = pod.metadata.labels;
        self.pod.metadata.annotations = pod.metadata.annotations;
        if let Some(mut spec) = pod.spec {
            spec.node_name = node;
            let ephemeral = ephemeral_specs(&spec);
            for c in &self.containers {
                let image = match c.kind {
                    ContainerKind::Ephemeral => {
                        ephemeral.get(c.index).and_then(|e| e.image.clone())
                    }
                    _ => container_spec(&spec, c.kind, c.index).image.clone(),
                };
                self.backoff
                    .retain_image(&c.name, &image.unwrap_or_default());
            }
            // A14: ephemeral containers are only ever added (the subresource's validation; a
            // patch may reorder the list, so they are matched by name): each new one gets its
            // bookkeeping and is started by the next sync.
            for (index, e) in ephemeral.iter().enumerate() {
                let known = self
                    .containers
                    .iter_mut()
                    .find(|c| c.kind == ContainerKind::Ephemeral && c.name == e.name);
                match known {
                    Some(c) => c.index = index,
                    None => {
                        self.containers.push(ContainerState::new(
                            &e.name,
                            ContainerKind::Ephemeral,
                            index,
                        ));
                        // No resources (V12), none allocated: never part of a resize.
                        self.resize.allocated.push(Default::default());
                    }
                }
            }
            self.ephemeral = ephemeral;
            self.pod.spec = Some(spec);
        }
        // In-place resize: the new resources are allocated, or left pending.
        self.handle_pod_resources_resize(now);
        self.kick_unready_readiness(now);
        self.step(now);
    }

    /// Conditions written by others through the status subresource (readiness gates, D1/D5).
    /// Kubelet-owned condition types in `conditions` are ignored.
    pub fn handle_conditions_update(&mut self, conditions: Vec<PodCondition>, now: Timestamp) {
        let status = self.pod.status.get_or_insert_with(Default::default);
        let mut current = status.conditions.take().unwrap_or_default();
        for c in conditions {
            if status::KUBELET_CONDITIONS.contains(&c.type_.as_str()) {
                continue;
            }
            match current.iter_mut().find(|x| x.type_ == c.type_) {
                Some(x) => *x = c,
                None => current.push(c),
            }
        }
        status.conditions = Some(current);
        self.step(now);
    }

    // ----- the sync loop -----

    /// One sync: timers, the pod worker's sync for its state, probes, then the status.
    fn step(&mut self, now: Timestamp) {
        self.advance_stops(now);
        if self.worker == Worker::Syncing {
            // Spec 0.1: a sync first writes the status as it finds the pod, then acts; so a
            // container that died shows `Error` before its `CrashLoopBackOff`. A container killed
            // to be restarted is replaced within one kubelet sync, so that gap is never shown.
            let awaiting_replacement = self.containers.iter().any(|c| {
                c.newest()
                    .is_some_and(|i| i.exit().is_some() && i.restart_on_exit)
            });
            if !awaiting_replacement {
                self.publish_status(now);
            }
            self.check_active_deadline(now);
        }
        match self.worker {
            Worker::Syncing => self.sync_pod(now),
            Worker::Terminating { .. } => self.sync_terminating(now),
            Worker::Terminated => {}
        }
        // A kill decided above may already be able to advance (no preStop, ordering).
        self.advance_stops(now);
        if matches!(self.worker, Worker::Terminating { .. }) {
            self.sync_terminating(now);
        }
        self.run_probes(now);
        self.publish_status(now);
        // A terminal phase ends the pod worker's syncing (pod_workers: terminal -> terminating).
        if self.worker == Worker::Syncing && self.phase().is_terminal() {
            self.begin_termination(now);
            self.sync_terminating(now);
            self.publish_status(now);
        }
    }

    fn active_deadline(&self) -> Option<Timestamp> {
        if self.worker != Worker::Syncing {
            return None;
        }
        let secs = self.spec().active_deadline_seconds?;
        let start = self.pod.status.as_ref()?.start_time.as_ref()?.0;
        Some(start + crate::time::secs(secs))
    }

    /// M1 / P13: evict when the pod was active longer than `activeDeadlineSeconds`.
    fn check_active_deadline(&mut self, now: Timestamp) {
        let Some(deadline) = self.active_deadline() else {
            return;
        };
        if now < deadline || self.phase().is_terminal() {
            return;
        }
        let message = "Pod was active on the node longer than the specified deadline";
        self.evicted = Some(("DeadlineExceeded".to_string(), message.to_string()));
        self.emit(
            EventType::Normal,
            "DeadlineExceeded",
            message.to_string(),
            None,
        );
        self.begin_termination(now);
    }

    /// Switches the pod worker to terminating with the T1 grace period (or shortens it).
    fn begin_termination(&mut self, now: Timestamp) {
        self.begin_termination_within(None, now);
    }

    /// [`PodMachine::begin_termination`] with an internal override (an eviction's), used
    /// when smaller than the grace period otherwise chosen.
    fn begin_termination_within(&mut self, override_grace: Option<i64>, now: Timestamp) {
        let mut chosen = match self.worker {
            Worker::Terminated => return,
            Worker::Terminating { grace } => Some(grace),
            Worker::Syncing => None,
        };
        if let Some(d) = self.pod.metadata.deletion_grace_period_seconds
            && chosen.is_none_or(|c| d < c)
        {
            chosen = Some(d);
        }
        if let Some(o) = override_grace
            && chosen.is_none_or(|c| o < c)
        {
            chosen = Some(o);
        }
        let grace = chosen
            .unwrap_or_else(|| self.spec().termination_grace_period_seconds.unwrap_or(30))
            .max(1);
        let shortened = matches!(self.worker, Worker::Terminating { grace: g } if grace < g);
        self.worker = Worker::Terminating { grace };
        if shortened {
            self.shorten_stops(grace, now);
        }
    }

    // ----- helpers -----

    pub(crate) fn spec(&self) -> &PodSpec {
        self.pod
            .spec
            .as_ref()
            .expect("a PodMachine always has a spec")
    }

    pub(crate) fn container_spec_of(&self, ci: usize) -> &Container {
        let c = &self.containers[ci];
        match c.kind {
            ContainerKind::Ephemeral => &self.ephemeral[c.index],
            _ => container_spec(self.spec(), c.kind, c.index),
        }
    }

    fn find_instance(&self, id: InstanceId) -> Option<(usize, usize)> {
        self.containers.iter().enumerate().find_map(|(ci, c)| {
            c.instances
                .iter()
                .position(|i| i.id == id)
                .map(|ii| (ci, ii))
        })
    }

    pub(crate) fn emit(
        &mut self,
        type_: EventType,
        reason: &'static str,
        message: String,
        container: Option<usize>,
    ) {
        let container =
            container.map(|ci| (self.containers[ci].kind, self.containers[ci].name.clone()));
        self.actions.push_back(Action::EmitEvent(Event {
            type_,
            reason,
            message,
            container,
        }));
    }

    /// `<name>_<namespace>(<uid>)` as in kubelet messages.
    pub(crate) fn pod_full_name(&self) -> String {
        let m = &self.pod.metadata;
        format!(
            "{}_{}({})",
            m.name.as_deref().unwrap_or(""),
            m.namespace.as_deref().unwrap_or("default"),
            m.uid.as_deref().unwrap_or("")
        )
    }

    fn post_start_done(
        &mut self,
        ci: usize,
        ii: usize,
        result: Result<(), String>,
        now: Timestamp,
    ) {
        let inst = &mut self.containers[ci].instances[ii];
        let InstState::PostStart { started_at } = inst.state else {
            return;
        };
        match result {
            Ok(()) => {
                inst.state = InstState::Running { started_at };
                self.containers[ci].reason_cache = None;
                self.on_instance_running(ci, now);
            }
            Err(detail) => {
                // H3: the event hides the detail; the waiting reason carries it.
                self.emit(
                    EventType::Warning,
                    "FailedPostStartHook",
                    "PostStartHook failed".to_string(),
                    Some(ci),
                );
                self.containers[ci].reason_cache = Some(("PostStartHookError".to_string(), detail));
                if self.containers[ci].instances[ii].stop.is_none() {
                    let grace = self.container_grace(ci, None);
                    let reason = crate::action::KillReason {
                        message: "FailedPostStartHook".to_string(),
                        probe: None,
                        restart: false,
                    };
                    self.begin_stop(ci, ii, reason, grace, false, now);
                }
            }
        }
    }
}

impl ContainerState {
    fn new(name: &str, kind: ContainerKind, index: usize) -> ContainerState {
        ContainerState {
            name: name.to_string(),
            kind,
            index,
            instances: Vec::new(),
            reason_cache: None,
            backoff_until: None,
            backoff_resync: None,
            retry_at: None,
        }
    }
}

/// The init or regular container `index` of its list (ephemeral containers are the machine's
/// converted copies, [`PodMachine::container_spec_of`]).
pub(crate) fn container_spec(spec: &PodSpec, kind: ContainerKind, index: usize) -> &Container {
    match kind {
        ContainerKind::Regular => &spec.containers[index],
        ContainerKind::Init | ContainerKind::Sidecar => {
            &spec.init_containers.as_ref().expect("init container index")[index]
        }
        ContainerKind::Ephemeral => unreachable!("ephemeral containers are the machine's copies"),
    }
}

/// `spec.ephemeralContainers` as containers, in spec order.
fn ephemeral_specs(spec: &PodSpec) -> Vec<Container> {
    spec.ephemeral_containers
        .iter()
        .flatten()
        .map(podvisor_api::pod::ephemeral_as_container)
        .collect()
}

pub(crate) fn probe_of(
    c: &Container,
    kind: ProbeKind,
) -> Option<&k8s_openapi::api::core::v1::Probe> {
    match kind {
        ProbeKind::Startup => c.startup_probe.as_ref(),
        ProbeKind::Liveness => c.liveness_probe.as_ref(),
        ProbeKind::Readiness => c.readiness_probe.as_ref(),
    }
}

/// M3/M4: the termination message of an exited instance.
fn termination_message(exit: &ExitStatus, fallback_to_logs: bool, reason: &str) -> Option<String> {
    const MAX_FILE: usize = 4096;
    const MAX_LOG_BYTES: usize = 2048;
    const MAX_LOG_LINES: usize = 80;
    if let Some(msg) = exit
        .termination_message
        .as_deref()
        .filter(|m| !m.is_empty())
    {
        return Some(tail_bytes(msg, MAX_FILE).to_string());
    }
    if fallback_to_logs && exit.exit_code != 0 && reason != "ContainerCannotRun" {
        let log = exit.log_tail.as_deref().unwrap_or("");
        let lines: Vec<&str> = log.split_inclusive('\n').collect();
        let start = lines.len().saturating_sub(MAX_LOG_LINES);
        let joined: String = lines[start..].concat();
        let tail = tail_bytes(&joined, MAX_LOG_BYTES);
        if !tail.is_empty() {
            return Some(tail.to_string());
        }
    }
    None
}

/// The last `max` bytes of `s`, starting at a char boundary.
fn tail_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}
