//! Pod conditions as the kubelet generates them (spec section 9, D1-D9;
//! upstream `pkg/kubelet/status/generate.go`, `kubelet_pods.go: generateAPIPodStatus`,
//! `status_manager.go: updateLastTransitionTime, mergePodStatus`).
//!
//! One call produces the complete `status.conditions` list the kubelet would publish, including
//! `lastTransitionTime` bookkeeping against the previous list.

use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::phase::{has_any_regular_container_started, is_sidecar};
use crate::Phase;

pub use podvisor_api::pod::{
    CONTAINERS_READY, INITIALIZED, POD_READY_TO_START_CONTAINERS, POD_SCHEDULED, READY,
};
/// Condition type `DisruptionTarget` (D8): not generated here, carried over from `previous`.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Reason: no container statuses at all (D3, D4).
pub const REASON_UNKNOWN_CONTAINER_STATUSES: &str = "UnknownContainerStatuses";
/// Reason: the pod succeeded (D3, D4, D6).
pub const REASON_POD_COMPLETED: &str = "PodCompleted";
/// Reason: the pod failed (D4, D6).
pub const REASON_POD_FAILED: &str = "PodFailed";
/// Reason: some container is unknown or not ready (D4).
pub const REASON_CONTAINERS_NOT_READY: &str = "ContainersNotReady";
/// Reason: some init container has not completed / started (D3).
pub const REASON_CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
/// Reason: some readiness gate is missing or not True (D5).
pub const REASON_READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// Condition types whose value the kubelet recomputes on every status generation. Any previous
/// condition of these types is dropped and replaced; everything else is preserved. The resize
/// conditions are kubelet-owned too: the machine adds them from its resize state
/// (`machine/resize.rs`), so a previous one is never carried over.
const KUBELET_OWNED: [&str; 8] = [
    POD_SCHEDULED,
    READY,
    INITIALIZED,
    CONTAINERS_READY,
    POD_READY_TO_START_CONTAINERS,
    podvisor_api::pod::POD_RESIZE_PENDING,
    podvisor_api::pod::POD_RESIZE_IN_PROGRESS,
    podvisor_api::pod::ALL_CONTAINERS_RESTARTING,
];

/// Everything [`generate_conditions`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct ConditionInput<'a> {
    /// The pod spec: init containers, containers, readiness gates.
    pub spec: &'a PodSpec,
    /// The phase being written with these conditions (after P11-P13 merging).
    pub phase: Phase,
    /// Current `status.initContainerStatuses`.
    pub init_statuses: &'a [ContainerStatus],
    /// Current `status.containerStatuses`.
    pub statuses: &'a [ContainerStatus],
    /// No new sandbox is needed (A1): drives `PodReadyToStartContainers` (D2).
    pub sandbox_ready: bool,
    /// The previously published conditions: source of preserved conditions (readiness gates,
    /// `DisruptionTarget`) and of kept `lastTransitionTime`s (D7).
    pub previous: &'a [PodCondition],
    /// The time to stamp on conditions whose status changed (D7).
    pub now: Timestamp,
    /// `metadata.generation` of the pod the status is built from: the `observedGeneration`
    /// of every kubelet-owned condition (D10).
    pub generation: Option<i64>,
}

/// Generates the pod's conditions (D1-D7, D9).
///
/// Order (as upstream `generateAPIPodStatus` builds it and `mergePodStatus` publishes it):
/// first every condition of `previous` that the kubelet does not own, in its previous order
/// (readiness-gate conditions D9, `DisruptionTarget` D8, anything else set by other
/// components), unchanged; then the kubelet-owned conditions in D1 order:
/// `PodReadyToStartContainers`, `Initialized`, `Ready`, `ContainersReady`, `PodScheduled`.
///
/// `lastTransitionTime` (D7) of the kubelet-owned conditions is copied from the previous
/// condition of the same type when its `status` is unchanged, else set to `now` truncated to
/// whole seconds (the API's precision, P16). `lastProbeTime` is always `None`.
/// `observedGeneration` of the kubelet-owned conditions is the pod's generation (D10,
/// PodObservedGenerationTracking); preserved conditions keep theirs.
///
/// When `phase` is terminal, `Ready` and `ContainersReady` are False with reason `PodCompleted`
/// or `PodFailed` (D4, D6).
pub fn generate_conditions(input: &ConditionInput) -> Vec<PodCondition> {
    let mut conditions: Vec<PodCondition> = input
        .previous
        .iter()
        .filter(|c| !KUBELET_OWNED.contains(&c.type_.as_str()))
        .cloned()
        .collect();

    conditions.push(ready_to_start_containers(input.sandbox_ready));
    conditions.push(initialized(input));
    let containers_ready = containers_ready(input);
    // D5 is evaluated against the list built so far, like upstream: readiness-gate conditions
    // come from the preserved part.
    conditions.push(ready(input.spec, &containers_ready, &conditions));
    conditions.push(containers_ready);
    conditions.push(condition(POD_SCHEDULED, true, None, None));

    force_not_ready_when_terminal(input.phase, &mut conditions);
    stamp_transition_times(&mut conditions, input.previous, input.now);
    for c in conditions
        .iter_mut()
        .filter(|c| KUBELET_OWNED.contains(&c.type_.as_str()))
    {
        c.observed_generation = input.generation;
    }
    conditions
}

/// D2: True iff no new sandbox is needed; no reason either way.
fn ready_to_start_containers(sandbox_ready: bool) -> PodCondition {
    condition(POD_READY_TO_START_CONTAINERS, sandbox_ready, None, None)
}

/// D3's "any regular container has ever been running or terminated (API statuses)": a regular
/// container's `state` is running or terminated, or its `lastState` is terminated. (Upstream's
/// `HasAnyRegularContainerStarted` reads `state` alone, so an app waiting in back-off next to a
/// restarting sidecar flips the condition back to False; the reference and the issue's
/// invariant, Initialized never going from True back to False, keep it True.)
fn has_any_regular_container_run(spec: &PodSpec, statuses: &[ContainerStatus]) -> bool {
    has_any_regular_container_started(spec, statuses)
        || statuses.iter().any(|status| {
            spec.containers.iter().any(|c| c.name == status.name)
                && status
                    .last_state
                    .as_ref()
                    .is_some_and(|s| s.terminated.is_some())
        })
}

/// D3, `GeneratePodInitializedCondition`.
fn initialized(input: &ConditionInput) -> PodCondition {
    let spec = input.spec;
    let init_containers = spec.init_containers.as_deref().unwrap_or_default();
    let no_statuses = input.init_statuses.is_empty() && input.statuses.is_empty();
    if no_statuses && !init_containers.is_empty() {
        return condition(
            INITIALIZED,
            false,
            Some(REASON_UNKNOWN_CONTAINER_STATUSES),
            None,
        );
    }

    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for container in init_containers {
        let Some(status) = find_status(input, &container.name) else {
            unknown.push(container.name.as_str());
            continue;
        };
        // A sidecar counts once started; a regular init container once it exited 0 (ready).
        let done = if is_sidecar(container) {
            status.started == Some(true)
        } else {
            status.ready
        };
        if !done {
            incomplete.push(container.name.as_str());
        }
    }

    if input.phase == Phase::Succeeded && unknown.is_empty() {
        return condition(INITIALIZED, true, Some(REASON_POD_COMPLETED), None);
    }
    // D3: once a regular container has ever been running or terminated, the pod stays
    // initialized, also while that container waits in back-off (its `lastState` keeps the run)
    // and sidecars restart.
    if has_any_regular_container_run(spec, input.statuses) {
        return condition(INITIALIZED, true, None, None);
    }

    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        return condition(INITIALIZED, true, None, None);
    }
    condition(
        INITIALIZED,
        false,
        Some(REASON_CONTAINERS_NOT_INITIALIZED),
        Some(messages.join(", ")),
    )
}

/// D4, `GenerateContainersReadyCondition`: sidecars (in init order) then regular containers.
fn containers_ready(input: &ConditionInput) -> PodCondition {
    if input.init_statuses.is_empty() && input.statuses.is_empty() {
        return condition(
            CONTAINERS_READY,
            false,
            Some(REASON_UNKNOWN_CONTAINER_STATUSES),
            None,
        );
    }
    let spec = input.spec;
    let sidecars = spec
        .init_containers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|c| is_sidecar(c));
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    for container in sidecars.chain(spec.containers.iter()) {
        match find_status(input, &container.name) {
            Some(status) if !status.ready => unready.push(container.name.as_str()),
            Some(_) => {}
            None => unknown.push(container.name.as_str()),
        }
    }

    if input.phase == Phase::Succeeded && unknown.is_empty() {
        return condition(CONTAINERS_READY, false, Some(REASON_POD_COMPLETED), None);
    }
    if input.phase == Phase::Failed {
        return condition(CONTAINERS_READY, false, Some(REASON_POD_FAILED), None);
    }

    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        return condition(CONTAINERS_READY, true, None, None);
    }
    condition(
        CONTAINERS_READY,
        false,
        Some(REASON_CONTAINERS_NOT_READY),
        Some(messages.join(", ")),
    )
}

/// D5, `GeneratePodReadyCondition`: mirrors `ContainersReady` unless it is True, then applies
/// the readiness gates (D9) against `conditions`.
fn ready(
    spec: &PodSpec,
    containers_ready: &PodCondition,
    conditions: &[PodCondition],
) -> PodCondition {
    if containers_ready.status != "True" {
        return PodCondition {
            type_: READY.to_owned(),
            ..containers_ready.clone()
        };
    }
    let mut messages = Vec::new();
    for gate in spec.readiness_gates.as_deref().unwrap_or_default() {
        let gate_type = &gate.condition_type;
        match conditions.iter().find(|c| &c.type_ == gate_type) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate {} does not exist.",
                go_quote(gate_type)
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate {} is not \"True\", but {}",
                go_quote(gate_type),
                c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        return condition(READY, true, None, None);
    }
    condition(
        READY,
        false,
        Some(REASON_READINESS_GATES_NOT_READY),
        Some(messages.join(", ")),
    )
}

/// D6: a terminal phase is never published with `Ready`/`ContainersReady` True (upstream does
/// this in `mergePodStatus`, issue 108594). With consistent inputs the generators above already
/// guarantee it; this keeps the invariant even if a caller passes a terminal phase with
/// containers still reporting ready.
fn force_not_ready_when_terminal(phase: Phase, conditions: &mut [PodCondition]) {
    let reason = match phase {
        Phase::Succeeded => REASON_POD_COMPLETED,
        Phase::Failed => REASON_POD_FAILED,
        Phase::Pending | Phase::Running => return,
    };
    let any_true = conditions
        .iter()
        .any(|c| (c.type_ == READY || c.type_ == CONTAINERS_READY) && c.status == "True");
    if !any_true {
        return;
    }
    for c in conditions
        .iter_mut()
        .filter(|c| c.type_ == READY || c.type_ == CONTAINERS_READY)
    {
        *c = condition(&c.type_.clone(), false, Some(reason), None);
    }
}

/// D7: for kubelet-owned conditions keep the previous `lastTransitionTime` when the status did
/// not change, else stamp `now`. Preserved conditions keep their own times untouched.
fn stamp_transition_times(
    conditions: &mut [PodCondition],
    previous: &[PodCondition],
    now: Timestamp,
) {
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    for c in conditions
        .iter_mut()
        .filter(|c| KUBELET_OWNED.contains(&c.type_.as_str()))
    {
        let kept = previous
            .iter()
            .find(|p| p.type_ == c.type_)
            .filter(|p| p.status == c.status)
            .and_then(|p| p.last_transition_time.clone());
        c.last_transition_time = Some(kept.unwrap_or(Time(now)));
    }
}

fn condition(
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        last_probe_time: None,
        last_transition_time: None,
        observed_generation: None,
    }
}

/// Status lookup by name across init and regular statuses (upstream concatenates both lists).
fn find_status<'a>(input: &ConditionInput<'a>, name: &str) -> Option<&'a ContainerStatus> {
    input
        .init_statuses
        .iter()
        .chain(input.statuses.iter())
        .find(|s| s.name == name)
}

/// Go's `%s` of a `[]string`: `[a b c]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

use podvisor_api::gotext::quote as go_quote;
