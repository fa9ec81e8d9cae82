//! In-place pod resize (`InPlacePodVerticalScaling`, GA in 1.35): the kubelet's allocation
//! manager (`handlePodResourcesResize`, feasibility against the node's allocatable), the
//! runtime manager's `computePodResizeAction` (update in place, or restart for a
//! `RestartContainer` policy) and the status manager's resize conditions.
//!
//! Three resource states per resizable container (regular containers and sidecars; a regular
//! init container never changes): the spec's *desired* resources, the *allocated* ones the
//! kubelet accepted (`allocatedResources`, what new instances start with), and the *actuated*
//! ones the runtime reported for a running instance (`status.containerStatuses[].resources`).
//!
//! - `PodResizePending` (reason `Infeasible` or `Deferred`) while desired ≠ allocated and the
//!   node cannot take it; `PodResizeInProgress` from the allocation until every running
//!   instance reports the allocated values (reason `Error` with the runtime's message when an
//!   update failed, e.g. a memory limit below the container's usage, retried after the pod
//!   worker's 10 s error requeue). Both carry the `metadata.generation` of their resize (D10).
//! - Events as the kubelet's (`pkg/kubelet/events`): `ResizeStarted`, `ResizeCompleted`,
//!   `ResizeDeferred`, `ResizeInfeasible`, `ResizeError`, each `Pod resize …: <summary>`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodCondition, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use podvisor_api::quantity::Quantity;

use super::{InstState, Instance, PodMachine, Worker, container_spec};
use crate::action::{Action, ContainerKind, EventType, InstanceId, KillReason};
use crate::config::NodeResources;
use crate::time::trunc_secs;

pub use podvisor_api::pod::{POD_RESIZE_IN_PROGRESS, POD_RESIZE_PENDING};

/// `cm.MinShares`: cpu requests at or below this many millicores are equal (the kernel's
/// minimum `cpu.shares`).
const MIN_SHARES: i64 = 2;
/// `cm.MinMilliCPULimit`: cpu limits at or below this are equal (the minimum CFS quota).
const MIN_MILLI_CPU_LIMIT: i64 = 10;
/// The pod worker requeues an errored sync after `backOffPeriod`; a failed resize is retried
/// at that sync.
const RETRY_SECS: i64 = 10;

/// One resize condition as the status manager keeps it (`updatedPodResizeCondition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResizeCondition {
    pub reason: String,
    pub message: String,
    pub generation: Option<i64>,
    pub probe_time: Timestamp,
    pub transition_time: Timestamp,
}

impl ResizeCondition {
    /// A condition set at `now`; the transition time stays when the reason does.
    fn set(
        old: Option<&ResizeCondition>,
        reason: &str,
        message: String,
        generation: Option<i64>,
        now: Timestamp,
    ) -> ResizeCondition {
        let now = trunc_secs(now);
        ResizeCondition {
            reason: reason.to_owned(),
            message,
            generation,
            probe_time: now,
            transition_time: old
                .filter(|o| o.reason == reason)
                .map_or(now, |o| o.transition_time),
        }
    }

    fn to_api(&self, type_: &str) -> PodCondition {
        PodCondition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            observed_generation: self.generation,
            last_probe_time: Some(Time(self.probe_time)),
            last_transition_time: Some(Time(self.transition_time)),
            reason: (!self.reason.is_empty()).then(|| self.reason.clone()),
            message: (!self.message.is_empty()).then(|| self.message.clone()),
        }
    }
}

/// The pod's resize bookkeeping.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResizeState {
    /// Allocated resources per container (index of `PodMachine::containers`).
    pub allocated: Vec<ResourceRequirements>,
    pub pending: Option<ResizeCondition>,
    pub in_progress: Option<ResizeCondition>,
    /// What the node's other pods have allocated (requests), for `Deferred`.
    pub node_requested: NodeResources,
}

/// A resize update of one instance (A18 step 7).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InstanceResize {
    /// `UpdateContainerResources` was sent with these resources; no answer yet.
    InFlight(ResourceRequirements),
    /// The runtime refused these resources; tried again at `retry_at` (or for other ones).
    Failed {
        target: ResourceRequirements,
        retry_at: Timestamp,
    },
}

/// What `computePodResizeAction` decided for a running container.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ResizeDecision {
    /// Nothing to do (equal, in flight, waiting for a retry, not running).
    Keep,
    /// Update in place to these resources.
    Update(ResourceRequirements),
    /// A changed resource's policy is `RestartContainer`: kill and start again.
    Restart(KillReason),
}

/// The three values a runtime actuates: cpu request and limit (millicores), memory limit
/// (bytes). Memory requests are not written to cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Actuated {
    cpu_request: i64,
    cpu_limit: i64,
    memory_limit: i64,
}

fn quantity(list: Option<&BTreeMap<String, WireQuantity>>, name: &str) -> Option<Quantity> {
    list?.get(name).and_then(|q| Quantity::parse(&q.0))
}

impl Actuated {
    fn of(r: &ResourceRequirements) -> Actuated {
        Actuated {
            cpu_request: quantity(r.requests.as_ref(), "cpu").map_or(0, |q| q.milli_value()),
            cpu_limit: quantity(r.limits.as_ref(), "cpu").map_or(0, |q| q.milli_value()),
            memory_limit: quantity(r.limits.as_ref(), "memory").map_or(0, |q| q.value()),
        }
    }

    /// Equal as the kubelet compares them: values at or below the kernel minimums match.
    fn matches(self, desired: Actuated) -> bool {
        let cpu_request = self.cpu_request == desired.cpu_request
            || (self.cpu_request <= MIN_SHARES && desired.cpu_request <= MIN_SHARES);
        let cpu_limit = self.cpu_limit == desired.cpu_limit
            || (self.cpu_limit <= MIN_MILLI_CPU_LIMIT && desired.cpu_limit <= MIN_MILLI_CPU_LIMIT);
        cpu_request && cpu_limit && self.memory_limit == desired.memory_limit
    }
}

/// Whether a container's resources can be resized (`IsResizableContainer`): regular
/// containers and sidecars.
pub(crate) fn is_resizable(kind: ContainerKind) -> bool {
    kind != ContainerKind::Init
}

/// The pod's effective cpu (millicores) and memory (bytes) requests (`PodRequests`).
fn pod_requests(spec: &PodSpec) -> (i64, i64) {
    let total = podvisor_api::resources::aggregate_container_requests(spec);
    (
        total.get("cpu").map_or(0, Quantity::milli_value),
        total.get("memory").map_or(0, Quantity::value),
    )
}

/// The kubelet's resource summary of a resize event (`makeResourceSummaryFromSpec`): every
/// init and regular container with its resources, the generation and the error, as JSON in
/// Go's field order.
fn summary(spec: &PodSpec, generation: Option<i64>, error: &str) -> String {
    let list = |containers: &[Container]| -> String {
        let items: Vec<String> = containers
            .iter()
            .map(|c| {
                let r = c.resources.clone().unwrap_or_default();
                let mut fields = Vec::new();
                for (key, map) in [("limits", &r.limits), ("requests", &r.requests)] {
                    if let Some(m) = map.as_ref().filter(|m| !m.is_empty()) {
                        let json = serde_json::to_string(m).unwrap_or_default();
                        fields.push(format!("\"{key}\":{json}"));
                    }
                }
                let name = serde_json::to_string(&c.name).unwrap_or_default();
                format!("{{\"name\":{name},\"resources\":{{{}}}}}", fields.join(","))
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    let mut parts = Vec::new();
    if let Some(inits) = spec.init_containers.as_deref().filter(|i| !i.is_empty()) {
        parts.push(format!("\"initContainers\":{}", list(inits)));
    }
    if !spec.containers.is_empty() {
        parts.push(format!("\"containers\":{}", list(&spec.containers)));
    }
    parts.push(format!("\"generation\":{}", generation.unwrap_or(0)));
    if !error.is_empty() {
        let e = serde_json::to_string(error).unwrap_or_default();
        parts.push(format!("\"error\":{e}"));
    }
    format!("{{{}}}", parts.join(","))
}

impl PodMachine {
    /// The allocated resources of every container from the spec the pod was admitted with.
    pub(super) fn initial_allocation(
        spec: &PodSpec,
        kinds: &[(ContainerKind, usize)],
    ) -> Vec<ResourceRequirements> {
        kinds
            .iter()
            .map(|&(kind, index)| match kind {
                // No resources (V12), none allocated: never part of a resize.
                ContainerKind::Ephemeral => ResourceRequirements::default(),
                _ => container_spec(spec, kind, index)
                    .resources
                    .clone()
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The pod as the kubelet acts on it (`UpdatePodFromAllocation`): the spec with the
    /// allocated resources, which a container's next start uses, whatever resize is pending.
    #[must_use]
    pub fn allocated_pod(&self) -> k8s_openapi::api::core::v1::Pod {
        let mut pod = self.pod.clone();
        if let Some(spec) = pod.spec.as_mut() {
            for (ci, c) in self.containers.iter().enumerate() {
                if !is_resizable(c.kind) {
                    continue;
                }
                let target = match c.kind {
                    ContainerKind::Regular => spec.containers.get_mut(c.index),
                    _ => spec
                        .init_containers
                        .as_mut()
                        .and_then(|i| i.get_mut(c.index)),
                };
                if let Some(container) = target {
                    let alloc = &self.resize.allocated[ci];
                    container.resources = (alloc != &ResourceRequirements::default()
                        || container.resources.is_some())
                    .then(|| alloc.clone());
                }
            }
        }
        pod
    }

    /// The requests of the node's other pods changed (their allocated cpu and memory); a
    /// `Deferred` resize is evaluated again.
    pub fn set_node_requested(&mut self, requested: NodeResources, now: Timestamp) {
        if self.resize.node_requested == requested {
            return;
        }
        self.resize.node_requested = requested;
        if self.resize.pending.is_some() {
            self.handle_pod_resources_resize(now);
            self.step(now);
        }
    }

    /// `handlePodResourcesResize`: the spec's resources against the allocation. Equal: no
    /// resize pending. Otherwise the resize is allocated when the node can take it
    /// (`PodResizeInProgress`, `ResizeStarted`), or left pending (`Infeasible`: more than
    /// the node's allocatable; `Deferred`: more than what the other pods leave).
    pub(super) fn handle_pod_resources_resize(&mut self, now: Timestamp) {
        // `IsInPlacePodVerticalScalingAllowed`: not for static pods; nor for a pod that is
        // terminating (its worker no longer syncs it).
        if self.config.is_static || self.worker != Worker::Syncing {
            return;
        }
        let desired: Vec<ResourceRequirements> = self
            .containers
            .iter()
            .enumerate()
            .map(|(ci, c)| {
                if is_resizable(c.kind) {
                    self.container_spec_of(ci)
                        .resources
                        .clone()
                        .unwrap_or_default()
                } else {
                    self.resize.allocated[ci].clone()
                }
            })
            .collect();
        if desired == self.resize.allocated {
            self.resize.pending = None;
            return;
        }
        let generation = self.pod.metadata.generation;
        if let Some((reason, message)) = self.resize_blocked() {
            let changed = self.resize.pending.as_ref().is_none_or(|p| {
                p.reason != reason || p.message != message || p.generation != generation
            });
            if changed {
                self.resize.pending = Some(ResizeCondition::set(
                    self.resize.pending.as_ref(),
                    reason,
                    message.clone(),
                    generation,
                    now,
                ));
                let event = if reason == "Infeasible" {
                    "ResizeInfeasible"
                } else {
                    "ResizeDeferred"
                };
                let text = format!(
                    "Pod resize {reason}: {}",
                    summary(self.spec(), generation, &message)
                );
                self.emit(EventType::Warning, event, text, None);
            }
            return;
        }
        self.resize.allocated = desired;
        self.resize.pending = None;
        // A new allocation clears an earlier error and carries this resize's generation.
        self.resize.in_progress = Some(ResizeCondition::set(
            None,
            "",
            String::new(),
            generation,
            now,
        ));
        let text = format!(
            "Pod resize started: {}",
            summary(self.spec(), generation, "")
        );
        self.emit(EventType::Normal, "ResizeStarted", text, None);
    }

    /// Why the node cannot take the desired resources now, as the kubelet's resize admission
    /// words it (`canResizePod`, then the resource-fit predicate's message).
    fn resize_blocked(&self) -> Option<(&'static str, String)> {
        let node = self.config.allocatable?;
        let (cpu, memory) = pod_requests(self.spec());
        if memory > node.memory_bytes {
            return Some((
                "Infeasible",
                format!(
                    "Node didn't have enough capacity: memory, requested: {memory}, capacity: {}",
                    node.memory_bytes
                ),
            ));
        }
        if cpu > node.cpu_millis {
            return Some((
                "Infeasible",
                format!(
                    "Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {}",
                    node.cpu_millis
                ),
            ));
        }
        let used = self.resize.node_requested;
        for (name, requested, used, capacity) in [
            ("cpu", cpu, used.cpu_millis, node.cpu_millis),
            ("memory", memory, used.memory_bytes, node.memory_bytes),
        ] {
            if requested > capacity - used {
                return Some((
                    "Deferred",
                    format!(
                        "Node didn't have enough resource: {name}, requested: {requested}, \
                         used: {used}, capacity: {capacity}"
                    ),
                ));
            }
        }
        None
    }

    /// `computePodResizeAction` for container `ci`'s newest instance `inst` (running, not
    /// being stopped).
    pub(super) fn resize_decision(
        &self,
        ci: usize,
        inst: &Instance,
        now: Timestamp,
    ) -> ResizeDecision {
        if self.config.is_static || !is_resizable(self.containers[ci].kind) {
            return ResizeDecision::Keep;
        }
        if !matches!(inst.state, InstState::Running { .. }) {
            return ResizeDecision::Keep;
        }
        let allocated = &self.resize.allocated[ci];
        match &inst.resize {
            Some(InstanceResize::InFlight(_)) => return ResizeDecision::Keep,
            Some(InstanceResize::Failed { target, retry_at })
                if target == allocated && now < *retry_at =>
            {
                return ResizeDecision::Keep;
            }
            _ => {}
        }
        let desired = Actuated::of(allocated);
        let current = Actuated::of(&inst.resources);
        if current.matches(desired) {
            return ResizeDecision::Keep;
        }
        let policy = |resource: &str| {
            self.container_spec_of(ci)
                .resize_policy
                .iter()
                .flatten()
                .find(|p| p.resource_name == resource)
                .is_some_and(|p| p.restart_policy == "RestartContainer")
        };
        let cpu_changed =
            current.cpu_request != desired.cpu_request || current.cpu_limit != desired.cpu_limit;
        let memory_changed = current.memory_limit != desired.memory_limit;
        if (cpu_changed && policy("cpu")) || (memory_changed && policy("memory")) {
            let name = &self.containers[ci].name;
            return ResizeDecision::Restart(KillReason {
                message: format!("Container {name} resize requires restart"),
                probe: None,
                restart: true,
            });
        }
        ResizeDecision::Update(allocated.clone())
    }

    /// A18 step 7: asks the runtime to update instance `ii` of `ci` in place.
    pub(super) fn update_resources(&mut self, ci: usize, resources: ResourceRequirements) {
        let c = &mut self.containers[ci];
        let Some(inst) = c.instances.last_mut() else {
            return;
        };
        inst.resize = Some(InstanceResize::InFlight(resources.clone()));
        self.actions.push_back(Action::UpdateContainerResources {
            name: c.name.clone(),
            instance: inst.id,
            resources,
        });
    }

    /// The runtime applied `resources` to `instance` (CRI `UpdateContainerResources`
    /// succeeded and the values were read back).
    pub fn handle_resources_updated(
        &mut self,
        instance: InstanceId,
        resources: ResourceRequirements,
        now: Timestamp,
    ) {
        if let Some((ci, ii)) = self.find_instance(instance) {
            let inst = &mut self.containers[ci].instances[ii];
            inst.resources = resources;
            inst.resize = None;
        }
        self.step(now);
    }

    /// The runtime could not apply the resources (a memory limit below the container's
    /// usage, a cgroup write that failed): `PodResizeInProgress` gets reason `Error` and the
    /// message (the kubelet's `SetPodResizeInProgressCondition(…, PodReasonError, …)`), and
    /// the update is tried again at the next sync after 10 s.
    pub fn handle_resources_update_failed(
        &mut self,
        instance: InstanceId,
        message: String,
        now: Timestamp,
    ) {
        let Some((ci, ii)) = self.find_instance(instance) else {
            return;
        };
        let target = self.resize.allocated[ci].clone();
        self.containers[ci].instances[ii].resize = Some(InstanceResize::Failed {
            target,
            retry_at: now + crate::time::secs(RETRY_SECS),
        });
        let generation = self.pod.metadata.generation;
        let old = self.resize.in_progress.clone();
        let changed = old
            .as_ref()
            .is_none_or(|o| o.reason != "Error" || o.message != message);
        self.resize.in_progress = Some(ResizeCondition::set(
            old.as_ref(),
            "Error",
            message.clone(),
            generation,
            now,
        ));
        if changed {
            let text = format!(
                "Pod resize error: {}",
                summary(&self.allocated_spec(), generation, &message)
            );
            self.emit(EventType::Warning, "ResizeError", text, None);
        }
        self.step(now);
    }

    fn allocated_spec(&self) -> PodSpec {
        self.allocated_pod().spec.unwrap_or_default()
    }

    /// When a failed update is retried (a timer while the pod syncs).
    pub(super) fn resize_retry_at(&self) -> Option<Timestamp> {
        self.containers
            .iter()
            .filter_map(|c| c.instances.last())
            .filter_map(|i| match &i.resize {
                Some(InstanceResize::Failed { retry_at, .. }) if i.is_running() => Some(*retry_at),
                _ => None,
            })
            .min()
    }

    /// `isPodResizeInProgress`: some running resizable instance does not run with its
    /// allocated resources yet, or an update is in flight.
    fn resize_in_progress(&self) -> bool {
        self.containers.iter().enumerate().any(|(ci, c)| {
            is_resizable(c.kind)
                && c.instances.last().is_some_and(|i| {
                    i.is_alive()
                        && (i.resize.is_some()
                            || !Actuated::of(&i.resources)
                                .matches(Actuated::of(&self.resize.allocated[ci])))
                })
        })
    }

    /// After a sync: a resize whose containers all run with their allocation is complete
    /// (the condition goes, `ResizeCompleted`).
    pub(super) fn finish_resize(&mut self) {
        let Some(cond) = &self.resize.in_progress else {
            return;
        };
        if self.resize_in_progress() {
            return;
        }
        let generation = cond.generation;
        self.resize.in_progress = None;
        let text = format!(
            "Pod resize completed: {}",
            summary(&self.allocated_spec(), generation, "")
        );
        self.emit(EventType::Normal, "ResizeCompleted", text, None);
    }

    /// The resize conditions to publish, pending first (`GetPodResizeConditions`).
    pub(super) fn resize_conditions(&self) -> Vec<PodCondition> {
        let mut out = Vec::new();
        if let Some(p) = &self.resize.pending {
            out.push(p.to_api(POD_RESIZE_PENDING));
        }
        if let Some(p) = &self.resize.in_progress {
            out.push(p.to_api(POD_RESIZE_IN_PROGRESS));
        }
        out
    }

    /// S15 for container `ci`: `resources` (a live instance: what the runtime applied, the
    /// memory request from the allocation, which cgroups do not carry; otherwise the
    /// allocation its next start gets) and `allocatedResources` (the allocated requests).
    pub(super) fn status_resources(
        &self,
        ci: usize,
        newest: Option<&Instance>,
    ) -> (
        Option<ResourceRequirements>,
        Option<BTreeMap<String, WireQuantity>>,
    ) {
        let allocated = &self.resize.allocated[ci];
        let Some(inst) = newest else {
            return (None, None);
        };
        let resources = if inst.is_alive() {
            let mut r = inst.resources.clone();
            let memory_request = allocated
                .requests
                .as_ref()
                .and_then(|m| m.get("memory").cloned());
            let requests = r.requests.get_or_insert_with(BTreeMap::new);
            requests.remove("memory");
            if let Some(q) = memory_request {
                requests.insert("memory".to_owned(), q);
            }
            if requests.is_empty() {
                r.requests = None;
            }
            r
        } else {
            allocated.clone()
        };
        (Some(resources), allocated.requests.clone())
    }
}
