//! [`Answers`]: the fake runtime of the rule tests.

use super::{Control, FakeRuntime, Input, container_id};
use crate::action::{Action, ExitStatus, InstanceId, ProbeKind, ProbeOutcome};
use k8s_openapi::api::core::v1::ResourceRequirements;
use podvisor_api::pod::memory_limit_below_usage_message;
use podvisor_api::quantity::Quantity;
use std::collections::{HashMap, HashSet};

/// Fixed answers given at the instant of the action, each kind switched on or off; what it does
/// not answer waits for the test. The default answers nothing.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    /// `CreateSandbox`: the sandbox is ready.
    pub sandbox: bool,
    /// `StartContainer`: the process started (container id [`container_id`]).
    pub starts: bool,
    /// `RunProbe`: the outcome set for the container and probe kind, if any.
    pub probes: HashMap<(String, ProbeKind), ProbeOutcome>,
    /// `StopContainer`: the instance exits on its stop signal, with its container's code in
    /// `stop_code` (default 143), unless its container is in `ignore_stop`.
    pub stops: bool,
    /// Containers that ignore their stop signal (they exit on SIGKILL only).
    pub ignore_stop: HashSet<String>,
    /// Exit codes on the stop signal, by container.
    pub stop_code: HashMap<String, i32>,
    /// `KillContainer`: the instance exits with 137.
    pub kills: bool,
    /// `UpdateContainerResources`: applied as asked, unless the container is in
    /// `memory_usage` and the new memory limit is below that usage (refused with the
    /// kubelet's message).
    pub resizes: bool,
    /// Memory in use by container (bytes), for refused memory limit decreases.
    pub memory_usage: HashMap<String, u64>,
}

impl Answers {
    /// Answers nothing: the test answers every request.
    pub fn none() -> Answers {
        Answers::default()
    }

    /// A runtime that works: sandboxes and starts succeed, stop signals and SIGKILL end the
    /// instance; probes and hooks wait for the test unless [`Answers::answer_probes`] says.
    pub fn working() -> Answers {
        Answers {
            sandbox: true,
            starts: true,
            stops: true,
            kills: true,
            resizes: true,
            ..Answers::default()
        }
    }

    /// Only SIGKILL is answered (it always works).
    pub fn kills_only() -> Answers {
        Answers {
            kills: true,
            ..Answers::default()
        }
    }

    /// Every probe of `kind` of `name` gets `outcome` at once from now on.
    pub fn answer_probes(&mut self, name: &str, kind: ProbeKind, outcome: ProbeOutcome) {
        self.probes.insert((name.to_string(), kind), outcome);
    }
}

/// A fake runtime's answer to `UpdateContainerResources`: applied, or refused when the new
/// memory limit is below `usage` (as the kubelet refuses it).
pub fn resize_answer(
    name: &str,
    instance: InstanceId,
    resources: &ResourceRequirements,
    usage: Option<u64>,
) -> Input {
    let limit = resources
        .limits
        .as_ref()
        .and_then(|l| l.get("memory"))
        .and_then(|q| Quantity::parse(&q.0))
        .and_then(|q| u64::try_from(q.value()).ok());
    match (limit, usage) {
        (Some(limit), Some(usage)) if limit < usage => Input::ResourcesUpdateFailed {
            id: instance,
            message: memory_limit_below_usage_message(name, limit, usage),
        },
        _ => Input::ResourcesUpdated {
            id: instance,
            resources: resources.clone(),
        },
    }
}

fn exit(code: i32, ctl: &Control<'_, Input>) -> ExitStatus {
    ExitStatus {
        exit_code: code,
        finished_at: Some(ctl.now()),
        ..ExitStatus::default()
    }
}

impl FakeRuntime for Answers {
    type Answer = Input;

    fn on_action(&mut self, action: &Action, ctl: &mut Control<'_, Input>) {
        match action {
            Action::CreateSandbox if self.sandbox => ctl.answer(Input::SandboxReady),
            Action::StartContainer { instance, .. } if self.starts => ctl.answer(Input::Started {
                id: *instance,
                container_id: container_id(*instance),
                started_at: ctl.now(),
            }),
            Action::RunProbe {
                name,
                instance,
                kind,
                ..
            } => {
                if let Some(outcome) = self.probes.get(&(name.clone(), *kind)) {
                    ctl.answer(Input::Probe {
                        name: name.clone(),
                        id: *instance,
                        kind: *kind,
                        outcome: outcome.clone(),
                    });
                }
            }
            Action::StopContainer { name, instance, .. }
                if self.stops && !self.ignore_stop.contains(name) =>
            {
                let code = self.stop_code.get(name).copied().unwrap_or(143);
                let exit = exit(code, ctl);
                ctl.answer(Input::Exited {
                    id: *instance,
                    exit,
                });
            }
            Action::KillContainer { instance, .. } if self.kills => {
                let exit = exit(137, ctl);
                ctl.answer(Input::Exited {
                    id: *instance,
                    exit,
                });
            }
            Action::UpdateContainerResources {
                name,
                instance,
                resources,
            } if self.resizes => {
                ctl.answer(resize_answer(
                    name,
                    *instance,
                    resources,
                    self.memory_usage.get(name).copied(),
                ));
            }
            _ => {}
        }
    }

    fn on_due(&mut self, answer: Input, _ctl: &mut Control<'_, Input>) -> Option<Input> {
        Some(answer)
    }
}
