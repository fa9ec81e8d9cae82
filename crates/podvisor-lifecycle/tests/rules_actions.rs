//! Rule tests for the machine (kubelet-lifecycle.md): section 4 (A, `computePodActions` and
//! `SyncPod`), section 5 (B, CrashLoopBackOff), section 1.3 (P11-P17 on the machine), section 2
//! (S, container statuses), section 9 (D2, D5 at machine level) and section 10 (M1, M3-M5, M12).
//!
//! Every test drives a `PodMachine` through `common::Harness` on a virtual clock and asserts
//! exact reasons, messages and event reasons.
//!
//! Rules of section 4 that do not apply to podvisor's process runtime (not tested):
//! - A1's network-namespace and pod-IP bullets: the process runtime shares the host network.
//!   A sandbox that stops being READY (the pod's shim died) and A2's re-creation are tested in
//!   `rules_sandbox.rs`; here: the sandbox is created first, no container starts before it is
//!   ready, a failed creation is retried, and with init containers only init container 0 is
//!   started (`a1_a2_*`).
//! - A5's `CREATED` bullet: create + start is one step for the driver; a start that fails after
//!   creation is reported as `StartError` (exit 128), which is the `EXITED` bullet
//!   (`a5_start_error_init_is_retried_like_a_failed_init`).
//! - A5's and A10's `UNKNOWN` bullets: the process runtime always observes an exit.
//! - A5's "no record, previously initialized, sidecar" bullet: records are never lost (no
//!   container GC of the newest instance, no agent restart inside the machine).
//! - A11's in-place resize bullet and A18 step 7: in `rules_resize.rs`.
//! - A14 and A18 step 5: no ephemeral containers.
//! - A17: `RestartAllContainersOnContainerExits` is alpha (off).
//! - A19's image pull step: images are not pulled by the lifecycle core.
//! - A21: deliberate difference (no 1 s relist): regular containers start in the same step as the
//!   last init container's exit is handled.
//! - A22 is API-server defaulting: tested only as such (`a22_image_pull_policy_default`), since
//!   the core pulls no images.

use crate::common;

use common::{Harness, POD_FULL_NAME, container, exec_probe, plus, secs_of, sidecar, t, t_ms};
use k8s_openapi::api::core::v1::Pod;
use podvisor_lifecycle::sim::Input;
use podvisor_lifecycle::{
    Action, BackoffConfig, ContainerKind, EventType, ExitStatus, HookKind, MachineConfig, Phase,
    ProbeKind,
};
use serde_json::{Value, json};
use std::time::Duration;

// ---- helpers -----------------------------------------------------------------------------------

/// A pod with one container `app` under `policy`.
fn single(policy: &str) -> Harness {
    Harness::from_spec(json!({"restartPolicy": policy, "containers": [container("app")]}))
}

/// A pod with the given init containers and containers under `policy`.
fn pod_with(policy: &str, init: Vec<Value>, containers: Vec<Value>) -> Harness {
    Harness::from_spec(json!({
        "restartPolicy": policy,
        "initContainers": init,
        "containers": containers,
    }))
}

/// `value` with `extra`'s fields merged in (shallow).
fn with(mut value: Value, extra: Value) -> Value {
    let obj = value.as_object_mut().unwrap();
    for (k, v) in extra.as_object().unwrap() {
        obj.insert(k.clone(), v.clone());
    }
    value
}

fn has_pending_start(h: &Harness, name: &str) -> bool {
    h.pending_starts().iter().any(|(n, _)| n == name)
}

/// Lets the newest instance of `name` run for `run` seconds (from `h.now()`), exit with `code`,
/// then waits for the replacement's `StartContainer` and answers it. Returns the back-off wait:
/// seconds from the exit to the replacement's start.
fn crash_and_wait(h: &mut Harness, name: &str, code: i32, run: i64) -> i64 {
    let exit_at = plus(h.now(), run);
    h.advance_to(exit_at);
    h.exit(name, code, exit_at);
    // The back-off expiry, after the 10 s requeues that find the start still blocked.
    while !has_pending_start(h, name) {
        let due = h.next_timer().expect("a back-off timer after a crash");
        h.advance_to(due);
    }
    assert!(has_pending_start(h, name), "{name} was not restarted");
    let started = h.now();
    h.start(name, started);
    secs_of(started) - secs_of(exit_at)
}

/// The current `CrashLoopBackOff` message of `name`, if it is waiting with that reason.
fn crash_loop_message(h: &Harness, name: &str) -> Option<String> {
    match h.waiting(name) {
        Some((reason, message)) if reason == "CrashLoopBackOff" => message,
        _ => None,
    }
}

fn killing(h: &Harness) -> Vec<String> {
    h.events_with_reason("Killing")
}

// ---- section 4: computePodActions and SyncPod -------------------------------------------------

#[test]
fn a1_a2_sandbox_is_created_before_any_container() {
    let mut h = single("Always");
    assert_eq!(
        h.actions()
            .iter()
            .filter(|a| **a == Action::CreateSandbox)
            .count(),
        1
    );
    assert!(
        h.pending_starts().is_empty(),
        "no container before the sandbox"
    );
    h.advance_to(t(30));
    assert!(h.pending_starts().is_empty());
    assert_eq!(
        h.waiting("app"),
        Some(("ContainerCreating".to_string(), None))
    );
    h.sandbox_ready(t(31));
    assert_eq!(h.start_order(), ["app"]);
    // Attempt 0: there never was an old sandbox.
    assert!(h.events_with_reason("SandboxChanged").is_empty());
}

#[test]
fn a2_failed_sandbox_creation_is_retried_and_containers_stay_waiting() {
    let mut h = single("Always");
    let mark = h.mark();
    let msg =
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[]: boom";
    let message = msg.to_string();
    h.input(
        Input::SandboxFailed {
            reason: "FailedMount",
            message,
        },
        t(1),
    );
    let events = h.event_list();
    let failed = events
        .iter()
        .find(|e| e.reason == "FailedMount")
        .expect("FailedMount");
    assert_eq!(failed.type_, EventType::Warning);
    assert_eq!(failed.message, msg);
    // M8: retried after the sync error requeue (10 s), not in a hot loop.
    assert!(
        !h.actions_since(mark).contains(&Action::CreateSandbox),
        "not retried at once"
    );
    assert_eq!(h.next_timer(), Some(t(11)));
    h.advance_to(t(30));
    assert_eq!(
        h.actions_since(mark)
            .iter()
            .filter(|a| **a == Action::CreateSandbox)
            .count(),
        1,
        "retried once"
    );
    assert_eq!(
        h.waiting("app"),
        Some(("ContainerCreating".to_string(), None))
    );
    assert_eq!(h.phase(), Phase::Pending);
    h.boot(t(31));
    assert_eq!(h.state_kind("app"), "running");
}

#[test]
fn a2_with_init_containers_only_init_container_0_is_started() {
    let mut h = pod_with(
        "Always",
        vec![container("init-a"), container("init-b")],
        vec![container("app"), container("app2")],
    );
    h.sandbox_ready(t(0));
    assert_eq!(h.start_order(), ["init-a"]);
    h.start_all(t(0));
    assert_eq!(h.start_order(), ["init-a"], "init-a is still running");
}

#[test]
fn a3_without_init_containers_regular_containers_start_at_once() {
    let mut h = pod_with("Always", vec![], vec![container("b"), container("a")]);
    h.boot(t(0));
    assert_eq!(h.start_order(), ["b", "a"]);
    assert_eq!(h.condition_status("Initialized"), "True");
}

#[test]
fn a4_a5_completed_init_containers_are_never_rerun() {
    let mut h = pod_with("Always", vec![container("init")], vec![container("app")]);
    h.boot(t(0));
    h.exit("init", 0, t(1));
    h.start_all(t(1));
    assert_eq!(h.start_order(), ["init", "app"]);
    // The app crashes: only the app is restarted; the init container stays completed.
    let wait = crash_and_wait(&mut h, "app", 1, 5);
    assert_eq!(wait, 0);
    assert_eq!(h.start_order(), ["init", "app", "app"]);
    assert_eq!(
        h.terminated("init").unwrap().reason.as_deref(),
        Some("Completed")
    );
    // Even while the app is dead and backing off.
    h.exit("app", 1, t(10));
    assert_eq!(
        crash_loop_message(&h, "app").unwrap().split(' ').nth(1),
        Some("10s")
    );
    assert_eq!(h.start_order(), ["init", "app", "app"]);
}

#[test]
fn a5_running_regular_init_container_blocks_the_next_one() {
    let mut h = pod_with(
        "Always",
        vec![container("init-a"), container("init-b")],
        vec![container("app")],
    );
    h.boot(t(0));
    h.advance_to(t(100));
    assert_eq!(h.start_order(), ["init-a"]);
    assert_eq!(h.state_kind("init-a"), "running");
    assert_eq!(
        h.waiting("init-b"),
        Some(("PodInitializing".to_string(), None))
    );
    assert_eq!(
        h.waiting("app"),
        Some(("PodInitializing".to_string(), None))
    );
}

#[test]
fn a5_succeeded_init_container_starts_the_next_one() {
    let mut h = pod_with(
        "Always",
        vec![container("init-a"), container("init-b")],
        vec![container("app")],
    );
    h.boot(t(0));
    h.exit("init-a", 0, t(3));
    assert_eq!(h.start_order(), ["init-a", "init-b"]);
    h.start_all(t(3));
    h.exit("init-b", 0, t(4));
    // The last init container succeeded: the pod is initialized (A21 deliberately immediate).
    assert_eq!(h.start_order(), ["init-a", "init-b", "app"]);
}

#[test]
fn a5_sidecar_without_startup_probe_unblocks_the_next_init_container_once_running() {
    let mut h = pod_with(
        "Always",
        vec![sidecar("proxy"), container("init")],
        vec![container("app")],
    );
    h.sandbox_ready(t(0));
    assert_eq!(h.start_order(), ["proxy"]);
    h.start("proxy", t(1));
    assert_eq!(h.start_order(), ["proxy", "init"]);
    h.start_all(t(1));
    h.exit("init", 0, t(2));
    assert_eq!(h.start_order(), ["proxy", "init", "app"]);
}

#[test]
fn a8_a21_a_sidecar_settles_for_one_relist_before_the_next_container_starts() {
    // With the default config: the kubelet sees a started sidecar only at its next sync, after
    // a PLEG relist (1 s). The next init container, then the regular containers, wait for it.
    let pod = common::pod(json!({"spec": {
        "initContainers": [sidecar("proxy"), sidecar("logs")],
        "containers": [container("app")],
    }}));
    let mut h = Harness::admitted_at(pod, MachineConfig::default(), t(0));
    h.sandbox_ready(t(0));
    h.start("proxy", t(0));
    assert_eq!(h.start_order(), ["proxy"], "logs waits for proxy to settle");
    assert_eq!(h.next_timer(), Some(t(1)));
    h.advance_to(t(1));
    assert_eq!(h.start_order(), ["proxy", "logs"]);
    h.start("logs", t_ms(1_200));
    h.advance_to(t_ms(2_199));
    assert_eq!(
        h.start_order(),
        ["proxy", "logs"],
        "app waits for logs to settle"
    );
    h.advance_to(t_ms(2_200));
    assert_eq!(h.start_order(), ["proxy", "logs", "app"]);
    // A sidecar restarting later holds nothing up: the pod has initialized.
    h.start("app", t(3));
    h.exit("proxy", 1, t(4));
    h.start("proxy", t(4));
    assert_eq!(h.state_kind("app"), "running");
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn a5_a8_sidecar_startup_probe_without_result_holds_initialization() {
    let proxy = with(sidecar("proxy"), json!({"startupProbe": exec_probe(10, 3)}));
    let mut h = pod_with("Always", vec![proxy], vec![container("app")]);
    h.boot(t(0));
    // R4: the worker ticked at t(0) before the sidecar existed; the next tick is at t(10).
    assert!(h.probes_run().is_empty());
    h.advance_to(t(10));
    assert_eq!(
        h.probes_run(),
        [(t(10), "proxy".to_string(), ProbeKind::Startup)]
    );
    assert_eq!(h.start_order(), ["proxy"], "no result yet: wait");
    assert_eq!(h.status_of("proxy").started, Some(false));
    assert_eq!(h.phase(), Phase::Pending);
    h.probe_ok("proxy", ProbeKind::Startup, t(10));
    assert_eq!(h.start_order(), ["proxy", "app"]);
    assert_eq!(h.status_of("proxy").started, Some(true));
}

#[test]
fn a5_sidecar_startup_probe_failure_kills_and_restarts_it() {
    let proxy = with(sidecar("proxy"), json!({"startupProbe": exec_probe(10, 1)}));
    let mut h = pod_with("Always", vec![proxy], vec![container("app")]);
    h.boot(t(0));
    h.advance_to(t(10));
    h.probe_fail("proxy", ProbeKind::Startup, t(10));
    assert_eq!(
        h.events_with_reason("Unhealthy"),
        ["Startup probe failed: nope"]
    );
    assert_eq!(killing(&h), ["Init container proxy failed startup probe"]);
    assert_eq!(
        h.stops(),
        [("proxy".to_string(), "SIGTERM".to_string(), 30)]
    );
    assert_eq!(h.start_order(), ["proxy"], "restarted once it has exited");
    h.exit_stopped(143, t(11));
    assert_eq!(h.starts_of("proxy"), [(t(0), 0), (t(11), 1)]);
    assert!(!h.start_order().contains(&"app".to_string()));
}

#[test]
fn a5_sidecar_liveness_failure_kills_and_restarts_it() {
    let proxy = with(
        sidecar("proxy"),
        json!({"livenessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with("Always", vec![proxy], vec![container("app")]);
    h.boot(t(0));
    assert_eq!(h.start_order(), ["proxy", "app"]);
    h.advance_to(t(10));
    assert_eq!(
        h.probes_run(),
        [(t(10), "proxy".to_string(), ProbeKind::Liveness)]
    );
    h.probe_fail("proxy", ProbeKind::Liveness, t(10));
    assert_eq!(killing(&h), ["Init container proxy failed liveness probe"]);
    h.exit_stopped(143, t(12));
    assert_eq!(h.starts_of("proxy"), [(t(0), 0), (t(12), 1)]);
    // The app keeps running.
    assert_eq!(h.starts_of("app").len(), 1);
    assert!(h.stops().iter().all(|(n, _, _)| n == "proxy"));
}

#[test]
fn a5_m12_sidecar_definition_change_restarts_it() {
    let mut h = pod_with("Always", vec![sidecar("proxy")], vec![container("app")]);
    h.boot(t(0));
    h.set_image("proxy", "busybox:1.37", t(10));
    assert_eq!(killing(&h), ["Init container proxy definition changed"]);
    h.exit_stopped(143, t(11));
    assert_eq!(h.starts_of("proxy"), [(t(0), 0), (t(11), 1)]);
    h.start_all(t(11));
    assert_eq!(h.status_of("proxy").image, "busybox:1.37");
    assert_eq!(h.starts_of("app").len(), 1, "the app is not touched");
}

#[test]
fn a5_exited_sidecar_is_restarted_regardless_of_exit_code_and_pod_policy() {
    for policy in ["Always", "OnFailure", "Never"] {
        for code in [0, 1] {
            let mut h = pod_with(policy, vec![sidecar("proxy")], vec![container("app")]);
            h.boot(t(0));
            h.exit("proxy", code, t(5));
            assert_eq!(
                h.starts_of("proxy"),
                [(t(0), 0), (t(5), 1)],
                "{policy}, exit {code}"
            );
            assert_eq!(h.phase(), Phase::Running, "{policy}, exit {code}");
        }
    }
}

#[test]
fn a5_failed_regular_init_container_under_never_fails_the_pod() {
    let mut h = pod_with(
        "Never",
        vec![container("init-a"), container("init-b")],
        vec![container("app")],
    );
    h.boot(t(0));
    h.exit("init-a", 1, t(3));
    assert_eq!(h.start_order(), ["init-a"], "nothing else starts");
    assert_eq!(h.phase(), Phase::Failed);
    assert!(h.pod_terminated());
    assert_eq!(h.terminated("init-a").unwrap().exit_code, 1);
    assert_eq!(
        h.terminated("init-a").unwrap().reason.as_deref(),
        Some("Error")
    );
}

#[test]
fn a5_oom_killed_init_container_counts_as_failed() {
    let mut h = pod_with("Never", vec![container("init")], vec![container("app")]);
    h.boot(t(0));
    let exit = ExitStatus {
        exit_code: 137,
        oom_killed: true,
        ..ExitStatus::default()
    };
    h.exit_with("init", exit, t(3));
    assert_eq!(h.phase(), Phase::Failed);
    assert_eq!(
        h.terminated("init").unwrap().reason.as_deref(),
        Some("OOMKilled")
    );
    assert_eq!(h.start_order(), ["init"]);
}

#[test]
fn a5_failed_regular_init_container_is_restarted_unless_never() {
    for policy in ["Always", "OnFailure"] {
        let mut h = pod_with(policy, vec![container("init")], vec![container("app")]);
        h.boot(t(0));
        h.exit("init", 1, t(3));
        assert_eq!(h.starts_of("init"), [(t(0), 0), (t(3), 1)], "{policy}");
        assert_eq!(h.phase(), Phase::Pending, "{policy}");
        h.start_all(t(3));
        h.exit("init", 0, t(4));
        assert_eq!(h.start_order(), ["init", "init", "app"], "{policy}");
    }
}

#[test]
fn a5_start_error_init_is_retried_like_a_failed_init() {
    let mut h = pod_with("Always", vec![container("init")], vec![container("app")]);
    h.sandbox_ready(t(0));
    h.fail_start(
        "init",
        "RunContainerError",
        "exec: \"nope\": not found",
        true,
        t(0),
    );
    assert_eq!(h.starts_of("init"), [(t(0), 0), (t(0), 1)]);
    let mut never = pod_with("Never", vec![container("init")], vec![container("app")]);
    never.sandbox_ready(t(0));
    never.fail_start(
        "init",
        "RunContainerError",
        "exec: \"nope\": not found",
        true,
        t(0),
    );
    assert_eq!(never.phase(), Phase::Failed);
    let term = never.terminated("init").unwrap();
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (128, Some("StartError"))
    );
}

#[test]
fn a6_a7_a8_init_containers_run_one_at_a_time_in_spec_order() {
    let mut h = pod_with(
        "Always",
        vec![
            container("zz-first"),
            sidecar("proxy"),
            container("aa-last"),
        ],
        vec![container("app")],
    );
    h.sandbox_ready(t(0));
    assert_eq!(h.start_order(), ["zz-first"]);
    h.start_all(t(0));
    assert_eq!(h.start_order(), ["zz-first"]);
    h.exit("zz-first", 0, t(1));
    h.start_all(t(1));
    // The sidecar keeps running; the next regular init container is started after it.
    assert_eq!(h.start_order(), ["zz-first", "proxy", "aa-last"]);
    h.exit("aa-last", 0, t(2));
    h.start_all(t(2));
    assert_eq!(h.start_order(), ["zz-first", "proxy", "aa-last", "app"]);
    let names: Vec<String> = h
        .status()
        .init_container_statuses
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        names,
        ["zz-first", "proxy", "aa-last"],
        "init statuses in spec order"
    );
}

/// A5: once the highest-index init container with a record is found, everything below it counts
/// as previously initialized: a dead sidecar below a running init container is restarted at once,
/// a completed regular init container below it is not re-run.
#[test]
fn a5_containers_below_the_highest_record_count_as_previously_initialized() {
    let mut h = pod_with(
        "Always",
        vec![container("init1"), sidecar("proxy"), container("init3")],
        vec![container("app")],
    );
    h.boot(t(0));
    h.exit("init1", 0, t(1));
    h.start_all(t(1));
    assert_eq!(h.start_order(), ["init1", "proxy", "init3"]);
    h.exit("proxy", 1, t(2));
    assert_eq!(h.starts_of("proxy"), [(t(1), 0), (t(2), 1)]);
    h.start_all(t(2));
    assert_eq!(h.starts_of("init1").len(), 1);
    h.exit("init3", 0, t(3));
    assert_eq!(h.start_order(), ["init1", "proxy", "init3", "proxy", "app"]);
}

#[test]
fn a9_regular_containers_wait_while_initialization_is_in_progress_or_failing() {
    let mut h = pod_with("Always", vec![container("init")], vec![container("app")]);
    h.boot(t(0));
    h.exit("init", 1, t(1));
    h.start_all(t(1));
    h.exit("init", 1, t(2));
    // Backing off: still only the init container.
    h.advance_to(t(11));
    h.start_all(t(12));
    assert!(h.start_order().iter().all(|n| n == "init"));
    assert_eq!(
        h.waiting("app"),
        Some(("PodInitializing".to_string(), None))
    );
    assert_eq!(h.phase(), Phase::Pending);
}

#[test]
fn a10_dead_container_is_restarted_when_it_should_be() {
    let mut h = pod_with("Always", vec![], vec![container("a"), container("b")]);
    h.boot(t(0));
    h.exit("b", 0, t(5));
    assert_eq!(h.starts_of("b"), [(t(0), 0), (t(5), 1)]);
    assert_eq!(h.starts_of("a").len(), 1);
}

/// A11: the `Killing` message of a running container killed by the sync, and whether it runs
/// again after it has exited. A second container keeps running so that A13 does not turn the
/// kill into a whole-pod kill (see `a11_a13_*`).
#[test]
fn a11_kill_messages_and_restart_flag() {
    struct Case {
        policy: &'static str,
        container_policy: Option<&'static str>,
        cause: &'static str,
        message: &'static str,
        restarted: bool,
    }
    let cases = [
        Case {
            policy: "Always",
            container_policy: None,
            cause: "liveness",
            message: "Container app failed liveness probe, will be restarted",
            restarted: true,
        },
        Case {
            policy: "OnFailure",
            container_policy: None,
            cause: "liveness",
            message: "Container app failed liveness probe, will be restarted",
            restarted: true,
        },
        Case {
            policy: "Never",
            container_policy: None,
            cause: "liveness",
            message: "Container app failed liveness probe",
            restarted: false,
        },
        Case {
            policy: "Always",
            container_policy: None,
            cause: "startup",
            message: "Container app failed startup probe, will be restarted",
            restarted: true,
        },
        Case {
            policy: "Never",
            container_policy: None,
            cause: "startup",
            message: "Container app failed startup probe",
            restarted: false,
        },
        // 1.34+ ContainerRestartRules: the container's own policy decides the flag.
        Case {
            policy: "Always",
            container_policy: Some("Never"),
            cause: "liveness",
            message: "Container app failed liveness probe",
            restarted: false,
        },
        Case {
            policy: "Never",
            container_policy: Some("Always"),
            cause: "liveness",
            message: "Container app failed liveness probe, will be restarted",
            restarted: true,
        },
    ];
    for c in cases {
        let mut app = container("app");
        match c.cause {
            "liveness" => app = with(app, json!({"livenessProbe": exec_probe(10, 1)})),
            _ => app = with(app, json!({"startupProbe": exec_probe(10, 1)})),
        }
        if let Some(p) = c.container_policy {
            app = with(app, json!({"restartPolicy": p}));
        }
        let mut h = pod_with(c.policy, vec![], vec![app, container("other")]);
        h.boot(t(0));
        let kind = if c.cause == "liveness" {
            ProbeKind::Liveness
        } else {
            ProbeKind::Startup
        };
        h.advance_to(t(10));
        h.probe_fail("app", kind, t(10));
        let what = format!("{} {:?} {}", c.policy, c.container_policy, c.cause);
        assert_eq!(killing(&h), [c.message], "{what}");
        assert_eq!(
            h.stops(),
            [("app".to_string(), "SIGTERM".to_string(), 30)],
            "{what}"
        );
        h.exit_stopped(143, t(13));
        assert_eq!(has_pending_start(&h, "app"), c.restarted, "{what}");
        if !c.restarted {
            // Killed and left dead.
            assert_eq!(h.terminated("app").unwrap().exit_code, 143, "{what}");
            assert_eq!(h.state_kind("other"), "running", "{what}");
            assert_eq!(h.phase(), Phase::Running, "{what}");
        }
    }
}

/// A11 + A13: when the only container fails its liveness probe under `Never`, keepCount is 0 and
/// nothing is to be started, so the sync kills the whole pod instead: the kill message is the
/// pod kill's `Stopping container <name>` (upstream `killPodWithSyncResult` passes no message).
/// A11: with the restart flag the replacement is started in the same sync as the kill, so a
/// process that exits 0 on SIGTERM under `OnFailure` still runs again; and the gap between the
/// exit and the replacement is never published (no terminated flash, no terminal phase).
#[test]
fn a11_killed_container_is_replaced_without_publishing_the_gap() {
    let app = with(
        container("app"),
        json!({"livenessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with("OnFailure", vec![], vec![app]);
    h.boot(t(0));
    h.advance_to(t(10));
    h.probe_fail("app", ProbeKind::Liveness, t(10));
    assert_eq!(
        killing(&h),
        ["Container app failed liveness probe, will be restarted"]
    );
    let mark = h.mark();
    h.exit_stopped(0, t(12));
    assert!(has_pending_start(&h, "app"));
    assert!(
        !h.actions_since(mark)
            .iter()
            .any(|a| matches!(a, Action::PublishStatus(_))),
        "{:?}",
        h.actions_since(mark)
    );
    assert_eq!(h.state_kind("app"), "running");
    assert_eq!(h.phase(), Phase::Running);
    h.start_all(t(12));
    let s = h.status_of("app");
    assert_eq!(s.restart_count, 1);
    let last = h.last_terminated("app").unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (0, Some("Completed"))
    );
    assert_eq!(h.state_kind("app"), "running");
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn a11_a13_no_restart_and_nothing_left_kills_the_pod() {
    let app = with(
        container("app"),
        json!({"livenessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with("Never", vec![], vec![app]);
    h.boot(t(0));
    h.advance_to(t(10));
    h.probe_fail("app", ProbeKind::Liveness, t(10));
    assert_eq!(killing(&h), ["Stopping container app"]);
    h.exit_stopped(143, t(11));
    assert!(h.pending_starts().is_empty());
    assert_eq!(h.phase(), Phase::Failed);
    assert!(h.pod_terminated());
}

/// A11/A12/M12: a changed image forces the restart whatever the policy, and the replacement
/// runs the new image even when the old process exits 0 on SIGTERM.
#[test]
fn a12_m12_image_change_restarts_regular_container_regardless_of_policy() {
    for policy in ["Always", "OnFailure", "Never"] {
        for code in [0, 143] {
            let mut h = single(policy);
            h.boot(t(0));
            h.set_image("app", "busybox:1.37", t(10));
            assert_eq!(
                killing(&h),
                ["Container app definition changed, will be restarted"],
                "{policy} {code}"
            );
            h.exit_stopped(code, t(11));
            assert_eq!(
                h.starts_of("app"),
                [(t(0), 0), (t(11), 1)],
                "{policy} {code}"
            );
            h.start_all(t(11));
            assert_eq!(h.phase(), Phase::Running, "{policy} {code}");
            let s = h.status_of("app");
            assert_eq!(s.image, "busybox:1.37");
            assert_eq!(s.restart_count, 1);
            assert_eq!(h.state_kind("app"), "running");
        }
    }
}

#[test]
fn a12_changes_other_than_the_image_do_not_restart() {
    let mut h = single("Always");
    h.boot(t(0));
    let mark = h.mark();
    h.update(t(10), |pod: &mut Pod| {
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("tier".to_string(), "web".to_string());
        pod.spec.as_mut().unwrap().active_deadline_seconds = Some(3600);
    });
    assert!(h.events_since(mark).is_empty());
    assert!(h.stops().is_empty());
    assert_eq!(h.pod().metadata.labels.as_ref().unwrap()["tier"], "web");
}

#[test]
fn a13_job_style_pod_stops_its_sidecar_when_the_main_container_is_done() {
    for (policy, code, phase) in [
        ("Never", 0, Phase::Succeeded),
        ("Never", 1, Phase::Failed),
        ("OnFailure", 0, Phase::Succeeded),
    ] {
        let mut h = pod_with(policy, vec![sidecar("proxy")], vec![container("job")]);
        h.boot(t(0));
        h.exit("job", code, t(20));
        assert_eq!(killing(&h), ["Stopping container proxy"], "{policy} {code}");
        assert_eq!(
            h.stops(),
            [("proxy".to_string(), "SIGTERM".to_string(), 30)]
        );
        assert!(!h.pod_terminated());
        h.exit_stopped(143, t(21));
        // The sidecar is not restarted.
        assert_eq!(h.starts_of("proxy").len(), 1, "{policy} {code}");
        assert_eq!(h.phase(), phase, "{policy} {code}");
        assert!(h.pod_terminated(), "{policy} {code}");
    }
}

/// A15 (pod policy, no container policy): is the container started again after it exited?
#[test]
fn a15_should_container_be_restarted() {
    let cases = [
        ("Always", 0, true),
        ("Always", 1, true),
        ("OnFailure", 0, false),
        ("OnFailure", 1, true),
        ("Never", 0, false),
        ("Never", 1, false),
    ];
    for (policy, code, restarted) in cases {
        let mut h = pod_with(policy, vec![], vec![container("app"), container("other")]);
        h.boot(t(0));
        h.exit("app", code, t(5));
        assert_eq!(
            has_pending_start(&h, "app"),
            restarted,
            "{policy} exit {code}"
        );
        if !restarted {
            assert_eq!(h.terminated("app").unwrap().exit_code, code);
        }
    }
}

#[test]
fn a15_deleted_pod_never_restarts_containers() {
    let mut h = pod_with("Always", vec![], vec![container("app"), container("other")]);
    h.boot(t(0));
    h.delete(Some(30), t(10));
    h.exit("app", 1, t(11));
    assert!(h.pending_starts().is_empty());
    h.exit("other", 0, t(12));
    assert!(h.pending_starts().is_empty());
    assert!(h.pod_terminated());
}

/// A16: container `restartPolicy` and `restartPolicyRules` (`ContainerRestartRules`, beta in
/// 1.35).
#[test]
fn a16_container_restart_policy_and_rules() {
    let restart_in = |codes: &[i32]| json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": codes}}]);
    let restart_not_in = |codes: &[i32]| json!([{"action": "Restart", "exitCodes": {"operator": "NotIn", "values": codes}}]);
    let cases: Vec<(&str, &str, Value, i32, bool)> = vec![
        ("Never", "Never", restart_in(&[42]), 42, true),
        ("Never", "Never", restart_in(&[42]), 1, false),
        ("Never", "Never", restart_in(&[42]), 0, false),
        ("Never", "Never", restart_not_in(&[0, 1]), 3, true),
        ("Never", "Never", restart_not_in(&[0, 1]), 1, false),
        // A rule without exitCodes never matches.
        ("Never", "Never", json!([{"action": "Restart"}]), 1, false),
        // Rules first, then the container policy.
        ("Never", "OnFailure", restart_in(&[0]), 0, true),
        ("Never", "OnFailure", json!([]), 1, true),
        ("Never", "OnFailure", json!([]), 0, false),
        ("Never", "Always", json!([]), 0, true),
        ("Always", "Never", json!([]), 1, false),
        ("Always", "OnFailure", json!([]), 0, false),
    ];
    for (pod_policy, policy, rules, code, restarted) in cases {
        let app = with(
            container("app"),
            json!({"restartPolicy": policy, "restartPolicyRules": rules}),
        );
        let mut h = pod_with(pod_policy, vec![], vec![app, container("other")]);
        h.boot(t(0));
        h.exit("app", code, t(5));
        assert_eq!(
            has_pending_start(&h, "app"),
            restarted,
            "pod {pod_policy}, container {policy}, rules {rules}, exit {code}"
        );
    }
}

#[test]
fn a16_init_container_with_own_never_policy_fails_an_always_pod() {
    let init = with(container("init"), json!({"restartPolicy": "Never"}));
    let mut h = pod_with("Always", vec![init], vec![container("app")]);
    h.boot(t(0));
    h.exit("init", 1, t(2));
    assert_eq!(h.start_order(), ["init"]);
    assert_eq!(h.phase(), Phase::Failed);
    assert!(h.pod_terminated());
    // ... and its rules can still ask for a restart.
    let init = with(
        container("init"),
        json!({"restartPolicy": "Never", "restartPolicyRules": [
            {"action": "Restart", "exitCodes": {"operator": "In", "values": [75]}}
        ]}),
    );
    let mut h = pod_with("Always", vec![init], vec![container("app")]);
    h.boot(t(0));
    h.exit("init", 75, t(2));
    assert_eq!(h.starts_of("init"), [(t(0), 0), (t(2), 1)]);
}

/// A22 (defaulting, through `podvisor_api::apply_defaults` in the harness): `imagePullPolicy`
/// is `Always` for `latest` or no tag without a digest, else `IfNotPresent`; a set value stays.
#[test]
fn a22_image_pull_policy_default() {
    let cases = [
        (json!({"name": "a", "image": "busybox"}), "Always"),
        (json!({"name": "b", "image": "busybox:latest"}), "Always"),
        (
            json!({"name": "c", "image": "registry.local:5000/busybox"}),
            "Always",
        ),
        (
            json!({"name": "d", "image": "busybox:1.36"}),
            "IfNotPresent",
        ),
        (
            json!({"name": "e", "image": format!("busybox@sha256:{}", "0".repeat(64))}),
            "IfNotPresent",
        ),
        (
            json!({"name": "f", "image": "busybox", "imagePullPolicy": "Never"}),
            "Never",
        ),
    ];
    let containers: Vec<Value> = cases.iter().map(|(c, _)| c.clone()).collect();
    let h = pod_with("Always", vec![], containers);
    let spec = h.pod().spec.clone().unwrap();
    for ((c, expected), got) in cases.iter().zip(&spec.containers) {
        assert_eq!(got.image_pull_policy.as_deref(), Some(*expected), "{c}");
    }
}

#[test]
fn a18_regular_containers_start_one_by_one_in_spec_order() {
    let mut h = pod_with(
        "Always",
        vec![],
        vec![container("zeta"), container("alpha"), container("mid")],
    );
    h.sandbox_ready(t(0));
    assert_eq!(h.pending_starts().len(), 1, "one start step at a time");
    assert_eq!(h.start_all(t(0)), ["zeta", "alpha", "mid"]);
}

#[test]
fn a18_a19_start_events_and_start_failures() {
    let mut h = single("Always");
    h.boot(t(0));
    let events = h.event_list();
    let pairs: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("Created", "Created container: app"),
            ("Started", "Started container app")
        ]
    );
    assert!(events.iter().all(|e| e.type_ == EventType::Normal
        && e.container == Some((ContainerKind::Regular, "app".to_string()))));

    let mut h = single("Always");
    h.sandbox_ready(t(0));
    let mark = h.mark();
    h.fail_start(
        "app",
        "CreateContainerConfigError",
        "secret \"db\" not found",
        false,
        t(0),
    );
    let events = h.event_list();
    let failed = events.iter().find(|e| e.reason == "Failed").unwrap();
    assert_eq!(failed.type_, EventType::Warning);
    assert_eq!(failed.message, "Error: secret \"db\" not found");
    assert!(h.events_since(mark).iter().all(|(r, _)| r != "Created"));
}

/// A18 step 8: "a failure of one does not stop the others"; S6: the failed step is the waiting
/// reason; the failed start is retried at the next sync, which the pod worker requeues 10 s
/// after an errored sync (no back-off: nothing was created, there is no exited record).
#[test]
fn a18_s6_a_failed_start_does_not_block_other_containers_and_is_retried_after_10s() {
    let mut h = pod_with("Always", vec![], vec![container("a"), container("b")]);
    h.sandbox_ready(t(0));
    let config_error = (
        "CreateContainerConfigError".to_string(),
        Some("secret \"db\" not found".to_string()),
    );
    h.fail_start("a", &config_error.0, "secret \"db\" not found", false, t(0));
    assert_eq!(h.pending_starts().len(), 1);
    assert!(has_pending_start(&h, "b"), "b starts although a failed");
    h.start("b", t(0));
    assert_eq!(h.waiting("a"), Some(config_error.clone()));
    assert_eq!(h.status_of("a").restart_count, 0);
    assert_eq!(h.phase(), Phase::Pending, "P6: a has never started");
    assert_eq!(h.next_timer(), Some(t(10)));
    h.advance_to(t(9));
    assert!(!has_pending_start(&h, "a"));
    h.advance_to(t(10));
    assert_eq!(
        h.starts_of("a"),
        [(t(0), 0), (t(10), 0)],
        "no instance was created: count 0"
    );
    // While the retry is in its start step the cached failure is still what the API shows.
    assert_eq!(h.waiting("a"), Some(config_error.clone()));
    h.fail_start(
        "a",
        &config_error.0,
        "secret \"db\" not found",
        false,
        t(10),
    );
    assert_eq!(h.next_timer(), Some(t(20)));
    assert_eq!(h.events_with_reason("Failed").len(), 2);
    h.advance_to(t(20));
    h.start("a", t(20));
    assert_eq!(h.state_kind("a"), "running");
    assert_eq!(h.phase(), Phase::Running);
    assert_eq!(h.next_timer(), None);
}

#[test]
fn a18_failed_init_start_blocks_the_pod() {
    let mut h = pod_with("Always", vec![container("init")], vec![container("app")]);
    h.sandbox_ready(t(0));
    h.fail_start(
        "init",
        "CreateContainerError",
        "no space left on device",
        false,
        t(0),
    );
    assert!(h.pending_starts().is_empty());
    assert_eq!(
        h.waiting("init"),
        Some((
            "CreateContainerError".to_string(),
            Some("no space left on device".to_string())
        ))
    );
    assert_eq!(
        h.waiting("app"),
        Some(("PodInitializing".to_string(), None))
    );
    h.advance_to(t(10));
    assert_eq!(h.start_order(), ["init", "init"]);
    h.start_all(t(10));
    h.exit("init", 0, t(11));
    assert_eq!(h.start_order(), ["init", "init", "app"]);
}

#[test]
fn a20_post_start_hook_blocks_later_containers() {
    let a = with(
        container("a"),
        json!({"lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "sleep 5"]}}}}),
    );
    let mut h = pod_with("Always", vec![], vec![a, container("b")]);
    h.sandbox_ready(t(0));
    assert_eq!(h.start_all(t(0)), ["a"]);
    assert!(h.actions().iter().any(|x| matches!(
        x,
        Action::RunHook { name, hook: HookKind::PostStart, .. } if name == "a"
    )));
    // H2: a is not visible as running while its postStart runs; b is not created.
    h.advance_to(t(4));
    assert_eq!(
        h.waiting("a"),
        Some(("ContainerCreating".to_string(), None))
    );
    assert_eq!(h.start_order(), ["a"]);
    h.hook("a", HookKind::PostStart, Ok(()), t(5));
    assert_eq!(h.start_all(t(5)), ["b"]);
    assert_eq!(h.state_kind("a"), "running");
    assert_eq!(
        h.terminated("a"),
        None,
        "a is running after its hook completed"
    );
}

// ---- section 5: restart back-off -------------------------------------------------------------

#[test]
fn b1_b7_wait_sequence_is_0_10_20_40_80_160_300_300() {
    let mut h = single("Always");
    h.boot(t(0));
    let waits: Vec<i64> = (0..8)
        .map(|_| crash_and_wait(&mut h, "app", 1, 1))
        .collect();
    assert_eq!(waits, [0, 10, 20, 40, 80, 160, 300, 300]);
}

#[test]
fn b2_image_change_starts_a_fresh_back_off() {
    let mut h = single("Always");
    h.boot(t(0));
    for _ in 0..4 {
        crash_and_wait(&mut h, "app", 1, 1);
    }
    let exit_at = plus(h.now(), 1);
    h.exit("app", 1, exit_at);
    assert!(
        crash_loop_message(&h, "app")
            .unwrap()
            .starts_with("back-off 1m20s ")
    );
    // A new image: no back-off entry for it, the restart is immediate.
    h.set_image("app", "busybox:1.37", plus(exit_at, 2));
    assert!(has_pending_start(&h, "app"));
    let now = h.now();
    h.start_all(now);
    let waits: Vec<i64> = (0..3)
        .map(|_| crash_and_wait(&mut h, "app", 1, 1))
        .collect();
    assert_eq!(waits, [10, 20, 40]);
}

#[test]
fn b3_delay_is_measured_from_finished_at() {
    let mut h = single("Always");
    h.boot(t(0));
    crash_and_wait(&mut h, "app", 1, 1); // restarted at t(1): entry 10 s
    // The exit is reported late (agent was busy): finishedAt t(5), reported at t(8).
    let exit = ExitStatus {
        exit_code: 1,
        finished_at: Some(t(5)),
        ..ExitStatus::default()
    };
    h.advance_to(t(8));
    h.exit_with("app", exit, t(8));
    assert_eq!(h.next_timer(), Some(t(15)));
    h.advance_to(t(14));
    assert!(!has_pending_start(&h, "app"));
    h.advance_to(t(15));
    assert!(has_pending_start(&h, "app"));
}

#[test]
fn b4_back_off_resets_only_after_a_run_longer_than_600s() {
    // (run length of the instance after three quick crashes, wait after it, next wait)
    for (run, wait, next) in [(601, 0, 10), (600, 40, 80), (599, 40, 80)] {
        let mut h = single("Always");
        h.boot(t(0));
        let quick: Vec<i64> = (0..3)
            .map(|_| crash_and_wait(&mut h, "app", 1, 1))
            .collect();
        assert_eq!(quick, [0, 10, 20]);
        assert_eq!(crash_and_wait(&mut h, "app", 1, run), wait, "run {run}");
        assert_eq!(crash_and_wait(&mut h, "app", 1, 1), next, "run {run}");
    }
}

#[test]
fn b5_crash_loop_message_and_back_off_event() {
    let mut h = single("Always");
    h.boot(t(0));
    let mut messages = Vec::new();
    for _ in 0..7 {
        let exit_at = plus(h.now(), 1);
        h.advance_to(exit_at);
        h.exit("app", 1, exit_at);
        messages.push(crash_loop_message(&h, "app"));
        // The last instance's exit is shown as lastState.
        if let Some(last) = messages
            .last()
            .unwrap()
            .as_ref()
            .and(h.last_terminated("app"))
        {
            assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
        }
        while !has_pending_start(&h, "app") {
            let next = h.next_timer().unwrap();
            h.advance_to(next);
        }
        let now = h.now();
        h.start_all(now);
    }
    let expected: Vec<Option<String>> = [
        None,
        Some("10s"),
        Some("20s"),
        Some("40s"),
        Some("1m20s"),
        Some("2m40s"),
        Some("5m0s"),
    ]
    .into_iter()
    .map(|d| d.map(|d| format!("back-off {d} restarting failed container=app pod={POD_FULL_NAME}")))
    .collect();
    assert_eq!(messages, expected);
    let backoffs: Vec<_> = h
        .event_list()
        .into_iter()
        .filter(|e| e.reason == "BackOff")
        .collect();
    // 10.6: one per blocked sync: at the crash, then at each 10 s requeue while still blocked
    // (10 s back-off: 1, 20 s: 2, ..., 300 s: 30).
    assert_eq!(backoffs.len(), 1 + 2 + 4 + 8 + 16 + 30);
    for e in backoffs {
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            e.message,
            format!("Back-off restarting failed container app in pod {POD_FULL_NAME}")
        );
        assert_eq!(
            e.container,
            Some((ContainerKind::Regular, "app".to_string()))
        );
    }
    assert_eq!(
        format!(
            "back-off 10s restarting failed container=app pod=web_default({})",
            common::UID
        ),
        expected[1].clone().unwrap()
    );
}

#[test]
fn b6_init_containers_and_sidecars_back_off_too() {
    // A regular init container.
    let mut h = pod_with("Always", vec![container("init")], vec![container("app")]);
    h.boot(t(0));
    let waits: Vec<i64> = (0..3)
        .map(|_| crash_and_wait(&mut h, "init", 1, 1))
        .collect();
    assert_eq!(waits, [0, 10, 20]);
    let at = plus(h.now(), 1);
    h.exit("init", 1, at);
    assert_eq!(
        crash_loop_message(&h, "init").unwrap(),
        format!("back-off 40s restarting failed container=init pod={POD_FULL_NAME}")
    );
    let ev = h
        .event_list()
        .into_iter()
        .rfind(|e| e.reason == "BackOff")
        .unwrap();
    assert_eq!(
        ev.container,
        Some((ContainerKind::Init, "init".to_string()))
    );

    // A sidecar, while the main container runs.
    let mut h = pod_with("Always", vec![sidecar("proxy")], vec![container("app")]);
    h.boot(t(0));
    let waits: Vec<i64> = (0..3)
        .map(|_| crash_and_wait(&mut h, "proxy", 0, 1))
        .collect();
    assert_eq!(waits, [0, 10, 20]);
    let at = plus(h.now(), 1);
    h.exit("proxy", 0, at);
    assert_eq!(
        crash_loop_message(&h, "proxy").unwrap(),
        format!("back-off 40s restarting failed container=proxy pod={POD_FULL_NAME}")
    );
    assert_eq!(h.state_kind("app"), "running");
    assert_eq!(h.phase(), Phase::Running);
}

#[test]
fn b6_liveness_restarts_back_off_too() {
    let app = with(
        container("app"),
        json!({"livenessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with("Always", vec![], vec![app]);
    h.boot(t(0));
    h.advance_to(t(10));
    h.probe_fail("app", ProbeKind::Liveness, t(10));
    h.exit_stopped(143, t(11));
    assert_eq!(
        h.starts_of("app"),
        [(t(0), 0), (t(11), 1)],
        "first restart at once"
    );
    h.start_all(t(11));
    h.advance_to(t(20)); // the next liveness tick probes the new instance
    h.probe_fail("app", ProbeKind::Liveness, t(20));
    assert_eq!(killing(&h).len(), 2);
    h.exit_stopped(143, t(21));
    assert_eq!(
        crash_loop_message(&h, "app").unwrap(),
        format!("back-off 10s restarting failed container=app pod={POD_FULL_NAME}")
    );
    h.advance_to(t(30));
    assert!(!has_pending_start(&h, "app"));
    h.advance_to(t(31));
    assert_eq!(h.starts_of("app").last(), Some(&(t(31), 2)));
}

#[test]
fn b8_reduced_and_capped_curves() {
    let cases = [
        (
            BackoffConfig::reduced(),
            vec![0, 1, 2, 4, 8, 16, 32, 60, 60],
        ),
        (
            BackoffConfig::default().with_max_period(Duration::from_secs(2)),
            vec![0, 2, 2, 2, 2],
        ),
        (
            BackoffConfig::default().with_max_period(Duration::from_secs(30)),
            vec![0, 10, 20, 30, 30],
        ),
        (
            BackoffConfig::reduced().with_max_period(Duration::from_secs(5)),
            vec![0, 1, 2, 4, 5, 5],
        ),
    ];
    for (backoff, expected) in cases {
        let config = MachineConfig {
            backoff,
            ..MachineConfig::default()
        };
        let mut h =
            Harness::with_config(json!({"spec": {"containers": [container("app")]}}), config);
        h.boot(t(0));
        let waits: Vec<i64> = (0..expected.len())
            .map(|_| crash_and_wait(&mut h, "app", 1, 1))
            .collect();
        assert_eq!(waits, expected, "{backoff:?}");
    }
}

#[test]
fn b8_reset_rule_is_unchanged_by_the_reduced_curve() {
    let config = MachineConfig {
        backoff: BackoffConfig::reduced(),
        ..MachineConfig::default()
    };
    let mut h = Harness::with_config(json!({"spec": {"containers": [container("app")]}}), config);
    h.boot(t(0));
    for _ in 0..3 {
        crash_and_wait(&mut h, "app", 1, 1);
    }
    assert_eq!(crash_and_wait(&mut h, "app", 1, 599), 4);
    assert_eq!(crash_and_wait(&mut h, "app", 1, 601), 0);
    assert_eq!(crash_and_wait(&mut h, "app", 1, 1), 1);
}

// ---- section 1.3: phase merging on the machine -----------------------------------------------

#[test]
fn p11_a_terminal_phase_is_never_left() {
    let mut h = single("OnFailure");
    h.boot(t(0));
    h.exit("app", 0, t(5));
    assert_eq!(h.phase(), Phase::Succeeded);
    assert!(h.pod_terminated());
    let mark = h.mark();
    h.set_image("app", "busybox:1.37", t(6));
    h.set_conditions(
        json!([{"type": "example.com/gate", "status": "True"}]),
        t(7),
    );
    h.delete(None, t(8));
    h.advance_to(t(1000));
    assert_eq!(h.phase(), Phase::Succeeded);
    assert!(
        h.actions_since(mark)
            .iter()
            .all(|a| matches!(a, Action::PublishStatus(_))),
        "nothing runs after termination: {:?}",
        h.actions_since(mark)
    );
}

#[test]
fn p12_p13_reason_and_message_kept_while_the_phase_stays() {
    let mut h = Harness::from_spec(json!({
        "activeDeadlineSeconds": 60,
        "containers": [container("app")],
    }));
    h.boot(t(0));
    h.advance_to(t(60));
    let expected = (
        Some("DeadlineExceeded".to_string()),
        Some("Pod was active on the node longer than the specified deadline".to_string()),
    );
    assert_eq!(h.pod_reason(), expected);
    h.exit_stopped(143, t(61));
    assert!(h.pod_terminated());
    assert_eq!(h.phase(), Phase::Failed);
    assert_eq!(h.pod_reason(), expected);
    h.set_conditions(
        json!([{"type": "example.com/gate", "status": "True"}]),
        t(70),
    );
    assert_eq!(h.pod_reason(), expected);
}

#[test]
fn p14_terminate_pod_marks_unfinished_containers_unknown() {
    // Initialized pod: a regular container that never ran becomes ContainerStatusUnknown.
    let a = with(
        container("a"),
        json!({"lifecycle": {"postStart": {"exec": {"command": ["sleep", "1000"]}}}}),
    );
    let mut h = pod_with("Always", vec![], vec![a, container("b")]);
    h.boot(t(0));
    h.delete(Some(30), t(5));
    h.exit_stopped(143, t(6));
    assert!(h.pod_terminated());
    assert_eq!(h.phase(), Phase::Failed);
    let b = h.terminated("b").expect("b terminated");
    assert_eq!(b.exit_code, 137);
    assert_eq!(b.reason.as_deref(), Some("ContainerStatusUnknown"));
    assert_eq!(
        b.message.as_deref(),
        Some("The container could not be located when the pod was terminated")
    );
    assert_eq!(h.terminated("a").unwrap().exit_code, 143);

    // Not initialized: regular containers stay waiting; the first init container is converted,
    // the trailing never-started ones are left waiting.
    let mut h = pod_with(
        "Always",
        vec![container("init-a"), container("init-b")],
        vec![container("app")],
    );
    h.delete(Some(30), t(1));
    assert!(h.pod_terminated());
    assert_eq!(h.phase(), Phase::Failed);
    assert_eq!(
        h.terminated("init-a").unwrap().reason.as_deref(),
        Some("ContainerStatusUnknown")
    );
    assert_eq!(
        h.waiting("init-b"),
        Some(("PodInitializing".to_string(), None))
    );
    assert_eq!(
        h.waiting("app"),
        Some(("PodInitializing".to_string(), None))
    );
}

#[test]
fn p16_start_time_is_set_once_in_whole_seconds() {
    let pod = common::pod(json!({"spec": {"containers": [container("app")]}}));
    let mut h = Harness::admitted_at(pod, MachineConfig::default(), t_ms(1_700));
    let start = h.status().start_time.expect("startTime").0;
    assert_eq!(start, t(1));
    h.boot(t(5));
    h.exit("app", 1, t(9));
    h.advance_to(t(100));
    assert_eq!(h.status().start_time.unwrap().0, t(1));
}

#[test]
fn p17_t8_deleted_pod_goes_terminal_before_removal() {
    for (code, phase) in [
        (0, Phase::Succeeded),
        (143, Phase::Failed),
        (137, Phase::Failed),
    ] {
        let mut h = single("Always");
        h.boot(t(0));
        h.delete(None, t(10));
        assert_eq!(killing(&h), ["Stopping container app"]);
        assert_eq!(h.stops(), [("app".to_string(), "SIGTERM".to_string(), 30)]);
        assert_eq!(h.phase(), Phase::Running, "still running while terminating");
        assert!(!h.pod_terminated());
        h.exit_stopped(code, t(12));
        assert_eq!(h.phase(), phase, "exit {code}");
        assert!(h.pod_terminated());
        let last = h.actions().last().unwrap();
        assert_eq!(
            *last,
            Action::PodTerminated,
            "PodTerminated comes after the final status"
        );
    }
}

// ---- section 2: container statuses -----------------------------------------------------------

#[test]
fn s1_default_waiting_reasons_and_name_sort() {
    let h = pod_with(
        "Always",
        vec![],
        vec![container("zeta"), container("alpha"), container("mid")],
    );
    let status = h.status();
    let names: Vec<&str> = status
        .container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["alpha", "mid", "zeta"]);
    for n in ["alpha", "mid", "zeta"] {
        assert_eq!(h.waiting(n), Some(("ContainerCreating".to_string(), None)));
        assert_eq!(h.status_of(n).image, "busybox");
        assert_eq!(h.status_of(n).restart_count, 0);
        assert!(!h.status_of(n).ready);
    }
    assert!(status.init_container_statuses.is_none());

    let h = pod_with(
        "Always",
        vec![container("z-init"), sidecar("a-proxy")],
        vec![container("zeta"), container("alpha")],
    );
    let status = h.status();
    let init_names: Vec<&str> = status
        .init_container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(init_names, ["z-init", "a-proxy"], "spec order");
    for n in ["z-init", "a-proxy", "zeta", "alpha"] {
        assert_eq!(
            h.waiting(n),
            Some(("PodInitializing".to_string(), None)),
            "{n}"
        );
    }
}

#[test]
fn s3_newest_instance_is_state_second_newest_is_last_state() {
    let mut h = single("Always");
    h.boot(t(0));
    h.exit("app", 3, t(5));
    h.start_all(t(5));
    h.exit("app", 4, t(8));
    h.advance_to(t(18));
    h.start_all(t(18));
    let ids = h.instances("app");
    assert_eq!(ids.len(), 3);
    let s = h.status_of("app");
    let running = s.state.as_ref().unwrap().running.as_ref().unwrap();
    assert_eq!(running.started_at.as_ref().unwrap().0, t(18));
    assert_eq!(
        s.container_id,
        Some(format!("containerd://{:016x}", ids[2].0))
    );
    let last = h.last_terminated("app").unwrap();
    assert_eq!(
        last.exit_code, 4,
        "the second-newest, not the first instance"
    );
    assert_eq!(
        last.container_id,
        Some(format!("containerd://{:016x}", ids[1].0))
    );
    assert_eq!(last.started_at.as_ref().unwrap().0, t(5));
    assert_eq!(last.finished_at.as_ref().unwrap().0, t(8));
    assert_eq!(s.restart_count, 2);
}

#[test]
fn s6_reason_cache_turns_a_dead_container_into_crash_loop_back_off() {
    let mut h = single("Always");
    h.boot(t(0));
    // First exit: restarted at once, no cached failure: the dead instance shows terminated.
    h.exit("app", 1, t(5));
    assert!(has_pending_start(&h, "app"));
    assert_eq!(h.terminated("app").unwrap().exit_code, 1);
    h.start_all(t(5));
    // Second exit: blocked by back-off: waiting CrashLoopBackOff, the exit moves to lastState.
    h.exit("app", 2, t(7));
    let s = h.status_of("app");
    let waiting = s.state.as_ref().unwrap().waiting.clone().unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(
        waiting.message.unwrap(),
        format!("back-off 10s restarting failed container=app pod={POD_FULL_NAME}")
    );
    let last = s.last_state.unwrap().terminated.unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (2, Some("Error")));
    assert_eq!(s.restart_count, 1);
    assert!(!s.ready);
    assert_eq!(s.started, Some(false));
    // A successful start clears the cache.
    h.advance_to(t(17));
    h.start_all(t(17));
    assert_eq!(h.state_kind("app"), "running");
    assert_eq!(h.last_terminated("app").unwrap().exit_code, 2);
}

#[test]
fn s6_not_applied_when_the_container_will_not_restart() {
    let mut h = pod_with(
        "OnFailure",
        vec![],
        vec![container("app"), container("other")],
    );
    h.boot(t(0));
    crash_and_wait(&mut h, "app", 1, 1);
    h.exit("app", 0, t(3));
    assert_eq!(
        h.terminated("app").unwrap().reason.as_deref(),
        Some("Completed")
    );
}

#[test]
fn s7_terminated_reasons() {
    let oom = ExitStatus {
        exit_code: 137,
        oom_killed: true,
        ..ExitStatus::default()
    };
    let cases = [
        (ExitStatus::default(), 0, "Completed"),
        (
            ExitStatus {
                exit_code: 1,
                ..ExitStatus::default()
            },
            1,
            "Error",
        ),
        (
            ExitStatus {
                exit_code: 143,
                ..ExitStatus::default()
            },
            143,
            "Error",
        ),
        (oom, 137, "OOMKilled"),
    ];
    for (exit, code, reason) in cases {
        let mut h = single("Never");
        h.boot(t(0));
        h.exit_with("app", exit, t(4));
        let term = h.terminated("app").unwrap();
        assert_eq!(
            (term.exit_code, term.reason.as_deref()),
            (code, Some(reason))
        );
        assert_eq!(term.started_at.unwrap().0, t(0));
        assert_eq!(term.finished_at.unwrap().0, t(4));
        assert_eq!(term.signal, None, "the kubelet never fills signal");
    }
    // A start failure after creation: StartError, exit 128, the runtime's message.
    let mut h = single("Never");
    h.sandbox_ready(t(0));
    h.fail_start(
        "app",
        "RunContainerError",
        "exec: \"app\": executable file not found in $PATH",
        true,
        t(1),
    );
    let term = h.terminated("app").unwrap();
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (128, Some("StartError"))
    );
    assert_eq!(
        term.message.as_deref(),
        Some("exec: \"app\": executable file not found in $PATH")
    );
    assert_eq!(h.phase(), Phase::Failed);
}

#[test]
fn s10_restart_count_increments_when_the_replacement_is_created() {
    let mut h = single("Always");
    h.boot(t(0));
    assert_eq!(h.status_of("app").restart_count, 0);
    h.exit("app", 1, t(5));
    // The replacement is being created with count 1; the dead instance still shows 0.
    assert_eq!(h.starts_of("app"), [(t(0), 0), (t(5), 1)]);
    assert_eq!(h.status_of("app").restart_count, 0);
    h.start_all(t(5));
    assert_eq!(h.status_of("app").restart_count, 1);
    h.exit("app", 1, t(6));
    // In CrashLoopBackOff the count stays at the restarts so far.
    h.advance_to(t(15));
    assert_eq!(h.status_of("app").restart_count, 1);
    h.advance_to(t(16));
    assert_eq!(h.starts_of("app").last(), Some(&(t(16), 2)));
}

#[test]
fn s11_started_with_and_without_startup_probe() {
    let mut h = single("Always");
    h.sandbox_ready(t(0));
    assert_eq!(h.status_of("app").started, Some(false));
    h.start_all(t(0));
    assert_eq!(h.status_of("app").started, Some(true));
    h.exit("app", 0, t(1));
    assert_eq!(h.status_of("app").started, Some(false), "not running");

    let app = with(container("app"), json!({"startupProbe": exec_probe(10, 3)}));
    let mut h = pod_with("Always", vec![], vec![app]);
    h.boot(t(0));
    assert_eq!(h.state_kind("app"), "running");
    assert_eq!(h.status_of("app").started, Some(false));
    h.advance_to(t(10));
    assert_eq!(h.status_of("app").started, Some(false));
    h.probe_ok("app", ProbeKind::Startup, t(10));
    assert_eq!(h.status_of("app").started, Some(true));
}

#[test]
fn s12_ready_needs_started_and_readiness_success() {
    let mut h = single("Always");
    h.boot(t(0));
    assert!(
        h.status_of("app").ready,
        "no readiness probe: ready when running"
    );

    let app = with(
        container("app"),
        json!({"readinessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with("Always", vec![], vec![app]);
    h.boot(t(0));
    assert!(
        !h.status_of("app").ready,
        "initial readiness result is Failure"
    );
    assert!(
        h.probes_run()
            .contains(&(t(0), "app".to_string(), ProbeKind::Readiness))
    );
    h.probe_ok("app", ProbeKind::Readiness, t(0));
    assert!(h.status_of("app").ready);
    assert_eq!(h.condition_status("Ready"), "True");
    h.advance_to(t(10));
    h.probe_fail("app", ProbeKind::Readiness, t(10));
    assert!(!h.status_of("app").ready);
    assert_eq!(
        h.events_with_reason("Unhealthy"),
        ["Readiness probe failed: nope"]
    );
    assert!(h.stops().is_empty(), "readiness never kills");

    // With a startup probe, not ready before started even with readiness success.
    let app = with(
        container("app"),
        json!({"startupProbe": exec_probe(10, 3), "readinessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with("Always", vec![], vec![app]);
    h.boot(t(0));
    assert!(!h.status_of("app").ready);
    assert!(
        h.probes_run()
            .iter()
            .all(|(_, _, k)| *k == ProbeKind::Startup)
    );
}

#[test]
fn s13_init_container_ready_iff_exited_0() {
    let mut h = pod_with(
        "Always",
        vec![container("init-a"), container("init-b")],
        vec![container("app")],
    );
    h.boot(t(0));
    assert!(!h.status_of("init-a").ready, "running");
    h.exit("init-a", 0, t(1));
    assert!(h.status_of("init-a").ready);
    h.start_all(t(1));
    h.exit("init-b", 1, t(2));
    assert!(!h.status_of("init-b").ready);
    assert!(h.status_of("init-a").ready);

    // Sidecars follow the regular container rules (started, readiness probe).
    let proxy = with(
        sidecar("proxy"),
        json!({"readinessProbe": exec_probe(10, 1)}),
    );
    let mut h = pod_with(
        "Always",
        vec![sidecar("plain"), proxy],
        vec![container("app")],
    );
    h.boot(t(0));
    assert!(h.status_of("plain").ready, "running, no readiness probe");
    assert_eq!(h.status_of("plain").started, Some(true));
    assert!(!h.status_of("proxy").ready, "readiness has no result yet");
    h.probe_ok("proxy", ProbeKind::Readiness, t(1));
    assert!(h.status_of("proxy").ready);
}

// ---- section 9: conditions at machine level --------------------------------------------------

#[test]
fn d2_pod_ready_to_start_containers_follows_the_sandbox() {
    let mut h = single("Always");
    let c = h.condition("PodReadyToStartContainers").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", None));
    h.sandbox_ready(t(2));
    let c = h.condition("PodReadyToStartContainers").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_deref()), ("True", None));
    assert_eq!(c.last_transition_time.unwrap().0, t(2));
    h.start_all(t(2));
    h.delete(None, t(5));
    h.exit_stopped(143, t(6));
    assert!(h.pod_terminated());
    assert_eq!(h.condition_status("PodReadyToStartContainers"), "False");
}

#[test]
fn d5_readiness_gates_via_conditions_update() {
    let mut h = Harness::from_spec(json!({
        "readinessGates": [{"conditionType": "example.com/lb"}],
        "containers": [container("app")],
    }));
    h.boot(t(0));
    assert_eq!(h.condition_status("ContainersReady"), "True");
    let ready = h.condition("Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("corresponding condition of pod readiness gate \"example.com/lb\" does not exist.")
    );
    h.set_conditions(json!([{"type": "example.com/lb", "status": "False"}]), t(3));
    let ready = h.condition("Ready").unwrap();
    assert_eq!(
        ready.message.as_deref(),
        Some("the status of pod readiness gate \"example.com/lb\" is not \"True\", but False")
    );
    // Kubelet-owned types are ignored in the update.
    h.set_conditions(
        json!([
            {"type": "example.com/lb", "status": "True"},
            {"type": "ContainersReady", "status": "False"},
        ]),
        t(4),
    );
    assert_eq!(h.condition_status("Ready"), "True");
    assert_eq!(h.condition_status("ContainersReady"), "True");
    assert_eq!(h.condition_status("example.com/lb"), "True");
    assert_eq!(
        h.condition("Ready")
            .unwrap()
            .last_transition_time
            .unwrap()
            .0,
        t(4)
    );
}

// ---- section 10: deadline, termination messages, image changes -------------------------------

#[test]
fn m1_active_deadline_counts_init_time_and_fails_the_pod() {
    let mut h = Harness::from_spec(json!({
        "activeDeadlineSeconds": 30,
        "initContainers": [container("init")],
        "containers": [container("app")],
    }));
    h.boot(t(0));
    h.exit("init", 0, t(20));
    h.start_all(t(20));
    assert_eq!(
        h.next_timer(),
        Some(t(30)),
        "measured from startTime, not from the app start"
    );
    h.advance_to(t(29));
    assert!(h.events_with_reason("DeadlineExceeded").is_empty());
    h.advance_to(t(30));
    let ev = h
        .event_list()
        .into_iter()
        .find(|e| e.reason == "DeadlineExceeded")
        .expect("event");
    assert_eq!(ev.type_, EventType::Normal);
    assert_eq!(
        ev.message,
        "Pod was active on the node longer than the specified deadline"
    );
    assert_eq!(ev.container, None);
    assert_eq!(h.phase(), Phase::Failed);
    assert_eq!(h.pod_reason().0.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(killing(&h), ["Stopping container app"]);
    assert_eq!(h.stops(), [("app".to_string(), "SIGTERM".to_string(), 30)]);
    h.exit_stopped(143, t(31));
    assert!(h.pod_terminated());
    assert_eq!(h.starts_of("app").len(), 1, "never restarted");
    assert_eq!(h.phase(), Phase::Failed);
}

#[test]
fn m1_deadline_can_be_set_later_or_shortened() {
    // Shortened from 300 to 120 at t(60): fires at t(120).
    let mut h = Harness::from_spec(json!({
        "activeDeadlineSeconds": 300,
        "containers": [container("app")],
    }));
    h.boot(t(0));
    h.update(t(60), |pod| {
        pod.spec.as_mut().unwrap().active_deadline_seconds = Some(120)
    });
    assert_eq!(h.next_timer(), Some(t(120)));
    h.advance_to(t(119));
    assert_eq!(h.phase(), Phase::Running);
    h.advance_to(t(120));
    assert_eq!(h.phase(), Phase::Failed);
    assert_eq!(h.events_with_reason("DeadlineExceeded").len(), 1);

    // Set on a pod that has run longer already: evicted at once.
    let mut h = single("Always");
    h.boot(t(0));
    h.advance_to(t(100));
    h.update(t(100), |pod| {
        pod.spec.as_mut().unwrap().active_deadline_seconds = Some(50)
    });
    assert_eq!(h.phase(), Phase::Failed);
    assert_eq!(h.pod_reason().0.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(killing(&h), ["Stopping container app"]);
}

#[test]
fn m3_file_message_keeps_the_last_4096_bytes() {
    let mut h = single("Never");
    h.boot(t(0));
    let msg = format!("{}{}", "a".repeat(1000), "b".repeat(4000));
    let exit = ExitStatus {
        exit_code: 1,
        termination_message: Some(msg.clone()),
        ..ExitStatus::default()
    };
    h.exit_with("app", exit, t(1));
    let got = h.terminated("app").unwrap().message.unwrap();
    assert_eq!(got.len(), 4096);
    assert_eq!(got, msg[msg.len() - 4096..]);
    assert!(got.starts_with("aaaa") && got.ends_with("bbbb"));
}

#[test]
fn m4_fallback_to_logs_on_error() {
    let hundred_lines: String = (0..100).map(|i| format!("l{i:03}\n")).collect();
    let eighty_lines: String = (20..100).map(|i| format!("l{i:03}\n")).collect();
    let long_lines: String = (0..10)
        .map(|i| format!("{}\n", char::from(b'a' + i).to_string().repeat(299)))
        .collect();
    let cases: Vec<(&str, i32, Option<&str>, Option<String>)> = vec![
        // Policy, exit code, termination file, expected message.
        ("FallbackToLogsOnError", 1, None, Some(eighty_lines.clone())),
        ("FallbackToLogsOnError", 1, Some(""), Some(eighty_lines)),
        ("FallbackToLogsOnError", 0, None, None),
        (
            "FallbackToLogsOnError",
            1,
            Some("from the file"),
            Some("from the file".to_string()),
        ),
        ("File", 1, None, None),
    ];
    for (policy, code, file, expected) in cases {
        let app = with(
            container("app"),
            json!({"terminationMessagePolicy": policy}),
        );
        let mut h = pod_with("Never", vec![], vec![app]);
        h.boot(t(0));
        let exit = ExitStatus {
            exit_code: code,
            termination_message: file.map(str::to_string),
            log_tail: Some(hundred_lines.clone()),
            ..ExitStatus::default()
        };
        h.exit_with("app", exit, t(1));
        let got = h.terminated("app").unwrap().message;
        assert_eq!(got, expected, "{policy} exit {code} file {file:?}");
    }
    // 2048 bytes at most.
    let app = with(
        container("app"),
        json!({"terminationMessagePolicy": "FallbackToLogsOnError"}),
    );
    let mut h = pod_with("Never", vec![], vec![app]);
    h.boot(t(0));
    let exit = ExitStatus {
        exit_code: 2,
        log_tail: Some(long_lines.clone()),
        ..ExitStatus::default()
    };
    h.exit_with("app", exit, t(1));
    let got = h.terminated("app").unwrap().message.unwrap();
    assert_eq!(got.len(), 2048);
    assert_eq!(got, long_lines[long_lines.len() - 2048..]);
}

#[test]
fn m5_termination_messages_are_capped_per_pod() {
    // 12288 bytes shared by every container (init included), each message keeps its head.
    for (init, regular, limit) in [(0, 2, 4096), (1, 3, 3072), (0, 6, 2048)] {
        let inits: Vec<Value> = (0..init).map(|i| container(&format!("init{i}"))).collect();
        let names: Vec<String> = (0..regular).map(|i| format!("c{i}")).collect();
        let containers: Vec<Value> = names.iter().map(|n| container(n)).collect();
        let mut h = pod_with("Never", inits, containers);
        h.sandbox_ready(t(0));
        let message = format!("H{}T", "x".repeat(4094));
        for i in 0..init {
            let name = format!("init{i}");
            h.start(&name, t(0));
            let exit = ExitStatus {
                exit_code: 0,
                termination_message: Some(message.clone()),
                ..ExitStatus::default()
            };
            h.exit_with(&name, exit, t(1));
        }
        h.start_all(t(1));
        for n in &names {
            let exit = ExitStatus {
                exit_code: 1,
                termination_message: Some(message.clone()),
                ..ExitStatus::default()
            };
            h.exit_with(n, exit, t(2));
        }
        assert!(h.pod_terminated());
        let all: Vec<String> = (0..init)
            .map(|i| format!("init{i}"))
            .chain(names.clone())
            .collect();
        for n in all {
            let got = h.terminated(&n).unwrap().message.unwrap();
            assert_eq!(got.len(), limit, "{n} of {init}+{regular}");
            assert!(got.starts_with('H'), "the head is kept");
        }
    }
}

#[test]
fn m12_image_change_of_a_completed_init_container_does_nothing() {
    let mut h = pod_with("Always", vec![container("init")], vec![container("app")]);
    h.boot(t(0));
    h.exit("init", 0, t(1));
    h.start_all(t(1));
    let mark = h.mark();
    h.set_image("init", "busybox:1.37", t(10));
    h.advance_to(t(100));
    assert!(h.events_since(mark).is_empty());
    assert!(h.pending_starts().is_empty());
    assert!(h.stops().is_empty());
    assert_eq!(
        h.terminated("init").unwrap().reason.as_deref(),
        Some("Completed")
    );
    assert_eq!(h.phase(), Phase::Running);
    // S4: the status shows the image of the instance that ran, not the updated spec
    // (upstream e2e "should not restart init container when updated with a new image after
    // finishing" asserts `Image != updatedImage`).
    assert_eq!(h.status_of("init").image, "busybox");
}

/// S1/S4: `image` is the spec image before any instance exists, then the image of the newest
/// instance: a sidecar shows its new image only once the replacement runs it.
#[test]
fn s4_status_image_is_the_newest_instance_image() {
    let mut h = pod_with("Always", vec![sidecar("proxy")], vec![container("app")]);
    assert_eq!(h.status_of("app").image, "busybox");
    h.boot(t(0));
    h.start_all(t(0));
    h.set_image("proxy", "busybox:1.37", t(10));
    assert_eq!(h.status_of("proxy").image, "busybox");
    h.exit_stopped(143, t(11));
    h.start_all(t(11));
    assert_eq!(h.status_of("proxy").image, "busybox:1.37");
    assert_eq!(h.status_of("app").image, "busybox");
}

/// S15: with 1.35's default gates every container status lists its `volumeMounts` (name,
/// mountPath, readOnly, and for a read-only mount the resolved `recursiveReadOnly`: podvisor's
/// runtime has no recursive read-only mounts, so `Disabled`); once the runtime has the
/// container, `resources` (InPlacePodVerticalScaling: the allocated resources, as nothing is
/// resized) and `allocatedResources` (the requests).
#[test]
fn s15_container_statuses_carry_mounts_and_resources() {
    let mut h = Harness::new(json!({"spec": {
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "conf", "emptyDir": {}}],
        "containers": [
            {"name": "app", "image": "busybox", "command": ["sh"],
             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}},
             "volumeMounts": [
                {"name": "data", "mountPath": "/data"},
                {"name": "conf", "mountPath": "/conf", "readOnly": true, "recursiveReadOnly": "IfPossible"},
             ]},
            {"name": "bare", "image": "busybox", "command": ["sh"]},
        ],
    }}));
    let mounts = |h: &Harness| serde_json::to_value(h.status_of("app").volume_mounts).unwrap();
    let want_mounts = json!([
        {"name": "data", "mountPath": "/data"},
        {"name": "conf", "mountPath": "/conf", "readOnly": true, "recursiveReadOnly": "Disabled"},
    ]);
    // Before any instance: mounts already, no resources.
    assert_eq!(mounts(&h), want_mounts);
    assert_eq!(h.status_of("app").resources, None);
    assert_eq!(h.status_of("bare").volume_mounts, None);
    h.boot(t(0));
    h.start_all(t(0));
    let app = serde_json::to_value(h.status_of("app")).unwrap();
    assert_eq!(app["volumeMounts"], want_mounts);
    assert_eq!(
        app["resources"],
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}})
    );
    assert_eq!(
        app["allocatedResources"],
        json!({"cpu": "100m", "memory": "64Mi"})
    );
    let bare = serde_json::to_value(h.status_of("bare")).unwrap();
    assert_eq!(bare["resources"], json!({}));
    assert_eq!(bare.get("allocatedResources"), None);
}

/// D10: `status.observedGeneration` (and the kubelet's conditions') is the generation of the
/// pod the status was built from, and follows a spec update (or a graceful delete, which the
/// API server counts as one).
#[test]
fn d10_status_observes_the_generation_it_was_built_from() {
    let mut h = Harness::new(json!({
        "metadata": {"generation": 2},
        "spec": {"containers": [container("app")]},
    }));
    h.boot(t(0));
    h.start_all(t(0));
    let observed = |h: &Harness| {
        let status = h.status();
        let conditions: Vec<Option<i64>> = status
            .conditions
            .unwrap_or_default()
            .iter()
            .map(|c| c.observed_generation)
            .collect();
        (status.observed_generation, conditions)
    };
    assert_eq!(observed(&h), (Some(2), vec![Some(2); 5]));
    h.update(t(5), |pod| pod.metadata.generation = Some(3));
    assert_eq!(observed(&h), (Some(3), vec![Some(3); 5]));
}

#[test]
fn m12_image_change_reactions_by_container_kind() {
    // (container changed, expected Killing messages, restarted containers)
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "app",
            &["Container app definition changed, will be restarted"],
            &["app"],
        ),
        (
            "proxy",
            &["Init container proxy definition changed"],
            &["proxy"],
        ),
        ("init", &[], &[]),
    ];
    for (name, kills, restarted) in cases {
        let mut h = pod_with(
            "Always",
            vec![container("init"), sidecar("proxy")],
            vec![container("app")],
        );
        h.boot(t(0));
        h.exit("init", 0, t(1));
        h.start_all(t(1));
        assert_eq!(h.start_order(), ["init", "proxy", "app"]);
        let mark = h.mark();
        h.set_image(name, "busybox:1.37", t(10));
        h.exit_stopped(143, t(11));
        h.start_all(t(11));
        let started: Vec<String> = h
            .actions_since(mark)
            .iter()
            .filter_map(|a| match a {
                Action::StartContainer { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(killing(&h), kills, "{name}");
        assert_eq!(started, restarted, "{name}");
        assert_eq!(h.phase(), Phase::Running, "{name}");
    }
}
