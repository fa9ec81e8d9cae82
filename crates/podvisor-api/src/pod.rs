//! The pod rules that several crates need, in one place, as Kubernetes keeps them in
//! `pkg/api/v1/pod/util.go`, `pkg/kubelet/container/helpers.go` and
//! `pkg/apis/core/v1/helper/qos`: the sidecar test, whether a container restarts after an exit,
//! the QoS class, and the condition types the kubelet owns.

use crate::quantity::Quantity;
use k8s_openapi::api::core::v1::{
    Container, ContainerRestartRule, EphemeralContainer, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;

type ResourceList = BTreeMap<String, ApiQuantity>;

/// `PodReadyToStartContainers`: the sandbox is ready (D2).
pub const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
/// `Initialized`: every regular init container succeeded and every sidecar started (D3).
pub const INITIALIZED: &str = "Initialized";
/// `Ready`: the pod can serve (D5).
pub const READY: &str = "Ready";
/// `ContainersReady`: every container is ready (D4).
pub const CONTAINERS_READY: &str = "ContainersReady";
/// `PodScheduled`: bound to a node (written by the scheduler, or the kubelet for static pods).
pub const POD_SCHEDULED: &str = "PodScheduled";

/// `PodResizePending`: an in-place resize the kubelet cannot grant now.
pub const POD_RESIZE_PENDING: &str = "PodResizePending";
/// `PodResizeInProgress`: an allocated in-place resize not yet actuated.
pub const POD_RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
/// KEP-5532: True while a `RestartAllContainers` rule's restart kills the pod's containers.
pub const ALL_CONTAINERS_RESTARTING: &str = "AllContainersRestarting";

/// The condition types whose truth the kubelet owns (D1, and the resize conditions,
/// `PodConditionByKubelet`); the status manager keeps every other type as clients wrote it.
pub const KUBELET_CONDITIONS: [&str; 8] = [
    POD_READY_TO_START_CONTAINERS,
    INITIALIZED,
    READY,
    CONTAINERS_READY,
    POD_SCHEDULED,
    POD_RESIZE_PENDING,
    POD_RESIZE_IN_PROGRESS,
    ALL_CONTAINERS_RESTARTING,
];

/// Whether `c` (an init container) is a sidecar: `restartPolicy: Always`
/// (`IsRestartableInitContainer`).
#[must_use]
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// `ContainerShouldRestart` (A16, `ContainerRestartRules` on as in 1.35): for a container with
/// its own `restartPolicy`, the first of its `restartPolicyRules` that matches the exit code
/// decides if its action is `Restart`, else the container's policy does; otherwise the pod's
/// policy (`Always` when empty).
#[must_use]
pub fn container_should_restart(c: &Container, spec: &PodSpec, exit_code: i32) -> bool {
    if let Some(policy) = c.restart_policy.as_deref() {
        if first_matching_rule(c, exit_code).is_some_and(|rule| rule.action == "Restart") {
            return true;
        }
        match policy {
            "Always" => return true,
            "OnFailure" => return exit_code != 0,
            "Never" => return false,
            _ => {}
        }
    }
    match spec.restart_policy.as_deref() {
        Some("OnFailure") => exit_code != 0,
        Some("Never") => false,
        _ => true,
    }
}

/// `findMatchingContainerRestartRule`: the first of `c`'s `restartPolicyRules` whose exit
/// codes match `exit_code` (`In`: listed, `NotIn`: not listed).
#[must_use]
pub fn first_matching_rule(c: &Container, exit_code: i32) -> Option<&ContainerRestartRule> {
    c.restart_policy_rules.iter().flatten().find(|rule| {
        rule.exit_codes.as_ref().is_some_and(|codes| {
            let listed = codes.values.iter().flatten().any(|v| *v == exit_code);
            match codes.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            }
        })
    })
}

/// KEP-5532 (`RestartAllContainersOnContainerExits`): whether `c`'s exit with `exit_code`
/// restarts the whole pod in place: its first matching rule has the action
/// `RestartAllContainers` (the check of `ShouldAllContainersRestart` for one container). Only
/// meaningful with the gate on; with it off the rule is ignored and the container's policy
/// decides ([`container_should_restart`]).
#[must_use]
pub fn restarts_all_containers(c: &Container, exit_code: i32) -> bool {
    first_matching_rule(c, exit_code)
        .is_some_and(|rule| rule.action == crate::feature_gates::RESTART_ALL_CONTAINERS)
}

/// The QoS classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    /// Requests equal limits for cpu and memory everywhere.
    Guaranteed,
    /// Anything between.
    Burstable,
    /// No cpu or memory request or limit anywhere.
    BestEffort,
}

impl QosClass {
    /// The API's spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

/// `ComputePodQOS` (1.35): from the pod-level `spec.resources` when it is set
/// (`PodLevelResources`, on by default), else from every init and regular container, each
/// classified on its own: any Burstable container, or a mix of BestEffort and Guaranteed ones,
/// makes the pod Burstable. Only cpu and memory count, compared as quantities (`1` = `1000m`).
#[must_use]
pub fn qos_class(spec: &PodSpec) -> QosClass {
    if let Some(resources) = spec.resources.as_ref() {
        return resource_qos(resources);
    }
    let mut pod: Option<QosClass> = None;
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
    {
        let qos = c
            .resources
            .as_ref()
            .map_or(QosClass::BestEffort, resource_qos);
        match pod {
            _ if qos == QosClass::Burstable => return qos,
            None => pod = Some(qos),
            Some(p) if p != qos => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    pod.unwrap_or(QosClass::BestEffort)
}

/// `resourceQOS`: one set of requirements. Empty is BestEffort; a request that differs from its
/// limit for cpu or memory is Burstable; cpu and memory both unset (zero) is BestEffort, both
/// set equal is Guaranteed, one of each is Burstable.
fn resource_qos(r: &ResourceRequirements) -> QosClass {
    let none = |m: Option<&ResourceList>| m.is_none_or(BTreeMap::is_empty);
    if none(r.requests.as_ref()) && none(r.limits.as_ref()) {
        return QosClass::BestEffort;
    }
    let amount = |list: Option<&ResourceList>, name: &str| {
        list.and_then(|l| l.get(name))
            .and_then(|q| Quantity::parse(&q.0))
            .unwrap_or_default()
    };
    let mut class: Option<QosClass> = None;
    for name in ["cpu", "memory"] {
        let request = amount(r.requests.as_ref(), name);
        let limit = amount(r.limits.as_ref(), name);
        // Compared by amount (`Quantity`'s `==` also compares the suffix family).
        if request.cmp(&limit) != std::cmp::Ordering::Equal {
            return QosClass::Burstable;
        }
        let this = if request.is_zero() {
            QosClass::BestEffort
        } else {
            QosClass::Guaranteed
        };
        match class {
            None => class = Some(this),
            Some(c) if c != this => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    class.unwrap_or(QosClass::BestEffort)
}

/// The message of the kubelet's `Pulled` event for a pull (`image_manager.go`): `Successfully
/// pulled image "x" in 1.2s (1.5s including waiting). Image size: N bytes.` Both durations are
/// truncated to milliseconds and printed as Go prints a `time.Duration`; `image` is the name
/// as the pod spec wrote it.
#[must_use]
pub fn image_pulled_message(
    image: &str,
    pull: std::time::Duration,
    including_waiting: std::time::Duration,
    size: u64,
) -> String {
    use std::time::Duration;
    let ms = |d: Duration| Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    format!(
        "Successfully pulled image {} in {} ({} including waiting). Image size: {size} bytes.",
        crate::gotext::quote(image),
        crate::gotext::duration(ms(pull)),
        crate::gotext::duration(ms(including_waiting)),
    )
}

/// An ephemeral container as a [`Container`] (its `EphemeralContainerCommon`, as the kubelet
/// converts it to start it and the API server to validate it): every field it shares, so
/// the container rules, the runtime's config and the status apply unchanged.
pub fn ephemeral_as_container(e: &EphemeralContainer) -> Container {
    Container {
        args: e.args.clone(),
        command: e.command.clone(),
        env: e.env.clone(),
        env_from: e.env_from.clone(),
        image: e.image.clone(),
        image_pull_policy: e.image_pull_policy.clone(),
        lifecycle: e.lifecycle.clone(),
        liveness_probe: e.liveness_probe.clone(),
        name: e.name.clone(),
        ports: e.ports.clone(),
        readiness_probe: e.readiness_probe.clone(),
        resize_policy: e.resize_policy.clone(),
        resources: e.resources.clone(),
        restart_policy: e.restart_policy.clone(),
        restart_policy_rules: e.restart_policy_rules.clone(),
        security_context: e.security_context.clone(),
        startup_probe: e.startup_probe.clone(),
        stdin: e.stdin,
        stdin_once: e.stdin_once,
        termination_message_path: e.termination_message_path.clone(),
        termination_message_policy: e.termination_message_policy.clone(),
        tty: e.tty,
        volume_devices: e.volume_devices.clone(),
        volume_mounts: e.volume_mounts.clone(),
        working_dir: e.working_dir.clone(),
    }
}

/// `applySchedulingGatedCondition`'s message (`pkg/registry/core/pod/strategy.go`).
pub const SCHEDULING_GATED_MESSAGE: &str =
    "Scheduling is blocked due to non-empty scheduling gates";

/// Whether the pod has scheduling gates left (M11: the scheduler does not take it).
#[must_use]
pub fn is_scheduling_gated(spec: &PodSpec) -> bool {
    spec.scheduling_gates
        .as_ref()
        .is_some_and(|g| !g.is_empty())
}

/// `podStrategy.PrepareForCreate`'s `applySchedulingGatedCondition`: a pod created with
/// scheduling gates gets `PodScheduled=False`, reason `SchedulingGated` (what kubectl shows as
/// STATUS, K1), unless it already has a `PodScheduled` condition.
pub fn apply_scheduling_gated_condition(
    pod: &mut k8s_openapi::api::core::v1::Pod,
    now: jiff::Timestamp,
) {
    use k8s_openapi::api::core::v1::PodCondition;
    if !pod.spec.as_ref().is_some_and(is_scheduling_gated) {
        return;
    }
    let status = pod.status.get_or_insert_with(Default::default);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if conditions.iter().any(|c| c.type_ == POD_SCHEDULED) {
        return;
    }
    conditions.push(PodCondition {
        type_: POD_SCHEDULED.to_owned(),
        status: "False".to_owned(),
        reason: Some("SchedulingGated".to_owned()),
        message: Some(SCHEDULING_GATED_MESSAGE.to_owned()),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
        ..PodCondition::default()
    });
}

/// The default scheduler's `Scheduled` event message once it bound a pod
/// (`Successfully assigned <ns>/<name> to <node>`).
#[must_use]
pub fn scheduled_message(namespace: &str, name: &str, node: &str) -> String {
    format!("Successfully assigned {namespace}/{name} to {node}")
}

/// The kubelet's refusal of an in-place resize that would set a container's memory limit
/// below what it uses (1.35 allows memory limit decreases and checks the usage first; the
/// resize stays `PodResizeInProgress` with reason `Error` and this message). Shared by the
/// runtimes that check the usage and the simulator's fake runtime.
#[must_use]
pub fn memory_limit_below_usage_message(container: &str, limit: u64, usage: u64) -> String {
    format!(
        "attempting to set container {} memory limit ({limit}) below current usage ({usage})",
        crate::gotext::quote(container)
    )
}
