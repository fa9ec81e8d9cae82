//! Rule tests for pod conditions (kubelet-lifecycle.md section 9: D1-D7, D9).

use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use podvisor_lifecycle::Phase;
use podvisor_lifecycle::status::conditions::{ConditionInput, generate_conditions};
use serde_json::{Value, json};

// ---- builders ---------------------------------------------------------------------------------

/// `"+name"` marks a sidecar; `gates` are readiness-gate condition types.
fn spec(init: &[&str], containers: &[&str], gates: &[&str]) -> PodSpec {
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
    let gates: Vec<Value> = gates.iter().map(|g| json!({"conditionType": g})).collect();
    serde_json::from_value(json!({
        "initContainers": init,
        "containers": containers,
        "readinessGates": gates,
    }))
    .unwrap()
}

fn cs(v: Value) -> ContainerStatus {
    serde_json::from_value(v).unwrap()
}
fn running(name: &str, started: bool, ready: bool) -> ContainerStatus {
    cs(json!({"name": name, "state": {"running": {}}, "started": started, "ready": ready}))
}
fn terminated(name: &str, code: i32) -> ContainerStatus {
    // Regular init containers are ready iff they exited 0 (S13).
    cs(json!({"name": name, "state": {"terminated": {"exitCode": code}}, "ready": code == 0}))
}
/// A regular container or sidecar that exited: never ready.
fn exited(name: &str, code: i32) -> ContainerStatus {
    cs(json!({"name": name, "state": {"terminated": {"exitCode": code}}, "ready": false}))
}
fn waiting(name: &str, reason: &str) -> ContainerStatus {
    cs(json!({"name": name, "state": {"waiting": {"reason": reason}}}))
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}
fn now() -> Timestamp {
    ts("2025-01-01T00:10:00Z")
}
fn earlier() -> Timestamp {
    ts("2025-01-01T00:00:00Z")
}

fn prev(type_: &str, status: &str, reason: Option<&str>, at: Timestamp) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.map(str::to_owned),
        last_transition_time: Some(Time(at)),
        ..Default::default()
    }
}

struct In<'a> {
    spec: &'a PodSpec,
    phase: Phase,
    init: &'a [ContainerStatus],
    regular: &'a [ContainerStatus],
    sandbox_ready: bool,
    previous: &'a [PodCondition],
}

fn generate(i: In) -> Vec<PodCondition> {
    generate_conditions(&ConditionInput {
        spec: i.spec,
        phase: i.phase,
        init_statuses: i.init,
        statuses: i.regular,
        sandbox_ready: i.sandbox_ready,
        previous: i.previous,
        now: now(),
        generation: None,
    })
}

/// `(status, reason, message)` of the condition of that type; panics if absent.
fn csm(conds: &[PodCondition], type_: &str) -> (String, String, String) {
    let c = conds
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {conds:?}"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

fn t(status: &str, reason: &str, message: &str) -> (String, String, String) {
    (status.to_owned(), reason.to_owned(), message.to_owned())
}

fn types(conds: &[PodCondition]) -> Vec<&str> {
    conds.iter().map(|c| c.type_.as_str()).collect()
}

fn running_pod<'a>(s: &'a PodSpec, regular: &'a [ContainerStatus]) -> In<'a> {
    In {
        spec: s,
        phase: Phase::Running,
        init: &[],
        regular,
        sandbox_ready: true,
        previous: &[],
    }
}

// ---- D1 ---------------------------------------------------------------------------------------

#[test]
fn d1_kubelet_conditions_in_order_and_pod_scheduled_true() {
    let s = spec(&[], &["app"], &[]);
    let regular = [running("app", true, true)];
    let conds = generate(running_pod(&s, &regular));
    assert_eq!(
        types(&conds),
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    assert_eq!(csm(&conds, "PodScheduled"), t("True", "", ""));
    for c in &conds {
        assert_eq!(c.status, "True", "{}", c.type_);
    }
}

#[test]
fn d1_preserves_foreign_conditions_and_disruption_target() {
    let s = spec(&[], &["app"], &["example.com/lb"]);
    let regular = [running("app", true, true)];
    let gate = prev("example.com/lb", "True", None, earlier());
    let disruption = prev(
        "DisruptionTarget",
        "True",
        Some("TerminationByKubelet"),
        earlier(),
    );
    let previous = [
        prev("PodScheduled", "True", None, earlier()),
        gate.clone(),
        prev("Ready", "False", Some("ContainersNotReady"), earlier()),
        disruption.clone(),
        prev("Initialized", "True", None, earlier()),
    ];
    let conds = generate(In {
        previous: &previous,
        ..running_pod(&s, &regular)
    });
    // Upstream order: preserved conditions first (their previous order), then the
    // kubelet-owned ones in D1 order; old kubelet-owned entries are replaced, not duplicated.
    assert_eq!(
        types(&conds),
        [
            "example.com/lb",
            "DisruptionTarget",
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    assert_eq!(conds[0], gate);
    assert_eq!(conds[1], disruption);
}

// ---- D2 ---------------------------------------------------------------------------------------

#[test]
fn d2_pod_ready_to_start_containers_follows_sandbox() {
    let s = spec(&[], &["app"], &[]);
    let regular = [waiting("app", "ContainerCreating")];
    for (sandbox_ready, want) in [(true, "True"), (false, "False")] {
        let conds = generate(In {
            sandbox_ready,
            phase: Phase::Pending,
            ..running_pod(&s, &regular)
        });
        assert_eq!(csm(&conds, "PodReadyToStartContainers"), t(want, "", ""));
    }
}

// ---- D3 ---------------------------------------------------------------------------------------

#[test]
fn d3_initialized() {
    let s = spec(&["a", "+side", "b"], &["app"], &[]);
    let pi = || waiting("app", "PodInitializing");
    struct Case {
        name: &'static str,
        phase: Phase,
        init: Vec<ContainerStatus>,
        regular: Vec<ContainerStatus>,
        want: (String, String, String),
    }
    let cases = vec![
        Case {
            name: "no statuses at all",
            phase: Phase::Pending,
            init: vec![],
            regular: vec![],
            want: t("False", "UnknownContainerStatuses", ""),
        },
        Case {
            name: "first init running, rest unknown",
            phase: Phase::Pending,
            init: vec![running("a", false, false)],
            regular: vec![pi()],
            want: t(
                "False",
                "ContainersNotInitialized",
                "containers with unknown status: [side b], containers with incomplete status: [a]",
            ),
        },
        Case {
            name: "sidecar running but not started is incomplete",
            phase: Phase::Pending,
            init: vec![
                terminated("a", 0),
                running("side", false, false),
                waiting("b", "PodInitializing"),
            ],
            regular: vec![pi()],
            want: t(
                "False",
                "ContainersNotInitialized",
                "containers with incomplete status: [side b]",
            ),
        },
        Case {
            name: "started sidecar counts even when not ready",
            phase: Phase::Pending,
            init: vec![
                terminated("a", 0),
                running("side", true, false),
                terminated("b", 0),
            ],
            regular: vec![pi()],
            want: t("True", "", ""),
        },
        Case {
            name: "failed regular init container is incomplete",
            phase: Phase::Pending,
            init: vec![terminated("a", 1)],
            regular: vec![pi()],
            want: t(
                "False",
                "ContainersNotInitialized",
                "containers with unknown status: [side b], containers with incomplete status: [a]",
            ),
        },
        Case {
            name: "once a regular container ran, a restarting sidecar does not matter",
            phase: Phase::Running,
            init: vec![
                terminated("a", 0),
                waiting("side", "CrashLoopBackOff"),
                terminated("b", 0),
            ],
            regular: vec![running("app", true, true)],
            want: t("True", "", ""),
        },
        Case {
            name: "regular container terminated counts as started",
            phase: Phase::Running,
            init: vec![running("a", false, false)],
            regular: vec![exited("app", 1)],
            want: t("True", "", ""),
        },
        Case {
            name: "Succeeded with every init status known -> PodCompleted",
            phase: Phase::Succeeded,
            init: vec![terminated("a", 0), exited("side", 143), terminated("b", 0)],
            regular: vec![exited("app", 0)],
            want: t("True", "PodCompleted", ""),
        },
        Case {
            name: "Succeeded with an unknown init status falls through",
            phase: Phase::Succeeded,
            init: vec![terminated("a", 0), terminated("b", 0)],
            regular: vec![exited("app", 0)],
            want: t("True", "", ""),
        },
    ];
    for c in cases {
        let conds = generate(In {
            spec: &s,
            phase: c.phase,
            init: &c.init,
            regular: &c.regular,
            sandbox_ready: true,
            previous: &[],
        });
        assert_eq!(csm(&conds, "Initialized"), c.want, "case {:?}", c.name);
    }
}

#[test]
fn d3_pod_without_init_containers_is_initialized_from_the_start() {
    let s = spec(&[], &["app"], &[]);
    for regular in [vec![], vec![waiting("app", "ContainerCreating")]] {
        let conds = generate(In {
            phase: Phase::Pending,
            sandbox_ready: false,
            ..running_pod(&s, &regular)
        });
        assert_eq!(csm(&conds, "Initialized"), t("True", "", ""));
    }
}

// ---- D4 ---------------------------------------------------------------------------------------

#[test]
fn d4_containers_ready() {
    let s = spec(&["init", "+side"], &["a", "b"], &[]);
    struct Case {
        name: &'static str,
        phase: Phase,
        init: Vec<ContainerStatus>,
        regular: Vec<ContainerStatus>,
        want: (String, String, String),
    }
    let cases = vec![
        Case {
            name: "no statuses",
            phase: Phase::Pending,
            init: vec![],
            regular: vec![],
            want: t("False", "UnknownContainerStatuses", ""),
        },
        Case {
            name: "unknown and unready, sidecars listed first",
            phase: Phase::Running,
            init: vec![terminated("init", 0), running("side", true, false)],
            regular: vec![running("b", true, false)],
            want: t(
                "False",
                "ContainersNotReady",
                "containers with unknown status: [a], containers with unready status: [side b]",
            ),
        },
        Case {
            name: "regular init containers are not considered",
            phase: Phase::Running,
            init: vec![terminated("init", 1), running("side", true, true)],
            regular: vec![running("a", true, true), running("b", true, true)],
            want: t("True", "", ""),
        },
        Case {
            name: "unready only",
            phase: Phase::Running,
            init: vec![terminated("init", 0), running("side", true, true)],
            regular: vec![running("a", true, false), running("b", true, false)],
            want: t(
                "False",
                "ContainersNotReady",
                "containers with unready status: [a b]",
            ),
        },
        Case {
            name: "Succeeded",
            phase: Phase::Succeeded,
            init: vec![terminated("init", 0), exited("side", 143)],
            regular: vec![exited("a", 0), exited("b", 0)],
            want: t("False", "PodCompleted", ""),
        },
        Case {
            name: "Succeeded with an unknown container is not PodCompleted",
            phase: Phase::Succeeded,
            init: vec![terminated("init", 0)],
            regular: vec![exited("a", 0), exited("b", 0)],
            want: t(
                "False",
                "ContainersNotReady",
                "containers with unknown status: [side], containers with unready status: [a b]",
            ),
        },
        Case {
            name: "Failed, even with an unknown container",
            phase: Phase::Failed,
            init: vec![terminated("init", 0)],
            regular: vec![terminated("a", 1)],
            want: t("False", "PodFailed", ""),
        },
    ];
    for c in cases {
        let conds = generate(In {
            spec: &s,
            phase: c.phase,
            init: &c.init,
            regular: &c.regular,
            sandbox_ready: true,
            previous: &[],
        });
        assert_eq!(csm(&conds, "ContainersReady"), c.want, "case {:?}", c.name);
    }
}

// ---- D5 / D9 ----------------------------------------------------------------------------------

#[test]
fn d5_ready_copies_containers_ready_when_not_true() {
    let s = spec(&[], &["a", "b"], &["example.com/gate"]);
    let regular = [running("a", true, false), running("b", true, true)];
    let conds = generate(running_pod(&s, &regular));
    let want = t(
        "False",
        "ContainersNotReady",
        "containers with unready status: [a]",
    );
    assert_eq!(csm(&conds, "ContainersReady"), want);
    // The readiness gate is not even looked at.
    assert_eq!(csm(&conds, "Ready"), want);
}

#[test]
fn d5_readiness_gates() {
    let s = spec(&[], &["app"], &["example.com/one", "example.com/two"]);
    let regular = [running("app", true, true)];
    let cases = [
        (
            vec![],
            t(
                "False",
                "ReadinessGatesNotReady",
                "corresponding condition of pod readiness gate \"example.com/one\" does not exist., \
                 corresponding condition of pod readiness gate \"example.com/two\" does not exist.",
            ),
        ),
        (
            vec![
                prev("example.com/one", "False", None, earlier()),
                prev("example.com/two", "True", None, earlier()),
            ],
            t(
                "False",
                "ReadinessGatesNotReady",
                "the status of pod readiness gate \"example.com/one\" is not \"True\", but False",
            ),
        ),
        (
            vec![
                prev("example.com/two", "Unknown", None, earlier()),
                prev("example.com/one", "True", None, earlier()),
            ],
            t(
                "False",
                "ReadinessGatesNotReady",
                "the status of pod readiness gate \"example.com/two\" is not \"True\", but Unknown",
            ),
        ),
        (
            vec![
                prev("example.com/one", "True", None, earlier()),
                prev("example.com/two", "True", None, earlier()),
            ],
            t("True", "", ""),
        ),
    ];
    for (previous, want) in cases {
        let conds = generate(In {
            previous: &previous,
            ..running_pod(&s, &regular)
        });
        assert_eq!(csm(&conds, "ContainersReady"), t("True", "", ""));
        assert_eq!(csm(&conds, "Ready"), want, "previous {previous:?}");
    }
}

#[test]
fn d9_kubelet_never_creates_readiness_gate_conditions() {
    let s = spec(&[], &["app"], &["example.com/gate"]);
    let regular = [running("app", true, true)];
    let conds = generate(running_pod(&s, &regular));
    assert!(!conds.iter().any(|c| c.type_ == "example.com/gate"));
    // ... and leaves an existing one exactly as the other component wrote it.
    let mut gate = prev("example.com/gate", "False", Some("Waiting"), earlier());
    gate.message = Some("registering".to_owned());
    gate.last_probe_time = Some(Time(earlier()));
    let previous = [gate.clone()];
    let conds = generate(In {
        previous: &previous,
        ..running_pod(&s, &regular)
    });
    assert_eq!(conds[0], gate);
    assert_eq!(conds.iter().filter(|c| c.type_ == gate.type_).count(), 1);
}

// ---- D6 ---------------------------------------------------------------------------------------

#[test]
fn d6_terminal_phase_forces_ready_false() {
    let s = spec(&[], &["app"], &[]);
    // Containers still report ready while the terminal phase is written.
    let regular = [running("app", true, true)];
    let previous = [
        prev("Ready", "True", None, earlier()),
        prev("ContainersReady", "True", None, earlier()),
    ];
    for (phase, reason) in [
        (Phase::Succeeded, "PodCompleted"),
        (Phase::Failed, "PodFailed"),
    ] {
        let conds = generate(In {
            phase,
            previous: &previous,
            ..running_pod(&s, &regular)
        });
        for type_ in ["Ready", "ContainersReady"] {
            assert_eq!(
                csm(&conds, type_),
                t("False", reason, ""),
                "{phase} {type_}"
            );
            let c = conds.iter().find(|c| c.type_ == type_).unwrap();
            assert_eq!(c.last_transition_time, Some(Time(now())));
        }
    }
}

// ---- D7 ---------------------------------------------------------------------------------------

#[test]
fn d7_last_transition_time() {
    let s = spec(&[], &["a", "b"], &[]);
    // Previous: not ready because of a; now not ready because of b (reason/message change only).
    let previous = [
        prev("PodReadyToStartContainers", "True", None, earlier()),
        prev("Initialized", "True", None, earlier()),
        PodCondition {
            message: Some("containers with unready status: [a]".to_owned()),
            ..prev("Ready", "False", Some("ContainersNotReady"), earlier())
        },
        prev(
            "ContainersReady",
            "False",
            Some("ContainersNotReady"),
            earlier(),
        ),
        prev("PodScheduled", "True", None, earlier()),
    ];
    let regular = [running("a", true, true), running("b", true, false)];
    let conds = generate(In {
        previous: &previous,
        ..running_pod(&s, &regular)
    });
    for c in &conds {
        assert_eq!(
            c.last_transition_time,
            Some(Time(earlier())),
            "{} kept",
            c.type_
        );
        assert_eq!(c.last_probe_time, None);
    }
    assert_eq!(
        csm(&conds, "Ready").2,
        "containers with unready status: [b]"
    );

    // A flip of status moves the time to now; unchanged ones keep theirs.
    let regular = [running("a", true, true), running("b", true, true)];
    let conds = generate(In {
        previous: &previous,
        ..running_pod(&s, &regular)
    });
    let ltt = |type_: &str| {
        conds
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
            .last_transition_time
            .clone()
    };
    assert_eq!(ltt("Ready"), Some(Time(now())));
    assert_eq!(ltt("ContainersReady"), Some(Time(now())));
    assert_eq!(ltt("Initialized"), Some(Time(earlier())));
    assert_eq!(ltt("PodScheduled"), Some(Time(earlier())));
}

#[test]
fn d7_first_appearance_uses_now_truncated_to_seconds() {
    let s = spec(&[], &["app"], &[]);
    let regular = [running("app", true, true)];
    let now_fraction: Timestamp = "2025-01-01T00:10:00.750Z".parse().unwrap();
    let conds = generate_conditions(&ConditionInput {
        spec: &s,
        phase: Phase::Running,
        init_statuses: &[],
        statuses: &regular,
        sandbox_ready: true,
        previous: &[],
        now: now_fraction,
        generation: None,
    });
    for c in &conds {
        assert_eq!(c.last_transition_time, Some(Time(now())), "{}", c.type_);
        assert_eq!(c.last_probe_time, None);
    }
}

#[test]
fn d3_a_regular_container_that_ran_keeps_the_pod_initialized_while_it_waits() {
    // The app ran, crashed and waits in back-off (its run is in `lastState`) while the sidecar
    // restarts: the pod "has ever" had a regular container running, so it stays Initialized.
    let s = spec(&["a", "+side"], &["app"], &[]);
    let app = cs(json!({
        "name": "app",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1}},
    }));
    let init = [terminated("a", 0), running("side", false, false)];
    let regular = [app];
    let conds = generate(In {
        init: &init,
        ..running_pod(&s, &regular)
    });
    assert_eq!(csm(&conds, "Initialized"), t("True", "", ""));
    // Never having run, the same waiting app leaves it to the init containers.
    let regular = [waiting("app", "ContainerCreating")];
    let conds = generate(In {
        init: &init,
        ..running_pod(&s, &regular)
    });
    assert_eq!(csm(&conds, "Initialized").0, "False");
}

/// D10: every kubelet-owned condition carries the generation of the pod the status is built
/// from; conditions owned by others keep their own.
#[test]
fn d10_kubelet_conditions_observe_the_pod_generation() {
    let s = spec(&[], &["app"], &["example.com/gate"]);
    let regular = [running("app", true, true)];
    let foreign = PodCondition {
        type_: "example.com/gate".to_owned(),
        status: "True".to_owned(),
        observed_generation: Some(1),
        ..PodCondition::default()
    };
    let previous = [foreign];
    let conds = generate_conditions(&ConditionInput {
        spec: &s,
        phase: Phase::Running,
        init_statuses: &[],
        statuses: &regular,
        sandbox_ready: true,
        previous: &previous,
        now: now(),
        generation: Some(3),
    });
    let observed: Vec<(&str, Option<i64>)> = conds
        .iter()
        .map(|c| (c.type_.as_str(), c.observed_generation))
        .collect();
    assert_eq!(
        observed,
        [
            ("example.com/gate", Some(1)),
            ("PodReadyToStartContainers", Some(3)),
            ("Initialized", Some(3)),
            ("Ready", Some(3)),
            ("ContainersReady", Some(3)),
            ("PodScheduled", Some(3)),
        ]
    );
}
