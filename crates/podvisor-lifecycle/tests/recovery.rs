//! Rebuilding a pod's machine after an agent restart (issue 4 recovery, S14): no container is
//! restarted, readiness does not flap, restart counts and back-off continue, a termination in
//! progress goes on, and exits that happened meanwhile are handled with their real times.

#![allow(missing_docs)]

use crate::common;

use common::{Harness, container, exec_probe, t};
use podvisor_lifecycle::{
    Action, ExitStatus, InstanceId, MachineConfig, PastInstance, Phase, ProbeKind,
};
use serde_json::json;

fn starts(h: &Harness) -> usize {
    h.actions()
        .iter()
        .filter(|a| matches!(a, Action::StartContainer { .. }))
        .count()
}

fn exit_at(code: i32, at: k8s_openapi::jiff::Timestamp) -> ExitStatus {
    ExitStatus {
        exit_code: code,
        finished_at: Some(at),
        ..ExitStatus::default()
    }
}

#[test]
fn s14_recovery_keeps_running_containers_and_readiness() {
    let mut h = Harness::from_spec(json!({"containers": [
        {"name": "app", "image": "busybox", "readinessProbe": exec_probe(5, 3)}
    ]}));
    h.boot(t(0));
    h.advance_to(t(5));
    h.probe_ok("app", ProbeKind::Readiness, t(5));
    assert!(h.status_of("app").ready);
    assert_eq!(h.condition_status("Ready"), "True");
    let running = h.running_instances();
    assert_eq!(running.len(), 1);

    // The agent restarts at t=60 with the last persisted object.
    let r = Harness::recovered(h.pod().clone(), &running, MachineConfig::default(), t(60));
    assert_eq!(
        starts(&r),
        0,
        "no container is restarted: {:#?}",
        r.actions()
    );
    assert!(!r.actions().contains(&Action::CreateSandbox));
    let app = r.status_of("app");
    assert_eq!(app.restart_count, 0);
    assert!(
        app.ready,
        "S14: readiness is kept for a long-running instance"
    );
    assert_eq!(r.condition_status("Ready"), "True");
    assert_eq!(r.phase(), Phase::Running);
    assert_eq!(app.container_id, h.status_of("app").container_id);
}

#[test]
fn s14_a_young_instance_waits_for_its_readiness_probe() {
    let mut h = Harness::from_spec(json!({"containers": [
        {"name": "app", "image": "busybox", "readinessProbe": exec_probe(5, 3)}
    ]}));
    h.boot(t(0));
    h.probe_ok("app", ProbeKind::Readiness, t(0));
    let running = h.running_instances();
    let r = Harness::recovered(h.pod().clone(), &running, MachineConfig::default(), t(5));
    assert!(
        !r.status_of("app").ready,
        "started less than 10 s before the restart"
    );
}

#[test]
fn s10_restart_counts_and_last_state_continue() {
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    h.exit("app", 1, t(1));
    h.start_all(t(1));
    h.exit("app", 1, t(2));
    h.advance_to(t(12));
    h.start_all(t(12));
    assert_eq!(h.status_of("app").restart_count, 2);
    let running = h.running_instances();
    let r = Harness::recovered(h.pod().clone(), &running, MachineConfig::default(), t(20));
    assert_eq!(starts(&r), 0);
    let app = r.status_of("app");
    assert_eq!(app.restart_count, 2);
    assert_eq!(r.last_terminated("app").map(|t| t.exit_code), Some(1));
}

#[test]
fn b3_back_off_continues_across_a_restart() {
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    h.exit("app", 1, t(0));
    h.start_all(t(0));
    h.exit("app", 1, t(0));
    h.advance_to(t(10));
    h.start_all(t(10));
    h.exit("app", 1, t(10));
    // Blocked for 20 s (10..30) with `back-off 20s`.
    assert_eq!(
        h.waiting("app").map(|w| w.0),
        Some("CrashLoopBackOff".to_string())
    );
    let mut r = Harness::recovered(h.pod().clone(), &[], MachineConfig::default(), t(15));
    assert_eq!(
        starts(&r),
        0,
        "still backing off at t=15: {:#?}",
        r.actions()
    );
    assert_eq!(
        r.waiting("app").map(|w| w.0),
        Some("CrashLoopBackOff".to_string())
    );
    r.advance_to(t(29));
    assert_eq!(starts(&r), 0);
    r.advance_to(t(30));
    assert_eq!(starts(&r), 1, "restarted when the 20 s back-off expires");
    r.start_all(t(30));
    assert_eq!(r.status_of("app").restart_count, 3);
}

#[test]
fn exits_while_the_agent_was_down_are_handled_with_their_real_times() {
    let mut h =
        Harness::from_spec(json!({"restartPolicy": "Never", "containers": [container("app")]}));
    h.boot(t(0));
    let running = h.running_instances();
    let id: InstanceId = running[0].instance;
    let mut r = Harness::recovered(h.pod().clone(), &running, MachineConfig::default(), t(100));
    r.exit_instance(id, exit_at(0, t(40)), t(100));
    let term = r.terminated("app").expect("terminated");
    assert_eq!(term.exit_code, 0);
    assert_eq!(term.finished_at.map(|f| f.0), Some(t(40)));
    r.advance_to(t(101));
    assert_eq!(r.phase(), Phase::Succeeded);
    assert!(r.pod_terminated());
}

#[test]
fn s5_a_running_container_the_runtime_lost_reads_as_unknown() {
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    let mut r = Harness::recovered(h.pod().clone(), &[], MachineConfig::default(), t(50));
    let last = r
        .last_terminated("app")
        .or_else(|| r.terminated("app"))
        .expect("terminated record");
    assert_eq!(last.exit_code, 137);
    assert_eq!(last.reason.as_deref(), Some("ContainerStatusUnknown"));
    assert_eq!(
        last.message.as_deref(),
        Some(
            "The container could not be located when the pod was deleted.  The container used to be Running"
        )
    );
    // Under Always it is started again (a fresh instance, restart count 1).
    r.start_all(t(50));
    assert_eq!(r.status_of("app").restart_count, 1);
}

#[test]
fn t1_a_termination_in_progress_goes_on() {
    let mut h = Harness::from_spec(json!({"terminationGracePeriodSeconds": 30,
        "containers": [container("app")]}));
    h.boot(t(0));
    h.delete(None, t(10));
    let running = h.running_instances();
    let r = Harness::recovered(h.pod().clone(), &running, MachineConfig::default(), t(12));
    assert_eq!(starts(&r), 0);
    assert!(
        r.actions()
            .iter()
            .any(|a| matches!(a, Action::StopContainer { .. })),
        "the stop signal is sent again: {:#?}",
        r.actions()
    );
    assert_eq!(
        common::secs_of(r.pod().metadata.deletion_timestamp.clone().unwrap().0),
        40
    );
}

#[test]
fn new_instances_are_numbered_past_every_id_the_runtime_knows() {
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    let running = h.running_instances();
    let mut m = podvisor_lifecycle::PodMachine::recover(
        h.pod().clone(),
        &running,
        7,
        MachineConfig::default(),
        t(30),
    );
    while m.poll_action().is_some() {}
    m.handle_container_exited(running[0].instance, exit_at(1, t(31)), t(31));
    let started: Vec<InstanceId> = std::iter::from_fn(|| m.poll_action())
        .filter_map(|a| match a {
            Action::StartContainer { instance, .. } => Some(instance),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 1);
    assert!(started[0].0 > 7, "{started:?}");
}

#[test]
fn s10_a_first_instance_started_but_not_yet_published_keeps_restart_count_0() {
    // The agent dies after the runtime started the first instance, before the status showing
    // it was written: the persisted status still says ContainerCreating.
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.sandbox_ready(t(0));
    let persisted = h.pod().clone();
    assert_eq!(h.state_kind("app"), "waiting");
    h.start_all(t(0));
    let running = h.running_instances();
    assert_eq!(running.len(), 1);
    let r = Harness::recovered(persisted, &running, MachineConfig::default(), t(1));
    assert_eq!(starts(&r), 0, "{:#?}", r.actions());
    let app = r.status_of("app");
    assert_eq!(app.restart_count, 0, "the first instance is no restart");
    assert_eq!(app.container_id, h.status_of("app").container_id);
    assert_eq!(r.state_kind("app"), "running");
}

#[test]
fn s10_a_restart_started_but_not_yet_published_counts_once() {
    // The same during a crash loop: the status shows the exited instance in back-off.
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    h.exit("app", 1, t(1));
    h.start_all(t(1));
    h.exit("app", 1, t(2));
    assert_eq!(h.status_of("app").restart_count, 1);
    let persisted = h.pod().clone();
    h.advance_to(t(12));
    h.start_all(t(12));
    let running = h.running_instances();
    let r = Harness::recovered(persisted, &running, MachineConfig::default(), t(13));
    assert_eq!(starts(&r), 0, "{:#?}", r.actions());
    assert_eq!(r.status_of("app").restart_count, 2);
    assert_eq!(r.last_terminated("app").map(|t| t.exit_code), Some(1));
}

/// The runtime's record of an exited instance of `app`: `(instance, container ID)` as it ran.
fn past(
    (instance, container_id): (InstanceId, String),
    started: k8s_openapi::jiff::Timestamp,
    finished: k8s_openapi::jiff::Timestamp,
) -> PastInstance {
    PastInstance {
        name: "app".into(),
        instance,
        container_id,
        started_at: started,
        finished_at: finished,
    }
}

/// The running instance of `app` and its container ID.
fn running_app(h: &Harness) -> (InstanceId, String) {
    let id = h.status_of("app").container_id.expect("app runs");
    (h.instance("app"), id)
}

fn ms(n: i64) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::from_millis(n)
}

#[test]
fn b3_back_off_goes_on_when_the_agent_died_while_the_container_ran() {
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    let first = running_app(&h);
    h.exit("app", 1, t(1));
    h.start_all(t(1)); // B1: at once; the back-off is now 10 s
    let second = running_app(&h);
    h.exit("app", 1, t(2));
    h.advance_to(t(12));
    h.start_all(t(12)); // after 10 s; the back-off is now 20 s
    assert_eq!(h.state_kind("app"), "running");
    let history = [past(first, t(0), t(1)), past(second, t(1), t(2))];
    let running = h.running_instances();
    let id = running[0].instance;
    let mut r = Harness::recovered_with_history(
        h.pod().clone(),
        &running,
        &history,
        MachineConfig::default(),
        t(13),
    );
    r.exit_instance(id, exit_at(1, t(15)), t(15));
    assert_eq!(starts(&r), 0, "not restarted at once: {:#?}", r.actions());
    let message = r.waiting("app").and_then(|w| w.1).unwrap_or_default();
    assert!(message.starts_with("back-off 20s "), "{message}");
    r.advance_to(t(34));
    assert_eq!(starts(&r), 0);
    r.advance_to(t(35));
    assert_eq!(starts(&r), 1, "restarted when the 20 s back-off expires");
}

#[test]
fn b3_back_off_counts_from_the_exact_exit_time() {
    let mut h = Harness::from_spec(json!({"containers": [container("app")]}));
    h.boot(t(0));
    let first = running_app(&h);
    h.exit("app", 1, t(1));
    h.start_all(t(1));
    let second = running_app(&h);
    h.exit("app", 1, t(2) + ms(900));
    assert_eq!(
        h.waiting("app").map(|w| w.0),
        Some("CrashLoopBackOff".to_string())
    );
    let history = [past(first, t(0), t(1)), past(second, t(1), t(2) + ms(900))];
    // The status says finishedAt 2 (whole seconds): the exact 2.9 s must win.
    let mut r = Harness::recovered_with_history(
        h.pod().clone(),
        &[],
        &history,
        MachineConfig::default(),
        t(5),
    );
    r.advance_to(t(12) + ms(500));
    assert_eq!(
        starts(&r),
        0,
        "still backing off at 12.5 s: {:#?}",
        r.actions()
    );
    r.advance_to(t(12) + ms(900));
    assert_eq!(starts(&r), 1);
}
