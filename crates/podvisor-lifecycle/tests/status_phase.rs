//! Rule tests for `getPhase` (kubelet-lifecycle.md section 1: P1-P10, P15 and the examples).

use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec};
use podvisor_lifecycle::Phase;
use podvisor_lifecycle::status::phase::{PhaseInput, get_phase, has_any_regular_container_started};
use serde_json::{Value, json};

// ---- builders ---------------------------------------------------------------------------------

/// A spec with the given restart policy, init containers (`"+name"` marks a sidecar) and
/// containers.
fn spec(policy: &str, init: &[&str], containers: &[&str]) -> PodSpec {
    let init: Vec<Value> = init
        .iter()
        .map(|n| match n.strip_prefix('+') {
            Some(n) => json!({"name": n, "image": "busybox", "restartPolicy": "Always"}),
            None => json!({"name": n, "image": "busybox"}),
        })
        .collect();
    let containers: Vec<Value> = containers
        .iter()
        .map(|n| json!({"name": n, "image": "busybox"}))
        .collect();
    serde_json::from_value(json!({
        "restartPolicy": policy,
        "initContainers": init,
        "containers": containers,
    }))
    .unwrap()
}

fn cs(v: Value) -> ContainerStatus {
    serde_json::from_value(v).unwrap()
}
fn running(name: &str) -> ContainerStatus {
    cs(json!({"name": name, "state": {"running": {}}, "started": true}))
}
fn running_unstarted(name: &str) -> ContainerStatus {
    cs(json!({"name": name, "state": {"running": {}}, "started": false}))
}
fn terminated(name: &str, code: i32) -> ContainerStatus {
    cs(json!({"name": name, "state": {"terminated": {"exitCode": code}}}))
}
fn waiting(name: &str, reason: &str) -> ContainerStatus {
    cs(json!({"name": name, "state": {"waiting": {"reason": reason}}}))
}
/// Waiting for a restart after an instance exited with `code`.
fn waiting_after(name: &str, reason: &str, code: i32) -> ContainerStatus {
    cs(
        json!({"name": name, "state": {"waiting": {"reason": reason}},
              "lastState": {"terminated": {"exitCode": code}}}),
    )
}
fn no_state(name: &str) -> ContainerStatus {
    cs(json!({"name": name}))
}

#[derive(Clone, Copy, Default)]
struct Flags {
    terminal: bool,
    initialized: bool,
    is_static: bool,
}

const PLAIN: Flags = Flags {
    terminal: false,
    initialized: false,
    is_static: false,
};
const INITIALIZED: Flags = Flags {
    terminal: false,
    initialized: true,
    is_static: false,
};
const TERMINAL: Flags = Flags {
    terminal: true,
    initialized: true,
    is_static: false,
};

fn phase(
    spec: &PodSpec,
    init: &[ContainerStatus],
    regular: &[ContainerStatus],
    flags: Flags,
) -> Phase {
    get_phase(&PhaseInput {
        spec,
        init_statuses: init,
        statuses: regular,
        pod_is_terminal: flags.terminal,
        pod_has_initialized: flags.initialized,
        is_static: flags.is_static,
    })
}

struct Case {
    name: &'static str,
    spec: PodSpec,
    init: Vec<ContainerStatus>,
    regular: Vec<ContainerStatus>,
    flags: Flags,
    want: Phase,
}

fn check(cases: Vec<Case>) {
    for c in cases {
        let got = phase(&c.spec, &c.init, &c.regular, c.flags);
        assert_eq!(got, c.want, "case {:?}", c.name);
    }
}

// ---- P1-P3: counting --------------------------------------------------------------------------

#[test]
fn p1_regular_init_container_counting() {
    let never = spec("Never", &["init"], &["app"]);
    let always = spec("Always", &["init"], &["app"]);
    check(vec![
        Case {
            name: "no status -> pending",
            spec: always.clone(),
            init: vec![],
            regular: vec![running("app")],
            flags: PLAIN,
            want: Phase::Pending,
        },
        Case {
            name: "running -> pending",
            spec: always.clone(),
            init: vec![running("init")],
            regular: vec![waiting("app", "PodInitializing")],
            flags: PLAIN,
            want: Phase::Pending,
        },
        Case {
            name: "running init stays pending even if a regular container runs",
            spec: always.clone(),
            init: vec![running("init")],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
        Case {
            name: "terminated 0 -> nothing",
            spec: always.clone(),
            init: vec![terminated("init", 0)],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "terminated non-zero -> failed-init",
            spec: never.clone(),
            init: vec![terminated("init", 2)],
            regular: vec![waiting("app", "PodInitializing")],
            flags: PLAIN,
            want: Phase::Failed,
        },
        Case {
            name: "waiting after non-zero exit -> failed-init",
            spec: never.clone(),
            init: vec![waiting_after("init", "CrashLoopBackOff", 1)],
            regular: vec![waiting("app", "PodInitializing")],
            flags: PLAIN,
            want: Phase::Failed,
        },
        Case {
            name: "waiting after exit 0 -> nothing",
            spec: always.clone(),
            init: vec![waiting_after("init", "", 0)],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "waiting without lastState -> pending",
            spec: always.clone(),
            init: vec![waiting("init", "PodInitializing")],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
        Case {
            name: "no state -> pending",
            spec: always.clone(),
            init: vec![no_state("init")],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
    ]);
}

#[test]
fn p2_sidecar_counting() {
    let always = spec("Always", &["+side"], &["app"]);
    let never = spec("Never", &["+side"], &["app"]);
    check(vec![
        Case {
            name: "no status -> unknown",
            spec: always.clone(),
            init: vec![],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
        Case {
            name: "running and started -> running",
            spec: always.clone(),
            init: vec![running("side")],
            regular: vec![waiting("app", "PodInitializing")],
            flags: PLAIN,
            want: Phase::Pending, // app is waiting (P6), the sidecar itself is fine
        },
        Case {
            name: "running and started, app exited 0 under Never: sidecar keeps it Running",
            spec: never.clone(),
            init: vec![running("side")],
            regular: vec![terminated("app", 0)],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "running but not started -> pending before initialization",
            spec: always.clone(),
            init: vec![running_unstarted("side")],
            regular: vec![],
            flags: PLAIN,
            want: Phase::Pending,
        },
        Case {
            name: "terminated sidecar is ignored",
            spec: never.clone(),
            init: vec![terminated("side", 137)],
            regular: vec![terminated("app", 0)],
            flags: INITIALIZED,
            want: Phase::Succeeded,
        },
        Case {
            name: "waiting after an exit is ignored",
            spec: always.clone(),
            init: vec![waiting_after("side", "CrashLoopBackOff", 1)],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "waiting without lastState -> waiting (Pending even when initialized)",
            spec: always.clone(),
            init: vec![waiting("side", "ImagePullBackOff")],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
        Case {
            name: "no state -> unknown",
            spec: always.clone(),
            init: vec![no_state("side")],
            regular: vec![running("app")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
    ]);
}

#[test]
fn p3_regular_container_counting() {
    let never = spec("Never", &[], &["a", "b"]);
    check(vec![
        Case {
            name: "no status -> unknown",
            spec: never.clone(),
            init: vec![],
            regular: vec![running("a")],
            flags: PLAIN,
            want: Phase::Pending,
        },
        Case {
            name: "terminated 0 -> stopped and succeeded",
            spec: never.clone(),
            init: vec![],
            regular: vec![terminated("a", 0), terminated("b", 0)],
            flags: PLAIN,
            want: Phase::Succeeded,
        },
        Case {
            name: "waiting after exit 0 -> stopped but not succeeded",
            spec: never.clone(),
            init: vec![],
            regular: vec![terminated("a", 0), waiting_after("b", "", 0)],
            flags: PLAIN,
            want: Phase::Failed,
        },
        Case {
            name: "waiting without lastState -> waiting",
            spec: never.clone(),
            init: vec![],
            regular: vec![terminated("a", 0), waiting("b", "ContainerCreating")],
            flags: PLAIN,
            want: Phase::Pending,
        },
        Case {
            name: "no state -> unknown",
            spec: never.clone(),
            init: vec![],
            regular: vec![terminated("a", 0), no_state("b")],
            flags: PLAIN,
            want: Phase::Pending,
        },
    ]);
}

// ---- P4-P10: decision -------------------------------------------------------------------------

#[test]
fn p4_failed_init_fails_pod_only_when_not_restartable() {
    let pending_app = vec![waiting("app", "PodInitializing")];
    for (policy, want) in [
        ("Never", Phase::Failed),
        ("OnFailure", Phase::Pending),
        ("Always", Phase::Pending),
    ] {
        let s = spec(policy, &["init"], &["app"]);
        assert_eq!(
            phase(&s, &[terminated("init", 1)], &pending_app, PLAIN),
            want,
            "policy {policy}"
        );
    }
    // A16: a container-level `restartPolicy: Never` makes that init container not restartable.
    let s: PodSpec = serde_json::from_value(json!({
        "restartPolicy": "Always",
        "initContainers": [{"name": "init", "image": "x", "restartPolicy": "Never"}],
        "containers": [{"name": "app", "image": "x"}],
    }))
    .unwrap();
    assert_eq!(
        phase(&s, &[terminated("init", 1)], &pending_app, PLAIN),
        Phase::Failed
    );
    // ... unless a rule says Restart for that exit code.
    let s: PodSpec = serde_json::from_value(json!({
        "restartPolicy": "Never",
        "initContainers": [{"name": "init", "image": "x", "restartPolicy": "Never",
            "restartPolicyRules": [{"action": "Restart",
                                    "exitCodes": {"operator": "In", "values": [42]}}]}],
        "containers": [{"name": "app", "image": "x"}],
    }))
    .unwrap();
    assert_eq!(
        phase(&s, &[terminated("init", 42)], &pending_app, PLAIN),
        Phase::Pending
    );
    assert_eq!(
        phase(&s, &[terminated("init", 1)], &pending_app, PLAIN),
        Phase::Failed
    );
}

#[test]
fn p5_pending_init_and_sidecars_1_32() {
    let s = spec("Always", &["init", "+side"], &["app"]);
    // A restarting (not yet started) sidecar does not put an initialized pod back to Pending.
    assert_eq!(
        phase(
            &s,
            &[terminated("init", 0), running_unstarted("side")],
            &[running("app")],
            INITIALIZED
        ),
        Phase::Running
    );
    // The same statuses before initialization: Pending.
    assert_eq!(
        phase(
            &s,
            &[terminated("init", 0), running_unstarted("side")],
            &[waiting("app", "PodInitializing")],
            PLAIN
        ),
        Phase::Pending
    );
    // A sandbox was recreated: regular init containers re-run, so Pending again even though
    // the API still shows main containers that ran.
    assert_eq!(
        phase(
            &s,
            &[running("init"), waiting("side", "PodInitializing")],
            &[waiting_after("app", "PodInitializing", 0)],
            INITIALIZED
        ),
        Phase::Pending
    );
}

#[test]
fn p6_never_started_container_keeps_pod_pending() {
    let s = spec("Always", &[], &["a", "b"]);
    assert_eq!(
        phase(
            &s,
            &[],
            &[running("a"), waiting("b", "ImagePullBackOff")],
            INITIALIZED
        ),
        Phase::Pending
    );
}

#[test]
fn p7_running_when_something_runs_and_nothing_unknown() {
    let s = spec("Never", &[], &["a", "b"]);
    assert_eq!(
        phase(&s, &[], &[running("a"), terminated("b", 1)], INITIALIZED),
        Phase::Running
    );
    assert_eq!(
        phase(&s, &[], &[running("a"), running("b")], INITIALIZED),
        Phase::Running
    );
}

#[test]
fn p8a_terminal_pod_ignores_restart_policy() {
    for policy in ["Always", "OnFailure", "Never"] {
        let s = spec(policy, &[], &["a", "b"]);
        assert_eq!(
            phase(&s, &[], &[terminated("a", 0), terminated("b", 0)], TERMINAL),
            Phase::Succeeded,
            "{policy}"
        );
        assert_eq!(
            phase(
                &s,
                &[],
                &[terminated("a", 0), terminated("b", 143)],
                TERMINAL
            ),
            Phase::Failed,
            "{policy}"
        );
    }
}

#[test]
fn p8b_always_with_every_container_exited_is_running() {
    let s = spec("Always", &[], &["a", "b"]);
    assert_eq!(
        phase(
            &s,
            &[],
            &[terminated("a", 0), terminated("b", 0)],
            INITIALIZED
        ),
        Phase::Running
    );
    assert_eq!(
        phase(
            &s,
            &[],
            &[
                waiting_after("a", "CrashLoopBackOff", 1),
                terminated("b", 0)
            ],
            INITIALIZED
        ),
        Phase::Running
    );
    // Restart policy unset means Always.
    let unset: PodSpec =
        serde_json::from_value(json!({"containers": [{"name": "a", "image": "x"}]})).unwrap();
    assert_eq!(
        phase(&unset, &[], &[terminated("a", 0)], INITIALIZED),
        Phase::Running
    );
}

#[test]
fn p8c_all_succeeded_is_succeeded() {
    for policy in ["OnFailure", "Never"] {
        let s = spec(policy, &[], &["a", "b"]);
        assert_eq!(
            phase(
                &s,
                &[],
                &[terminated("a", 0), terminated("b", 0)],
                INITIALIZED
            ),
            Phase::Succeeded,
            "{policy}"
        );
    }
}

#[test]
fn p8d_never_with_a_failure_is_failed() {
    let s = spec("Never", &[], &["a", "b"]);
    assert_eq!(
        phase(
            &s,
            &[],
            &[terminated("a", 0), terminated("b", 1)],
            INITIALIZED
        ),
        Phase::Failed
    );
}

#[test]
fn p8e_on_failure_with_a_failure_is_running() {
    let s = spec("OnFailure", &[], &["a", "b"]);
    assert_eq!(
        phase(
            &s,
            &[],
            &[terminated("a", 0), terminated("b", 1)],
            INITIALIZED
        ),
        Phase::Running
    );
    assert_eq!(
        phase(
            &s,
            &[],
            &[
                terminated("a", 0),
                waiting_after("b", "CrashLoopBackOff", 1)
            ],
            INITIALIZED
        ),
        Phase::Running
    );
}

#[test]
fn p9_anything_else_is_pending() {
    let s = spec("Never", &[], &["a", "b"]);
    // Something unknown next to a stopped container.
    assert_eq!(
        phase(&s, &[], &[terminated("a", 0)], INITIALIZED),
        Phase::Pending
    );
    // Nothing known at all.
    assert_eq!(phase(&s, &[], &[], PLAIN), Phase::Pending);
}

#[test]
fn p10_never_unknown() {
    // `Phase` has no Unknown variant; check that every combination of states yields one of
    // the four phases and that "all unknown" maps to Pending rather than anything else.
    let makers: [fn(&str) -> ContainerStatus; 6] = [
        running,
        running_unstarted,
        |n| terminated(n, 0),
        |n| terminated(n, 1),
        |n| waiting(n, "ContainerCreating"),
        no_state,
    ];
    let s = spec("OnFailure", &["init", "+side"], &["app"]);
    for mi in &makers {
        for ms in &makers {
            for ma in &makers {
                for flags in [PLAIN, INITIALIZED, TERMINAL] {
                    let p = phase(&s, &[mi("init"), ms("side")], &[ma("app")], flags);
                    assert!(Phase::parse(p.as_str()).is_some());
                }
            }
        }
    }
    assert_eq!(phase(&s, &[], &[], PLAIN), Phase::Pending);
}

#[test]
fn p15_static_pods_skip_the_terminal_path() {
    let s = spec("Always", &[], &["a"]);
    let static_terminal = Flags {
        is_static: true,
        ..TERMINAL
    };
    assert_eq!(
        phase(&s, &[], &[terminated("a", 0)], static_terminal),
        Phase::Running
    );
    assert_eq!(
        phase(&s, &[], &[terminated("a", 0)], TERMINAL),
        Phase::Succeeded
    );
    let never = spec("Never", &[], &["a"]);
    assert_eq!(
        phase(&never, &[], &[terminated("a", 1)], static_terminal),
        Phase::Failed
    );
}

// ---- examples at the end of section 1 ---------------------------------------------------------

#[test]
fn section1_examples() {
    let one = |policy| spec(policy, &[], &["c1"]);
    let two = |policy| spec(policy, &[], &["c1", "c2"]);
    let init = |policy| spec(policy, &["init"], &["c1"]);
    check(vec![
        Case {
            name: "Always, one container exited 0 -> Running",
            spec: one("Always"),
            init: vec![],
            regular: vec![terminated("c1", 0)],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "OnFailure, exited 0 -> Succeeded",
            spec: one("OnFailure"),
            init: vec![],
            regular: vec![terminated("c1", 0)],
            flags: INITIALIZED,
            want: Phase::Succeeded,
        },
        Case {
            name: "OnFailure, exited 1 and waiting for restart -> Running",
            spec: one("OnFailure"),
            init: vec![],
            regular: vec![waiting_after("c1", "CrashLoopBackOff", 1)],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "Never, exited 1 -> Failed",
            spec: one("Never"),
            init: vec![],
            regular: vec![terminated("c1", 1)],
            flags: INITIALIZED,
            want: Phase::Failed,
        },
        Case {
            name: "Never, c1 running + c2 exited 1 -> Running",
            spec: two("Never"),
            init: vec![],
            regular: vec![running("c1"), terminated("c2", 1)],
            flags: INITIALIZED,
            want: Phase::Running,
        },
        Case {
            name: "... then Failed when c1 ends",
            spec: two("Never"),
            init: vec![],
            regular: vec![terminated("c1", 0), terminated("c2", 1)],
            flags: INITIALIZED,
            want: Phase::Failed,
        },
        Case {
            name: "Never, init exited 1 -> Failed immediately",
            spec: init("Never"),
            init: vec![terminated("init", 1)],
            regular: vec![waiting("c1", "PodInitializing")],
            flags: PLAIN,
            want: Phase::Failed,
        },
        Case {
            name: "Always, init exited 1 (backing off) -> Pending",
            spec: init("Always"),
            init: vec![waiting_after("init", "CrashLoopBackOff", 1)],
            regular: vec![waiting("c1", "PodInitializing")],
            flags: PLAIN,
            want: Phase::Pending,
        },
        Case {
            name: "c1 running + c2 in ImagePullBackOff -> Pending",
            spec: two("Always"),
            init: vec![],
            regular: vec![running("c1"), waiting("c2", "ImagePullBackOff")],
            flags: INITIALIZED,
            want: Phase::Pending,
        },
    ]);
}

#[test]
fn has_any_regular_container_started_ignores_init_statuses() {
    let s = spec("Always", &["init"], &["app"]);
    assert!(!has_any_regular_container_started(&s, &[]));
    assert!(!has_any_regular_container_started(
        &s,
        &[terminated("init", 0), waiting("app", "PodInitializing")]
    ));
    assert!(has_any_regular_container_started(
        &s,
        &[terminated("init", 0), terminated("app", 1)]
    ));
    assert!(has_any_regular_container_started(&s, &[running("app")]));
}
