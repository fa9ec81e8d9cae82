//! Rule tests for a sandbox that stops being READY while the pod runs (kubelet-lifecycle.md
//! A1, A2, A18, D2, P5, S10, the `SandboxChanged` event of 10.6): the process runtime reports
//! it when a pod's shim dies, after reporting every instance that ran in it as exited
//! (`PodMachine::handle_sandbox_lost`).
//!
//! Every test drives a `PodMachine` through `common::Harness` on a virtual clock.

use crate::common;

use common::{Harness, container, plus, sidecar, t};
use k8s_openapi::jiff::Timestamp;
use podvisor_lifecycle::sim::Input;
use podvisor_lifecycle::{Action, EventType, ExitStatus, Phase};
use serde_json::json;

const SANDBOX_CHANGED: &str = "Pod sandbox changed, it will be killed and re-created.";

/// The shim died at `now`: the runtime killed what was left and reports the sandbox lost with
/// the newest instance of each of `running` exited (137, SIGKILL).
fn lose_sandbox(h: &mut Harness, running: &[&str], now: Timestamp) {
    let exits = running
        .iter()
        .map(|name| {
            let exit = ExitStatus {
                exit_code: 137,
                finished_at: Some(now),
                ..ExitStatus::default()
            };
            (h.instance(name), exit)
        })
        .collect();
    h.input(Input::SandboxLost { exits }, now);
}

fn sandboxes_created(h: &Harness) -> usize {
    h.actions()
        .iter()
        .filter(|a| **a == Action::CreateSandbox)
        .count()
}

/// An `Always` pod with init container `init` and container `app`, running since `t(1)`.
fn running_with_init() -> Harness {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": "Always",
        "initContainers": [container("init")],
        "containers": [container("app")],
    }));
    h.boot(t(0));
    h.exit("init", 0, t(1));
    h.start_all(t(1));
    assert_eq!(h.start_order(), ["init", "app"]);
    assert_eq!(h.phase(), Phase::Running);
    h
}

#[test]
fn a1_a2_lost_sandbox_is_recreated_and_initialization_reruns_from_the_first_init_container() {
    let mut h = running_with_init();
    let mark = h.mark();
    lose_sandbox(&mut h, &["app"], t(10));
    // A2 / 10.6: an old sandbox existed, so the event is emitted.
    let changed: Vec<_> = h
        .event_list()
        .into_iter()
        .filter(|e| e.reason == "SandboxChanged")
        .collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].type_, EventType::Normal);
    assert_eq!(changed[0].message, SANDBOX_CHANGED);
    assert_eq!(changed[0].container, None);
    // Already dead: the kill is bookkeeping only, no signal is sent.
    assert!(
        !h.actions_since(mark).iter().any(|a| matches!(
            a,
            Action::StopContainer { .. } | Action::KillContainer { .. }
        )),
        "{:#?}",
        h.actions_since(mark)
    );
    assert_eq!(sandboxes_created(&h), 2, "a new sandbox is requested");
    assert!(h.pending_starts().is_empty(), "nothing starts before it");
    // D2: not ready to start containers until the new sandbox is ready.
    assert_eq!(h.condition_status("PodReadyToStartContainers"), "False");
    assert_eq!(h.terminated("app").unwrap().exit_code, 137);

    h.sandbox_ready(t(11));
    assert_eq!(h.condition_status("PodReadyToStartContainers"), "True");
    // A2: init records purged, init container 0 first; S10: restart counts continue.
    assert_eq!(h.start_order(), ["init", "app", "init"]);
    assert_eq!(h.starts_of("init")[1].1, 1);
    h.start("init", t(11));
    // P5 (1.32+): no regular container of the new sandbox yet, an init container runs.
    assert_eq!(h.phase(), Phase::Pending);
    assert_eq!(h.state_kind("init"), "running");
    assert_eq!(h.status_of("init").restart_count, 1);
    assert!(
        h.last_terminated("init").is_none(),
        "the purged record is not lastState"
    );
    assert!(h.pending_starts().is_empty(), "app waits for init");

    h.exit("init", 0, t(12));
    // The first restart after the loss is not delayed (B1).
    assert_eq!(h.start_order(), ["init", "app", "init", "app"]);
    assert_eq!(h.starts_of("app")[1], (t(12), 1));
    h.start("app", t(12));
    assert_eq!(h.phase(), Phase::Running);
    let app = h.status_of("app");
    assert_eq!(app.restart_count, 1);
    assert_eq!(h.last_terminated("app").unwrap().exit_code, 137);
    assert_eq!(h.condition_status("Ready"), "True");
    assert_eq!(h.condition_status("Initialized"), "True");
}

#[test]
fn a2_lost_sandbox_without_init_containers_restarts_every_container() {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": "Always",
        "containers": [container("a"), container("b")],
    }));
    h.boot(t(0));
    lose_sandbox(&mut h, &["a", "b"], t(5));
    assert_eq!(sandboxes_created(&h), 2);
    h.sandbox_ready(t(6));
    assert_eq!(h.start_all(t(6)), ["a", "b"]);
    assert_eq!(h.status_of("a").restart_count, 1);
    assert_eq!(h.status_of("b").restart_count, 1);
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn a2_on_failure_lost_sandbox_does_not_restart_containers_that_succeeded() {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": "OnFailure",
        "containers": [container("done"), container("busy")],
    }));
    h.boot(t(0));
    h.exit("done", 0, t(2));
    lose_sandbox(&mut h, &["busy"], t(5));
    assert_eq!(h.events_with_reason("SandboxChanged"), [SANDBOX_CHANGED]);
    h.sandbox_ready(t(6));
    assert_eq!(h.start_all(t(6)), ["busy"]);
    assert_eq!(h.status_of("busy").restart_count, 1);
    assert_eq!(h.terminated("done").unwrap().exit_code, 0);
}

#[test]
fn a2a_never_pod_with_container_records_gets_no_new_sandbox_and_fails() {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": "Never",
        "initContainers": [container("init")],
        "containers": [container("app")],
    }));
    h.boot(t(0));
    h.exit("init", 0, t(1));
    h.start_all(t(1));
    lose_sandbox(&mut h, &["app"], t(10));
    assert_eq!(sandboxes_created(&h), 1, "no new sandbox under Never");
    assert!(
        h.events_with_reason("SandboxChanged").is_empty(),
        "no event without a new sandbox"
    );
    assert_eq!(h.start_order(), ["init", "app"]);
    assert_eq!(h.phase(), Phase::Failed);
    assert!(h.pod_terminated());
    assert_eq!(h.terminated("app").unwrap().exit_code, 137);
    assert_eq!(h.condition_status("PodReadyToStartContainers"), "False");
    assert_eq!(h.next_timer(), None);
}

#[test]
fn a2a_never_pod_whose_init_container_was_running_fails() {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": "Never",
        "initContainers": [container("init")],
        "containers": [container("app")],
    }));
    h.boot(t(0));
    lose_sandbox(&mut h, &["init"], t(3));
    assert_eq!(sandboxes_created(&h), 1);
    assert_eq!(h.phase(), Phase::Failed);
    assert!(h.pod_terminated());
}

#[test]
fn a2_lost_sandbox_restarts_sidecars_with_initialization() {
    let mut h = Harness::from_spec(json!({
        "restartPolicy": "Always",
        "initContainers": [sidecar("side"), container("init")],
        "containers": [container("app")],
    }));
    h.boot(t(0));
    h.exit("init", 0, t(1));
    h.start_all(t(1));
    assert_eq!(h.start_order(), ["side", "init", "app"]);
    lose_sandbox(&mut h, &["side", "app"], t(10));
    h.sandbox_ready(t(11));
    // Initialization re-runs in order: the sidecar, then the init container, then the app.
    h.start_all(t(11));
    assert_eq!(h.start_order()[3..], ["side", "init"]);
    h.exit("init", 0, t(12));
    h.start_all(t(12));
    assert_eq!(h.start_order()[3..], ["side", "init", "app"]);
    assert_eq!(h.status_of("side").restart_count, 1);
    assert_eq!(h.status_of("init").restart_count, 1);
    assert_eq!(h.status_of("app").restart_count, 1);
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn a2_lost_sandbox_of_a_terminating_pod_is_not_recreated() {
    let mut h = running_with_init();
    h.delete(Some(30), t(5));
    lose_sandbox(&mut h, &["app"], t(6));
    assert_eq!(sandboxes_created(&h), 1);
    assert!(h.events_with_reason("SandboxChanged").is_empty());
    assert!(h.pod_terminated());
}

#[test]
fn a2_sandbox_lost_twice_recreates_it_each_time() {
    let mut h = running_with_init();
    lose_sandbox(&mut h, &["app"], t(10));
    h.sandbox_ready(t(11));
    h.start("init", t(11));
    // Lost again while the init container re-runs.
    lose_sandbox(&mut h, &["init"], t(12));
    assert_eq!(sandboxes_created(&h), 3);
    assert_eq!(h.events_with_reason("SandboxChanged").len(), 2);
    h.sandbox_ready(t(13));
    // B3: init container 0's restart right after the first loss started its back-off (the
    // kubelet's `doBackOff` sees the purged record in that sync), so this one waits.
    assert_eq!(h.start_order(), ["init", "app", "init"]);
    assert_eq!(h.waiting("init").unwrap().0, "CrashLoopBackOff");
    let due = h.next_timer().expect("the back-off timer");
    h.advance_to(due);
    assert_eq!(h.start_order(), ["init", "app", "init", "init"]);
    assert_eq!(h.starts_of("init")[2], (due, 2));
    h.start("init", due);
    h.exit("init", 0, plus(due, 1));
    h.start("app", plus(due, 1));
    assert_eq!(h.status_of("app").restart_count, 1);
    assert_eq!(h.phase(), Phase::Running);
}
