//! Probe and hook results reach the machine through the pod worker.

use crate::common;

use common::{RuntimeCall, Seen, agent, container_status, pod, pump};
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn readiness_probe_results_reach_the_machine() {
    let (rt, agent, _) = agent();
    rt.set_exec_code("check", 1);
    let yaml = "
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, infinity]
    readinessProbe:
      exec: {command: [check]}
      periodSeconds: 1
";
    let mut h = agent.spawn_pod(pod(yaml));
    let mut seen = Seen::default();
    // Running but failing its readiness probe.
    pump(&mut h, &mut seen, Duration::from_secs(5), |_| false).await;
    let last = seen.statuses.last().unwrap();
    assert_eq!(podvisor_lifecycle::kubectl::ready_text(last), "0/1");
    assert!(container_status(last).state.unwrap().running.is_some());
    let probes = rt
        .calls()
        .iter()
        .filter(|c| matches!(c, RuntimeCall::Exec { argv, .. } if argv == &["check"]))
        .count();
    assert!(probes >= 4, "{probes} probe runs in 5 s");
    assert!(seen.reasons().contains(&"Unhealthy"));
    let unhealthy = seen
        .events
        .iter()
        .find(|e| e.event.reason == "Unhealthy")
        .unwrap();
    assert!(
        unhealthy
            .event
            .message
            .starts_with("Readiness probe failed"),
        "{}",
        unhealthy.event.message
    );
    // The probe starts passing: the container becomes ready.
    rt.set_exec_code("check", 0);
    let ready = |s: &Seen| {
        s.statuses
            .last()
            .is_some_and(|p| podvisor_lifecycle::kubectl::ready_text(p) == "1/1")
    };
    assert!(pump(&mut h, &mut seen, Duration::from_secs(3), ready).await);
}

#[tokio::test(start_paused = true)]
async fn a_failing_liveness_probe_restarts_the_container() {
    let (rt, agent, _) = agent();
    rt.set_exec_code("alive", 1);
    let yaml = "
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, infinity]
    livenessProbe:
      exec: {command: [alive]}
      periodSeconds: 1
      failureThreshold: 2
";
    let mut h = agent.spawn_pod(pod(yaml));
    let mut seen = Seen::default();
    let restarted = |s: &Seen| {
        s.statuses
            .last()
            .is_some_and(|p| container_status(p).restart_count == 1)
    };
    assert!(pump(&mut h, &mut seen, Duration::from_secs(20), restarted).await);
    let killing = seen
        .events
        .iter()
        .find(|e| e.event.reason == "Killing")
        .unwrap();
    assert_eq!(
        killing.event.message,
        "Container app failed liveness probe, will be restarted"
    );
    let calls = rt.calls();
    let sigterm = calls
        .iter()
        .position(|c| {
            matches!(
                c,
                RuntimeCall::Signal {
                    instance: 1,
                    signal: 15
                }
            )
        })
        .expect("SIGTERM");
    let restart = calls
        .iter()
        .position(|c| {
            matches!(
                c,
                RuntimeCall::Start {
                    restart_count: 1,
                    ..
                }
            )
        })
        .expect("restart");
    assert!(sigterm < restart);
}

#[tokio::test(start_paused = true)]
async fn post_start_and_pre_stop_hooks_run_through_the_runtime() {
    let (rt, agent, _) = agent();
    let yaml = "
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, infinity]
    lifecycle:
      postStart:
        exec: {command: [greet]}
      preStop:
        exec: {command: [drain]}
";
    let mut h = agent.spawn_pod(pod(yaml));
    let mut seen = Seen::default();
    let running = |s: &Seen| s.statuses.last().is_some_and(|p| container_status(p).ready);
    assert!(pump(&mut h, &mut seen, Duration::from_secs(5), running).await);
    h.delete(None);
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    let calls = rt.calls();
    let exec = |name: &str| {
        calls
            .iter()
            .position(|c| matches!(c, RuntimeCall::Exec { argv, .. } if argv == &[name]))
            .unwrap_or_else(|| panic!("{name} not run: {calls:?}"))
    };
    let sigterm = calls
        .iter()
        .position(|c| matches!(c, RuntimeCall::Signal { signal: 15, .. }))
        .expect("SIGTERM");
    assert!(exec("greet") < exec("drain"));
    assert!(
        exec("drain") < sigterm,
        "preStop runs before the stop signal"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_post_start_hook_kills_the_container() {
    let (rt, agent, _) = agent();
    rt.set_exec_code("greet", 1);
    let yaml = "
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: busybox
    command: [sleep, infinity]
    lifecycle:
      postStart:
        exec: {command: [greet]}
";
    let mut h = agent.spawn_pod(pod(yaml));
    let mut seen = Seen::default();
    assert!(
        pump(&mut h, &mut seen, Duration::from_secs(60), |s| s
            .terminated
            .is_some())
        .await
    );
    assert!(
        seen.reasons().contains(&"FailedPostStartHook"),
        "{:?}",
        seen.reasons()
    );
    assert!(
        rt.calls()
            .iter()
            .any(|c| matches!(c, RuntimeCall::Signal { signal: 15, .. }))
    );
}
