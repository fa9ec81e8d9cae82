//! In-place resize (`InPlacePodVerticalScaling`, GA in 1.35). The spec has no numbered rules
//! beyond A11's resize bullet, A18 step 7, S15 (`resources`, `allocatedResources`) and D10
//! (resize conditions carry their resize's generation); the rest follows upstream:
//! `pkg/kubelet/allocation/allocation_manager.go` (`handlePodResourcesResize`),
//! `pkg/kubelet/lifecycle/predicate.go` and `canResizePod` (the `Infeasible`/`Deferred`
//! messages), `kuberuntime_manager.go` (`computePodResizeAction`, `doPodResizeAction`),
//! `status_manager.go` (the conditions) and `pkg/kubelet/events` (the `Resize*` events).

use crate::common::{Harness, config, container, pod, sidecar, t};
use k8s_openapi::api::core::v1::ResourceRequirements;
use podvisor_lifecycle::sim::Input;
use podvisor_lifecycle::{
    MachineConfig, NodeResources, POD_RESIZE_IN_PROGRESS, POD_RESIZE_PENDING,
};
use serde_json::{Value, json};

fn resources(v: Value) -> ResourceRequirements {
    serde_json::from_value(v).expect("resources")
}

fn node_config() -> MachineConfig {
    MachineConfig {
        allocatable: Some(NodeResources {
            cpu_millis: 2000,
            memory_bytes: 4 << 30,
        }),
        ..config()
    }
}

fn app(res: Value, policy: Value) -> Value {
    let mut c = container("app");
    c["resources"] = res;
    c["resizePolicy"] = policy;
    c
}

fn running(spec: Value) -> Harness {
    let mut h = Harness::with_config(
        json!({"metadata": {"generation": 1}, "spec": spec}),
        node_config(),
    );
    h.boot(t(0));
    h
}

const GUARANTEED: fn() -> Value = || json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}});

/// A18 step 7 / `computePodResizeAction`: a cpu resize with the default `NotRequired` policy
/// is allocated (`PodResizeInProgress` with the resize's generation, D10; `ResizeStarted`),
/// applied in place (`UpdateContainerResources`, no restart), and once the runtime reports
/// the new values the condition goes (`ResizeCompleted`); `resources` and
/// `allocatedResources` follow (S15).
#[test]
fn a18_resize_in_place_until_the_runtime_reports_the_new_values() {
    let mut h = running(json!({"containers": [app(GUARANTEED(), json!(null))]}));
    let mark = h.mark();
    let new = json!({"requests": {"cpu": "200m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}});
    h.resize("app", resources(new.clone()), t(5));
    let cond = h.condition(POD_RESIZE_IN_PROGRESS).expect("in progress");
    assert_eq!(cond.status, "True");
    assert_eq!(cond.observed_generation, Some(2));
    assert_eq!(cond.reason, None);
    assert!(h.condition(POD_RESIZE_PENDING).is_none());
    let started = h.events_with_reason("ResizeStarted");
    assert_eq!(
        started,
        vec![
            "Pod resize started: {\"containers\":[{\"name\":\"app\",\"resources\":{\"limits\":{\"cpu\":\"200m\",\"memory\":\"64Mi\"},\"requests\":{\"cpu\":\"200m\",\"memory\":\"64Mi\"}}}],\"generation\":2}"
                .to_string()
        ]
    );
    // Allocated at once; the running container still shows what it runs with.
    let status = serde_json::to_value(h.status_of("app")).unwrap();
    assert_eq!(
        status["allocatedResources"],
        json!({"cpu": "200m", "memory": "64Mi"})
    );
    assert_eq!(status["resources"], GUARANTEED());
    let updates = h.resource_updates_since(mark);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].1, resources(new.clone()));
    h.resources_updated(updates[0].0, updates[0].1.clone(), t(6));
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_none());
    assert_eq!(h.events_with_reason("ResizeCompleted").len(), 1);
    let status = serde_json::to_value(h.status_of("app")).unwrap();
    assert_eq!(status["resources"], new);
    assert_eq!(status["restartCount"], 0);
    assert!(h.events_with_reason("Killing").is_empty());
}

/// `canResizePod`: requests beyond the node's allocatable are `Infeasible` with the kubelet's
/// message; nothing is allocated or applied, and a `ResizeInfeasible` warning is recorded.
#[test]
fn resize_beyond_allocatable_is_infeasible() {
    let mut h = running(json!({"containers": [app(GUARANTEED(), json!(null))]}));
    let mark = h.mark();
    h.resize(
        "app",
        resources(json!({"requests": {"cpu": "3", "memory": "64Mi"}, "limits": {"cpu": "3", "memory": "64Mi"}})),
        t(5),
    );
    let cond = h.condition(POD_RESIZE_PENDING).expect("pending");
    assert_eq!(cond.reason.as_deref(), Some("Infeasible"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000")
    );
    assert_eq!(cond.observed_generation, Some(2));
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_none());
    assert!(h.resource_updates_since(mark).is_empty());
    let status = serde_json::to_value(h.status_of("app")).unwrap();
    assert_eq!(
        status["allocatedResources"],
        json!({"cpu": "100m", "memory": "64Mi"})
    );
    let warning = h.events_with_reason("ResizeInfeasible");
    assert_eq!(warning.len(), 1);
    assert!(
        warning[0].starts_with("Pod resize Infeasible: {"),
        "{warning:?}"
    );
    assert!(warning[0].ends_with(
        "\"generation\":2,\"error\":\"Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000\"}"
    ));
    // Memory is checked first.
    h.resize(
        "app",
        resources(json!({"requests": {"cpu": "3", "memory": "5Gi"}, "limits": {"cpu": "3", "memory": "5Gi"}})),
        t(6),
    );
    assert_eq!(
        h.condition(POD_RESIZE_PENDING).unwrap().message.as_deref(),
        Some(
            "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296"
        )
    );
}

/// The resource-fit predicate on resize: what the node's other pods have allocated leaves too
/// little, so the resize is `Deferred` (the predicate's message) and retried when the other
/// pods' requests change.
#[test]
fn resize_that_does_not_fit_beside_other_pods_is_deferred_then_allocated() {
    let mut h = running(json!({"containers": [app(GUARANTEED(), json!(null))]}));
    h.input(
        Input::NodeRequested(NodeResources {
            cpu_millis: 1500,
            memory_bytes: 0,
        }),
        t(1),
    );
    h.resize(
        "app",
        resources(json!({"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}})),
        t(5),
    );
    let cond = h.condition(POD_RESIZE_PENDING).expect("pending");
    assert_eq!(cond.reason.as_deref(), Some("Deferred"));
    assert_eq!(
        cond.message.as_deref(),
        Some("Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000")
    );
    assert_eq!(h.events_with_reason("ResizeDeferred").len(), 1);
    let mark = h.mark();
    h.input(
        Input::NodeRequested(NodeResources {
            cpu_millis: 500,
            memory_bytes: 0,
        }),
        t(20),
    );
    assert!(h.condition(POD_RESIZE_PENDING).is_none());
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_some());
    assert_eq!(h.resource_updates_since(mark).len(), 1);
}

/// A11 (`Container <name> resize requires restart`): a changed resource whose resize policy is
/// `RestartContainer` restarts the container (a kill without `, will be restarted`, then a
/// start with the allocated resources, counting as a restart); the resize completes when the
/// new instance runs.
#[test]
fn a11_restart_container_policy_restarts_with_the_new_resources() {
    let policy = json!([
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"},
    ]);
    let mut h = running(json!({"containers": [app(GUARANTEED(), policy)]}));
    let mark = h.mark();
    let new = json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}});
    h.resize("app", resources(new.clone()), t(5));
    assert!(h.resource_updates_since(mark).is_empty());
    assert_eq!(
        h.events_with_reason("Killing"),
        vec!["Container app resize requires restart".to_string()]
    );
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_some());
    h.exit_stopped(143, t(6));
    h.start_all(t(6));
    let status = serde_json::to_value(h.status_of("app")).unwrap();
    assert_eq!(status["restartCount"], 1);
    assert_eq!(status["resources"], new);
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 143);
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_none());
    assert_eq!(h.events_with_reason("ResizeCompleted").len(), 1);
    // The new instance was started with the allocated resources.
    assert_eq!(
        h.machine().allocated_pod().spec.unwrap().containers[0].resources,
        Some(resources(new))
    );
}

/// 1.35: a memory limit decrease is allowed, but a limit below the container's usage is not
/// applied: `PodResizeInProgress` gets reason `Error` with the runtime's message (and a
/// `ResizeError` warning); the update is tried again after the 10 s error requeue.
#[test]
fn memory_limit_below_usage_is_an_in_progress_error_and_retried() {
    let burstable = json!({"requests": {"memory": "32Mi"}, "limits": {"memory": "128Mi"}});
    let mut h = running(json!({"containers": [app(burstable, json!(null))]}));
    let mark = h.mark();
    h.resize(
        "app",
        resources(json!({"requests": {"memory": "32Mi"}, "limits": {"memory": "48Mi"}})),
        t(5),
    );
    let updates = h.resource_updates_since(mark);
    assert_eq!(updates.len(), 1);
    let message = podvisor_api::pod::memory_limit_below_usage_message("app", 48 << 20, 60 << 20);
    h.input(
        Input::ResourcesUpdateFailed {
            id: updates[0].0,
            message: message.clone(),
        },
        t(5),
    );
    let cond = h.condition(POD_RESIZE_IN_PROGRESS).expect("in progress");
    assert_eq!(cond.reason.as_deref(), Some("Error"));
    assert_eq!(cond.message.as_deref(), Some(message.as_str()));
    assert_eq!(cond.observed_generation, Some(2));
    assert!(message.contains("memory limit (50331648) below current usage (62914560)"));
    assert_eq!(h.events_with_reason("ResizeError").len(), 1);
    let status = serde_json::to_value(h.status_of("app")).unwrap();
    assert_eq!(status["resources"]["limits"]["memory"], "128Mi");
    // Not again before the requeue.
    let mark = h.mark();
    h.advance_to(t(14));
    assert!(h.resource_updates_since(mark).is_empty());
    h.advance_to(t(15));
    let retry = h.resource_updates_since(mark);
    assert_eq!(retry.len(), 1);
    h.resources_updated(retry[0].0, retry[0].1.clone(), t(15));
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_none());
}

/// Sidecars (restartable init containers) resize in place like regular containers.
#[test]
fn sidecar_resizes_in_place() {
    let mut proxy = sidecar("proxy");
    proxy["resources"] = GUARANTEED();
    let mut h =
        running(json!({"initContainers": [proxy], "containers": [app(GUARANTEED(), json!(null))]}));
    h.start_all(t(1));
    let mark = h.mark();
    let new = json!({"requests": {"cpu": "300m", "memory": "64Mi"}, "limits": {"cpu": "300m", "memory": "64Mi"}});
    h.resize("proxy", resources(new.clone()), t(5));
    let updates = h.resource_updates_since(mark);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].0, h.instance("proxy"));
    h.resources_updated(updates[0].0, updates[0].1.clone(), t(6));
    let status = serde_json::to_value(h.status_of("proxy")).unwrap();
    assert_eq!(status["resources"], new);
    assert_eq!(status["restartCount"], 0);
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_none());
}

/// `IsInPlacePodVerticalScalingAllowed`: static pods are never resized (M10).
#[test]
fn m10_static_pods_are_not_resized() {
    let mut cfg = node_config();
    cfg.is_static = true;
    let mut h = Harness::admitted_at(
        pod(
            json!({"metadata": {"name": "web", "generation": 1}, "spec": {"containers": [app(GUARANTEED(), json!(null))]}}),
        ),
        cfg,
        t(0),
    );
    h.boot(t(0));
    let mark = h.mark();
    h.resize(
        "app",
        resources(json!({"requests": {"cpu": "200m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}})),
        t(5),
    );
    assert!(h.resource_updates_since(mark).is_empty());
    assert!(h.condition(POD_RESIZE_IN_PROGRESS).is_none());
    assert!(h.condition(POD_RESIZE_PENDING).is_none());
}
