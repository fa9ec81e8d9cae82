//! A hand-driven test harness for [`PodMachine`] on a virtual clock.
//!
//! [`Harness`] owns one machine and plays the driver: every input is followed by draining the
//! machine's actions into [`Harness::log`] (with the time they were produced in
//! [`Harness::log_at`]). Nothing is answered automatically: a test answers what it wants to, in
//! the order it wants to, with helpers named after the driver's answers
//! ([`Harness::start_all`], [`Harness::exit`], [`Harness::probe`], [`Harness::hook`], ...).
//! Timers are fired by [`Harness::advance_to`].
//!
//! Instants come from [`t`] (whole seconds after a fixed epoch) or [`t_ms`]. The pod defaults to
//! `web` in namespace `default` with uid [`UID`], so kubelet messages read
//! `pod=web_default(<UID>)` ([`POD_FULL_NAME`]).
//!
//! Stable API: other test files use this module; only add to it.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::{
    Action, Event, ExitStatus, HookKind, InstanceId, MachineConfig, Phase, PodMachine, ProbeKind,
    ProbeOutcome, StartFailure,
};
use serde_json::{Value, json};
use std::collections::HashSet;

/// The virtual clock's origin: 2026-01-01T00:00:00Z.
pub const EPOCH_SECS: i64 = 1_767_225_600;

/// The uid given to pods that have none.
pub const UID: &str = "0b4c1d9e-6f1a-4c2b-8a3d-5e6f7a8b9c0d";

/// `<name>_<namespace>(<uid>)` of the default pod, as kubelet messages print it.
pub const POD_FULL_NAME: &str = "web_default(0b4c1d9e-6f1a-4c2b-8a3d-5e6f7a8b9c0d)";

/// The instant `secs` seconds after the epoch.
pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(EPOCH_SECS + secs).expect("valid timestamp")
}

/// The instant `ms` milliseconds after the epoch.
pub fn t_ms(ms: i64) -> Timestamp {
    t(0) + SignedDuration::from_millis(ms)
}

/// Whole seconds from the epoch to `ts` (floored).
pub fn secs_of(ts: Timestamp) -> i64 {
    ts.as_second() - EPOCH_SECS
}

/// `ts` plus `secs` seconds.
pub fn plus(ts: Timestamp, secs: i64) -> Timestamp {
    ts + SignedDuration::from_secs(secs)
}

/// Builds a `Pod` from JSON as the API server would store it: `metadata.name` (`web`),
/// `namespace` (`default`), `uid` ([`UID`]) and `creationTimestamp` (`t(0)`) when absent, then
/// [`podvisor_api::apply_defaults`] (restart policy, grace period, termination message policy,
/// image pull policy, probe timings, ...). Use [`pod_undefaulted`] to skip the defaulting.
pub fn pod(v: Value) -> Pod {
    let mut pod = pod_undefaulted(v);
    podvisor_api::apply_defaults(&mut pod);
    pod
}

/// [`pod`] without the API defaulting (only the metadata is filled).
pub fn pod_undefaulted(mut v: Value) -> Pod {
    let obj = v.as_object_mut().expect("a pod is a JSON object");
    obj.entry("apiVersion").or_insert(json!("v1"));
    obj.entry("kind").or_insert(json!("Pod"));
    let meta = obj
        .entry("metadata")
        .or_insert(json!({}))
        .as_object_mut()
        .expect("metadata is an object");
    meta.entry("name").or_insert(json!("web"));
    meta.entry("namespace").or_insert(json!("default"));
    meta.entry("uid").or_insert(json!(UID));
    meta.entry("creationTimestamp")
        .or_insert(json!(t(0).to_string()));
    serde_json::from_value(v).expect("a valid Pod")
}

/// A container JSON with a `busybox` image (`{"name": name, "image": "busybox"}`).
pub fn container(name: &str) -> Value {
    json!({"name": name, "image": "busybox"})
}

/// A sidecar JSON: an init container with `restartPolicy: Always`.
pub fn sidecar(name: &str) -> Value {
    json!({"name": name, "image": "busybox", "restartPolicy": "Always"})
}

/// An exec probe JSON with the given period and failure threshold (other fields defaulted).
pub fn exec_probe(period: i32, failure_threshold: i32) -> Value {
    json!({
        "exec": {"command": ["true"]},
        "periodSeconds": period,
        "failureThreshold": failure_threshold,
    })
}

/// The default config, except that a sidecar unblocks the next container as soon as it runs
/// (no A8 settle time): most rule tests are about what happens, not the relist delay, which
/// has tests of its own.
pub fn config() -> MachineConfig {
    MachineConfig {
        sidecar_settle: std::time::Duration::ZERO,
        ..MachineConfig::default()
    }
}

/// One driver session around a [`PodMachine`]. See the module docs.
#[derive(Debug)]
pub struct Harness {
    /// The machine under test (inputs may also be given to it directly; call
    /// [`Harness::drain`] afterwards).
    pub m: PodMachine,
    /// Every action the machine produced, in order.
    pub log: Vec<Action>,
    /// `log_at[i]` is the input time at which `log[i]` was produced.
    pub log_at: Vec<Timestamp>,
    /// The time of the latest input.
    pub now: Timestamp,
    /// Instances whose `StartContainer` was answered (started or failed).
    answered: HashSet<InstanceId>,
    /// Instances reported exited.
    exited: HashSet<InstanceId>,
}

impl Harness {
    /// A machine for `pod_json` (see [`pod`]) with the default config, admitted at `t(0)`.
    pub fn new(pod_json: Value) -> Harness {
        Harness::with_config(pod_json, config())
    }

    /// A machine for a pod whose `spec` is `spec_json`, admitted at `t(0)`.
    pub fn from_spec(spec_json: Value) -> Harness {
        Harness::new(json!({ "spec": spec_json }))
    }

    /// A machine for `pod_json` with `config`, admitted at `t(0)`.
    pub fn with_config(pod_json: Value, config: MachineConfig) -> Harness {
        Harness::admitted_at(pod(pod_json), config, t(0))
    }

    /// A machine for an already built pod, admitted at `now`.
    pub fn admitted_at(pod: Pod, config: MachineConfig, now: Timestamp) -> Harness {
        let m = PodMachine::new(pod, config, now);
        let mut h = Harness {
            m,
            log: Vec::new(),
            log_at: Vec::new(),
            now,
            answered: HashSet::new(),
            exited: HashSet::new(),
        };
        h.drain();
        h
    }

    /// A machine rebuilt after an agent restart at `now` from `pod` (with its last persisted
    /// status) and the instances the runtime still runs.
    pub fn recovered(
        pod: Pod,
        running: &[podvisor_lifecycle::RecoveredInstance],
        config: MachineConfig,
        now: Timestamp,
    ) -> Harness {
        let known = running.iter().map(|r| r.instance.0).max().unwrap_or(0);
        let m = PodMachine::recover(pod, running, known, config, now);
        let mut h = Harness {
            m,
            log: Vec::new(),
            log_at: Vec::new(),
            now,
            answered: HashSet::new(),
            exited: HashSet::new(),
        };
        h.drain();
        h
    }

    /// [`Harness::recovered`] with the runtime's record of the instances that exited.
    pub fn recovered_with_history(
        pod: Pod,
        running: &[podvisor_lifecycle::RecoveredInstance],
        history: &[podvisor_lifecycle::PastInstance],
        config: MachineConfig,
        now: Timestamp,
    ) -> Harness {
        let known = running
            .iter()
            .map(|r| r.instance.0)
            .chain(history.iter().map(|p| p.instance.0))
            .max()
            .unwrap_or(0);
        let m = PodMachine::recover_with_history(pod, running, history, known, config, now);
        let mut h = Harness {
            m,
            log: Vec::new(),
            log_at: Vec::new(),
            now,
            answered: HashSet::new(),
            exited: HashSet::new(),
        };
        h.drain();
        h
    }

    /// What a runtime would report as still running: every running container instance.
    pub fn running_instances(&self) -> Vec<podvisor_lifecycle::RecoveredInstance> {
        let status = self.status();
        status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .filter_map(|s| {
                let running = s.state.as_ref()?.running.as_ref()?;
                Some(podvisor_lifecycle::RecoveredInstance {
                    name: s.name.clone(),
                    instance: self.instance(&s.name),
                    container_id: s.container_id.clone()?,
                    started_at: running.started_at.as_ref()?.0,
                })
            })
            .collect()
    }

    // ----- driving -----

    /// Moves the input clock to `now` (never backwards).
    fn input(&mut self, now: Timestamp) {
        self.now = self.now.max(now);
    }

    /// Drains every queued action into the log.
    pub fn drain(&mut self) {
        while let Some(a) = self.m.poll_action() {
            self.log.push(a);
            self.log_at.push(self.now);
        }
    }

    /// Fires every timer due at or before `now`, each at its own instant, then sets the clock
    /// to `now`. Panics if the machine keeps a timer due without making progress.
    pub fn advance_to(&mut self, now: Timestamp) {
        let mut rounds = 0;
        while let Some(due) = self.m.poll_timeout() {
            if due > now {
                break;
            }
            rounds += 1;
            assert!(rounds < 100_000, "timer at {due} never stops being due");
            self.input(due);
            self.m.handle_timeout(self.now);
            self.drain();
        }
        self.input(now);
    }

    /// When the machine wants to be called back next (`poll_timeout`).
    pub fn next_timer(&self) -> Option<Timestamp> {
        self.m.poll_timeout()
    }

    /// Answers `CreateSandbox`: the sandbox is ready.
    pub fn sandbox_ready(&mut self, now: Timestamp) {
        self.input(now);
        self.m.handle_sandbox_ready(now);
        self.drain();
    }

    /// Sandbox ready, then [`Harness::start_all`]: the usual way to get a pod running at `now`.
    pub fn boot(&mut self, now: Timestamp) {
        self.sandbox_ready(now);
        self.start_all(now);
    }

    /// `StartContainer` actions not answered yet: (name, instance).
    pub fn pending_starts(&self) -> Vec<(String, InstanceId)> {
        self.log
            .iter()
            .filter_map(|a| match a {
                Action::StartContainer { name, instance, .. }
                    if !self.answered.contains(instance) =>
                {
                    Some((name.clone(), *instance))
                }
                _ => None,
            })
            .collect()
    }

    /// Answers every pending `StartContainer` with `handle_container_started` (process started
    /// at `now`), repeating while answering produces new starts (sequential starts, A18).
    /// Stops at a postStart hook, which blocks further starts until [`Harness::hook`] answers.
    /// Returns the names started, in order.
    pub fn start_all(&mut self, now: Timestamp) -> Vec<String> {
        let mut names = Vec::new();
        loop {
            let pending = self.pending_starts();
            if pending.is_empty() {
                return names;
            }
            for (name, id) in pending {
                self.started(id, now);
                names.push(name);
            }
        }
    }

    /// Answers the pending `StartContainer` of `name` (panics if there is none).
    pub fn start(&mut self, name: &str, now: Timestamp) {
        let id = self
            .pending_starts()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no pending StartContainer for {name}; log: {:#?}", self.log))
            .1;
        self.started(id, now);
    }

    fn started(&mut self, id: InstanceId, now: Timestamp) {
        self.input(now);
        self.answered.insert(id);
        self.m
            .handle_container_started(id, format!("containerd://{:016x}", id.0), now, now);
        self.drain();
    }

    /// Answers the pending `StartContainer` of `name` with a failure (2.2).
    pub fn fail_start(
        &mut self,
        name: &str,
        reason: &str,
        message: &str,
        created: bool,
        now: Timestamp,
    ) {
        let id = self
            .pending_starts()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no pending StartContainer for {name}"))
            .1;
        self.input(now);
        self.answered.insert(id);
        let failure = StartFailure {
            reason: reason.to_string(),
            message: message.to_string(),
            created,
        };
        self.m.handle_container_start_failed(id, failure, now);
        self.drain();
    }

    /// The newest instance created for `name` (panics if none).
    pub fn instance(&self, name: &str) -> InstanceId {
        *self
            .instances(name)
            .last()
            .unwrap_or_else(|| panic!("{name} was never started"))
    }

    /// Every instance created for `name`, oldest first.
    pub fn instances(&self, name: &str) -> Vec<InstanceId> {
        self.log
            .iter()
            .filter_map(|a| match a {
                Action::StartContainer {
                    name: n, instance, ..
                } if n == name => Some(*instance),
                _ => None,
            })
            .collect()
    }

    /// The newest instance of `name` exits with `code` at `now` (`finishedAt` = `now`).
    pub fn exit(&mut self, name: &str, code: i32, now: Timestamp) {
        let exit = ExitStatus {
            exit_code: code,
            finished_at: Some(now),
            ..ExitStatus::default()
        };
        self.exit_with(name, exit, now);
    }

    /// The newest instance of `name` exits as described by `exit`, reported at `now`.
    pub fn exit_with(&mut self, name: &str, exit: ExitStatus, now: Timestamp) {
        let id = self.instance(name);
        self.exit_instance(id, exit, now);
    }

    /// A specific instance exits.
    pub fn exit_instance(&mut self, id: InstanceId, exit: ExitStatus, now: Timestamp) {
        self.input(now);
        self.exited.insert(id);
        self.m.handle_container_exited(id, exit, now);
        self.drain();
    }

    /// Every instance that was sent `StopContainer` or `KillContainer` and has not exited
    /// yet exits with `code` (143 for SIGTERM, 137 for SIGKILL) at `now`. Returns their names.
    pub fn exit_stopped(&mut self, code: i32, now: Timestamp) -> Vec<String> {
        let targets: Vec<(String, InstanceId)> = self
            .log
            .iter()
            .filter_map(|a| match a {
                Action::StopContainer { name, instance, .. }
                | Action::KillContainer { name, instance } => Some((name.clone(), *instance)),
                _ => None,
            })
            .collect();
        let mut names = Vec::new();
        for (name, id) in targets {
            if self.exited.contains(&id) {
                continue;
            }
            let exit = ExitStatus {
                exit_code: code,
                finished_at: Some(now),
                ..ExitStatus::default()
            };
            self.exit_instance(id, exit, now);
            names.push(name);
        }
        names
    }

    /// Answers a probe of `kind` for the newest instance of `name`.
    pub fn probe(&mut self, name: &str, kind: ProbeKind, outcome: ProbeOutcome, now: Timestamp) {
        let id = self.instance(name);
        self.input(now);
        self.m.handle_probe_result(name, id, kind, outcome, now);
        self.drain();
    }

    /// Shorthand: a failing probe with output `"nope"`.
    pub fn probe_fail(&mut self, name: &str, kind: ProbeKind, now: Timestamp) {
        self.probe(name, kind, ProbeOutcome::Failure("nope".to_string()), now);
    }

    /// Shorthand: a succeeding probe.
    pub fn probe_ok(&mut self, name: &str, kind: ProbeKind, now: Timestamp) {
        self.probe(name, kind, ProbeOutcome::Success, now);
    }

    /// `RunProbe` actions in the log: (time, container, kind).
    pub fn probes_run(&self) -> Vec<(Timestamp, String, ProbeKind)> {
        self.log
            .iter()
            .zip(&self.log_at)
            .filter_map(|(a, at)| match a {
                Action::RunProbe { name, kind, .. } => Some((*at, name.clone(), *kind)),
                _ => None,
            })
            .collect()
    }

    /// Answers a hook run against the newest instance of `name`.
    pub fn hook(&mut self, name: &str, hook: HookKind, result: Result<(), String>, now: Timestamp) {
        let id = self.instance(name);
        self.input(now);
        self.m.handle_hook_result(id, hook, result, now);
        self.drain();
    }

    /// A delete request (`None`: the pod's own grace period).
    pub fn delete(&mut self, grace: Option<i64>, now: Timestamp) {
        self.input(now);
        self.m.handle_delete(grace, now);
        self.drain();
    }

    /// A spec update: `edit` changes a copy of the current pod, which is then handed to
    /// `handle_spec_update`.
    pub fn update(&mut self, now: Timestamp, edit: impl FnOnce(&mut Pod)) {
        let mut pod = self.m.pod().clone();
        edit(&mut pod);
        self.input(now);
        self.m.handle_spec_update(pod, now);
        self.drain();
    }

    /// Changes the image of the container (regular or init) named `name`.
    pub fn set_image(&mut self, name: &str, image: &str, now: Timestamp) {
        self.update(now, |pod| {
            let spec = pod.spec.as_mut().expect("spec");
            let c = spec
                .init_containers
                .iter_mut()
                .flatten()
                .chain(spec.containers.iter_mut())
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no container {name}"));
            c.image = Some(image.to_string());
        });
    }

    /// Conditions written by another client (readiness gates): a JSON list of conditions.
    pub fn set_conditions(&mut self, conditions: Value, now: Timestamp) {
        let conditions: Vec<PodCondition> =
            serde_json::from_value(conditions).expect("valid conditions");
        self.input(now);
        self.m.handle_conditions_update(conditions, now);
        self.drain();
    }

    // ----- reading the log -----

    /// The current log length, to look at what happened after this point.
    pub fn mark(&self) -> usize {
        self.log.len()
    }

    /// Actions logged since `mark`.
    pub fn actions_since(&self, mark: usize) -> &[Action] {
        &self.log[mark..]
    }

    /// Every event, in order.
    pub fn event_list(&self) -> Vec<Event> {
        self.events_list_since(0)
    }

    fn events_list_since(&self, mark: usize) -> Vec<Event> {
        self.log[mark..]
            .iter()
            .filter_map(|a| match a {
                Action::EmitEvent(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every event as (reason, message).
    pub fn events(&self) -> Vec<(String, String)> {
        self.events_since(0)
    }

    /// Events since `mark` as (reason, message).
    pub fn events_since(&self, mark: usize) -> Vec<(String, String)> {
        self.events_list_since(mark)
            .into_iter()
            .map(|e| (e.reason.to_string(), e.message))
            .collect()
    }

    /// Messages of the events with `reason`.
    pub fn events_with_reason(&self, reason: &str) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|(r, _)| r == reason)
            .map(|(_, m)| m)
            .collect()
    }

    /// `StartContainer` actions for `name`: (time, restart_count).
    pub fn starts_of(&self, name: &str) -> Vec<(Timestamp, i32)> {
        self.log
            .iter()
            .zip(&self.log_at)
            .filter_map(|(a, at)| match a {
                Action::StartContainer {
                    name: n,
                    restart_count,
                    ..
                } if n == name => Some((*at, *restart_count)),
                _ => None,
            })
            .collect()
    }

    /// Names of every `StartContainer`, in order.
    pub fn start_order(&self) -> Vec<String> {
        self.log
            .iter()
            .filter_map(|a| match a {
                Action::StartContainer { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// `StopContainer` actions: (container, signal, grace in whole seconds).
    pub fn stops(&self) -> Vec<(String, String, u64)> {
        self.log
            .iter()
            .filter_map(|a| match a {
                Action::StopContainer {
                    name,
                    signal,
                    grace,
                    ..
                } => Some((name.clone(), signal.clone(), grace.as_secs())),
                _ => None,
            })
            .collect()
    }

    /// Whether `PodTerminated` was emitted.
    pub fn pod_terminated(&self) -> bool {
        self.log.iter().any(|a| matches!(a, Action::PodTerminated))
    }

    // ----- reading the status -----

    /// The published pod.
    pub fn pod(&self) -> &Pod {
        self.m.pod()
    }

    /// The current status.
    pub fn status(&self) -> PodStatus {
        self.m.pod().status.clone().unwrap_or_default()
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.m.phase()
    }

    /// `status.reason` and `status.message`.
    pub fn pod_reason(&self) -> (Option<String>, Option<String>) {
        let s = self.status();
        (s.reason, s.message)
    }

    /// The status of the container or init container `name` (panics if absent).
    pub fn status_of(&self, name: &str) -> ContainerStatus {
        let s = self.status();
        s.init_container_statuses
            .into_iter()
            .flatten()
            .chain(s.container_statuses.into_iter().flatten())
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no status for {name}"))
    }

    /// `running`, `waiting`, `terminated` or `none` for `state` of `name`.
    pub fn state_kind(&self, name: &str) -> &'static str {
        let st = self.status_of(name).state.unwrap_or_default();
        if st.running.is_some() {
            "running"
        } else if st.terminated.is_some() {
            "terminated"
        } else if st.waiting.is_some() {
            "waiting"
        } else {
            "none"
        }
    }

    /// `state.waiting` of `name` as (reason, message), if waiting.
    pub fn waiting(&self, name: &str) -> Option<(String, Option<String>)> {
        let w = self.status_of(name).state?.waiting?;
        Some((w.reason.unwrap_or_default(), w.message))
    }

    /// `state.terminated` of `name`, if terminated.
    pub fn terminated(&self, name: &str) -> Option<ContainerStateTerminated> {
        self.status_of(name).state?.terminated
    }

    /// `lastState.terminated` of `name`, if any.
    pub fn last_terminated(&self, name: &str) -> Option<ContainerStateTerminated> {
        self.status_of(name).last_state?.terminated
    }

    /// The pod condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<PodCondition> {
        self.status()
            .conditions
            .into_iter()
            .flatten()
            .find(|c| c.type_ == type_)
    }

    /// The `status` (`True`/`False`/`Unknown`) of condition `type_` (panics if absent).
    pub fn condition_status(&self, type_: &str) -> String {
        self.condition(type_)
            .unwrap_or_else(|| panic!("no condition {type_}"))
            .status
    }
}
