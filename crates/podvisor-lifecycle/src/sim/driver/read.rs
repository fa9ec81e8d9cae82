//! Reading what happened: the actions logged, and the pod's status.

use super::{Driver, FakeRuntime};
use crate::Phase;
use crate::action::{Action, Event, InstanceId, ProbeKind};
use crate::machine::RecoveredInstance;
use k8s_openapi::api::core::v1::{
    ContainerStateTerminated, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::jiff::Timestamp;

impl<R: FakeRuntime> Driver<R> {
    // ----- instances -----

    /// The newest instance created for `name` (panics if none).
    pub fn instance(&self, name: &str) -> InstanceId {
        *self
            .instances(name)
            .last()
            .unwrap_or_else(|| panic!("{name} was never started"))
    }

    /// Every instance created for `name`, oldest first.
    pub fn instances(&self, name: &str) -> Vec<InstanceId> {
        self.instances
            .values()
            .filter(|i| i.name == name)
            .map(|i| i.id)
            .collect()
    }

    /// What a runtime would report as still running after an agent restart: every container
    /// whose status says running, with its newest instance.
    pub fn running_instances(&self) -> Vec<RecoveredInstance> {
        let status = self.status();
        status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .filter_map(|s| {
                let running = s.state.as_ref()?.running.as_ref()?;
                Some(RecoveredInstance {
                    name: s.name.clone(),
                    instance: self.instance(&s.name),
                    container_id: s.container_id.clone()?,
                    started_at: running.started_at.as_ref()?.0,
                })
            })
            .collect()
    }

    // ----- the log -----

    /// The current log length, to look at what happens after this point.
    pub fn mark(&self) -> usize {
        self.log.len()
    }

    /// Actions logged since `mark`.
    pub fn actions_since(&self, mark: usize) -> &[Action] {
        &self.log[mark..]
    }

    /// Every event, in order.
    pub fn event_list(&self) -> Vec<Event> {
        self.event_list_since(0)
    }

    fn event_list_since(&self, mark: usize) -> Vec<Event> {
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
        self.event_list_since(mark)
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

    /// `RunProbe` actions: (time, container, kind).
    pub fn probes_run(&self) -> Vec<(Timestamp, String, ProbeKind)> {
        self.logged()
            .filter_map(|(at, a)| match a {
                Action::RunProbe { name, kind, .. } => Some((at, name.clone(), *kind)),
                _ => None,
            })
            .collect()
    }

    /// `StartContainer` actions for `name`: (time, restart count).
    pub fn starts_of(&self, name: &str) -> Vec<(Timestamp, i32)> {
        self.logged()
            .filter_map(|(at, a)| match a {
                Action::StartContainer {
                    name: n,
                    restart_count,
                    ..
                } if n == name => Some((at, *restart_count)),
                _ => None,
            })
            .collect()
    }

    /// Containers of every `StartContainer`, in order.
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

    /// Whether `PodTerminated` was produced.
    pub fn pod_terminated(&self) -> bool {
        self.terminated_at.is_some()
    }

    // ----- the status -----

    /// The pod with its current status.
    pub fn pod(&self) -> &Pod {
        self.machine.pod()
    }

    /// The current status.
    pub fn status(&self) -> PodStatus {
        self.machine.pod().status.clone().unwrap_or_default()
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.machine.phase()
    }

    /// `status.reason` and `status.message`.
    pub fn pod_reason(&self) -> (Option<String>, Option<String>) {
        let s = self.status();
        (s.reason, s.message)
    }

    /// The status of the container, init or ephemeral container `name` (panics if absent).
    pub fn status_of(&self, name: &str) -> ContainerStatus {
        let s = self.status();
        s.init_container_statuses
            .into_iter()
            .flatten()
            .chain(s.container_statuses.into_iter().flatten())
            .chain(s.ephemeral_container_statuses.into_iter().flatten())
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no status for {name}"))
    }

    /// `running`, `waiting`, `terminated` or `none`: the state of `name`.
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

    /// The pod condition `type_`, if present.
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
