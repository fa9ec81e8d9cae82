//! Killing one instance (`killContainer`, section 8): preStop, termination ordering, the stop
//! signal, and SIGKILL at the grace deadline.

use super::{PodMachine, Worker};
use crate::action::{Action, ContainerKind, EventType, HookKind, KillReason, ProbeKind};
use crate::time::{secs, whole_secs_between};
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// The minimum time between the stop signal and SIGKILL (T3, H4).
const MIN_GRACE: i64 = 2;

/// A kill in progress. Entered by `begin_stop`, left when the instance exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stop {
    /// Remaining grace budget in whole seconds.
    pub grace: i64,
    /// Whether the container is started again after it exits (A11).
    pub restart: bool,
    /// Wait for the termination order (T5) before signalling.
    pub ordering: bool,
    pub pre_stop_done: bool,
    pub stage: Stage,
}

/// Where a kill stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The preStop hook runs; wait for it or for `deadline` (H4).
    PreStop {
        since: Timestamp,
        deadline: Timestamp,
    },
    /// A sidecar waits for its turn (T5) until `deadline`.
    WaitTurn {
        since: Timestamp,
        deadline: Timestamp,
    },
    /// The stop signal was sent; SIGKILL at `kill_at`.
    Signalled { kill_at: Timestamp },
    /// SIGKILL was sent; waiting for the exit.
    Killed,
}

impl Stop {
    /// When this kill must be looked at again.
    pub fn deadline(&self) -> Option<Timestamp> {
        match self.stage {
            Stage::PreStop { deadline, .. } | Stage::WaitTurn { deadline, .. } => Some(deadline),
            Stage::Signalled { kill_at } => Some(kill_at),
            Stage::Killed => None,
        }
    }
}

impl PodMachine {
    /// The container-level grace period (T2) for a kill that is not a pod termination.
    pub(crate) fn container_grace(&self, ci: usize, probe: Option<ProbeKind>) -> i64 {
        if let Some(d) = self.pod.metadata.deletion_grace_period_seconds {
            return d;
        }
        if let Some(kind) = probe.filter(|k| *k != ProbeKind::Readiness)
            && let Some(g) = super::probe_of(self.container_spec_of(ci), kind)
                .and_then(|p| p.termination_grace_period_seconds)
        {
            return g;
        }
        self.spec().termination_grace_period_seconds.unwrap_or(30)
    }

    /// Starts killing instance `ii` of container `ci` (T3): `Killing` event, then preStop if the
    /// instance runs, has one and `grace > 0`.
    pub(crate) fn begin_stop(
        &mut self,
        ci: usize,
        ii: usize,
        reason: KillReason,
        grace: i64,
        ordering: bool,
        now: Timestamp,
    ) {
        let restart = reason.restart;
        self.emit(EventType::Normal, "Killing", reason.message, Some(ci));
        let pre_stop = self
            .container_spec_of(ci)
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.clone());
        let name = self.containers[ci].name.clone();
        let inst = &mut self.containers[ci].instances[ii];
        let ordering = ordering && inst.is_alive();
        let mut stop = Stop {
            grace,
            restart,
            ordering,
            pre_stop_done: true,
            stage: Stage::Killed,
        };
        match pre_stop {
            Some(handler) if grace > 0 => {
                stop.pre_stop_done = false;
                stop.stage = Stage::PreStop {
                    since: now,
                    deadline: now + secs(grace),
                };
                self.actions.push_back(Action::RunHook {
                    name,
                    instance: inst.id,
                    hook: HookKind::PreStop,
                    handler,
                });
                inst.stop = Some(stop);
            }
            _ => {
                inst.stop = Some(stop);
                self.after_pre_stop(ci, ii, now);
            }
        }
    }

    /// preStop is over: wait for the turn (sidecars, T5) or signal.
    fn after_pre_stop(&mut self, ci: usize, ii: usize, now: Timestamp) {
        let stop = self.containers[ci].instances[ii]
            .stop
            .as_mut()
            .expect("stopping");
        if stop.ordering && stop.grace > 0 && self.containers[ci].kind == ContainerKind::Sidecar {
            let stop = self.containers[ci].instances[ii]
                .stop
                .as_mut()
                .expect("stopping");
            stop.stage = Stage::WaitTurn {
                since: now,
                deadline: now + secs(stop.grace),
            };
            self.try_turn(ci, ii, now);
        } else {
            self.signal(ci, ii, now);
        }
    }

    /// T5: a sidecar's turn comes once every regular container and every later sidecar is dead.
    fn is_turn(&self, ci: usize) -> bool {
        let me = &self.containers[ci];
        !self.containers.iter().any(|c| {
            let blocks = c.kind == ContainerKind::Regular
                || (c.kind == ContainerKind::Sidecar && c.index > me.index);
            blocks && c.instances.iter().any(super::Instance::is_alive)
        })
    }

    fn try_turn(&mut self, ci: usize, ii: usize, now: Timestamp) {
        let Some(stop) = self.containers[ci].instances[ii].stop.as_ref() else {
            return;
        };
        let Stage::WaitTurn { since, deadline } = stop.stage else {
            return;
        };
        if now >= deadline || self.is_turn(ci) {
            let waited = whole_secs_between(now.min(deadline), since);
            self.containers[ci].instances[ii]
                .stop
                .as_mut()
                .expect("stopping")
                .grace -= waited;
            self.signal(ci, ii, now);
        }
    }

    /// Sends the stop signal with at least 2 s before SIGKILL (T3).
    fn signal(&mut self, ci: usize, ii: usize, now: Timestamp) {
        let signal = self
            .container_spec_of(ci)
            .lifecycle
            .as_ref()
            .and_then(|l| l.stop_signal.clone())
            .unwrap_or_else(|| "SIGTERM".to_string());
        let name = self.containers[ci].name.clone();
        let inst = &mut self.containers[ci].instances[ii];
        let stop = inst.stop.as_mut().expect("stopping");
        let grace = stop.grace.max(MIN_GRACE);
        stop.grace = grace;
        stop.stage = Stage::Signalled {
            kill_at: now + secs(grace),
        };
        self.actions.push_back(Action::StopContainer {
            name,
            instance: inst.id,
            signal,
            grace: Duration::from_secs(grace.unsigned_abs()),
        });
    }

    /// Moves every kill in progress forward: preStop done or over budget, turns, SIGKILL.
    pub(super) fn advance_stops(&mut self, now: Timestamp) {
        for ci in 0..self.containers.len() {
            for ii in 0..self.containers[ci].instances.len() {
                let Some(stop) = self.containers[ci].instances[ii].stop.clone() else {
                    continue;
                };
                if !self.containers[ci].instances[ii].is_alive() {
                    // A start step that never produced a process: nothing to signal.
                    continue;
                }
                match stop.stage {
                    Stage::PreStop { since, deadline } => {
                        if stop.pre_stop_done || now >= deadline {
                            // H4: whole elapsed seconds come off the budget.
                            let elapsed = whole_secs_between(now.min(deadline), since);
                            let s = self.containers[ci].instances[ii]
                                .stop
                                .as_mut()
                                .expect("stop");
                            s.grace -= elapsed;
                            self.after_pre_stop(ci, ii, now);
                        }
                    }
                    Stage::WaitTurn { .. } => self.try_turn(ci, ii, now),
                    Stage::Signalled { kill_at } if now >= kill_at => {
                        let name = self.containers[ci].name.clone();
                        let inst = &mut self.containers[ci].instances[ii];
                        inst.stop.as_mut().expect("stop").stage = Stage::Killed;
                        let instance = inst.id;
                        self.actions
                            .push_back(Action::KillContainer { name, instance });
                    }
                    Stage::Signalled { .. } | Stage::Killed => {}
                }
            }
        }
    }

    /// A shorter pod grace period re-requested during termination (T1): every kill in progress
    /// gets at most `grace` from now.
    pub(super) fn shorten_stops(&mut self, grace: i64, now: Timestamp) {
        debug_assert!(matches!(self.worker, Worker::Terminating { .. }));
        let limit = now + secs(grace);
        for c in &mut self.containers {
            for i in &mut c.instances {
                let Some(stop) = i.stop.as_mut() else {
                    continue;
                };
                stop.grace = stop.grace.min(grace);
                match &mut stop.stage {
                    Stage::PreStop { deadline, .. } | Stage::WaitTurn { deadline, .. } => {
                        *deadline = (*deadline).min(limit);
                    }
                    Stage::Signalled { kill_at } => {
                        *kill_at = (*kill_at).min(now + secs(grace.max(MIN_GRACE)));
                    }
                    Stage::Killed => {}
                }
            }
        }
    }
}
