//! KEP-5532 (`RestartAllContainersOnContainerExits`, alpha in 1.35): a container exit that
//! matches a `RestartAllContainers` rule restarts the whole pod in place.
//!
//! As the kubelet does it (`ShouldAllContainersRestart`, `computePodActions` with
//! `restartAllContainers`, `GenerateAllContainersRestartingCondition`):
//!
//! 1. *Termination phase*, entered by the sync that sees the matching exit of an init, sidecar
//!    or regular container: `AllContainersRestarting` becomes True (reason
//!    `RestartAllContainersStarted`), and every live init, sidecar and regular instance is
//!    killed with a grace override of 0 — so no preStop hook runs and the stop signal is
//!    followed by SIGKILL after the 2 s minimum (`killContainer`) — with no sidecar ordering.
//!    Ephemeral containers are left alone. Nothing is started meanwhile.
//! 2. Once every one of them has exited, their records count as removed from the runtime
//!    (`Instance::removed`): the condition goes False, the init containers run again from the first
//!    and every regular container starts again whatever its restart policy (including those
//!    that succeeded), with no back-off (the kubelet's `doBackOff` finds no exited instance) and
//!    restart counts that go on. The sandbox, its IP and volumes stay.
//!
//! The phase is Pending from the matching exit until the regular containers run again
//! (KEP "Pod Phase"), unless a re-run init container fails the pod.

use super::{InstState, PodMachine};
use crate::action::{ContainerKind, KillReason};
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use podvisor_api::pod::{ALL_CONTAINERS_RESTARTING, restarts_all_containers};

/// The condition's reason while the containers are killed (`RestartAllContainersStarted`).
pub const REASON_RESTART_ALL_CONTAINERS_STARTED: &str = "RestartAllContainersStarted";
/// The condition's message while the containers are killed.
const MESSAGE: &str = "container exited with restart policy rule";

impl PodMachine {
    fn gate_on(&self) -> bool {
        self.config.gates.restart_all_containers()
    }

    /// A record not removed by a reset, and for init containers not purged with an earlier
    /// sandbox (A2).
    fn is_current(&self, kind: ContainerKind, id: u64, removed: bool) -> bool {
        !removed && (!kind.is_init() || id >= self.sandbox_floor)
    }

    /// `ShouldAllContainersRestart`: the first init, sidecar or regular container whose newest
    /// current instance exited with a code whose first matching rule is `RestartAllContainers`.
    pub(super) fn restart_all_trigger(&self) -> Option<usize> {
        if !self.gate_on() || self.pod.metadata.deletion_timestamp.is_some() {
            return None;
        }
        self.containers.iter().enumerate().position(|(ci, c)| {
            c.kind != ContainerKind::Ephemeral
                && c.newest().is_some_and(|i| {
                    self.is_current(c.kind, i.id.0, i.removed)
                        && matches!(&i.state, InstState::Exited(e)
                            if restarts_all_containers(self.container_spec_of(ci), e.exit_code))
                })
        })
    }

    /// Whether the pod is between a matching exit and the new start of every container (each
    /// still shows a removed record): its phase is Pending (KEP-5532 "Pod Phase").
    pub(super) fn restart_all_pending(&self) -> bool {
        if !self.gate_on() || self.kill_pod {
            return false;
        }
        self.restarting_all
            || self.restart_all_trigger().is_some()
            || self.containers.iter().any(|c| {
                c.kind != ContainerKind::Ephemeral && c.newest_visible().is_some_and(|i| i.removed)
            })
    }

    /// The termination phase of an in-place restart, run by `SyncPod` before
    /// `computePodActions`. Returns true while the sync must do nothing else.
    pub(super) fn sync_restart_all(&mut self, now: Timestamp) -> bool {
        if !self.restarting_all {
            if self.restart_all_trigger().is_none() {
                return false;
            }
            self.restarting_all = true;
            self.sidecar_settle_until = None;
            for ci in 0..self.containers.len() {
                if self.containers[ci].kind == ContainerKind::Ephemeral {
                    continue;
                }
                let Some(ii) = self.containers[ci]
                    .instances
                    .iter()
                    .rposition(super::Instance::is_alive)
                else {
                    continue;
                };
                if self.containers[ci].instances[ii].stop.is_some() {
                    // A kill already under way (a liveness failure) goes on; what it would
                    // have restarted is started by the reset instead.
                    continue;
                }
                let reason = KillReason {
                    message: format!("Stopping container {}", self.containers[ci].name),
                    probe: None,
                    restart: false,
                };
                // The grace override 0: no preStop hook, the 2 s minimum before SIGKILL.
                self.begin_stop(ci, ii, reason, 0, false, now);
            }
        }
        let busy = self.containers.iter().any(|c| {
            c.kind != ContainerKind::Ephemeral
                && c.instances.iter().any(|i| i.is_alive() || i.is_starting())
        });
        if busy {
            return true;
        }
        // Every container is gone from the runtime: the startup phase is a normal pod start
        // in the same sandbox.
        self.restarting_all = false;
        self.sandbox_floor = self.next_instance;
        for c in &mut self.containers {
            if c.kind == ContainerKind::Ephemeral {
                continue;
            }
            c.backoff_until = None;
            c.backoff_resync = None;
            c.retry_at = None;
            c.reason_cache = None;
            for i in &mut c.instances {
                i.restart_on_exit = false;
                i.removed = true;
            }
        }
        false
    }

    /// KEP "Kubelet Restarts", for a machine rebuilt from the persisted status and the
    /// runtime's records: a matching exit after which some other container already started
    /// again was handled by an in-place restart before the agent stopped (nothing starts
    /// between a matching exit and its clean-up), so the records from before it count as
    /// removed and the startup phase goes on. A matching exit after which nothing started is
    /// acted on by the next sync (the termination phase goes on, or begins).
    pub(super) fn recover_restart_all(&mut self) {
        if !self.gate_on() {
            return;
        }
        let started = |i: &super::Instance| match &i.state {
            InstState::Running { started_at } | InstState::PostStart { started_at } => {
                Some(*started_at)
            }
            InstState::Exited(e) => e.started_at,
            InstState::Starting => None,
        };
        let Some(handled) = self
            .containers
            .iter()
            .enumerate()
            .filter(|(_, c)| c.kind != ContainerKind::Ephemeral)
            .filter_map(|(ci, c)| match c.newest().map(|i| &i.state) {
                Some(InstState::Exited(e))
                    if restarts_all_containers(self.container_spec_of(ci), e.exit_code) =>
                {
                    Some(e.finished_at)
                }
                _ => None,
            })
            .filter(|&exit| {
                self.containers
                    .iter()
                    .filter(|c| c.kind != ContainerKind::Ephemeral)
                    .flat_map(|c| c.instances.iter())
                    .any(|i| started(i).is_some_and(|s| s > exit))
            })
            .max()
        else {
            return;
        };
        for c in &mut self.containers {
            if c.kind == ContainerKind::Ephemeral {
                continue;
            }
            for i in &mut c.instances {
                if i.exit().is_some() && started(i).is_none_or(|s| s <= handled) {
                    i.removed = true;
                }
            }
        }
    }

    /// `GenerateAllContainersRestartingCondition`, for pods that could restart all containers
    /// (the gate on and a rule with the action, or rules on a sidecar); `previous` stamps the
    /// transition time (D7).
    pub(super) fn all_containers_restarting_condition(
        &self,
        terminal: Option<&str>,
        previous: &[PodCondition],
        now: Timestamp,
    ) -> Option<PodCondition> {
        if !self.gate_on()
            || !podvisor_api::feature_gates::restart_all_containers_in_use(self.spec())
        {
            return None;
        }
        let restarting = terminal.is_none() && self.restarting_all;
        let (status, reason, message) = match terminal {
            Some(reason) => ("False", Some(reason), None),
            None if restarting => (
                "True",
                Some(REASON_RESTART_ALL_CONTAINERS_STARTED),
                Some(MESSAGE.to_string()),
            ),
            None => ("False", None, None),
        };
        let kept = previous
            .iter()
            .find(|p| p.type_ == ALL_CONTAINERS_RESTARTING && p.status == status)
            .and_then(|p| p.last_transition_time.clone());
        Some(PodCondition {
            type_: ALL_CONTAINERS_RESTARTING.to_string(),
            status: status.to_string(),
            reason: reason.map(str::to_string),
            message,
            last_probe_time: None,
            last_transition_time: Some(kept.unwrap_or(Time(crate::time::trunc_secs(now)))),
            observed_generation: None,
        })
    }
}
