//! Ephemeral containers (A14, A18 step 5; `computePodActions`' `EphemeralContainersToStart`
//! in upstream's `kuberuntime_manager.go`): added to a pod through the
//! `pods/ephemeralcontainers` subresource, started once when they have no record, never
//! restarted, listed in `status.ephemeralContainerStatuses`, counted for neither the phase nor
//! readiness, and killed with the pod.

use crate::common::*;
use k8s_openapi::api::core::v1::EphemeralContainer;
use podvisor_lifecycle::{Action, ContainerKind, Phase};
use serde_json::{Value, json};

/// A running `Always` pod with one regular container `app`, started at `t(1)`.
fn running_pod(policy: &str) -> Harness {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": policy,
        "containers": [container("app")],
    }));
    h.sandbox_ready(t(0));
    h.start("app", t(1));
    assert_eq!(h.phase(), Phase::Running);
    h
}

/// What the subresource stores: the pod with one more (defaulted) ephemeral container.
fn add_ephemeral(h: &mut Harness, e: Value, now: k8s_openapi::jiff::Timestamp) {
    let mut e: EphemeralContainer = serde_json::from_value(e).expect("an ephemeral container");
    podvisor_api::defaults::default_ephemeral_container(&mut e);
    h.update(now, |pod| {
        let spec = pod.spec.as_mut().expect("spec");
        spec.ephemeral_containers
            .get_or_insert_with(Vec::new)
            .push(e);
    });
}

fn debug() -> Value {
    json!({"name": "debug", "image": "busybox", "targetContainerName": "app", "stdin": true, "tty": true})
}

fn ephemeral_starts(h: &Harness) -> Vec<String> {
    h.actions()
        .iter()
        .filter_map(|a| match a {
            Action::StartContainer {
                name,
                kind: ContainerKind::Ephemeral,
                ..
            } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// A14: an ephemeral container without a record is started by the next sync; its status is
/// in `ephemeralContainerStatuses` (waiting `ContainerCreating` until the runtime answers,
/// then running), never `ready`, with no `started` (the prober sets neither for it), and its
/// events name `spec.ephemeralContainers{debug}`.
#[test]
fn a14_ephemeral_container_is_started_once_it_is_added() {
    let mut h = running_pod("Always");
    add_ephemeral(&mut h, debug(), t(5));
    assert_eq!(ephemeral_starts(&h), ["debug"]);
    let s = h.status_of("debug");
    assert_eq!(
        h.waiting("debug").map(|w| w.0).as_deref(),
        Some("ContainerCreating")
    );
    assert!(!s.ready);
    h.start("debug", t(6));
    let s = h.status_of("debug");
    assert_eq!(h.state_kind("debug"), "running");
    assert!(!s.ready);
    assert_eq!(s.started, None);
    assert_eq!(s.restart_count, 0);
    assert!(s.resources.is_none());
    let status = h.status();
    assert_eq!(status.container_statuses.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        status.ephemeral_container_statuses.as_ref().map(Vec::len),
        Some(1)
    );
    let created = h
        .event_list()
        .into_iter()
        .find(|e| e.reason == "Started" && e.message == "Started container debug")
        .expect("the Started event of debug");
    assert_eq!(
        created.container,
        Some((ContainerKind::Ephemeral, "debug".to_string()))
    );
    assert_eq!(
        ContainerKind::Ephemeral.field_path("debug"),
        "spec.ephemeralContainers{debug}"
    );
}

/// A14: an ephemeral container that exited is never restarted, whatever the pod's restart
/// policy and exit code (`Always`, exit 1): it stays terminated with restart count 0 while the
/// pod runs on, Ready.
#[test]
fn a14_ephemeral_container_is_never_restarted() {
    let mut h = running_pod("Always");
    add_ephemeral(&mut h, debug(), t(5));
    h.start("debug", t(5));
    h.exit("debug", 1, t(8));
    h.advance_to(t(400));
    assert_eq!(ephemeral_starts(&h), ["debug"]);
    let term = h.terminated("debug").expect("terminated");
    assert_eq!((term.exit_code, term.reason.as_deref()), (1, Some("Error")));
    assert_eq!(h.status_of("debug").restart_count, 0);
    assert_eq!(h.waiting("debug"), None);
    assert_eq!(h.phase(), Phase::Running);
    assert_eq!(h.condition_status("Ready"), "True");
    assert!(h.events_with_reason("BackOff").is_empty());
}

/// A14 + P-rules: an ephemeral container counts for neither readiness (`ContainersReady` and
/// `Ready` follow the regular containers while it runs, unready) nor the phase: a `Never` pod
/// whose regular container succeeded is `Succeeded` although the debugger still runs, and
/// the debugger is then killed with the pod (A13/T4).
#[test]
fn a14_ephemeral_container_counts_for_neither_phase_nor_readiness() {
    let mut h = running_pod("Never");
    add_ephemeral(&mut h, debug(), t(5));
    h.start("debug", t(5));
    assert_eq!(h.condition_status("Ready"), "True");
    assert_eq!(h.condition_status("ContainersReady"), "True");
    h.exit("app", 0, t(10));
    assert_eq!(h.phase(), Phase::Succeeded);
    let stops = h.stops();
    assert!(
        stops.iter().any(|(name, _, _)| name == "debug"),
        "the debugger is killed with the pod: {stops:?}"
    );
    h.exit_stopped(137, t(11));
    assert!(h.pod_terminated());
    assert_eq!(h.phase(), Phase::Succeeded);
    assert_eq!(h.terminated("debug").map(|t| t.exit_code), Some(137));
}

/// A14 + T4: a deleted pod's ephemeral containers are stopped with the others, with the
/// pod's grace period.
#[test]
fn a14_ephemeral_container_is_killed_with_the_pod() {
    let mut h = running_pod("Always");
    add_ephemeral(&mut h, debug(), t(5));
    h.start("debug", t(5));
    h.delete(None, t(10));
    let mut stopped: Vec<String> = h.stops().into_iter().map(|(n, _, _)| n).collect();
    stopped.sort();
    assert_eq!(stopped, ["app", "debug"]);
    let stopped = h.exit_stopped(137, t(11));
    assert_eq!(stopped.len(), 2);
    assert!(h.pod_terminated());
}

/// A14 (upstream: "Ephemeral containers may be started even if initialization is not yet
/// complete") and A18 step 5: one added while an init container still runs starts in the
/// next sync, before the regular containers.
#[test]
fn a14_ephemeral_container_starts_before_initialization_completes() {
    let mut h = Harness::from_spec(json!({
        "initContainers": [container("init")],
        "containers": [container("app")],
    }));
    h.sandbox_ready(t(0));
    h.start("init", t(1));
    add_ephemeral(
        &mut h,
        json!({"name": "debug", "image": "busybox", "targetContainerName": "init"}),
        t(2),
    );
    // Before its start the status says what every waiting container of a pod with init
    // containers says.
    assert_eq!(
        h.waiting("debug").map(|w| w.0).as_deref(),
        Some("PodInitializing")
    );
    h.start("debug", t(3));
    assert_eq!(h.state_kind("debug"), "running");
    assert_eq!(h.state_kind("init"), "running");
    h.exit("init", 0, t(4));
    h.start("app", t(5));
    assert_eq!(h.start_order(), ["init", "debug", "app"]);
    assert_eq!(h.condition_status("Initialized"), "True");
}

/// A14 + 2.2: a start that failed before anything was created leaves no record, so the
/// container is tried again at the next sync (the 10 s requeue); one that failed after its
/// creation (`StartError`, exit 128) has a record and is never tried again.
#[test]
fn a14_failed_starts_retry_only_without_a_record() {
    let mut h = running_pod("Always");
    add_ephemeral(&mut h, debug(), t(5));
    h.fail_start("debug", "ErrImagePull", "pull access denied", false, t(6));
    assert_eq!(
        h.waiting("debug").map(|w| w.0).as_deref(),
        Some("ErrImagePull")
    );
    h.advance_to(t(30));
    assert_eq!(ephemeral_starts(&h).len(), 2);
    h.fail_start(
        "debug",
        "RunContainerError",
        "exec: no such file",
        true,
        t(30),
    );
    let term = h.terminated("debug").expect("terminated");
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (128, Some("StartError"))
    );
    h.advance_to(t(600));
    assert_eq!(ephemeral_starts(&h).len(), 2);
    assert_eq!(h.phase(), Phase::Running);
}

/// A14: a second ephemeral container added later starts on its own; the first one is not
/// started again. A patch may reorder the list: containers are matched by name.
#[test]
fn a14_each_added_ephemeral_container_starts_once() {
    let mut h = running_pod("Always");
    add_ephemeral(&mut h, debug(), t(5));
    h.start("debug", t(5));
    h.exit("debug", 0, t(6));
    add_ephemeral(&mut h, json!({"name": "debug2", "image": "busybox"}), t(7));
    h.update(t(8), |pod| {
        pod.spec
            .as_mut()
            .and_then(|s| s.ephemeral_containers.as_mut())
            .expect("ephemeral containers")
            .reverse();
    });
    h.start("debug2", t(8));
    assert_eq!(ephemeral_starts(&h), ["debug", "debug2"]);
    let names: Vec<String> = h
        .status()
        .ephemeral_container_statuses
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["debug", "debug2"]);
    assert_eq!(h.state_kind("debug"), "terminated");
    assert_eq!(h.state_kind("debug2"), "running");
}

/// A14 with A18 step 7: adding an ephemeral container changes no container's resources, so it
/// starts no resize (no `ResizeStarted`, no `PodResizeInProgress`); a pod that already has
/// one (a machine rebuilt from the API's pod) has nothing allocated to it either.
#[test]
fn a14_an_added_ephemeral_container_is_not_a_resize() {
    let mut h = running_pod("Always");
    add_ephemeral(&mut h, debug(), t(5));
    let reasons: Vec<String> = h
        .events()
        .iter()
        .map(|(reason, _)| reason.clone())
        .collect();
    assert!(
        !reasons.iter().any(|r| r.starts_with("Resize")),
        "{reasons:?}"
    );
    let conditions: Vec<String> = h
        .pod()
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert!(
        !conditions.iter().any(|c| c.starts_with("PodResize")),
        "{conditions:?}"
    );
    let mut with_debugger = h.pod().clone();
    with_debugger.status = None;
    let rebuilt = Harness::recovered(with_debugger, &[], config(), t(6));
    let statuses = rebuilt.pod().status.clone().unwrap_or_default();
    assert!(
        !statuses
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_.starts_with("PodResize")),
        "a rebuilt machine allocates nothing to its ephemeral container"
    );
}
