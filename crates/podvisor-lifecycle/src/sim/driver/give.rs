//! Inputs named after what the runtime or the API reports, each given at an explicit `now` (the
//! clock moves there when it is later; timers are fired by `advance_to` only).

use super::{Driver, FakeRuntime, Input, container_id};
use crate::action::{ExitStatus, HookKind, InstanceId, ProbeKind, ProbeOutcome, StartFailure};
use k8s_openapi::api::core::v1::{Pod, PodCondition, ResourceRequirements};
use k8s_openapi::jiff::Timestamp;

impl<R: FakeRuntime> Driver<R> {
    /// The sandbox is ready.
    pub fn sandbox_ready(&mut self, now: Timestamp) {
        self.input(Input::SandboxReady, now);
    }

    /// Sandbox ready, then [`Driver::start_all`]: the usual way to get a pod running at `now`.
    pub fn boot(&mut self, now: Timestamp) {
        self.sandbox_ready(now);
        self.start_all(now);
    }

    /// `StartContainer`s not answered yet: (container, instance).
    pub fn pending_starts(&self) -> Vec<(String, InstanceId)> {
        self.pending_starts
            .iter()
            .map(|id| (self.instances[id].name.clone(), *id))
            .collect()
    }

    /// Answers every pending `StartContainer` (started at `now`), repeating while answering
    /// brings new ones (sequential starts, A18). Stops at a postStart hook, which holds further
    /// starts until it is answered. Returns the containers started, in order.
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
        let id = self.pending_start_of(name);
        self.started(id, now);
    }

    fn pending_start_of(&self, name: &str) -> InstanceId {
        self.pending_starts()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no pending StartContainer for {name}; log: {:#?}", self.log))
            .1
    }

    /// Instance `id` started at `now` (container id [`container_id`]).
    pub fn started(&mut self, id: InstanceId, now: Timestamp) {
        let container_id = container_id(id);
        self.input(
            Input::Started {
                id,
                container_id,
                started_at: now,
            },
            now,
        );
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
        let id = self.pending_start_of(name);
        let failure = StartFailure {
            reason: reason.to_string(),
            message: message.to_string(),
            created,
        };
        self.input(Input::StartFailed { id, failure }, now);
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

    /// Instance `id` exits.
    pub fn exit_instance(&mut self, id: InstanceId, exit: ExitStatus, now: Timestamp) {
        self.input(Input::Exited { id, exit }, now);
    }

    /// Every instance that was sent `StopContainer` or `KillContainer` and has not exited yet
    /// exits with `code` (143 for SIGTERM, 137 for SIGKILL) at `now`. Returns their names.
    pub fn exit_stopped(&mut self, code: i32, now: Timestamp) -> Vec<String> {
        let targets: Vec<(String, InstanceId)> = self
            .log
            .iter()
            .filter_map(|a| match a {
                crate::Action::StopContainer { name, instance, .. }
                | crate::Action::KillContainer { name, instance } => {
                    Some((name.clone(), *instance))
                }
                _ => None,
            })
            .collect();
        let mut names = Vec::new();
        for (name, id) in targets {
            if self.has_exited(id) {
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

    /// A probe result of `kind` for the newest instance of `name`.
    pub fn probe(&mut self, name: &str, kind: ProbeKind, outcome: ProbeOutcome, now: Timestamp) {
        let id = self.instance(name);
        let name = name.to_string();
        self.input(
            Input::Probe {
                name,
                id,
                kind,
                outcome,
            },
            now,
        );
    }

    /// A failing probe with output `"nope"`.
    pub fn probe_fail(&mut self, name: &str, kind: ProbeKind, now: Timestamp) {
        self.probe(name, kind, ProbeOutcome::Failure("nope".to_string()), now);
    }

    /// A succeeding probe.
    pub fn probe_ok(&mut self, name: &str, kind: ProbeKind, now: Timestamp) {
        self.probe(name, kind, ProbeOutcome::Success, now);
    }

    /// A hook result for the newest instance of `name`.
    pub fn hook(&mut self, name: &str, hook: HookKind, result: Result<(), String>, now: Timestamp) {
        let id = self.instance(name);
        self.input(Input::Hook { id, hook, result }, now);
    }

    /// A delete request (`None`: the pod's own grace period).
    pub fn delete(&mut self, grace: Option<i64>, now: Timestamp) {
        self.input(Input::Delete { grace }, now);
    }

    /// A spec update: `edit` changes a copy of the current pod, which the machine then gets.
    pub fn update(&mut self, now: Timestamp, edit: impl FnOnce(&mut Pod)) {
        let mut pod = self.machine.pod().clone();
        edit(&mut pod);
        self.input(Input::SpecUpdate(Box::new(pod)), now);
    }

    /// An in-place resize through the `resize` subresource: the container named `name`
    /// (regular or sidecar) gets `resources`, and the pod's generation goes up by one.
    pub fn resize(&mut self, name: &str, resources: ResourceRequirements, now: Timestamp) {
        self.update(now, |pod| {
            pod.metadata.generation = Some(pod.metadata.generation.unwrap_or(1) + 1);
            let spec = pod.spec.as_mut().expect("spec");
            let c = spec
                .init_containers
                .iter_mut()
                .flatten()
                .chain(spec.containers.iter_mut())
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no container {name}"));
            c.resources = Some(resources);
        });
    }

    /// The pending `UpdateContainerResources` actions since `mark`: (instance, resources).
    pub fn resource_updates_since(&self, mark: usize) -> Vec<(InstanceId, ResourceRequirements)> {
        self.log[mark..]
            .iter()
            .filter_map(|a| match a {
                crate::action::Action::UpdateContainerResources {
                    instance,
                    resources,
                    ..
                } => Some((*instance, resources.clone())),
                _ => None,
            })
            .collect()
    }

    /// The runtime applied `resources` to `id`.
    pub fn resources_updated(
        &mut self,
        id: InstanceId,
        resources: ResourceRequirements,
        now: Timestamp,
    ) {
        self.input(Input::ResourcesUpdated { id, resources }, now);
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

    /// Conditions written by another client (readiness gates).
    pub fn set_conditions(&mut self, conditions: Vec<PodCondition>, now: Timestamp) {
        self.input(Input::Conditions(conditions), now);
    }
}
