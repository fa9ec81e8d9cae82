//! `computePodActions` and `SyncPod` (section 4), plus `SyncTerminatingPod` (T6).

use super::resize::ResizeDecision;
use super::{InstState, Instance, PodMachine, Sandbox, Worker};
use crate::action::{Action, ContainerKind, EventType, InstanceId, KillReason, ProbeKind};
use crate::backoff::BackoffCheck;
use crate::duration::go_duration;
use crate::probe::ProbeResult;
use k8s_openapi::jiff::Timestamp;
use podvisor_api::pod::container_should_restart;

/// The pod worker requeues a sync that ended in an error (a start blocked by back-off) after
/// `backOffPeriod`, 10 s (upstream adds up to 50 % jitter).
const BACKOFF_RESYNC_SECS: i64 = 10;

/// What one sync decided (the kubelet's `podActions`).
#[derive(Debug, Default)]
struct PodActions {
    kill_pod: bool,
    /// Indexes into `PodMachine::containers`, in start order (init first, then regular).
    to_start: Vec<usize>,
    /// (container index, kill message, probe that caused it).
    to_kill: Vec<(usize, KillReason)>,
    /// When a settling sidecar (A8) lets initialization go on.
    settle_until: Option<Timestamp>,
    /// In-place resizes (container index, allocated resources), in spec order.
    to_update: Vec<(usize, k8s_openapi::api::core::v1::ResourceRequirements)>,
}

impl PodMachine {
    /// `ShouldContainerBeRestarted` (A15).
    pub(crate) fn should_restart(&self, ci: usize) -> bool {
        if self.pod.metadata.deletion_timestamp.is_some() {
            return false;
        }
        let Some(newest) = self.containers[ci].newest() else {
            return true;
        };
        // A14: an ephemeral container with a record is never restarted.
        if self.containers[ci].kind == ContainerKind::Ephemeral {
            return false;
        }
        // KEP-5532: removed by an in-place restart of the pod, as if it never ran.
        if newest.removed {
            return true;
        }
        match &newest.state {
            InstState::Exited(e) => {
                newest.restart_on_exit
                    || container_should_restart(
                        self.container_spec_of(ci),
                        self.spec(),
                        e.exit_code,
                    )
            }
            _ => false,
        }
    }

    pub(crate) fn pod_policy(&self) -> &str {
        self.spec().restart_policy.as_deref().unwrap_or("Always")
    }

    /// The restart flag for killing a running container (A11).
    fn restart_after_kill(&self, ci: usize) -> bool {
        match self.container_spec_of(ci).restart_policy.as_deref() {
            Some(p) => p != "Never",
            None => self.pod_policy() != "Never",
        }
    }

    fn image_changed(&self, inst: &Instance, ci: usize) -> bool {
        self.container_spec_of(ci).image.as_deref().unwrap_or("") != inst.image
    }

    /// `SyncPod` while the pod worker is syncing.
    pub(super) fn sync_pod(&mut self, now: Timestamp) {
        match self.sandbox {
            Sandbox::None { retry_at } => {
                if retry_at.is_some_and(|r| now < r) {
                    return;
                }
                // A2/A18: the containers of a lost sandbox are all dead before the new one.
                let busy = self
                    .containers
                    .iter()
                    .any(|c| c.instances.iter().any(|i| i.is_alive() || i.is_starting()));
                if busy {
                    self.kill_all(None, now);
                    return;
                }
                self.sandbox = Sandbox::Creating;
                self.actions.push_back(Action::CreateSandbox);
                return;
            }
            Sandbox::Creating | Sandbox::Gone => return,
            Sandbox::Ready => {}
        }
        // Syncs are serial: a start step (create, start, postStart) in progress blocks the next
        // one (A20).
        if self
            .containers
            .iter()
            .any(|c| c.instances.iter().any(Instance::is_starting))
        {
            return;
        }
        if self.kill_pod {
            self.kill_all(None, now);
            return;
        }
        // KEP-5532: a `RestartAllContainers` rule matched; nothing else until all are dead.
        if self.sync_restart_all(now) {
            return;
        }
        // This is the requeued sync a failed or backed-off start waited for, whether or not it
        // gets to that container (initialization may have regressed meanwhile): the timers are
        // spent. (A start still blocked by back-off always yields a later `until`.)
        for c in &mut self.containers {
            if c.retry_at.is_some_and(|r| r <= now) {
                c.retry_at = None;
            }
            if c.backoff_until.is_some_and(|u| u <= now) {
                c.backoff_until = None;
                c.backoff_resync = None;
            }
        }
        let actions = self.compute_pod_actions(now);
        self.sidecar_settle_until = actions.settle_until;
        if actions.kill_pod {
            self.kill_pod = true;
            self.kill_all(None, now);
            return;
        }
        for (ci, reason) in actions.to_kill {
            let ii = self.containers[ci].instances.len() - 1;
            let grace = self.container_grace(ci, reason.probe);
            self.begin_stop(ci, ii, reason, grace, false, now);
        }
        // A18 step 7: in-place resizes, before the starts.
        for (ci, resources) in actions.to_update {
            self.update_resources(ci, resources);
        }
        self.finish_resize();
        // A14/A18 step 5: ephemeral containers without a record start before the init and
        // regular containers, initialized or not (`EphemeralContainersToStart`).
        let mut to_start: Vec<usize> = (0..self.containers.len())
            .filter(|&ci| {
                let c = &self.containers[ci];
                c.kind == ContainerKind::Ephemeral && c.instances.is_empty()
            })
            .collect();
        to_start.extend(actions.to_start);
        self.start_containers(&to_start, now);
    }

    /// A2 a/b: whether a sandbox that is no longer READY is created again. Not under `Never`
    /// once any container has a record; not when no regular container is left to start
    /// (`OnFailure` skips those that succeeded) and one has a record (initialized).
    pub(super) fn recreate_sandbox(&self) -> bool {
        let policy = self.pod_policy();
        if policy == "Never" && self.containers.iter().any(|c| !c.instances.is_empty()) {
            return false;
        }
        let mut regular = self
            .containers
            .iter()
            .filter(|c| c.kind == ContainerKind::Regular);
        let succeeded = |c: &super::ContainerState| {
            c.newest()
                .and_then(Instance::exit)
                .is_some_and(|e| e.exit_code == 0)
        };
        let to_start = regular
            .clone()
            .any(|c| !(policy == "OnFailure" && succeeded(c)));
        to_start || !regular.any(|c| !c.instances.is_empty())
    }

    /// `computePodActions` (4.2, 4.3) over the current instance records.
    fn compute_pod_actions(&self, now: Timestamp) -> PodActions {
        let mut out = PodActions::default();
        let initialized = self.compute_init_actions(&mut out, now);
        if out.kill_pod || !initialized {
            return out;
        }
        let mut keep = 0;
        let mut restart_after_kill = 0;
        for (ci, c) in self.containers.iter().enumerate() {
            if c.kind != ContainerKind::Regular {
                continue;
            }
            let Some(inst) = c.newest().filter(|i| i.is_alive()) else {
                // A10
                if self.should_restart(ci) {
                    out.to_start.push(ci);
                }
                continue;
            };
            if inst.stop.is_some() {
                // Already being killed; it is restarted (or not) once it has exited.
                if inst.stop.as_ref().is_some_and(|s| s.restart) {
                    restart_after_kill += 1;
                }
                continue;
            }
            let name = &c.name;
            let (message, probe, forced) = if self.image_changed(inst, ci) {
                (format!("Container {name} definition changed"), None, true)
            } else if inst.result(ProbeKind::Liveness) == ProbeResult::Failure {
                (
                    format!("Container {name} failed liveness probe"),
                    Some(ProbeKind::Liveness),
                    false,
                )
            } else if inst.result(ProbeKind::Startup) == ProbeResult::Failure {
                (
                    format!("Container {name} failed startup probe"),
                    Some(ProbeKind::Startup),
                    false,
                )
            } else {
                match self.resize_decision(ci, inst, now) {
                    ResizeDecision::Keep => {}
                    ResizeDecision::Update(r) => out.to_update.push((ci, r)),
                    ResizeDecision::Restart(reason) => {
                        // Killed and started again whatever the restart policy, without the
                        // `, will be restarted` suffix (`computePodResizeAction`).
                        restart_after_kill += 1;
                        out.to_kill.push((ci, reason));
                        continue;
                    }
                }
                keep += 1;
                continue;
            };
            let restart = forced || self.restart_after_kill(ci);
            let message = if restart {
                restart_after_kill += 1;
                format!("{message}, will be restarted")
            } else {
                message
            };
            out.to_kill.push((
                ci,
                KillReason {
                    message,
                    probe,
                    restart,
                },
            ));
        }
        // A13: nothing left to keep or start: stop everything, sidecars included.
        if keep == 0 && out.to_start.is_empty() && restart_after_kill == 0 {
            out.kill_pod = true;
            out.to_start.clear();
        }
        out
    }

    /// `computeInitContainerActions` (A3–A9). Returns whether the pod has initialized.
    fn compute_init_actions(&self, out: &mut PodActions, now: Timestamp) -> bool {
        let inits: Vec<usize> = (0..self.containers.len())
            .filter(|&ci| self.containers[ci].kind.is_init())
            .collect();
        if inits.is_empty() {
            return true;
        }
        // A4: a regular container exists (created or running) -> initialized before.
        let mut initialized = self
            .containers
            .iter()
            .filter(|c| c.kind == ContainerKind::Regular)
            .any(|c| c.newest().is_some_and(Instance::is_alive));
        let mut previously = initialized;
        let mut start = Vec::new();
        let last = inits.len() - 1;
        for (pos, &ci) in inits.iter().enumerate().rev() {
            let c = &self.containers[ci];
            let sidecar = c.kind == ContainerKind::Sidecar;
            // A2: records of an earlier sandbox were purged.
            // KEP-5532: nor do records an in-place restart removed.
            let Some(inst) = c
                .newest()
                .filter(|i| i.id.0 >= self.sandbox_floor && !i.removed)
            else {
                if previously && sidecar {
                    start.push(ci);
                }
                continue;
            };
            if previously && !sidecar {
                continue;
            }
            match &inst.state {
                InstState::Starting | InstState::PostStart { .. } => {}
                InstState::Running { .. } if !sidecar => {}
                InstState::Running { .. } => {
                    if inst.stop.is_some() {
                        // being restarted
                    } else if self.init_probe_kill(ci, inst, out) {
                        // killed for a startup failure; restarted once it exited
                    } else if self.startup_pending(ci, inst) {
                        // A5: a sidecar whose startup probe has no result holds initialization
                    } else if let Some(until) = self.settling(ci, inst, now).filter(|_| !previously)
                    {
                        // A8: the next container waits for the sidecar to be seen started.
                        out.settle_until = Some(until);
                    } else {
                        if pos == last {
                            initialized = true;
                        } else if !previously {
                            start.push(inits[pos + 1]);
                        }
                        self.sidecar_running_checks(ci, inst, out, now);
                    }
                }
                InstState::Exited(e) => {
                    if sidecar {
                        start.push(ci);
                    } else if e.exit_code != 0 || e.reason == "OOMKilled" {
                        let restart = container_should_restart(
                            self.container_spec_of(ci),
                            self.spec(),
                            e.exit_code,
                        );
                        if !restart {
                            out.kill_pod = true;
                            out.to_start.clear();
                            return false;
                        }
                        start.push(ci);
                    } else if pos == last {
                        initialized = true;
                    } else if !previously {
                        start.push(inits[pos + 1]);
                    }
                }
            }
            previously = true;
        }
        if !previously {
            // A6: nothing has a record yet.
            start.push(inits[0]);
        }
        start.reverse();
        out.to_start.extend(start);
        initialized
    }

    /// A8/A21: a sidecar without a startup probe that started less than `sidecar_settle` ago;
    /// returns when it has settled.
    fn settling(&self, ci: usize, inst: &Instance, now: Timestamp) -> Option<Timestamp> {
        if super::probe_of(self.container_spec_of(ci), ProbeKind::Startup).is_some() {
            return None;
        }
        let InstState::Running { started_at } = inst.state else {
            return None;
        };
        let until = started_at + crate::time::to_signed(self.config.sidecar_settle);
        (now < until).then_some(until)
    }

    fn startup_pending(&self, ci: usize, inst: &Instance) -> bool {
        super::probe_of(self.container_spec_of(ci), ProbeKind::Startup).is_some()
            && inst.result(ProbeKind::Startup) == ProbeResult::Unknown
    }

    /// A5: a running sidecar whose startup probe failed is killed and restarted.
    fn init_probe_kill(&self, ci: usize, inst: &Instance, out: &mut PodActions) -> bool {
        if inst.result(ProbeKind::Startup) != ProbeResult::Failure {
            return false;
        }
        let name = &self.containers[ci].name;
        out.to_kill.push((
            ci,
            KillReason {
                message: format!("Init container {name} failed startup probe"),
                probe: Some(ProbeKind::Startup),
                restart: true,
            },
        ));
        true
    }

    /// A5: image change or liveness failure of a running sidecar.
    fn sidecar_running_checks(
        &self,
        ci: usize,
        inst: &Instance,
        out: &mut PodActions,
        now: Timestamp,
    ) {
        let name = &self.containers[ci].name;
        let reason = if self.image_changed(inst, ci) {
            KillReason {
                message: format!("Init container {name} definition changed"),
                probe: None,
                restart: true,
            }
        } else if inst.result(ProbeKind::Liveness) == ProbeResult::Failure {
            KillReason {
                message: format!("Init container {name} failed liveness probe"),
                probe: Some(ProbeKind::Liveness),
                restart: true,
            }
        } else {
            // Then the in-place resize of the sidecar (`computePodResizeAction` with
            // `isRestartableInitContainer`).
            match self.resize_decision(ci, inst, now) {
                ResizeDecision::Keep => {}
                ResizeDecision::Update(r) => out.to_update.push((ci, r)),
                ResizeDecision::Restart(reason) => out.to_kill.push((ci, reason)),
            }
            return;
        };
        out.to_kill.push((ci, reason));
    }

    /// Starts containers in order (A18 steps 6 and 8). Only one start step runs at a time (A20):
    /// the first container whose back-off allows it is started, blocked ones get
    /// `CrashLoopBackOff`, the rest wait for the next sync.
    fn start_containers(&mut self, to_start: &[usize], now: Timestamp) {
        let mut started = false;
        for &ci in to_start {
            if self.containers[ci].retry_at.is_some_and(|r| now < r) {
                if self.containers[ci].kind == ContainerKind::Init {
                    return;
                }
                continue;
            }
            let image = self.container_spec_of(ci).image.clone().unwrap_or_default();
            let name = self.containers[ci].name.clone();
            // A2: the sync that purges init-container records still sees them when it starts
            // the first init container; later syncs do not.
            let c = &self.containers[ci];
            // KEP-5532: nor do they see the records an in-place restart removed.
            let purged = (c.kind.is_init()
                && c.index != 0
                && c.newest().is_some_and(|i| i.id.0 < self.sandbox_floor))
                || c.newest().is_some_and(|i| i.removed);
            let finished = if purged {
                None
            } else {
                c.newest_exited().map(|e| e.finished_at)
            };
            match self.backoff.check(&name, &image, finished, now) {
                BackoffCheck::Blocked { delay, until } => {
                    // A11: the restart after a kill was this one attempt.
                    if let Some(i) = self.containers[ci].instances.last_mut() {
                        i.restart_on_exit = false;
                    }
                    let message = format!(
                        "back-off {} restarting failed container={} pod={}",
                        go_duration(delay),
                        name,
                        self.pod_full_name()
                    );
                    let again = {
                        let c = &mut self.containers[ci];
                        let due = c.backoff_until != Some(until)
                            || c.backoff_resync.is_none_or(|r| r <= now);
                        if due {
                            c.backoff_until = Some(until);
                            c.backoff_resync = Some(now + crate::time::secs(BACKOFF_RESYNC_SECS))
                                .filter(|r| *r < until);
                        }
                        due
                    };
                    if again {
                        let event = format!(
                            "Back-off restarting failed container {} in pod {}",
                            name,
                            self.pod_full_name()
                        );
                        self.emit(EventType::Warning, "BackOff", event, Some(ci));
                    }
                    self.containers[ci].reason_cache =
                        Some(("CrashLoopBackOff".to_string(), message));
                    if self.containers[ci].kind == ContainerKind::Init {
                        // A18: a failed regular init start aborts the sync.
                        return;
                    }
                }
                BackoffCheck::Proceed if !started => {
                    if let Some(f) = finished {
                        self.backoff.advance(&name, &image, f, now);
                    }
                    self.containers[ci].backoff_until = None;
                    self.containers[ci].backoff_resync = None;
                    self.containers[ci].retry_at = None;
                    // B9: after the restart back-off lets the start through, the image
                    // manager's own back-off may still hold it.
                    if let Some(until) = self.image_backoff.blocked_until(&image, now) {
                        self.image_backed_off(ci, &image, until);
                        if self.containers[ci].kind == ContainerKind::Init {
                            return;
                        }
                        continue;
                    }
                    self.start_instance(ci, image);
                    started = true;
                    if self.containers[ci].kind == ContainerKind::Init {
                        return;
                    }
                }
                BackoffCheck::Proceed => {}
            }
        }
    }

    /// B9: pulls of `image` back off until `until`: `ImagePullBackOff`, with the image
    /// manager's `BackOff` event and the sync's `Failed` one; the start is tried again then.
    fn image_backed_off(&mut self, ci: usize, image: &str, until: Timestamp) {
        let message = format!(
            "Back-off pulling image {}",
            podvisor_api::gotext::quote(image)
        );
        self.emit(EventType::Normal, "BackOff", message.clone(), Some(ci));
        self.emit(
            EventType::Warning,
            "Failed",
            "Error: ImagePullBackOff".to_string(),
            Some(ci),
        );
        let c = &mut self.containers[ci];
        c.retry_at = Some(until);
        c.reason_cache = Some(("ImagePullBackOff".to_string(), message));
    }

    fn start_instance(&mut self, ci: usize, image: String) {
        let id = InstanceId(self.next_instance);
        self.next_instance += 1;
        let c = &mut self.containers[ci];
        // S10: one more than the newest instance's count.
        let restart_count = c.newest().map_or(0, |i| i.restart_count + 1);
        // Only the newest two instances are ever visible (S3); keep one older for safety.
        if c.instances.len() > 2 {
            c.instances.remove(0);
        }
        c.instances.push(Instance {
            id,
            container_id: String::new(),
            restart_count,
            image,
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
            // The kubelet starts a container with its allocated resources.
            resources: self.resize.allocated[ci].clone(),
            resize: None,
            removed: false,
        });
        self.actions.push_back(Action::StartContainer {
            name: c.name.clone(),
            kind: c.kind,
            instance: id,
            restart_count,
        });
    }

    /// Kills every live instance (`KillPod`, T4) with container grace (T2) or `pod_grace` (T1),
    /// in termination order when the pod has sidecars (T5).
    pub(super) fn kill_all(&mut self, pod_grace: Option<i64>, now: Timestamp) {
        let ordering = self
            .containers
            .iter()
            .any(|c| c.kind == ContainerKind::Sidecar);
        for ci in 0..self.containers.len() {
            let Some(ii) = self.containers[ci]
                .instances
                .iter()
                .rposition(Instance::is_alive)
            else {
                continue;
            };
            if self.containers[ci].instances[ii].stop.is_some() {
                continue;
            }
            let grace = pod_grace.unwrap_or_else(|| self.container_grace(ci, None));
            let reason = KillReason {
                message: format!("Stopping container {}", self.containers[ci].name),
                probe: None,
                restart: false,
            };
            self.begin_stop(ci, ii, reason, grace, ordering, now);
        }
    }

    /// `SyncTerminatingPod` (T6): stop everything, then write the final status.
    pub(super) fn sync_terminating(&mut self, now: Timestamp) {
        let Worker::Terminating { grace } = self.worker else {
            return;
        };
        self.kill_all(Some(grace), now);
        let busy = self
            .containers
            .iter()
            .any(|c| c.instances.iter().any(|i| i.is_alive() || i.is_starting()));
        if busy {
            return;
        }
        for c in &mut self.containers {
            c.backoff_until = None;
            c.backoff_resync = None;
            c.retry_at = None;
        }
        self.worker = Worker::Terminated;
        self.sandbox = Sandbox::Gone;
        for w in &mut self.probes {
            w.stopped = true;
        }
        self.publish_status(now);
        self.actions.push_back(Action::PodTerminated);
    }

    /// Called when an instance becomes running and visible: readiness fast path (R12).
    pub(super) fn on_instance_running(&mut self, _ci: usize, now: Timestamp) {
        self.kick_unready_readiness(now);
    }
}
