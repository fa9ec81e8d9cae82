//! KEP-5532 (`RestartAllContainersOnContainerExits`, alpha in 1.35): a container exit that
//! matches a `RestartAllContainers` restart rule restarts the whole pod in place. There is no
//! rule id for it in kubelet-lifecycle.md; the tests cite the KEP's sections ("Restart
//! Phases", "Pod Status") and upstream's kubelet (`ShouldAllContainersRestart`,
//! `computePodActions` with `restartAllContainers`, `GenerateAllContainersRestartingCondition`),
//! which wins where the two differ (no preStop, no back-off).
//!
//! Every test drives a `PodMachine` through `common::Harness` on a virtual clock.

use crate::common;

use common::{Harness, config, container, sidecar, t};
use podvisor_api::FeatureGates;
use podvisor_lifecycle::{Action, HookKind, MachineConfig, Phase};
use serde_json::{Value, json};

const CONDITION: &str = "AllContainersRestarting";

fn gate_on() -> MachineConfig {
    MachineConfig {
        gates: FeatureGates::parse("RestartAllContainersOnContainerExits=true").unwrap(),
        ..config()
    }
}

/// A rule restarting the whole pod on exit code 88.
fn restart_all_on_88() -> Value {
    json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [88]}}])
}

fn with_rule(mut c: Value, policy: Option<&str>) -> Value {
    if let Some(p) = policy {
        c["restartPolicy"] = json!(p);
    }
    c["restartPolicyRules"] = restart_all_on_88();
    c
}

/// The pod: `restartPolicy: Never`, init container `setup`, sidecar `watcher`, app
/// `app` with the rule; running since `t(1)`.
fn running(app_rule: bool, watcher_rule: bool, config: MachineConfig) -> Harness {
    let app = if app_rule {
        with_rule(container("app"), Some("Never"))
    } else {
        container("app")
    };
    let watcher = if watcher_rule {
        with_rule(sidecar("watcher"), None)
    } else {
        sidecar("watcher")
    };
    let mut h = Harness::with_config(
        json!({"spec": {
            "restartPolicy": "Never",
            "initContainers": [container("setup"), watcher],
            "containers": [app],
        }}),
        config,
    );
    h.boot(t(0));
    h.exit("setup", 0, t(1));
    h.start_all(t(1));
    assert_eq!(h.start_order(), ["setup", "watcher", "app"]);
    assert_eq!(h.phase(), Phase::Running);
    h
}

fn sandboxes_created(h: &Harness) -> usize {
    h.actions()
        .iter()
        .filter(|a| **a == Action::CreateSandbox)
        .count()
}

#[test]
fn kep5532_regular_exit_kills_everything_then_reruns_init_containers_in_the_same_sandbox() {
    let mut h = running(true, false, gate_on());
    assert_eq!(h.condition_status(CONDITION), "False");
    let mark = h.mark();
    h.exit("app", 88, t(10));
    // Termination phase: the condition, every live container killed, nothing started.
    let cond = h.condition(CONDITION).unwrap();
    assert_eq!(cond.status, "True");
    assert_eq!(cond.reason.as_deref(), Some("RestartAllContainersStarted"));
    assert_eq!(
        cond.message.as_deref(),
        Some("container exited with restart policy rule")
    );
    assert_eq!(h.stops(), [("watcher".into(), "SIGTERM".into(), 2)]);
    assert_eq!(
        h.events_since(mark),
        [(
            "Killing".to_string(),
            "Stopping container watcher".to_string()
        )]
    );
    assert!(h.pending_starts().is_empty());
    // KEP "Pod Phase": Pending throughout the restart (a Never pod whose app failed would
    // otherwise be Failed).
    assert_eq!(h.phase(), Phase::Pending);
    assert_eq!(h.terminated("app").unwrap().exit_code, 88);

    h.exit_stopped(143, t(11));
    // All removed: the condition goes False and the pod starts again from the first init
    // container; restart counts go on.
    assert_eq!(h.condition_status(CONDITION), "False");
    assert_eq!(h.condition(CONDITION).unwrap().reason, None);
    assert_eq!(h.start_order(), ["setup", "watcher", "app", "setup"]);
    assert_eq!(h.starts_of("setup")[1], (t(11), 1));
    h.start("setup", t(11));
    assert_eq!(h.phase(), Phase::Pending);
    h.exit("setup", 0, t(12));
    h.start_all(t(12));
    assert_eq!(
        h.start_order(),
        ["setup", "watcher", "app", "setup", "watcher", "app"]
    );
    assert_eq!(h.starts_of("watcher")[1], (t(12), 1));
    // No back-off: the removed instances are no record to back off from.
    assert_eq!(h.starts_of("app")[1], (t(12), 1));
    assert_eq!(h.phase(), Phase::Running);
    assert_eq!(h.status_of("app").restart_count, 1);
    assert_eq!(h.last_terminated("app").unwrap().exit_code, 88);
    // KEP "ContainerStatuses in API": the history is kept, init containers' too (unlike a
    // lost sandbox's purge, A2).
    assert_eq!(h.last_terminated("watcher").unwrap().exit_code, 143);
    assert_eq!(h.last_terminated("setup").unwrap().exit_code, 0);
    // Initialized never went back to False (KEP "Existing Pod Conditions"); the sandbox is
    // the first one.
    assert_eq!(h.condition_status("Initialized"), "True");
    assert_eq!(sandboxes_created(&h), 1);
    assert_eq!(h.condition_status("PodReadyToStartContainers"), "True");
}

#[test]
fn kep5532_no_prestop_and_sigkill_after_the_2s_minimum_whatever_the_grace_period() {
    let mut h = Harness::with_config(
        json!({"spec": {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 60,
            "containers": [
                with_rule(container("app"), Some("Always")),
                {"name": "web", "image": "busybox",
                 "lifecycle": {"preStop": {"exec": {"command": ["sleep", "30"]}}}},
            ],
        }}),
        gate_on(),
    );
    h.boot(t(0));
    h.exit("app", 88, t(5));
    assert!(
        !h.actions().iter().any(|a| matches!(
            a,
            Action::RunHook {
                hook: HookKind::PreStop,
                ..
            }
        )),
        "no preStop hook on this path"
    );
    assert_eq!(h.stops(), [("web".into(), "SIGTERM".into(), 2)]);
    h.advance_to(t(7));
    assert!(
        h.actions()
            .iter()
            .any(|a| matches!(a, Action::KillContainer { name, .. } if name == "web")),
        "SIGKILL 2 s after the stop signal"
    );
    h.exit_stopped(137, t(7));
    h.start_all(t(7));
    assert_eq!(h.start_order(), ["app", "web", "app", "web"]);
    assert_eq!(h.starts_of("app")[1], (t(7), 1));
    assert_eq!(h.starts_of("web")[1], (t(7), 1));
}

#[test]
fn kep5532_a_sidecar_exit_restarts_the_main_container_too() {
    let mut h = running(false, true, gate_on());
    h.exit("watcher", 88, t(10));
    assert_eq!(h.condition_status(CONDITION), "True");
    assert_eq!(h.stops(), [("app".into(), "SIGTERM".into(), 2)]);
    // The sidecar is not restarted on its own meanwhile.
    assert!(h.pending_starts().is_empty());
    h.exit_stopped(143, t(11));
    h.start_all(t(11));
    h.exit("setup", 0, t(12));
    h.start_all(t(12));
    assert_eq!(
        h.start_order(),
        ["setup", "watcher", "app", "setup", "watcher", "app"]
    );
    assert_eq!(h.status_of("app").restart_count, 1);
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn kep5532_an_init_container_exit_reruns_initialization_from_the_first() {
    let mut h = Harness::with_config(
        json!({"spec": {
            "restartPolicy": "Never",
            "initContainers": [container("first"), with_rule(container("second"), Some("Never"))],
            "containers": [container("app")],
        }}),
        gate_on(),
    );
    h.boot(t(0));
    h.exit("first", 0, t(1));
    h.start_all(t(1));
    h.exit("second", 88, t(2));
    // Nothing runs: the reset is immediate and `first` starts again.
    assert!(h.stops().is_empty());
    assert_eq!(h.start_order(), ["first", "second", "first"]);
    assert_eq!(h.starts_of("first")[1], (t(2), 1));
    assert_eq!(h.phase(), Phase::Pending);
    h.start_all(t(2));
    h.exit("first", 0, t(3));
    h.start_all(t(3));
    h.exit("second", 0, t(4));
    h.start_all(t(4));
    assert_eq!(
        h.start_order(),
        ["first", "second", "first", "second", "app"]
    );
    assert_eq!(h.status_of("second").restart_count, 1);
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn kep5532_succeeded_and_never_containers_start_again() {
    let mut h = Harness::with_config(
        json!({"spec": {
            "restartPolicy": "Never",
            "containers": [container("done"), with_rule(container("app"), Some("Never"))],
        }}),
        gate_on(),
    );
    h.boot(t(0));
    h.exit("done", 0, t(3));
    assert_eq!(h.phase(), Phase::Running);
    h.exit("app", 88, t(5));
    // Both were dead: removed at once and both started again (KEP "Regular Containers").
    assert_eq!(h.phase(), Phase::Pending);
    h.start_all(t(5));
    assert_eq!(h.start_order(), ["done", "app", "done", "app"]);
    assert_eq!(h.starts_of("done")[1], (t(5), 1));
    assert_eq!(h.starts_of("app")[1], (t(5), 1));
    assert_eq!(h.phase(), Phase::Running);
    assert_eq!(h.condition_status(CONDITION), "False");
}

#[test]
fn kep5532_a_failing_init_container_after_the_restart_fails_a_never_pod() {
    let mut h = running(true, false, gate_on());
    h.exit("app", 88, t(10));
    h.exit_stopped(143, t(11));
    h.start("setup", t(11));
    h.exit("setup", 1, t(12));
    // KEP "API": restartPolicy Never and the init container fails after the restart.
    assert_eq!(h.phase(), Phase::Failed);
    let cond = h.condition(CONDITION).unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason.as_deref(), Some("PodFailed"));
}

#[test]
fn kep5532_a_rule_that_does_not_match_decides_nothing() {
    let mut h = running(true, false, gate_on());
    h.exit("app", 1, t(10));
    // The container's own policy (Never) decides: with the pod's Never the pod fails.
    assert_eq!(h.condition_status(CONDITION), "False");
    assert!(h.pending_starts().is_empty());
    h.exit_stopped(143, t(11));
    assert_eq!(h.phase(), Phase::Failed);
}

#[test]
fn kep5532_gate_off_ignores_the_action() {
    // Only a stored pod can carry the rule with the gate off (validation refuses it): the
    // rule is ignored and the container's policy decides (KEP "Upgrade / Downgrade").
    let mut h = running(true, false, config());
    assert!(h.condition(CONDITION).is_none());
    h.exit("app", 88, t(10));
    assert!(h.condition(CONDITION).is_none());
    h.exit_stopped(143, t(11));
    assert_eq!(h.start_order(), ["setup", "watcher", "app"]);
    assert_eq!(h.phase(), Phase::Failed);
}

#[test]
fn kep5532_the_condition_is_only_on_pods_that_could_restart_all_containers() {
    let mut h = Harness::with_config(
        json!({"spec": {"containers": [container("app")]}}),
        gate_on(),
    );
    h.boot(t(0));
    assert!(h.condition(CONDITION).is_none());
}

#[test]
fn kep5532_ephemeral_containers_are_left_running() {
    let mut h = running(true, false, gate_on());
    let mut e: k8s_openapi::api::core::v1::EphemeralContainer =
        serde_json::from_value(json!({"name": "debug", "image": "busybox"})).unwrap();
    podvisor_api::defaults::default_ephemeral_container(&mut e);
    h.update(t(5), |pod| {
        pod.spec.as_mut().unwrap().ephemeral_containers = Some(vec![e]);
    });
    h.start("debug", t(5));
    h.exit("app", 88, t(10));
    assert_eq!(h.stops(), [("watcher".into(), "SIGTERM".into(), 2)]);
    h.exit_stopped(143, t(11));
    assert_eq!(h.state_kind("debug"), "running");
    assert_eq!(h.starts_of("debug").len(), 1);
}

#[test]
fn kep5532_a_delete_during_the_restart_ends_the_pod() {
    let mut h = running(true, false, gate_on());
    h.exit("app", 88, t(10));
    h.delete(None, t(10));
    h.exit_stopped(143, t(11));
    assert!(h.pod_terminated());
    assert_eq!(h.start_order(), ["setup", "watcher", "app"]);
    assert_eq!(h.condition_status(CONDITION), "False");
}

/// KEP "Kubelet Restarts": an agent restarted in the termination phase (the persisted
/// `AllContainersRestarting` True, the sidecar still running) finishes the clean-up and
/// starts the pod again from the first init container.
#[test]
fn kep5532_an_agent_restart_in_the_termination_phase_continues_the_cleanup() {
    let mut h = running(true, false, gate_on());
    h.exit("app", 88, t(10));
    assert_eq!(h.condition_status(CONDITION), "True");
    let running = h.running_instances();
    assert_eq!(running.len(), 1, "the watcher");
    let mut r = Harness::recovered(h.pod().clone(), &running, gate_on(), t(11));
    assert_eq!(r.condition_status(CONDITION), "True");
    assert_eq!(r.phase(), Phase::Pending);
    assert_eq!(r.stops(), [("watcher".into(), "SIGTERM".into(), 2)]);
    r.exit_stopped(143, t(12));
    assert_eq!(r.condition_status(CONDITION), "False");
    r.start("setup", t(12));
    assert_eq!(r.status_of("setup").restart_count, 1);
    r.exit("setup", 0, t(13));
    r.start_all(t(13));
    assert_eq!(r.status_of("app").restart_count, 1);
    assert_eq!(r.phase(), Phase::Running);
}

/// KEP "Kubelet Restarts": an agent restarted in the startup phase (the clean-up done,
/// `setup` running again, the app's exit 88 still in the persisted status) goes on with the
/// start-up: the exit is not taken for a new trigger, nothing is killed.
#[test]
fn kep5532_an_agent_restart_in_the_startup_phase_does_not_restart_again() {
    let mut h = running(true, false, gate_on());
    h.exit("app", 88, t(10));
    h.exit_stopped(143, t(11));
    h.start("setup", t(12));
    let running = h.running_instances();
    let mut r = Harness::recovered(h.pod().clone(), &running, gate_on(), t(13));
    assert_eq!(r.condition_status(CONDITION), "False");
    assert_eq!(r.phase(), Phase::Pending);
    assert!(r.stops().is_empty(), "{:#?}", r.actions());
    let setup = running.iter().find(|i| i.name == "setup").unwrap().instance;
    let exit = podvisor_lifecycle::ExitStatus {
        exit_code: 0,
        finished_at: Some(t(14)),
        ..Default::default()
    };
    r.exit_instance(setup, exit, t(14));
    r.start_all(t(14));
    assert_eq!(r.start_order(), ["watcher", "app"]);
    assert_eq!(r.status_of("setup").restart_count, 1);
    assert_eq!(r.status_of("app").restart_count, 1);
    assert_eq!(r.last_terminated("app").unwrap().exit_code, 88);
    assert_eq!(r.phase(), Phase::Running);
    assert_eq!(r.condition_status(CONDITION), "False");
}
