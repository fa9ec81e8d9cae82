//! Property test: random pods under random runtime behaviour.
//!
//! Each case builds a pod (1–3 regular containers, 0–2 init containers some of which are
//! sidecars, a random restart policy, optional probes, hooks, container restart rules, grace
//! 0–5 s and `activeDeadlineSeconds`) and plays a random sequence of driver events against the
//! machine: time passing, exits (codes and OOM) of live instances, probe and hook answers, start
//! answers and failures, sandbox answers, deletes with random grace and image updates. The
//! crate's one driver (`sim::Driver`) plays the runtime: it answers `KillContainer` with an exit
//! at once (SIGKILL always works) and leaves everything else to the event sequence. After every
//! input it checks:
//!
//! - the machine does not panic;
//! - a terminal phase (Succeeded/Failed) is never left (P11);
//! - no container's `restartCount` ever decreases (S10);
//! - `Initialized` never goes from True back to False once a regular container has run (D3:
//!   "has ever been running or terminated"); before that, only while an init container or
//!   sidecar is incomplete (`ContainersNotInitialized`);
//! - after `handle_timeout(now)`, `poll_timeout()` is later than `now` (no livelock);
//!
//! and at the end that a delete followed by enough time (without ever answering a hook)
//! terminates the pod.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::sim::driver::Control;
use podvisor_lifecycle::sim::{Answers, Driver, FakeRuntime, Input};
use podvisor_lifecycle::{
    Action, ExitStatus, InstanceId, MachineConfig, Phase, PodMachine, ProbeOutcome, StartFailure,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::HashMap;

// ---- random pods --------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct ProbeParams {
    period: i32,
    failure_threshold: i32,
    success_threshold: i32,
    initial_delay: i32,
}

#[derive(Debug, Clone)]
struct ContainerParams {
    /// Startup, liveness, readiness.
    probes: [Option<ProbeParams>; 3],
    post_start: bool,
    pre_stop: bool,
    /// 0: none; 1: `Never` + restart on 42; 2: `OnFailure`; 3: `Always` (regular only).
    own_policy: u8,
}

#[derive(Debug, Clone)]
struct PodParams {
    policy: &'static str,
    regular: Vec<ContainerParams>,
    /// (params, is sidecar)
    init: Vec<(ContainerParams, bool)>,
    grace: i64,
    deadline: Option<i64>,
}

fn probe_params() -> impl Strategy<Value = Option<ProbeParams>> {
    prop::option::weighted(
        0.35,
        (1..=3i32, 1..=3i32, 1..=2i32, 0..=2i32).prop_map(|(period, ft, st, delay)| ProbeParams {
            period,
            failure_threshold: ft,
            success_threshold: st,
            initial_delay: delay,
        }),
    )
}

fn container_params() -> impl Strategy<Value = ContainerParams> {
    (
        [probe_params(), probe_params(), probe_params()],
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.3),
        prop::sample::select(vec![0u8, 0, 0, 1, 2, 3]),
    )
        .prop_map(
            |(probes, post_start, pre_stop, own_policy)| ContainerParams {
                probes,
                post_start,
                pre_stop,
                own_policy,
            },
        )
}

fn pod_params() -> impl Strategy<Value = PodParams> {
    (
        prop::sample::select(vec!["Always", "OnFailure", "Never"]),
        prop::collection::vec(container_params(), 1..=3),
        prop::collection::vec((container_params(), any::<bool>()), 0..=2),
        0..=5i64,
        prop::option::weighted(0.2, 3..=40i64),
    )
        .prop_map(|(policy, regular, init, grace, deadline)| PodParams {
            policy,
            regular,
            init,
            grace,
            deadline,
        })
}

fn probe_json(p: &ProbeParams, readiness: bool) -> Value {
    json!({
        "exec": {"command": ["check"]},
        "periodSeconds": p.period,
        "failureThreshold": p.failure_threshold,
        "successThreshold": if readiness { p.success_threshold } else { 1 },
        "initialDelaySeconds": p.initial_delay,
    })
}

/// A container as validation allows it: regular init containers get no probes, no
/// `postStart`... (they may have hooks in the API, but keep them plain), sidecars no own rules.
fn container_json(name: &str, p: &ContainerParams, kind: Kind) -> Value {
    let mut c = json!({"name": name, "image": "busybox:1"});
    if kind != Kind::Init {
        for (key, probe, readiness) in [
            ("startupProbe", &p.probes[0], false),
            ("livenessProbe", &p.probes[1], false),
            ("readinessProbe", &p.probes[2], true),
        ] {
            if let Some(probe) = probe {
                c[key] = probe_json(probe, readiness);
            }
        }
    }
    let mut lifecycle = serde_json::Map::new();
    if p.post_start {
        lifecycle.insert("postStart".into(), json!({"exec": {"command": ["warm"]}}));
    }
    if p.pre_stop {
        lifecycle.insert("preStop".into(), json!({"exec": {"command": ["drain"]}}));
    }
    if !lifecycle.is_empty() {
        c["lifecycle"] = Value::Object(lifecycle);
    }
    match kind {
        Kind::Sidecar => c["restartPolicy"] = json!("Always"),
        Kind::Init | Kind::Regular => match p.own_policy {
            1 => {
                c["restartPolicy"] = json!("Never");
                c["restartPolicyRules"] =
                    json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]);
            }
            2 => c["restartPolicy"] = json!("OnFailure"),
            3 if kind == Kind::Regular => c["restartPolicy"] = json!("Always"),
            _ => {}
        },
    }
    c
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Init,
    Sidecar,
    Regular,
}

fn build_pod(p: &PodParams) -> Pod {
    let init: Vec<Value> = p
        .init
        .iter()
        .enumerate()
        .map(|(i, (c, sidecar))| {
            let kind = if *sidecar { Kind::Sidecar } else { Kind::Init };
            container_json(&format!("i{i}"), c, kind)
        })
        .collect();
    let regular: Vec<Value> = p
        .regular
        .iter()
        .enumerate()
        .map(|(i, c)| container_json(&format!("c{i}"), c, Kind::Regular))
        .collect();
    let mut spec = json!({
        "restartPolicy": p.policy,
        "terminationGracePeriodSeconds": p.grace,
        "containers": regular,
    });
    if !init.is_empty() {
        spec["initContainers"] = json!(init);
    }
    if let Some(d) = p.deadline {
        spec["activeDeadlineSeconds"] = json!(d);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-1"},
        "spec": spec,
    }))
    .expect("a valid pod")
}

// ---- random events ------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// Let this many milliseconds pass, firing timers on the way.
    Advance(u32),
    /// Answer the pending sandbox request.
    Sandbox { ok: bool },
    /// Answer a pending start: 0 started, 1 failed before creation, 2 failed after creation.
    Start { pick: usize, how: u8 },
    /// A live instance exits.
    Exit { pick: usize, code: i32, oom: bool },
    /// Answer a pending probe.
    Probe { pick: usize, outcome: u8 },
    /// Answer a pending hook.
    Hook { pick: usize, ok: bool },
    /// A delete with this grace (None: the pod's).
    Delete { grace: Option<i64> },
    /// Change the image of a container (spec order over init then regular).
    Image { pick: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..4000).prop_map(Op::Advance),
        1 => prop::bool::weighted(0.8).prop_map(|ok| Op::Sandbox { ok }),
        5 => (any::<usize>(), prop::sample::select(vec![0u8, 0, 0, 0, 1, 2]))
            .prop_map(|(pick, how)| Op::Start { pick, how }),
        3 => (any::<usize>(), prop::sample::select(vec![0, 1, 42, 137, 143]), prop::bool::weighted(0.1))
            .prop_map(|(pick, code, oom)| Op::Exit { pick, code, oom }),
        5 => (any::<usize>(), 0u8..4).prop_map(|(pick, outcome)| Op::Probe { pick, outcome }),
        3 => (any::<usize>(), prop::bool::weighted(0.8)).prop_map(|(pick, ok)| Op::Hook { pick, ok }),
        1 => prop::option::of(0..=5i64).prop_map(|grace| Op::Delete { grace }),
        1 => any::<usize>().prop_map(|pick| Op::Image { pick }),
    ]
}

// ---- the driver ---------------------------------------------------------------------------------

/// The invariants above, checked after every input the machine handles.
#[derive(Debug, Default)]
struct Invariants {
    terminal: Option<Phase>,
    restart_counts: HashMap<String, i32>,
    initialized_seen: bool,
    /// A regular container has been running or terminated (its `state` or `lastState`).
    regular_ran: bool,
}

impl Invariants {
    fn check(&mut self, m: &PodMachine) {
        let phase = m.phase();
        match self.terminal {
            Some(t) => assert_eq!(phase, t, "a terminal phase was left"),
            None if phase.is_terminal() => self.terminal = Some(phase),
            None => {}
        }
        let status = m.pod().status.clone().unwrap_or_default();
        let all = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten());
        let mut regular_visible = false;
        for s in all {
            let prev = self.restart_counts.entry(s.name.clone()).or_insert(0);
            assert!(
                s.restart_count >= *prev,
                "restartCount of {} went from {} to {}",
                s.name,
                prev,
                s.restart_count
            );
            *prev = s.restart_count;
            let is_regular = status
                .container_statuses
                .iter()
                .flatten()
                .any(|c| c.name == s.name);
            let st = s.state.clone().unwrap_or_default();
            let last_run = s
                .last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some());
            if is_regular && (st.running.is_some() || st.terminated.is_some() || last_run) {
                regular_visible = true;
            }
        }
        let initialized = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Initialized")
            .map(|c| c.status == "True");
        // D3: once a regular container has run, the pod has initialized, for good.
        self.regular_ran |= regular_visible;
        if self.regular_ran {
            assert_eq!(
                initialized,
                Some(true),
                "Initialized is not True although a regular container has run: {}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
        }
        // Before that, True goes back to False only while an init container or sidecar is
        // incomplete (a sidecar restarting before any regular container could start).
        if self.initialized_seen && initialized != Some(true) {
            let cond = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Initialized")
                .cloned()
                .unwrap_or_default();
            assert!(
                !regular_visible && cond.reason.as_deref() == Some("ContainersNotInitialized"),
                "Initialized went back to False: {}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
        }
        if initialized == Some(true) {
            self.initialized_seen = true;
        }
    }
}

/// The fake runtime of the property: SIGKILL always works (an exit at once); everything else
/// waits for the random events. It checks the invariants after every input.
#[derive(Debug)]
struct Random {
    answers: Answers,
    invariants: Invariants,
}

impl FakeRuntime for Random {
    type Answer = Input;

    fn on_action(&mut self, action: &Action, ctl: &mut Control<'_, Input>) {
        self.answers.on_action(action, ctl);
    }

    fn on_due(&mut self, answer: Input, ctl: &mut Control<'_, Input>) -> Option<Input> {
        self.answers.on_due(answer, ctl)
    }

    fn observe(&mut self, machine: &PodMachine) {
        self.invariants.check(machine);
    }
}

/// The crate's one driver with the [`Random`] runtime, and the pod as the API holds it (image
/// updates change it).
struct World {
    d: Driver<Random>,
    pod: Pod,
    image_gen: u32,
}

impl World {
    fn new(pod: Pod) -> World {
        let now = Timestamp::from_second(1_767_225_600).unwrap();
        let m = PodMachine::new(pod.clone(), MachineConfig::default(), now);
        let runtime = Random {
            answers: Answers::kills_only(),
            invariants: Invariants::default(),
        };
        World {
            d: Driver::new(m, now, runtime),
            pod,
            image_gen: 1,
        }
    }

    fn input(&mut self, input: Input) {
        let now = self.d.now();
        self.d.input(input, now);
    }

    /// Fires every timer up to `target`, checking that no timer stays due.
    fn advance_to(&mut self, target: Timestamp) {
        let mut rounds = 0;
        while let Some(t) = self.d.next_timer().filter(|t| *t <= target) {
            rounds += 1;
            assert!(rounds < 100_000, "too many timers");
            assert!(
                t >= self.d.now(),
                "poll_timeout {t} is earlier than now {} after handle_timeout",
                self.d.now()
            );
            self.d.timeout(t);
            if let Some(next) = self.d.next_timer() {
                assert!(
                    next > t,
                    "poll_timeout {next} is not later than {t} after handle_timeout({t})"
                );
            }
        }
        self.d.advance_to(target);
    }

    fn apply(&mut self, op: &Op) {
        let now = self.d.now();
        match *op {
            Op::Advance(ms) => {
                let target = now + SignedDuration::from_millis(i64::from(ms));
                self.advance_to(target);
            }
            Op::Sandbox { ok } => {
                if self.d.sandbox_requested() {
                    if ok {
                        self.input(Input::SandboxReady);
                    } else {
                        self.input(Input::SandboxFailed {
                            reason: "FailedMount",
                            message: "no disk".to_string(),
                        });
                    }
                }
            }
            Op::Start { pick, how } => {
                let pending = self.d.pending_start_ids();
                if pending.is_empty() {
                    return;
                }
                let id = pending[pick % pending.len()];
                self.answer_start(id, how);
            }
            Op::Exit { pick, code, oom } => {
                let live = self.d.running();
                if live.is_empty() {
                    return;
                }
                let id = live[pick % live.len()];
                let exit = ExitStatus {
                    exit_code: code,
                    oom_killed: oom,
                    finished_at: Some(now),
                    ..ExitStatus::default()
                };
                self.input(Input::Exited { id, exit });
            }
            Op::Probe { pick, outcome } => {
                let pending = self.d.probe_requests();
                if pending.is_empty() {
                    return;
                }
                let r = pending[pick % pending.len()].clone();
                let outcome = match outcome {
                    0 => ProbeOutcome::Success,
                    1 => ProbeOutcome::Failure("down".to_string()),
                    2 => ProbeOutcome::Error("no route".to_string()),
                    _ => ProbeOutcome::Warning("redirect".to_string()),
                };
                self.input(Input::Probe {
                    name: r.name,
                    id: r.instance,
                    kind: r.kind,
                    outcome,
                });
            }
            Op::Hook { pick, ok } => {
                let pending = self.d.hook_requests();
                if pending.is_empty() {
                    return;
                }
                let r = pending[pick % pending.len()].clone();
                let result = if ok {
                    Ok(())
                } else {
                    Err("hook failed".to_string())
                };
                self.input(Input::Hook {
                    id: r.instance,
                    hook: r.hook,
                    result,
                });
            }
            Op::Delete { grace } => self.input(Input::Delete { grace }),
            Op::Image { pick } => {
                self.image_gen += 1;
                let spec = self.pod.spec.as_mut().expect("spec");
                let n_init = spec.init_containers.as_ref().map_or(0, Vec::len);
                let n = n_init + spec.containers.len();
                let i = pick % n;
                let c = if i < n_init {
                    &mut spec.init_containers.as_mut().expect("init")[i]
                } else {
                    &mut spec.containers[i - n_init]
                };
                c.image = Some(format!("busybox:{}", self.image_gen));
                self.input(Input::SpecUpdate(Box::new(self.pod.clone())));
            }
        }
    }

    fn answer_start(&mut self, id: InstanceId, how: u8) {
        let now = self.d.now();
        match how {
            0 => self.d.started(id, now),
            created => {
                let failure = StartFailure {
                    reason: "RunContainerError".to_string(),
                    message: "exec: \"app\": executable file not found".to_string(),
                    created: created == 2,
                };
                self.input(Input::StartFailed { id, failure });
            }
        }
    }

    /// Deletes the pod and lets time pass, answering starts (never hooks), until it terminates.
    fn finish(&mut self, grace: Option<i64>) {
        if self.d.sandbox_requested() {
            self.input(Input::SandboxReady);
        }
        self.input(Input::Delete { grace });
        let deadline = self.d.now() + SignedDuration::from_secs(600);
        while !self.d.machine().is_terminated() && self.d.now() < deadline {
            while let Some(&id) = self.d.pending_start_ids().last() {
                self.answer_start(id, 0);
            }
            let next = self.d.next_timer();
            let target = match next {
                Some(t) if t <= deadline => t,
                _ => break,
            };
            self.advance_to(target);
        }
        while let Some(&id) = self.d.pending_start_ids().last() {
            self.answer_start(id, 0);
        }
        let m = self.d.machine();
        assert!(
            m.is_terminated(),
            "not terminated 600 s after the delete; live {:?}, pending starts {:?}, hooks {:?}, next timer {:?}",
            self.d.running(),
            self.d.pending_start_ids(),
            self.d.hook_requests(),
            m.poll_timeout()
        );
        assert!(m.phase().is_terminal());
        assert_eq!(m.poll_timeout(), None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn machine_invariants_hold_for_random_pods_and_events(
        params in pod_params(),
        ops in prop::collection::vec(op(), 0..60),
        final_grace in prop::option::of(0..=5i64),
    ) {
        let mut w = World::new(build_pod(&params));
        // Most runs want a sandbox: answer the first request.
        if w.d.sandbox_requested() && !ops.iter().any(|o| matches!(o, Op::Sandbox { .. })) {
            w.input(Input::SandboxReady);
        }
        for op in &ops {
            w.apply(op);
        }
        w.finish(final_grace);
    }
}
