//! Status generation (`generateAPIPodStatus`, `convertToAPIContainerStatuses`, `TerminatePod`):
//! sections 1.3, 2 and 9 over the machine's instance records.

use super::{ContainerState, InstState, Instance, PodMachine, Sandbox, Worker};
use crate::Phase;
use crate::action::{Action, ContainerKind, ProbeKind};
use crate::probe::ProbeResult;
use crate::status::conditions::{
    ConditionInput, POD_READY_TO_START_CONTAINERS, generate_conditions,
};
use crate::status::phase::{PhaseInput, get_phase};
use crate::time::trunc_secs;
use k8s_openapi::api::core::v1::{
    Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, PodIP, PodStatus, VolumeMountStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Condition types the kubelet owns (D1); others are preserved as written by clients.
pub(crate) use podvisor_api::pod::KUBELET_CONDITIONS;

/// S15 (RecursiveReadOnlyMounts): the container's mounts as its status lists them. A
/// read-only mount shows the resolved recursive mode; the process runtime makes no recursive
/// read-only mounts, so it is always `Disabled` (`resolveRecursiveReadOnly` without runtime
/// support).
fn volume_mount_statuses(spec: &Container) -> Option<Vec<VolumeMountStatus>> {
    let mounts = spec.volume_mounts.as_ref().filter(|m| !m.is_empty())?;
    Some(
        mounts
            .iter()
            .map(|m| {
                let read_only = m.read_only.unwrap_or(false);
                VolumeMountStatus {
                    name: m.name.clone(),
                    mount_path: m.mount_path.clone(),
                    read_only: read_only.then_some(true),
                    recursive_read_only: read_only.then(|| "Disabled".to_string()),
                }
            })
            .collect(),
    )
}

/// M5: the per-pod cap on termination messages.
const MAX_POD_TERMINATION_MESSAGE: usize = 12 * 1024;

fn time(t: Timestamp) -> Time {
    Time(trunc_secs(t))
}

fn terminated_state(inst: &Instance) -> Option<ContainerStateTerminated> {
    let e = inst.exit()?;
    Some(ContainerStateTerminated {
        exit_code: e.exit_code,
        reason: Some(e.reason.clone()),
        message: e.message.clone(),
        started_at: e.started_at.map(time),
        finished_at: Some(time(e.finished_at)),
        container_id: (!inst.container_id.is_empty()).then(|| inst.container_id.clone()),
        signal: None,
    })
}

impl PodMachine {
    /// Regenerates the status and queues `PublishStatus` when it changed.
    pub(super) fn publish_status(&mut self, now: Timestamp) {
        // A11: the kubelet kills a container and starts its replacement in one sync, so it never
        // publishes the gap (which would read as terminal under `Never`/`OnFailure`): keep the
        // previous status while such a replacement is in its start step.
        let replacing_killed = self.containers.iter().any(|c| {
            let n = c.instances.len();
            n >= 2 && c.instances[n - 1].is_starting() && c.instances[n - 2].restart_on_exit
        });
        if replacing_killed && self.worker == Worker::Syncing {
            return;
        }
        let status = self.build_status(now);
        if matches!(self.worker, Worker::Terminating { .. }) && self.terminating_view.is_none() {
            // T6: `SyncTerminatingPod` writes the status as it finds the pod, then kills; the
            // next status it generates is the final one.
            self.terminating_view = Some((
                status.init_container_statuses.clone().unwrap_or_default(),
                status.container_statuses.clone().unwrap_or_default(),
            ));
        }
        if self.pod.status.as_ref() != Some(&status) {
            self.pod.status = Some(status);
            self.actions
                .push_back(Action::PublishStatus(Box::new(self.pod.clone())));
        }
    }

    fn container_status(&self, ci: usize, default_reason: &str, terminal: bool) -> ContainerStatus {
        let c: &ContainerState = &self.containers[ci];
        let spec = self.container_spec_of(ci);
        // H2: an instance in its start step is not visible yet.
        let visible: Vec<&Instance> = c.instances.iter().filter(|i| !i.is_starting()).collect();
        let newest = visible.last().copied();
        // A2: a purged init-container record no longer shows once the container ran again in
        // the new sandbox (until then the cached status keeps showing it, S2).
        // KEP-5532: what an in-place restart of the whole pod removed stays as history.
        let floor = self.sandbox_floor;
        let previous = visible
            .len()
            .checked_sub(2)
            .map(|i| visible[i])
            .filter(|p| {
                c.kind == ContainerKind::Regular
                    || p.removed
                    || p.id.0 >= floor
                    || newest.is_none_or(|n| n.id.0 < floor)
            });
        let mut state = match newest.map(|i| &i.state) {
            Some(InstState::Running { started_at }) => ApiState {
                running: Some(ContainerStateRunning {
                    started_at: Some(time(*started_at)),
                }),
                ..Default::default()
            },
            Some(InstState::Exited(_)) => ApiState {
                terminated: newest.and_then(terminated_state),
                ..Default::default()
            },
            _ => ApiState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(default_reason.to_string()),
                    message: None,
                }),
                ..Default::default()
            },
        };
        let mut last_state = previous.and_then(terminated_state).map(|t| ApiState {
            terminated: Some(t),
            ..Default::default()
        });
        // S6: a container that will be restarted shows the last failed start step.
        let init_succeeded = c.kind == ContainerKind::Init
            && newest
                .and_then(Instance::exit)
                .is_some_and(|e| e.exit_code == 0);
        // A replacement in its start step is the restart under way: the kubelet still shows the
        // status it generated before that sync (the cached failure, H3/S6).
        let restarting = c.newest().is_some_and(Instance::is_starting)
            && self.pod.metadata.deletion_timestamp.is_none();
        if !terminal
            && !init_succeeded
            && (restarting || self.should_restart(ci))
            && let Some((reason, message)) = &c.reason_cache
        {
            if state.terminated.is_some() {
                last_state = Some(state.clone());
            }
            state = ApiState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: Some(message.clone()),
                }),
                ..Default::default()
            };
        }
        let running = state.running.is_some();
        let started = running && self.instance_started(ci);
        let ephemeral = c.kind == ContainerKind::Ephemeral;
        let ready = match c.kind {
            // S13
            ContainerKind::Init => state.terminated.as_ref().is_some_and(|t| t.exit_code == 0),
            // The prober's `UpdatePodStatus` sets `ready` and `started` of init and regular
            // containers only: an ephemeral container is never ready.
            ContainerKind::Ephemeral => false,
            _ => {
                started
                    && match spec.readiness_probe {
                        // Derived at status generation only: a startup Success published by
                        // the deletion (R10, T6) does not make the container ready.
                        None => !newest.is_some_and(|i| i.quiet_started),
                        Some(_) => newest.is_some_and(|i| {
                            i.result(ProbeKind::Readiness) == ProbeResult::Success
                        }),
                    }
            }
        };
        let (resources, allocated_resources) = self.status_resources(ci, newest);
        ContainerStatus {
            name: c.name.clone(),
            // S1/S4: the spec image until an instance exists, then the image that instance
            // runs (an image update of a completed init container is not re-run, M12).
            image: newest.map_or_else(
                || spec.image.clone().unwrap_or_default(),
                |i| i.image.clone(),
            ),
            image_id: newest.map(|i| i.image_id.clone()).unwrap_or_default(),
            user: newest
                .and_then(|i| i.user.clone())
                .map(|linux| k8s_openapi::api::core::v1::ContainerUser { linux: Some(linux) }),
            container_id: newest
                .map(|i| i.container_id.clone())
                .filter(|s| !s.is_empty()),
            restart_count: newest.map_or(0, |i| i.restart_count),
            ready,
            started: (!ephemeral).then_some(started),
            state: Some(state),
            last_state: Some(last_state.unwrap_or_default()),
            volume_mounts: volume_mount_statuses(spec),
            // S15 (InPlacePodVerticalScaling): for a container the runtime has, the resources
            // it runs with and the allocated requests. Ephemeral containers have no resources
            // (V12) and none are allocated to them.
            resources: resources.filter(|_| !ephemeral),
            allocated_resources: allocated_resources.filter(|_| !ephemeral),
            ..Default::default()
        }
    }

    fn build_status(&self, now: Timestamp) -> PodStatus {
        let prev = self.pod.status.clone().unwrap_or_default();
        let spec = self.spec();
        let terminal = self.worker == Worker::Terminated;
        let default_reason = if self.containers.iter().any(|c| c.kind.is_init()) {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        let mut init_statuses = Vec::new();
        let mut statuses = Vec::new();
        let mut ephemeral_statuses = Vec::new();
        for (ci, c) in self.containers.iter().enumerate() {
            let s = self.container_status(ci, default_reason, terminal);
            match c.kind {
                ContainerKind::Regular => statuses.push(s),
                ContainerKind::Ephemeral => ephemeral_statuses.push(s),
                ContainerKind::Init | ContainerKind::Sidecar => init_statuses.push(s),
            }
        }
        // S1: regular container statuses are sorted by name; so are the ephemeral ones
        // (`convertToAPIContainerStatuses` sorts every non-init list), which count for neither
        // the phase nor the conditions (A14).
        statuses.sort_by(|a, b| a.name.cmp(&b.name));
        ephemeral_statuses.sort_by(|a, b| a.name.cmp(&b.name));
        if let (Worker::Terminating { .. }, Some((init, regular))) =
            (&self.worker, &self.terminating_view)
        {
            // T6/T7: while the containers are being killed, the statuses stay as written when
            // termination began; only probe results still change `ready` and `started` of a
            // running container (`SetContainerReadiness`, `SetContainerStartup`), and a
            // container that died is not ready at once (as with the evented PLEG,
            // kubernetes#128820).
            let fresh: Vec<ContainerStatus> = init_statuses.into_iter().chain(statuses).collect();
            let frozen = |list: &[ContainerStatus]| -> Vec<ContainerStatus> {
                list.iter()
                    .map(|s| {
                        let mut s = s.clone();
                        if let Some(f) = fresh.iter().find(|f| f.name == s.name) {
                            if f.state.as_ref().is_some_and(|st| st.running.is_some()) {
                                s.ready = f.ready;
                                s.started = f.started;
                            } else if s.state.as_ref().is_some_and(|st| st.running.is_some()) {
                                s.ready = false;
                            }
                        }
                        s
                    })
                    .collect()
            };
            init_statuses = frozen(init);
            statuses = frozen(regular);
        }
        let has_initialized = self.containers.iter().any(|c| {
            // P5 (1.32+): a regular container of the current sandbox (A2).
            c.kind == ContainerKind::Regular
                && c.instances
                    .iter()
                    .any(|i| i.id.0 >= self.sandbox_floor && !i.removed)
        });
        let mut phase = get_phase(&PhaseInput {
            spec,
            init_statuses: &init_statuses,
            statuses: &statuses,
            pod_is_terminal: terminal,
            pod_has_initialized: has_initialized,
            is_static: self.config.is_static,
        });
        let prev_phase = prev.phase.as_deref().and_then(Phase::parse);
        // P11: never leave a terminal phase, not even for the other one (forced back).
        if let Some(p) = prev_phase.filter(|p| p.is_terminal() && *p != phase) {
            phase = p;
        }
        // KEP-5532: Pending from a `RestartAllContainers` exit until the containers run again.
        if phase != Phase::Pending
            && prev_phase.is_none_or(|p| !p.is_terminal())
            && !terminal
            && self.worker == Worker::Syncing
            && self.restart_all_pending()
        {
            phase = Phase::Pending;
        }
        let (mut reason, mut message) = (None, None);
        // P13
        if let Some((r, m)) = &self.evicted {
            phase = Phase::Failed;
            reason = Some(r.clone());
            message = Some(m.clone());
        }
        if terminal && !self.config.is_static {
            // P14 TerminatePod
            if matches!(phase, Phase::Pending | Phase::Running) {
                phase = Phase::Failed;
            }
            terminate_statuses(&mut init_statuses, &mut statuses, has_initialized);
        }
        // P12: keep reason and message while the phase stays.
        if prev_phase == Some(phase) && reason.is_none() {
            reason = prev.reason.clone();
            message = prev.message.clone();
        }
        cap_messages(&mut init_statuses, &mut statuses);
        let previous_conditions = prev.conditions.clone().unwrap_or_default();
        let mut conditions = generate_conditions(&ConditionInput {
            spec,
            phase,
            init_statuses: &init_statuses,
            statuses: &statuses,
            sandbox_ready: self.sandbox == Sandbox::Ready,
            previous: &previous_conditions,
            now: trunc_secs(now),
            generation: self.pod.metadata.generation,
        });
        // The resize conditions come before the kubelet's others (`generateAPIPodStatus`).
        let at = conditions
            .iter()
            .position(|c| c.type_ == POD_READY_TO_START_CONTAINERS)
            .unwrap_or(conditions.len());
        conditions.splice(at..at, self.resize_conditions());
        let terminal_reason = match phase {
            Phase::Succeeded => Some("PodCompleted"),
            Phase::Failed => Some("PodFailed"),
            _ => None,
        };
        conditions.extend(self.all_containers_restarting_condition(
            terminal_reason,
            &previous_conditions,
            now,
        ));
        let host_ip = self.config.host_ip.clone();
        let pod_ip = self.config.pod_ip.clone();
        PodStatus {
            phase: Some(phase.as_str().to_string()),
            reason,
            message,
            conditions: Some(conditions),
            start_time: prev.start_time.clone(),
            host_ip: host_ip.clone(),
            host_ips: host_ip.map(|ip| vec![HostIP { ip }]),
            pod_ip: pod_ip.clone(),
            pod_ips: pod_ip.map(|ip| vec![PodIP { ip }]),
            qos_class: Some(podvisor_api::pod::qos_class(spec).as_str().to_string()),
            init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
            container_statuses: Some(statuses),
            ephemeral_container_statuses: (!ephemeral_statuses.is_empty())
                .then_some(ephemeral_statuses),
            // D10: the generation of the pod this status was built from.
            observed_generation: self.pod.metadata.generation,
            ..Default::default()
        }
    }
}

/// P14: containers that are not terminated when the pod terminates become
/// `ContainerStatusUnknown` (exit 137).
fn terminate_statuses(
    init_statuses: &mut [ContainerStatus],
    statuses: &mut [ContainerStatus],
    initialized: bool,
) {
    let unknown = || ApiState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some("ContainerStatusUnknown".to_string()),
            message: Some(
                "The container could not be located when the pod was terminated".to_string(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    let is_terminated =
        |s: &ContainerStatus| s.state.as_ref().is_some_and(|st| st.terminated.is_some());
    let has_started = |s: &ContainerStatus| {
        s.state.as_ref().is_some_and(|st| st.running.is_some())
            || s.last_state
                .as_ref()
                .is_some_and(|st| st.terminated.is_some())
    };
    if initialized {
        for s in statuses.iter_mut().filter(|s| !is_terminated(s)) {
            s.state = Some(unknown());
            s.ready = false;
        }
    }
    // Init containers: all but the trailing run of never-started ones (at least the first).
    let last_started = init_statuses
        .iter()
        .rposition(|s| is_terminated(s) || has_started(s))
        .unwrap_or(0);
    for s in init_statuses.iter_mut().take(last_started + 1) {
        if !is_terminated(s) {
            s.state = Some(unknown());
            s.ready = false;
        }
    }
    for s in init_statuses.iter_mut().chain(statuses.iter_mut()) {
        s.started = Some(false);
        if !is_terminated(s) {
            s.ready = false;
        }
    }
}

/// M5: every terminated message is cut to its first 12 KiB / (number of containers) bytes.
fn cap_messages(init_statuses: &mut [ContainerStatus], statuses: &mut [ContainerStatus]) {
    let n = init_statuses.len() + statuses.len();
    if n == 0 {
        return;
    }
    let limit = MAX_POD_TERMINATION_MESSAGE / n;
    for s in init_statuses.iter_mut().chain(statuses.iter_mut()) {
        for st in [s.state.as_mut(), s.last_state.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(m) = st.terminated.as_mut().and_then(|t| t.message.as_mut())
                && m.len() > limit
            {
                let mut end = limit;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
            }
        }
    }
}
