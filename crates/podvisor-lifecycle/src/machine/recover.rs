//! Rebuilding a [`PodMachine`] after the agent restarted (issue 4, S14): from the last
//! persisted pod status and the instances the runtime still knows, without restarting any
//! container, flapping readiness, resetting restart counts or forgetting back-off.

use super::{ContainerState, ExitRecord, InstState, Instance, PodMachine, Sandbox, Worker};
use crate::action::{InstanceId, ProbeKind};
use crate::probe::ProbeResult;
use crate::time::since;
use crate::{MachineConfig, Phase};
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

/// A container instance the runtime still runs (or ran) when the agent starts again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredInstance {
    /// Spec container name.
    pub name: String,
    /// The instance id it was started with.
    pub instance: InstanceId,
    /// `<runtime>://<id>`.
    pub container_id: String,
    /// Process start time.
    pub started_at: Timestamp,
}

/// A container instance that ran and exited before the agent restarted, with the times the
/// runtime recorded (the status keeps whole seconds only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastInstance {
    /// Spec container name.
    pub name: String,
    /// The instance id it was started with.
    pub instance: InstanceId,
    /// `<runtime>://<id>`.
    pub container_id: String,
    /// Process start time.
    pub started_at: Timestamp,
    /// Exit time.
    pub finished_at: Timestamp,
}

/// S14: readiness survives an agent restart for instances that started this long before it.
const READY_KEEP_AFTER: i64 = 10;

impl PodMachine {
    /// Rebuilds the machine of a pod that was running before the agent restarted. `pod` carries
    /// the last persisted status; `running` lists the instances the runtime still runs;
    /// `known_ids_up_to` is the highest instance id the runtime has ever seen for this pod (new
    /// instances are numbered past it, so ids are never reused). Exits
    /// that happened while the agent was down are then reported through
    /// [`PodMachine::handle_container_exited`] with their real times.
    ///
    /// Restart counts, `lastState`, readiness (S14), `started`, the CrashLoopBackOff delay and the
    /// termination in progress continue where they were; a container recorded as running that
    /// the runtime no longer knows reads as `ContainerStatusUnknown` (S5).
    pub fn recover(
        pod: Pod,
        running: &[RecoveredInstance],
        known_ids_up_to: u64,
        config: MachineConfig,
        now: Timestamp,
    ) -> PodMachine {
        PodMachine::recover_with_history(pod, running, &[], known_ids_up_to, config, now)
    }

    /// [`PodMachine::recover`] with the runtime's record of the instances that exited
    /// (`history`, any order): their exact times replace the whole seconds of the status, and
    /// each container's back-off is replayed over its runtime history (B3: the delay in force
    /// and when it was last advanced), so that it goes on exactly even when the agent died
    /// while a container was running (the status then shows no `back-off` message).
    pub fn recover_with_history(
        pod: Pod,
        running: &[RecoveredInstance],
        history: &[PastInstance],
        known_ids_up_to: u64,
        config: MachineConfig,
        now: Timestamp,
    ) -> PodMachine {
        let status = pod.status.clone().unwrap_or_default();
        let ready_condition = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let mut m = PodMachine::blank(pod, config, now);
        m.sandbox = Sandbox::Ready;
        let previous: Vec<ContainerStatus> = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .cloned()
            .collect();
        let mut max_id = 0;
        for ci in 0..m.containers.len() {
            let name = m.containers[ci].name.clone();
            let image = m.container_spec_of(ci).image.clone().unwrap_or_default();
            let prev = previous.iter().find(|s| s.name == name);
            let mut instances = Vec::new();
            let count = prev.map_or(0, |s| s.restart_count);
            if let Some(prev) = prev {
                // While waiting (S6), `lastState` is the newest instance itself.
                let waiting = prev.state.as_ref().is_some_and(|s| s.waiting.is_some());
                let last_count = if waiting { count } else { (count - 1).max(0) };
                if let Some(t) = prev.last_state.as_ref().and_then(|s| s.terminated.as_ref()) {
                    instances.push(exited(t, last_count, &image));
                }
                if let Some(t) = prev.state.as_ref().and_then(|s| s.terminated.as_ref()) {
                    let mut inst = exited(t, count, &image);
                    prev.image_id.clone_into(&mut inst.image_id);
                    instances.push(inst);
                }
            }
            for r in running.iter().filter(|r| r.name == name) {
                let known =
                    prev.is_some_and(|s| s.container_id.as_deref() == Some(&r.container_id));
                // An instance the status does not show yet (the agent died between starting it
                // and publishing it) follows the status's newest one; with none shown
                // (`ContainerCreating`) it is the first.
                let shows_instance = prev.is_some_and(|s| {
                    s.container_id.is_some()
                        || [s.state.as_ref(), s.last_state.as_ref()]
                            .into_iter()
                            .flatten()
                            .any(|st| st.terminated.is_some())
                });
                let restart_count = if known || !shows_instance {
                    count
                } else {
                    count + 1
                };
                let mut inst = instance(r.instance, &r.container_id, restart_count, &image);
                inst.state = InstState::Running {
                    started_at: r.started_at,
                };
                if known {
                    let prev = prev.expect("known");
                    prev.image_id.clone_into(&mut inst.image_id);
                    inst.user = prev.user.as_ref().and_then(|u| u.linux.clone());
                    let started = prev.started == Some(true);
                    inst.results[ProbeKind::Startup as usize] = if started {
                        ProbeResult::Success
                    } else {
                        ProbeResult::Unknown
                    };
                    let long_running = since(now, r.started_at).as_secs() > READY_KEEP_AFTER;
                    if prev.ready && ready_condition && long_running {
                        inst.results[ProbeKind::Readiness as usize] = ProbeResult::Success;
                    }
                }
                instances.push(inst);
            }
            // S4: recorded as running, but the runtime lost it.
            if let Some(prev) = prev {
                let lost = prev
                    .state
                    .as_ref()
                    .and_then(|s| s.running.as_ref())
                    .is_some()
                    && !running
                        .iter()
                        .any(|r| prev.container_id.as_deref() == Some(r.container_id.as_str()));
                if lost {
                    let started_at = prev
                        .state
                        .as_ref()
                        .and_then(|s| s.running.as_ref())
                        .and_then(|r| r.started_at.as_ref())
                        .map(|t| t.0);
                    let mut inst = instance(
                        InstanceId(0),
                        prev.container_id.as_deref().unwrap_or(""),
                        count,
                        &image,
                    );
                    inst.state = InstState::Exited(ExitRecord {
                        exit_code: 137,
                        reason: "ContainerStatusUnknown".to_string(),
                        // S5, two spaces after the period as upstream writes it.
                        message: Some(
                            "The container could not be located when the pod was deleted.  The \
                             container used to be Running"
                                .to_string(),
                        ),
                        started_at,
                        finished_at: now,
                    });
                    instances.push(inst);
                }
            }
            for inst in &mut instances {
                let past = history
                    .iter()
                    .find(|p| !inst.container_id.is_empty() && p.container_id == inst.container_id);
                if let (InstState::Exited(rec), Some(past)) = (&mut inst.state, past) {
                    rec.started_at = Some(past.started_at);
                    rec.finished_at = past.finished_at;
                }
            }
            let replayed = replay_backoff(&mut m, &name, &image, running, history);
            restore_waiting(&mut m, ci, prev, &image, !replayed);
            for inst in &instances {
                max_id = max_id.max(inst.id.0);
            }
            m.containers[ci].instances = instances;
        }
        m.next_instance = max_id.max(known_ids_up_to) + 1;
        // Instances rebuilt from the status alone got id 0; give them ids of their own.
        for c in &mut m.containers {
            for inst in &mut c.instances {
                if inst.id.0 == 0 {
                    inst.id = InstanceId(m.next_instance);
                    m.next_instance += 1;
                }
            }
        }
        if let Some(reason @ ("DeadlineExceeded" | super::evict::EVICTED)) =
            status.reason.as_deref()
        {
            m.evicted = Some((
                reason.to_string(),
                status.message.clone().unwrap_or_default(),
            ));
        }
        let terminal = status
            .phase
            .as_deref()
            .and_then(Phase::parse)
            .is_some_and(Phase::is_terminal);
        if terminal || m.evicted.is_some() || m.pod.metadata.deletion_timestamp.is_some() {
            m.begin_termination(now);
        } else {
            m.worker = Worker::Syncing;
        }
        // The instances run with the resources they were started or resized with; the
        // allocation is the spec's (no checkpoint of a resize in flight survives).
        for (c, alloc) in m.containers.iter_mut().zip(&m.resize.allocated) {
            for i in &mut c.instances {
                i.resources.clone_from(alloc);
            }
        }
        m.recover_restart_all();
        m.step(now);
        m
    }
}

fn instance(id: InstanceId, container_id: &str, restart_count: i32, image: &str) -> Instance {
    Instance {
        id,
        container_id: container_id.to_string(),
        restart_count,
        image: image.to_string(),
        image_id: String::new(),
        user: None,
        state: InstState::Starting,
        results: [
            ProbeResult::initial(ProbeKind::Startup),
            ProbeResult::initial(ProbeKind::Liveness),
            ProbeResult::initial(ProbeKind::Readiness),
        ],
        stop: None,
        restart_on_exit: false,
        quiet_started: false,
        resources: Default::default(),
        resize: None,
        removed: false,
    }
}

fn exited(t: &ContainerStateTerminated, restart_count: i32, image: &str) -> Instance {
    let mut inst = instance(
        InstanceId(0),
        t.container_id.as_deref().unwrap_or(""),
        restart_count,
        image,
    );
    inst.state = InstState::Exited(ExitRecord {
        exit_code: t.exit_code,
        reason: t.reason.clone().unwrap_or_default(),
        message: t.message.clone(),
        started_at: t.started_at.as_ref().map(|s| s.0),
        finished_at: t
            .finished_at
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |s| s.0),
    });
    inst
}

/// Replays container `name`'s back-off over the runtime's record of its instances: each start
/// that followed an exit advanced it (B3), as it did when the agent made that start. False when
/// the record shows no restart (the status' `back-off` message is all there is then).
fn replay_backoff(
    m: &mut PodMachine,
    name: &str,
    image: &str,
    running: &[RecoveredInstance],
    history: &[PastInstance],
) -> bool {
    // An exit still to be reported counts as running until it is.
    let mut timeline: Vec<(InstanceId, Timestamp, Option<Timestamp>)> = history
        .iter()
        .filter(|p| p.name == name && !running.iter().any(|r| r.instance == p.instance))
        .map(|p| (p.instance, p.started_at, Some(p.finished_at)))
        .chain(
            running
                .iter()
                .filter(|r| r.name == name)
                .map(|r| (r.instance, r.started_at, None)),
        )
        .collect();
    timeline.sort_by_key(|(id, ..)| *id);
    let mut replayed = false;
    for pair in timeline.windows(2) {
        if let (Some(finished_at), started_at) = (pair[0].2, pair[1].1) {
            m.backoff.advance(name, image, finished_at, started_at);
            replayed = true;
        }
    }
    replayed
}

/// The reason cache (S6) and, for `CrashLoopBackOff` (unless `restore_backoff` is false), the
/// back-off delay of its message.
fn restore_waiting(
    m: &mut PodMachine,
    ci: usize,
    prev: Option<&ContainerStatus>,
    image: &str,
    restore_backoff: bool,
) {
    let Some(waiting) = prev
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
    else {
        return;
    };
    let (Some(reason), Some(message)) = (waiting.reason.clone(), waiting.message.clone()) else {
        return;
    };
    if reason == "CrashLoopBackOff" && restore_backoff {
        let last_start = prev
            .and_then(|s| s.last_state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.started_at.as_ref())
            .map(|t| t.0);
        let delay = message
            .strip_prefix("back-off ")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(podvisor_api::gotext::parse_duration);
        if let (Some(delay), Some(last_start)) = (delay, last_start) {
            let name = m.containers[ci].name.clone();
            m.backoff.restore(&name, image, delay, last_start);
        }
    }
    let c: &mut ContainerState = &mut m.containers[ci];
    c.reason_cache = Some((reason, message));
}
