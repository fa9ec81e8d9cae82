//! Probe ticks and results (6.2): the prober worker's `doProbe`, minus running the probe.

use super::{InstState, PodMachine};
use crate::action::{Action, EventType, InstanceId, ProbeKind, ProbeOutcome};
use crate::probe::ProbeResult;
use k8s_openapi::jiff::Timestamp;

impl PodMachine {
    /// S11: the newest visible instance runs and its startup probe (if any) succeeded.
    pub(crate) fn instance_started(&self, ci: usize) -> bool {
        let Some(inst) = self.containers[ci].newest_visible() else {
            return false;
        };
        inst.is_running()
            && (super::probe_of(self.container_spec_of(ci), ProbeKind::Startup).is_none()
                || inst.result(ProbeKind::Startup) == ProbeResult::Success)
    }

    fn container_index(&self, name: &str) -> Option<usize> {
        self.containers.iter().position(|c| c.name == name)
    }

    /// R12: probe readiness now and restart its ticker.
    pub(super) fn trigger_readiness(&mut self, ci: usize, now: Timestamp) {
        let name = self.containers[ci].name.clone();
        if let Some(w) = self
            .probes
            .iter_mut()
            .find(|w| w.container == name && w.kind == ProbeKind::Readiness && !w.stopped)
        {
            w.trigger(now);
        }
    }

    /// Runs every probe tick that is due (R5–R11).
    pub(super) fn run_probes(&mut self, now: Timestamp) {
        for wi in 0..self.probes.len() {
            let w = &self.probes[wi];
            if w.stopped || w.in_flight.is_some() || now < w.next_tick {
                continue;
            }
            self.probes[wi].schedule_after(now);
            self.probe_tick(wi, now);
        }
    }

    fn probe_tick(&mut self, wi: usize, now: Timestamp) {
        // R5
        if self.phase().is_terminal() {
            self.probes[wi].stopped = true;
            return;
        }
        let kind = self.probes[wi].kind;
        let Some(ci) = self.container_index(&self.probes[wi].container) else {
            return;
        };
        // R6
        let Some(inst) = self.containers[ci].newest_visible() else {
            return;
        };
        let (id, state) = (inst.id, inst.state.clone());
        // R7
        self.probes[wi].observe_instance(id);
        // R8
        if self.probes[wi].on_hold {
            return;
        }
        let started_at = match state {
            InstState::Running { started_at } => started_at,
            InstState::Exited(e) => {
                // R9: a dead container reads as failing; the worker stays only if it may run again.
                self.set_result(ci, id, kind, ProbeResult::Failure);
                let may_restart = podvisor_api::pod::container_should_restart(
                    self.container_spec_of(ci),
                    self.spec(),
                    e.exit_code,
                );
                if !may_restart {
                    self.probes[wi].stopped = true;
                }
                return;
            }
            InstState::Starting | InstState::PostStart { .. } => return,
        };
        // R10
        if self.pod.metadata.deletion_timestamp.is_some() && kind != ProbeKind::Readiness {
            if kind == ProbeKind::Startup
                && let Some(inst) = self.containers[ci]
                    .instances
                    .iter_mut()
                    .find(|i| i.id == id)
                && inst.result(kind) != ProbeResult::Success
            {
                inst.quiet_started = true;
            }
            self.set_result(ci, id, kind, ProbeResult::Success);
            self.probes[wi].stopped = true;
            return;
        }
        // R11: initial delay in whole seconds since the container started.
        let ran = crate::time::whole_secs_between(now, started_at);
        if ran < self.probes[wi].timing.initial_delay {
            return;
        }
        let started = self.instance_started(ci);
        if (kind == ProbeKind::Startup) == started {
            return;
        }
        let w = &mut self.probes[wi];
        w.in_flight = Some(id);
        self.actions.push_back(Action::RunProbe {
            name: w.container.clone(),
            instance: id,
            kind,
            probe: w.probe.clone(),
        });
    }

    fn set_result(&mut self, ci: usize, id: InstanceId, kind: ProbeKind, result: ProbeResult) {
        if let Some(inst) = self.containers[ci]
            .instances
            .iter_mut()
            .find(|i| i.id == id)
        {
            inst.results[kind as usize] = result;
        }
    }

    /// A probe answer (R11, R16, R17): events, threshold counting, publishing.
    pub(super) fn probe_done(
        &mut self,
        name: &str,
        instance: InstanceId,
        kind: ProbeKind,
        outcome: ProbeOutcome,
        now: Timestamp,
    ) {
        let Some(wi) = self
            .probes
            .iter()
            .position(|w| w.container == name && w.kind == kind)
        else {
            return;
        };
        if self.probes[wi].in_flight == Some(instance) {
            self.probes[wi].in_flight = None;
        }
        let Some(ci) = self.container_index(name) else {
            return;
        };
        let w = &self.probes[wi];
        if w.stopped || w.instance != Some(instance) || w.on_hold {
            return;
        }
        let title = kind.title();
        let success = match outcome {
            ProbeOutcome::Error(err) => {
                let msg = format!("{title} probe errored and resulted in unknown state: {err}");
                self.emit(EventType::Warning, "Unhealthy", msg, Some(ci));
                return;
            }
            ProbeOutcome::Failure(out) => {
                let msg = format!("{title} probe failed: {out}");
                self.emit(EventType::Warning, "Unhealthy", msg, Some(ci));
                false
            }
            ProbeOutcome::Warning(out) => {
                let msg = format!("{title} probe warning: {out}");
                self.emit(EventType::Warning, "ProbeWarning", msg, Some(ci));
                true
            }
            ProbeOutcome::Success => true,
        };
        let Some(result) = self.probes[wi].count(success) else {
            return;
        };
        let previous = self.containers[ci]
            .instances
            .iter()
            .find(|i| i.id == instance)
            .map(|i| i.result(kind));
        self.set_result(ci, instance, kind, result);
        // R14: a changed result (liveness: only a failure) makes the kubelet sync the pod.
        if previous != Some(result)
            && (kind != ProbeKind::Liveness || result == ProbeResult::Failure)
        {
            self.kick_unready_readiness(now);
        }
    }

    /// R12: every kubelet sync regenerates the status, and that kicks the readiness probe of each
    /// started, running container that is not ready. Called for the inputs that make the kubelet
    /// sync the pod: PLEG events (started, exited), probe result changes, pod updates.
    pub(super) fn kick_unready_readiness(&mut self, now: Timestamp) {
        for ci in 0..self.containers.len() {
            let unready = self.containers[ci]
                .newest_visible()
                .is_some_and(|i| i.result(ProbeKind::Readiness) != ProbeResult::Success);
            if unready && self.instance_started(ci) {
                self.trigger_readiness(ci, now);
            }
        }
    }
}
