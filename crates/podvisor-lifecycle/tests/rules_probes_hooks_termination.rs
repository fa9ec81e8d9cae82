//! Rule tests for probes (kubelet-lifecycle.md 6.1–6.2, R1–R17 timing and counting), lifecycle
//! hooks (section 7, H1–H6) and termination (section 8, T1–T11), driving a [`PodMachine`] on a
//! virtual clock.
//!
//! The local [`Driver`] is the crate's one driver (`sim::Driver`) with a working runtime
//! (`sim::Answers`): it answers sandbox creation and container starts at once (unless told not
//! to), exits an instance on its stop signal (unless told to ignore it) and on SIGKILL, answers
//! probes from a per-(container, kind) table, and leaves hooks for the test to answer. Every
//! action is logged with the virtual time it was produced at, so tests can assert exact timings.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use podvisor_lifecycle::sim::{self, Answers, Input};
use podvisor_lifecycle::{
    Action, EventType, ExitStatus, HookKind, InstanceId, MachineConfig, Phase, PodMachine,
    ProbeKind, ProbeOutcome,
};
use serde_json::{Value, json};

// ---- pods ---------------------------------------------------------------------------------------

const T0: i64 = 1_767_225_600;
const FULL_NAME: &str = "p_default(uid-1)";

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-1"},
        "spec": spec,
    }))
    .expect("a valid pod")
}

/// `{"name": name, "image": "busybox"}` merged with `extra`'s keys.
fn c(name: &str, extra: Value) -> Value {
    let mut v = json!({"name": name, "image": "busybox"});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

/// A sidecar (init container with `restartPolicy: Always`).
fn sidecar(name: &str, extra: Value) -> Value {
    let mut v = c(name, extra);
    v["restartPolicy"] = json!("Always");
    v
}

/// An exec probe with `periodSeconds` and `failureThreshold`.
fn probe(period: i32, failure_threshold: i32) -> Value {
    json!({"exec": {"command": ["check"]}, "periodSeconds": period, "failureThreshold": failure_threshold})
}

fn pre_stop() -> Value {
    json!({"preStop": {"exec": {"command": ["drain"]}}})
}

fn post_start() -> Value {
    json!({"postStart": {"exec": {"command": ["warm-up"]}}})
}

// ---- the driver ---------------------------------------------------------------------------------

/// The crate's one driver (`sim::Driver`) with a working runtime: sandbox creation and container
/// starts are answered at once (unless `starts` is off), an instance exits on its stop signal
/// (unless its container ignores it) and on SIGKILL, probes are answered from a per-(container,
/// kind) table, and hooks are left for the test to answer. Times are seconds since the start, as
/// `f64`, so that tests can assert exact timings.
struct Driver {
    d: sim::Driver<Answers>,
}

impl Driver {
    fn new(spec: Value) -> Driver {
        Driver::with(spec, |_| {})
    }

    /// A driver whose runtime is configured by `setup` before the machine is created (so the
    /// first sync already sees the configuration).
    fn with(spec: Value, setup: impl FnOnce(&mut Answers)) -> Driver {
        let t0 = Timestamp::from_second(T0).unwrap();
        // No A8 settle time: these tests are about probes, hooks and termination.
        let config = MachineConfig {
            sidecar_settle: std::time::Duration::ZERO,
            ..MachineConfig::default()
        };
        let mut answers = Answers::working();
        setup(&mut answers);
        let m = PodMachine::new(pod(spec), config, t0);
        Driver {
            d: sim::Driver::new(m, t0, answers),
        }
    }

    fn m(&self) -> &PodMachine {
        self.d.machine()
    }

    fn now(&self) -> Timestamp {
        self.d.now()
    }

    fn t(&self) -> f64 {
        self.d.secs(self.d.now())
    }

    /// The log with times in seconds.
    fn log(&self) -> Vec<(f64, &Action)> {
        self.d
            .logged()
            .map(|(at, a)| (self.d.secs(at), a))
            .collect()
    }

    fn terminated_at(&self) -> Option<f64> {
        self.d.terminated_at().map(|at| self.d.secs(at))
    }

    /// Fires every timer up to `secs` (absolute, seconds since t0) and moves the clock there.
    fn at(&mut self, secs: f64) {
        let target = self.d.origin() + SignedDuration::from_secs_f64(secs);
        assert!(target >= self.d.now(), "time goes forward");
        self.d.advance_to(target);
    }

    // ----- answers -----

    fn answer_probes(&mut self, name: &str, kind: ProbeKind, outcome: ProbeOutcome) {
        self.d.runtime_mut().answer_probes(name, kind, outcome);
    }

    /// Answers the oldest pending probe of `name`/`kind`.
    fn probe(&mut self, name: &str, kind: ProbeKind, outcome: ProbeOutcome) {
        let r = self
            .d
            .probe_requests()
            .iter()
            .find(|r| r.name == name && r.kind == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no pending {kind:?} probe of {name} at t={}", self.t()));
        let input = Input::Probe {
            name: r.name,
            id: r.instance,
            kind,
            outcome,
        };
        self.d.input(input, self.d.now());
    }

    /// Answers the oldest pending `hook` of `name`.
    fn hook(&mut self, name: &str, hook: HookKind, result: Result<(), String>) {
        let r = self
            .d
            .hook_requests()
            .iter()
            .find(|r| r.name == name && r.hook == hook)
            .cloned()
            .unwrap_or_else(|| panic!("no pending {hook:?} hook of {name} at t={}", self.t()));
        let input = Input::Hook {
            id: r.instance,
            hook,
            result,
        };
        self.d.input(input, self.d.now());
    }

    /// Answers the pending starts (with `starts` off).
    fn start_pending(&mut self) {
        let now = self.d.now();
        for id in self.d.pending_start_ids().to_vec() {
            self.d.started(id, now);
        }
    }

    /// The live instance of `name` exits with `code`.
    fn exit(&mut self, name: &str, code: i32) {
        let id = self.live(name);
        let exit = ExitStatus {
            exit_code: code,
            finished_at: Some(self.d.now()),
            ..ExitStatus::default()
        };
        self.d.input(Input::Exited { id, exit }, self.d.now());
    }

    /// A new pod object.
    fn spec_update(&mut self, pod: Pod) {
        self.d.input(Input::SpecUpdate(Box::new(pod)), self.d.now());
    }

    fn delete(&mut self, grace: Option<i64>) {
        self.d.delete(grace, self.d.now());
    }

    // ----- queries -----

    fn pending_probes(&self) -> &[sim::driver::ProbeRequest] {
        self.d.probe_requests()
    }

    fn live(&self, name: &str) -> InstanceId {
        self.d
            .running()
            .iter()
            .copied()
            .filter(|id| self.d.instance_info(*id).is_some_and(|i| i.name == name))
            .max()
            .unwrap_or_else(|| panic!("{name} has no live instance at t={}", self.t()))
    }

    fn instances(&self, name: &str) -> Vec<InstanceId> {
        self.d.instances(name)
    }

    /// Times of `RunProbe` for `name`/`kind`.
    fn probe_times(&self, name: &str, kind: ProbeKind) -> Vec<f64> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::RunProbe {
                    name: n, kind: k, ..
                } if n == name && *k == kind => Some(t),
                _ => None,
            })
            .collect()
    }

    /// `(t, reason, message)` of every event about `container` (None: pod events).
    fn events_of(&self, container: Option<&str>) -> Vec<(f64, &'static str, String)> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::EmitEvent(e)
                    if e.container.as_ref().map(|(_, n)| n.as_str()) == container =>
                {
                    Some((t, e.reason, e.message.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// `(t, type, message)` of every event with `reason`.
    fn events(&self, reason: &str) -> Vec<(f64, EventType, String)> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::EmitEvent(e) if e.reason == reason => Some((t, e.type_, e.message.clone())),
                _ => None,
            })
            .collect()
    }

    fn messages(&self, reason: &str) -> Vec<String> {
        self.events(reason).into_iter().map(|(_, _, m)| m).collect()
    }

    /// `(t, container, signal, grace secs)` of every `StopContainer`.
    fn stops(&self) -> Vec<(f64, String, String, u64)> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::StopContainer {
                    name,
                    signal,
                    grace,
                    ..
                } => Some((t, name.clone(), signal.clone(), grace.as_secs())),
                _ => None,
            })
            .collect()
    }

    /// `(t, container)` of every `KillContainer`.
    fn kills(&self) -> Vec<(f64, String)> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::KillContainer { name, .. } => Some((t, name.clone())),
                _ => None,
            })
            .collect()
    }

    /// `(t, container, hook)` of every `RunHook`.
    fn hooks(&self) -> Vec<(f64, String, HookKind)> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::RunHook { name, hook, .. } => Some((t, name.clone(), *hook)),
                _ => None,
            })
            .collect()
    }

    /// `(t, container, restart_count)` of every `StartContainer`.
    fn starts(&self) -> Vec<(f64, String, i32)> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::StartContainer {
                    name,
                    restart_count,
                    ..
                } => Some((t, name.clone(), *restart_count)),
                _ => None,
            })
            .collect()
    }

    fn status(&self, name: &str) -> ContainerStatus {
        let s = self.d.pod().status.as_ref().expect("status");
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no status for {name}"))
            .clone()
    }

    /// `running`, `waiting(<reason>)` or `terminated(<reason>,<code>)`.
    fn state(&self, name: &str) -> String {
        let st = self.status(name).state.unwrap_or_default();
        if st.running.is_some() {
            "running".to_string()
        } else if let Some(t) = st.terminated {
            format!(
                "terminated({},{})",
                t.reason.unwrap_or_default(),
                t.exit_code
            )
        } else {
            let w = st.waiting.unwrap_or_default();
            format!("waiting({})", w.reason.unwrap_or_default())
        }
    }

    fn ready(&self, name: &str) -> bool {
        self.status(name).ready
    }

    fn started_flag(&self, name: &str) -> bool {
        self.status(name).started == Some(true)
    }

    /// `(status, reason, message)` of a pod condition.
    fn cond(&self, ty: &str) -> (String, Option<String>, Option<String>) {
        let s = self.d.pod().status.as_ref().expect("status");
        let c = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == ty)
            .unwrap_or_else(|| panic!("no condition {ty}"));
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    /// The container's lifecycle actions (events about it, hooks, stop, kill) as short strings.
    fn lifecycle(&self, name: &str) -> Vec<String> {
        self.log()
            .into_iter()
            .filter_map(|(t, a)| match a {
                Action::EmitEvent(e)
                    if e.container.as_ref().is_some_and(|(_, n)| n == name)
                        && matches!(e.reason, "Killing" | "FailedPreStopHook") =>
                {
                    Some(format!("{t} {}: {}", e.reason, e.message))
                }
                Action::RunHook { name: n, hook, .. } if n == name => {
                    Some(format!("{t} RunHook {hook:?}"))
                }
                Action::StopContainer {
                    name: n,
                    signal,
                    grace,
                    ..
                } if n == name => Some(format!("{t} Stop {signal} grace={}", grace.as_secs())),
                Action::KillContainer { name: n, .. } if n == name => Some(format!("{t} SIGKILL")),
                _ => None,
            })
            .collect()
    }
}

fn fail(out: &str) -> ProbeOutcome {
    ProbeOutcome::Failure(out.to_string())
}

use ProbeKind::{Liveness, Readiness, Startup};
use ProbeOutcome::Success;

fn until(v: Vec<f64>, t: f64) -> Vec<f64> {
    v.into_iter().filter(|x| *x <= t).collect()
}

// ---- 6.1 configuration and workers --------------------------------------------------------------

#[test]
fn r1_defaults_period_10_failure_threshold_3_success_threshold_1() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "livenessProbe": {"exec": {"command": ["check"]}},
            "readinessProbe": {"exec": {"command": ["check"]}, "periodSeconds": 0, "successThreshold": 0},
        }))]}),
        |d| {
            d.answer_probes("app", Liveness, fail("down"));
            d.answer_probes("app", Readiness, Success);
        },
    );
    // successThreshold 1: the first readiness success makes the container ready.
    assert!(d.ready("app"));
    d.at(35.0);
    // Liveness: every 10 s from worker start; the third failure is published and kills.
    assert_eq!(
        until(d.probe_times("app", Liveness), 35.0),
        vec![10.0, 20.0, 30.0]
    );
    assert_eq!(d.messages("Unhealthy").len(), 3);
    let killing = d.events("Killing");
    assert_eq!(killing.len(), 1);
    assert_eq!(killing[0].0, 30.0);
    // periodSeconds 0 means the default 10 s too (fast path at 0, then the ticker).
    assert_eq!(
        until(d.probe_times("app", Readiness), 25.0),
        vec![0.0, 10.0, 20.0]
    );
}

#[test]
fn r2_workers_for_regular_containers_and_sidecars() {
    let mut d = Driver::with(
        json!({
            "initContainers": [
                c("setup", json!({})),
                sidecar("proxy", json!({"livenessProbe": probe(5, 3)})),
            ],
            "containers": [c("app", json!({"livenessProbe": probe(5, 3)}))],
        }),
        |d| {
            d.answer_probes("proxy", Liveness, Success);
            d.answer_probes("app", Liveness, Success);
        },
    );
    d.at(0.5);
    d.exit("setup", 0);
    d.at(12.0);
    // Both workers tick on the same 5 s grid, created with the pod (not with the containers).
    assert_eq!(d.probe_times("proxy", Liveness), vec![5.0, 10.0]);
    assert_eq!(d.probe_times("app", Liveness), vec![5.0, 10.0]);
    // A regular init container never gets a probe.
    assert!(d.probe_times("setup", Liveness).is_empty());
}

#[test]
fn r3_initial_results_readiness_failure_liveness_success_startup_unknown() {
    let d = Driver::new(json!({"containers": [
        c("r", json!({"readinessProbe": probe(10, 3)})),
        c("l", json!({"livenessProbe": probe(10, 3)})),
        c("s", json!({"startupProbe": probe(10, 3)})),
    ]}));
    // Readiness starts as Failure: running and started, but not ready.
    assert_eq!(d.state("r"), "running");
    assert!(d.started_flag("r"));
    assert!(!d.ready("r"));
    // Liveness starts as Success: running, ready, and nobody kills it.
    assert!(d.ready("l"));
    assert!(d.events("Killing").is_empty());
    // Startup starts with no result: not started, hence not ready.
    assert_eq!(d.state("s"), "running");
    assert!(!d.started_flag("s"));
    assert!(!d.ready("s"));
}

#[test]
fn r4_ticks_are_measured_from_worker_start_not_container_start() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"livenessProbe": probe(7, 3)}))]}),
        |d| {
            d.starts = false;
            d.answer_probes("app", Liveness, Success);
        },
    );
    d.at(3.0);
    d.start_pending();
    d.at(30.0);
    // The worker was created at 0 (its immediate probe found no container); the container
    // started at 3, and ticks stay on the 0 + 7k grid.
    assert_eq!(d.probe_times("app", Liveness), vec![7.0, 14.0, 21.0, 28.0]);
}

#[test]
fn r4_a_tick_missed_while_probing_runs_right_after_the_answer() {
    let mut d =
        Driver::new(json!({"containers": [c("app", json!({"livenessProbe": probe(2, 3)}))]}));
    d.at(2.0);
    assert_eq!(d.probe_times("app", Liveness), vec![2.0]);
    // The probe takes 3.5 s: the tick at 4 is buffered, like Go's ticker, and runs on return.
    d.at(5.5);
    d.probe("app", Liveness, Success);
    assert_eq!(d.probe_times("app", Liveness), vec![2.0, 5.5]);
    d.probe("app", Liveness, Success);
    d.at(6.5);
    assert_eq!(d.probe_times("app", Liveness), vec![2.0, 5.5, 6.0]);
}

// ---- 6.2 one probe tick -------------------------------------------------------------------------

#[test]
fn r5_workers_exit_once_the_phase_is_terminal() {
    let mut d = Driver::with(
        json!({"restartPolicy": "Never", "containers": [
            c("app", json!({"readinessProbe": probe(1, 3)})),
        ]}),
        |d| d.answer_probes("app", Readiness, Success),
    );
    d.at(2.5);
    d.exit("app", 0);
    assert_eq!(d.m().phase(), Phase::Succeeded);
    assert!(d.m().is_terminated());
    d.at(10.0);
    assert_eq!(d.probe_times("app", Readiness), vec![0.0, 1.0, 2.0]);
    assert_eq!(d.m().poll_timeout(), None);
}

#[test]
fn r6_no_probe_while_the_instance_is_not_visible() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "lifecycle": post_start(),
            "livenessProbe": probe(1, 3),
            "readinessProbe": probe(1, 3),
        }))]}),
        |d| {
            d.answer_probes("app", Liveness, Success);
            d.answer_probes("app", Readiness, Success);
        },
    );
    d.at(5.0);
    assert!(d.probe_times("app", Liveness).is_empty());
    assert!(d.probe_times("app", Readiness).is_empty());
    d.hook("app", HookKind::PostStart, Ok(()));
    d.at(7.0);
    // Readiness at once (R12), liveness at the next ticks.
    assert_eq!(d.probe_times("app", Readiness), vec![5.0, 6.0, 7.0]);
    assert_eq!(d.probe_times("app", Liveness), vec![6.0, 7.0]);
}

#[test]
fn r7_a_new_instance_clears_on_hold_and_gets_initial_results() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "livenessProbe": probe(1, 1),
            "readinessProbe": probe(1, 1),
        }))]}),
        |d| d.answer_probes("app", Readiness, Success),
    );
    assert!(d.ready("app"));
    d.at(1.0);
    let first = d.live("app");
    d.probe("app", Liveness, fail("down"));
    // Killed (SIGTERM, exits at once) and restarted at once (first restart, no back-off).
    let second = d.live("app");
    assert_ne!(first, second);
    assert_eq!(d.status("app").restart_count, 1);
    // The new instance probes liveness again at the next tick.
    d.at(2.0);
    assert_eq!(d.probe_times("app", Liveness), vec![1.0, 2.0]);
    assert_eq!(d.pending_probes().last().map(|p| p.instance), Some(second));
    d.probe("app", Liveness, Success);
    assert!(d.ready("app"));
}

#[test]
fn r7_readiness_of_a_new_instance_starts_as_failure() {
    let mut d =
        Driver::new(json!({"containers": [c("app", json!({"readinessProbe": probe(10, 3)}))]}));
    d.probe("app", Readiness, Success);
    assert!(d.ready("app"));
    d.at(1.0);
    d.exit("app", 1);
    // Restarted at once; the new instance is not ready until its own probe passes.
    assert_eq!(d.status("app").restart_count, 1);
    assert_eq!(d.state("app"), "running");
    assert!(!d.ready("app"));
    d.probe("app", Readiness, Success);
    assert!(d.ready("app"));
}

#[test]
fn r8_liveness_worker_is_on_hold_after_a_published_failure() {
    let mut d = Driver::with(
        json!({"terminationGracePeriodSeconds": 10, "containers": [
            c("app", json!({"livenessProbe": probe(1, 1)})),
        ]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.at(1.0);
    d.probe("app", Liveness, fail("down"));
    // The instance keeps running until SIGKILL at 11; no liveness probe for it meanwhile.
    d.at(10.9);
    assert_eq!(d.probe_times("app", Liveness), vec![1.0]);
    d.at(11.0);
    assert_eq!(d.kills(), vec![(11.0, "app".to_string())]);
    d.at(12.0);
    assert_eq!(d.probe_times("app", Liveness), vec![1.0, 12.0]);
}

#[test]
fn r9_dead_container_that_will_not_run_again_stops_its_worker() {
    let mut d = Driver::with(
        json!({"restartPolicy": "Never", "containers": [
            c("other", json!({})),
            c("app", json!({"readinessProbe": probe(1, 3)})),
        ]}),
        |d| d.answer_probes("app", Readiness, Success),
    );
    d.at(2.5);
    d.exit("app", 1);
    assert_eq!(d.m().phase(), Phase::Running);
    d.at(3.0);
    // The tick at 3 found it dead and exited: nothing is left to wake for.
    assert_eq!(d.m().poll_timeout(), None);
    assert_eq!(d.probe_times("app", Readiness), vec![0.0, 1.0, 2.0]);
    assert!(!d.ready("app"));
}

#[test]
fn r9_dead_container_that_may_restart_keeps_its_worker() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"livenessProbe": probe(1, 3)}))]}),
        |d| d.answer_probes("app", Liveness, Success),
    );
    d.at(0.5);
    d.exit("app", 1); // restarted at once
    d.at(1.5);
    d.exit("app", 1); // back-off 10 s: restarted at 11.5
    d.at(11.0);
    assert_eq!(d.probe_times("app", Liveness), vec![1.0]);
    assert_eq!(d.state("app"), "waiting(CrashLoopBackOff)");
    d.at(13.0);
    assert_eq!(d.starts().last(), Some(&(11.5, "app".to_string(), 2)));
    assert_eq!(d.probe_times("app", Liveness), vec![1.0, 12.0, 13.0]);
}

#[test]
fn r9_restart_rules_decide_whether_the_worker_survives() {
    // Container restartPolicy Never with a rule restarting on 42 (A16, 1.35).
    let spec = json!({"containers": [
        c("app", json!({
            "restartPolicy": "Never",
            "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}],
            "livenessProbe": probe(1, 3),
        })),
        c("other", json!({})),
    ]});
    let mut d = Driver::with(spec.clone(), |d| d.answer_probes("app", Liveness, Success));
    d.at(0.5);
    d.exit("app", 42);
    assert_eq!(d.status("app").restart_count, 1);
    d.at(0.7);
    d.exit("app", 1);
    d.at(5.0);
    // The dead instance is seen at 1 and the worker exits.
    assert_eq!(d.m().poll_timeout(), None);
    assert_eq!(d.state("app"), "terminated(Error,1)");
}

#[test]
fn r10_deletion_stops_liveness_and_startup_quietly_readiness_keeps_probing() {
    let mut d = Driver::with(
        json!({"containers": [
            c("slow", json!({"startupProbe": probe(1, 100)})),
            c("app", json!({
                "lifecycle": pre_stop(),
                "livenessProbe": probe(1, 1),
                "readinessProbe": probe(1, 1),
            })),
        ]}),
        |d| {
            d.answer_probes("app", Liveness, Success);
            d.answer_probes("app", Readiness, Success);
            d.answer_probes("slow", Startup, fail("not yet"));
        },
    );
    d.at(2.5);
    d.delete(None);
    d.at(6.0);
    assert_eq!(d.probe_times("app", Liveness), vec![1.0, 2.0]);
    assert_eq!(d.probe_times("slow", Startup), vec![1.0, 2.0]);
    assert_eq!(
        d.probe_times("app", Readiness),
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    // The quiet shutdown publishes startup Success: nobody is killed for a startup failure.
    assert!(
        d.messages("Killing")
            .iter()
            .all(|m| m.starts_with("Stopping container"))
    );
}

#[test]
fn r10_t6_a_startup_success_published_by_the_deletion_shows_started_but_not_ready() {
    // The kubelet records the quiet Success with `SetContainerStartup` (`started` only); it
    // generates no status until the containers have stopped, so a container without a
    // readiness probe is not turned ready, nor the pod Ready, while it terminates.
    let mut d = Driver::with(
        json!({"containers": [c("slow", json!({"startupProbe": probe(1, 100)}))]}),
        |d| {
            d.answer_probes("slow", Startup, fail(""));
            d.ignore_stop.insert("slow".to_string());
        },
    );
    d.at(2.5);
    assert!(!d.started_flag("slow") && !d.ready("slow"));
    d.delete(Some(10));
    d.at(6.0);
    assert_eq!(d.state("slow"), "running");
    assert!(
        d.started_flag("slow"),
        "R10: the quiet Success is published"
    );
    assert!(
        !d.ready("slow"),
        "T6: ready is not re-derived while terminating"
    );
    assert_eq!(d.cond("ContainersReady").0, "False");
    assert_eq!(d.cond("Ready").0, "False");
}

#[test]
fn r11_initial_delay_counts_whole_seconds_since_container_start() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "livenessProbe": {"exec": {"command": ["check"]}, "initialDelaySeconds": 5, "periodSeconds": 1},
        }))]}),
        |d| {
            d.starts = false;
            d.answer_probes("app", Liveness, Success);
        },
    );
    d.at(0.4);
    d.start_pending();
    d.at(8.0);
    // At 5 only 4.6 s have passed (floor 4 < 5); at 6, 5.6 s (floor 5).
    assert_eq!(d.probe_times("app", Liveness), vec![6.0, 7.0, 8.0]);
}

#[test]
fn r11_startup_probe_gates_liveness_and_readiness() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "startupProbe": probe(1, 10),
            "livenessProbe": probe(1, 3),
            "readinessProbe": probe(1, 3),
        }))]}),
        |d| {
            d.answer_probes("app", Startup, fail("starting"));
            d.answer_probes("app", Liveness, Success);
            d.answer_probes("app", Readiness, Success);
        },
    );
    d.at(3.5);
    assert!(d.probe_times("app", Liveness).is_empty());
    assert!(d.probe_times("app", Readiness).is_empty());
    assert!(!d.started_flag("app"));
    d.answer_probes("app", Startup, Success);
    d.at(6.0);
    assert_eq!(d.probe_times("app", Startup), vec![1.0, 2.0, 3.0, 4.0]);
    assert!(d.started_flag("app"));
    // Readiness runs the moment the container has started (R12), liveness on its ticks.
    assert_eq!(d.probe_times("app", Readiness), vec![4.0, 5.0, 6.0]);
    assert_eq!(d.probe_times("app", Liveness), vec![5.0, 6.0]);
    assert!(d.ready("app"));
}

#[test]
fn r11_failures_must_be_consecutive_errors_do_not_count_or_reset() {
    let mut d =
        Driver::new(json!({"containers": [c("app", json!({"livenessProbe": probe(1, 3)}))]}));
    let script = [
        fail("a"),
        fail("b"),
        Success,
        fail("c"),
        ProbeOutcome::Error("no route".to_string()),
        fail("d"),
    ];
    for (i, o) in script.into_iter().enumerate() {
        d.at(1.0 + i as f64);
        d.probe("app", Liveness, o);
    }
    // F F S F E F: only two consecutive failures so far.
    assert!(d.events("Killing").is_empty());
    d.at(7.0);
    d.probe("app", Liveness, fail("e"));
    let killing = d.events("Killing");
    assert_eq!(killing.len(), 1);
    assert_eq!(killing[0].0, 7.0);
    assert_eq!(
        killing[0].2,
        "Container app failed liveness probe, will be restarted"
    );
}

#[test]
fn r11_success_threshold_counts_consecutive_successes() {
    let mut d = Driver::new(json!({"containers": [c("app", json!({
        "readinessProbe": {"exec": {"command": ["check"]}, "periodSeconds": 1, "successThreshold": 2, "failureThreshold": 1},
    }))]}));
    d.probe("app", Readiness, Success);
    assert!(!d.ready("app"));
    d.at(1.0);
    d.probe("app", Readiness, Success);
    assert!(d.ready("app"));
    d.at(2.0);
    d.probe("app", Readiness, fail("x"));
    assert!(!d.ready("app"));
    d.at(3.0);
    d.probe("app", Readiness, Success);
    assert!(!d.ready("app"));
    d.at(4.0);
    d.probe("app", Readiness, Success);
    assert!(d.ready("app"));
}

#[test]
fn r12_readiness_probes_at_once_after_start_and_restarts_its_ticker() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"readinessProbe": probe(10, 3)}))]}),
        |d| {
            d.starts = false;
            d.answer_probes("app", Readiness, Success);
        },
    );
    d.at(3.0);
    d.start_pending();
    assert!(d.ready("app"));
    d.at(25.0);
    assert_eq!(d.probe_times("app", Readiness), vec![3.0, 13.0, 23.0]);
}

#[test]
fn r12_every_sync_kicks_the_readiness_probe_of_an_unready_container() {
    let mut d = Driver::new(json!({"containers": [
        c("other", json!({})),
        c("app", json!({"readinessProbe": probe(10, 1)})),
    ]}));
    d.probe("app", Readiness, Success);
    d.at(3.0);
    // A published flip to Failure syncs the pod, and that sync probes again at once and restarts
    // the ticker.
    d.at(10.0);
    d.probe("app", Readiness, fail("503"));
    assert_eq!(d.probe_times("app", Readiness), vec![0.0, 10.0, 10.0]);
    d.probe("app", Readiness, fail("503"));
    // An unchanged result does not sync.
    assert_eq!(d.probe_times("app", Readiness), vec![0.0, 10.0, 10.0]);
    // PLEG events (a sibling exits, then its replacement starts) sync the pod too: the second
    // kick arrives while the first probe runs, so it runs again right after (Go's buffered
    // trigger channel).
    d.at(14.0);
    d.exit("other", 1);
    assert_eq!(d.probe_times("app", Readiness), vec![0.0, 10.0, 10.0, 14.0]);
    d.probe("app", Readiness, fail("503"));
    assert_eq!(
        d.probe_times("app", Readiness),
        vec![0.0, 10.0, 10.0, 14.0, 14.0]
    );
    d.probe("app", Readiness, fail("503"));
    d.at(25.0);
    assert_eq!(
        d.probe_times("app", Readiness),
        vec![0.0, 10.0, 10.0, 14.0, 14.0, 24.0]
    );
}

#[test]
fn r12_ready_containers_are_not_kicked() {
    let mut d = Driver::with(
        json!({"containers": [
            c("other", json!({})),
            c("app", json!({"readinessProbe": probe(10, 1)})),
        ]}),
        |d| d.answer_probes("app", Readiness, Success),
    );
    d.at(4.0);
    d.exit("other", 1);
    d.at(25.0);
    assert_eq!(d.probe_times("app", Readiness), vec![0.0, 10.0, 20.0]);
}

#[test]
fn r13_initial_delay_is_measured_from_container_start_even_with_a_startup_probe() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "startupProbe": probe(1, 10),
            "livenessProbe": {"exec": {"command": ["check"]}, "initialDelaySeconds": 3, "periodSeconds": 1},
        }))]}),
        |d| {
            d.answer_probes("app", Startup, fail("starting"));
            d.answer_probes("app", Liveness, Success);
        },
    );
    d.at(3.5);
    d.answer_probes("app", Startup, Success);
    d.at(6.0);
    // Started at 4; the delay (3 s from the container start at 0) is long over: liveness at 5,
    // not at 7.
    assert_eq!(d.probe_times("app", Liveness), vec![5.0, 6.0]);
}

#[test]
fn r13_initial_delay_rounds_up_to_the_next_tick() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "livenessProbe": {"exec": {"command": ["check"]}, "initialDelaySeconds": 3},
        }))]}),
        |d| d.answer_probes("app", Liveness, Success),
    );
    d.at(25.0);
    assert_eq!(d.probe_times("app", Liveness), vec![10.0, 20.0]);
}

#[test]
fn r14_readiness_flips_ready_and_containers_ready_conditions() {
    let mut d = Driver::new(json!({"containers": [
        c("app", json!({"readinessProbe": probe(1, 1)})),
        c("side", json!({})),
    ]}));
    let not_ready = (
        "False".to_string(),
        Some("ContainersNotReady".to_string()),
        Some("containers with unready status: [app]".to_string()),
    );
    assert_eq!(d.cond("ContainersReady"), not_ready);
    assert_eq!(d.cond("Ready"), not_ready);
    d.probe("app", Readiness, Success);
    assert_eq!(d.cond("ContainersReady").0, "True");
    assert_eq!(d.cond("Ready").0, "True");
    d.at(1.0);
    d.probe("app", Readiness, fail("503"));
    assert_eq!(d.cond("ContainersReady"), not_ready);
    assert_eq!(d.cond("Ready"), not_ready);
    // Readiness never restarts anything.
    assert!(d.events("Killing").is_empty());
    assert_eq!(d.state("app"), "running");
}

#[test]
fn r14_liveness_failure_kills_through_a_sync() {
    let mut d =
        Driver::new(json!({"containers": [c("app", json!({"livenessProbe": probe(1, 1)}))]}));
    d.at(1.0);
    d.probe("app", Liveness, fail("down"));
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "1 Killing: Container app failed liveness probe, will be restarted",
            "1 Stop SIGTERM grace=30",
        ]
    );
    assert_eq!(d.starts().len(), 2);
}

#[test]
fn r15_startup_failure_kills_with_the_startup_message_and_restarts() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "startupProbe": {"exec": {"command": ["check"]}, "initialDelaySeconds": 2, "periodSeconds": 1, "failureThreshold": 3},
        }))]}),
        |d| d.answer_probes("app", Startup, fail("no")),
    );
    d.at(4.5);
    // Allowance: initialDelay 2 + 3 x 1 s -> probes at 2, 3, 4, killed at 4.
    assert_eq!(d.probe_times("app", Startup), vec![2.0, 3.0, 4.0]);
    let killing = d.events("Killing");
    assert_eq!(
        killing,
        vec![(
            4.0,
            EventType::Normal,
            "Container app failed startup probe, will be restarted".to_string()
        )]
    );
    assert_eq!(
        d.starts(),
        vec![(0.0, "app".to_string(), 0), (4.0, "app".to_string(), 1)]
    );
    // The new instance is probed again (after its own initial delay).
    d.at(7.0);
    assert_eq!(d.probe_times("app", Startup), vec![2.0, 3.0, 4.0, 6.0, 7.0]);
}

#[test]
fn r15_startup_failure_under_never_is_not_restarted() {
    let mut d = Driver::with(
        json!({"restartPolicy": "Never", "containers": [
            c("app", json!({"startupProbe": probe(1, 2)})),
            c("other", json!({})),
        ]}),
        |d| d.answer_probes("app", Startup, fail("no")),
    );
    d.at(3.0);
    // No `, will be restarted` suffix, and no new instance.
    assert_eq!(
        d.messages("Killing"),
        vec!["Container app failed startup probe"]
    );
    assert_eq!(d.starts().len(), 2);
    assert_eq!(d.state("app"), "terminated(Error,143)");
    assert_eq!(d.m().phase(), Phase::Running);
}

#[test]
fn r15_a13_startup_failure_of_the_last_container_kills_the_pod_instead() {
    // keepCount 0 and nothing to start: KillPod wins over the per-container kill, so the
    // message is the plain one (killPodWithSyncResult) and the pod fails.
    let mut d = Driver::with(
        json!({"restartPolicy": "Never", "containers": [c("app", json!({"startupProbe": probe(1, 2)}))]}),
        |d| d.answer_probes("app", Startup, fail("no")),
    );
    d.at(3.0);
    assert_eq!(d.messages("Killing"), vec!["Stopping container app"]);
    assert_eq!(d.starts().len(), 1);
    assert_eq!(d.m().phase(), Phase::Failed);
}

#[test]
fn r15_startup_success_once_stops_the_startup_probe() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"startupProbe": probe(1, 3)}))]}),
        |d| d.answer_probes("app", Startup, Success),
    );
    d.at(10.0);
    assert_eq!(d.probe_times("app", Startup), vec![1.0]);
    assert!(d.started_flag("app"));
    assert!(d.ready("app"));
}

#[test]
fn r15_probe_termination_grace_applies_to_startup_kills() {
    let mut d = Driver::with(
        json!({"terminationGracePeriodSeconds": 5, "containers": [c("app", json!({
            "startupProbe": {"exec": {"command": ["check"]}, "periodSeconds": 1, "failureThreshold": 1, "terminationGracePeriodSeconds": 60},
        }))]}),
        |d| {
            d.answer_probes("app", Startup, fail("no"));
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.at(1.0);
    assert_eq!(
        d.stops(),
        vec![(1.0, "app".to_string(), "SIGTERM".to_string(), 60)]
    );
}

// ---- 6.3 events ---------------------------------------------------------------------------------

#[test]
fn r16_probe_error_event_and_the_attempt_is_discarded() {
    let mut d =
        Driver::new(json!({"containers": [c("app", json!({"readinessProbe": probe(1, 1)}))]}));
    d.probe("app", Readiness, Success);
    d.at(1.0);
    d.probe(
        "app",
        Readiness,
        ProbeOutcome::Error("unknown port \"web\"".to_string()),
    );
    assert_eq!(
        d.events("Unhealthy"),
        vec![(
            1.0,
            EventType::Warning,
            "Readiness probe errored and resulted in unknown state: unknown port \"web\""
                .to_string()
        )]
    );
    // The result stays Success.
    assert!(d.ready("app"));
}

#[test]
fn r17_failure_event_carries_the_probe_output() {
    let mut d = Driver::new(json!({"containers": [c("app", json!({
        "livenessProbe": probe(1, 5),
        "startupProbe": probe(1, 5),
    }))]}));
    d.at(1.0);
    d.probe("app", Startup, fail(""));
    d.at(2.0);
    d.probe("app", Startup, Success);
    d.at(3.0);
    d.probe(
        "app",
        Liveness,
        fail("HTTP probe failed with statuscode: 500"),
    );
    assert_eq!(
        d.events("Unhealthy"),
        vec![
            // An empty output leaves the trailing space.
            (
                1.0,
                EventType::Warning,
                "Startup probe failed: ".to_string()
            ),
            (
                3.0,
                EventType::Warning,
                "Liveness probe failed: HTTP probe failed with statuscode: 500".to_string()
            ),
        ]
    );
}

#[test]
fn r17_probe_warning_counts_as_success() {
    let mut d =
        Driver::new(json!({"containers": [c("app", json!({"readinessProbe": probe(1, 1)}))]}));
    d.probe(
        "app",
        Readiness,
        ProbeOutcome::Warning("Probe terminated redirects, Response body: moved".to_string()),
    );
    assert!(d.ready("app"));
    assert_eq!(
        d.events("ProbeWarning"),
        vec![(
            0.0,
            EventType::Warning,
            "Readiness probe warning: Probe terminated redirects, Response body: moved".to_string()
        )]
    );
    assert!(d.events("Unhealthy").is_empty());
}

// ---- 7. hooks -----------------------------------------------------------------------------------

#[test]
fn h1_run_hook_carries_the_spec_handler() {
    let d = Driver::new(json!({"containers": [c("app", json!({"lifecycle": post_start()}))]}));
    let handler = d
        .log()
        .into_iter()
        .find_map(|(_, a)| match a {
            Action::RunHook {
                handler,
                hook: HookKind::PostStart,
                ..
            } => Some(handler.clone()),
            _ => None,
        })
        .expect("postStart requested");
    assert_eq!(
        handler.exec.and_then(|e| e.command),
        Some(vec!["warm-up".to_string()])
    );
}

#[test]
fn h2_post_start_runs_after_start_and_hides_the_instance_until_done() {
    let mut d = Driver::new(json!({"containers": [
        c("app", json!({"lifecycle": post_start(), "readinessProbe": probe(10, 3)})),
        c("next", json!({})),
    ]}));
    // Created and Started come before the hook; the hook runs against the new instance.
    let app_events: Vec<&str> = d.events_of(Some("app")).iter().map(|e| e.1).collect();
    assert_eq!(app_events, vec!["Created", "Started"]);
    assert_eq!(
        d.hooks(),
        vec![(0.0, "app".to_string(), HookKind::PostStart)]
    );
    d.at(30.0);
    // Not running in the API, not started, pod Pending; later containers wait (A20).
    assert_eq!(d.state("app"), "waiting(ContainerCreating)");
    assert!(!d.started_flag("app"));
    assert_eq!(d.m().phase(), Phase::Pending);
    assert_eq!(d.starts().len(), 1);
    d.hook("app", HookKind::PostStart, Ok(()));
    assert_eq!(d.state("app"), "running");
    // startedAt is the process start, not the end of the hook.
    let started_at = d
        .status("app")
        .state
        .unwrap()
        .running
        .unwrap()
        .started_at
        .unwrap();
    assert_eq!(started_at.0, d.d.origin());
    assert_eq!(
        d.starts(),
        vec![(0.0, "app".to_string(), 0), (30.0, "next".to_string(), 0)]
    );
    assert_eq!(d.m().phase(), Phase::Running);
}

#[test]
fn h3_post_start_failure_kills_and_restarts_with_back_off() {
    let mut d = Driver::new(json!({"containers": [c("app", json!({"lifecycle": post_start()}))]}));
    d.at(1.0);
    let detail = "Exec lifecycle hook ([warm-up]) for Container \"app\" in Pod \"p_default(uid-1)\" failed - error: command 'warm-up' exited with 1: , message: \"\"";
    d.hook("app", HookKind::PostStart, Err(detail.to_string()));
    assert_eq!(
        d.events_of(Some("app"))
            .iter()
            .map(|e| (e.0, e.1, e.2.as_str()))
            .filter(|e| e.1 != "Created" && e.1 != "Started")
            .collect::<Vec<_>>(),
        vec![
            (1.0, "FailedPostStartHook", "PostStartHook failed"),
            (1.0, "Killing", "FailedPostStartHook"),
        ]
    );
    assert_eq!(d.events("FailedPostStartHook")[0].1, EventType::Warning);
    // Exited on SIGTERM, restarted at once (first restart), postStart runs again.
    assert_eq!(
        d.starts(),
        vec![(0.0, "app".to_string(), 0), (1.0, "app".to_string(), 1)]
    );
    assert_eq!(d.hooks().len(), 2);
    // The failed start step is shown while the replacement is in its start step.
    let st = d.status("app");
    let waiting = st.state.unwrap().waiting.unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("PostStartHookError"));
    assert_eq!(waiting.message.as_deref(), Some(detail));
    assert_eq!(st.last_state.unwrap().terminated.unwrap().exit_code, 143);
    // Second failure: back-off 10 s.
    d.at(2.0);
    d.hook("app", HookKind::PostStart, Err("boom".to_string()));
    assert_eq!(d.starts().len(), 2);
    assert_eq!(d.state("app"), "waiting(CrashLoopBackOff)");
    d.at(12.0);
    assert_eq!(d.starts().last(), Some(&(12.0, "app".to_string(), 2)));
}

#[test]
fn h3_post_start_failure_runs_pre_stop_with_the_pod_grace() {
    let mut d = Driver::with(
        json!({"terminationGracePeriodSeconds": 10, "containers": [c("app", json!({
            "lifecycle": {"postStart": {"exec": {"command": ["a"]}}, "preStop": {"exec": {"command": ["b"]}}},
        }))]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.hook("app", HookKind::PostStart, Err("boom".to_string()));
    d.at(3.0);
    d.hook("app", HookKind::PreStop, Ok(()));
    d.at(20.0);
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "0 RunHook PostStart",
            "0 Killing: FailedPostStartHook",
            "0 RunHook PreStop",
            "3 Stop SIGTERM grace=7",
            "10 SIGKILL",
            "10 RunHook PostStart",
        ]
    );
}

#[test]
fn h3_post_start_failure_under_never_is_not_restarted() {
    let mut d = Driver::new(json!({"restartPolicy": "Never", "containers": [
        c("app", json!({"lifecycle": post_start()})),
    ]}));
    d.hook("app", HookKind::PostStart, Err("boom".to_string()));
    assert_eq!(d.starts().len(), 1);
    assert_eq!(d.state("app"), "terminated(Error,143)");
    assert_eq!(d.m().phase(), Phase::Failed);
}

#[test]
fn h4_pre_stop_longer_than_grace_signal_at_grace_then_two_seconds() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"lifecycle": pre_stop()}))]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.delete(None);
    d.at(40.0);
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "0 Killing: Stopping container app",
            "0 RunHook PreStop",
            "30 Stop SIGTERM grace=2",
            "32 SIGKILL",
        ]
    );
    assert_eq!(d.terminated_at(), Some(32.0));
}

#[test]
fn h4_pre_stop_elapsed_whole_seconds_come_off_the_grace() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"lifecycle": pre_stop()}))]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.delete(None);
    d.at(5.5);
    d.hook("app", HookKind::PreStop, Ok(()));
    d.at(40.0);
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "0 Killing: Stopping container app",
            "0 RunHook PreStop",
            "5.5 Stop SIGTERM grace=25",
            "30.5 SIGKILL",
        ]
    );
}

#[test]
fn h4_pre_stop_failure_event_and_termination_proceeds() {
    let mut d = Driver::new(json!({"containers": [c("app", json!({"lifecycle": pre_stop()}))]}));
    d.delete(None);
    d.at(1.0);
    d.hook("app", HookKind::PreStop, Err("exit 1".to_string()));
    assert_eq!(
        d.events("FailedPreStopHook"),
        vec![(1.0, EventType::Warning, "PreStopHook failed".to_string())]
    );
    assert_eq!(
        d.stops(),
        vec![(1.0, "app".to_string(), "SIGTERM".to_string(), 29)]
    );
    assert!(d.m().is_terminated());
}

#[test]
fn h4_no_pre_stop_when_the_grace_is_zero() {
    let mut d = Driver::with(
        json!({"terminationGracePeriodSeconds": 0, "containers": [c("app", json!({
            "lifecycle": pre_stop(),
            "livenessProbe": probe(1, 1),
        }))]}),
        |d| {
            d.answer_probes("app", Liveness, fail("down"));
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.at(1.0);
    // A liveness kill uses the container grace (0): no preStop, stop with the 2 s minimum.
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "1 Killing: Container app failed liveness probe, will be restarted",
            "1 Stop SIGTERM grace=2",
        ]
    );
    d.at(3.0);
    assert_eq!(d.kills(), vec![(3.0, "app".to_string())]);
}

#[test]
fn h5_no_hooks_for_exited_containers() {
    let mut d = Driver::new(json!({"restartPolicy": "Never", "containers": [
        c("done", json!({"lifecycle": pre_stop()})),
        c("app", json!({"lifecycle": pre_stop()})),
    ]}));
    d.at(1.0);
    d.exit("done", 1);
    d.at(2.0);
    d.delete(None);
    assert_eq!(d.hooks(), vec![(2.0, "app".to_string(), HookKind::PreStop)]);
    assert_eq!(d.messages("Killing"), vec!["Stopping container app"]);
}

#[test]
fn h5_post_start_runs_again_for_every_instance() {
    let mut d = Driver::new(json!({"containers": [c("app", json!({"lifecycle": post_start()}))]}));
    d.hook("app", HookKind::PostStart, Ok(()));
    d.at(1.0);
    d.exit("app", 1);
    d.hook("app", HookKind::PostStart, Ok(()));
    d.at(2.0);
    d.exit("app", 1);
    d.at(12.0);
    let post: Vec<f64> = d.hooks().iter().map(|h| h.0).collect();
    assert_eq!(post, vec![0.0, 1.0, 12.0]);
    let ids: Vec<InstanceId> = d
        .log()
        .into_iter()
        .filter_map(|(_, a)| match a {
            Action::RunHook { instance, .. } => Some(*instance),
            _ => None,
        })
        .collect();
    assert_eq!(ids, d.instances("app"));
}

#[test]
fn h6_post_start_has_no_time_limit() {
    let mut d = Driver::new(json!({"terminationGracePeriodSeconds": 5, "containers": [
        c("app", json!({"lifecycle": post_start(), "livenessProbe": probe(1, 1)})),
    ]}));
    d.at(3600.0);
    assert!(d.events("Killing").is_empty());
    assert!(d.stops().is_empty());
    assert_eq!(d.m().poll_timeout().map(|t| t > d.now()), Some(true));
    d.hook("app", HookKind::PostStart, Ok(()));
    assert_eq!(d.state("app"), "running");
}

// ---- 8. termination -----------------------------------------------------------------------------

#[test]
fn t1_pod_grace_comes_from_the_spec_or_the_delete() {
    let spec = json!({"terminationGracePeriodSeconds": 20, "containers": [c("app", json!({}))]});
    let setup = |d: &mut Answers| {
        d.ignore_stop.insert("app".to_string());
    };
    let mut d = Driver::with(spec.clone(), setup);
    d.delete(None);
    assert_eq!(d.m().pod().metadata.deletion_grace_period_seconds, Some(20));
    d.at(30.0);
    assert_eq!(
        d.stops(),
        vec![(0.0, "app".to_string(), "SIGTERM".to_string(), 20)]
    );
    assert_eq!(d.kills(), vec![(20.0, "app".to_string())]);

    let mut d = Driver::with(spec, setup);
    d.delete(Some(5));
    d.at(30.0);
    assert_eq!(
        d.stops(),
        vec![(0.0, "app".to_string(), "SIGTERM".to_string(), 5)]
    );
    assert_eq!(d.kills(), vec![(5.0, "app".to_string())]);
}

#[test]
fn t1_a_shorter_re_request_cuts_the_kill_in_progress_a_longer_one_is_ignored() {
    let mut d = Driver::with(json!({"containers": [c("app", json!({}))]}), |d| {
        d.ignore_stop.insert("app".to_string());
    });
    d.delete(None);
    d.at(10.0);
    d.delete(Some(5));
    assert_eq!(d.m().pod().metadata.deletion_grace_period_seconds, Some(5));
    d.at(12.0);
    d.delete(Some(60));
    assert_eq!(d.m().pod().metadata.deletion_grace_period_seconds, Some(5));
    d.at(40.0);
    assert_eq!(
        d.stops(),
        vec![(0.0, "app".to_string(), "SIGTERM".to_string(), 30)]
    );
    assert_eq!(d.kills(), vec![(15.0, "app".to_string())]);
}

#[test]
fn t1_a_shorter_re_request_cuts_a_running_pre_stop() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({"lifecycle": pre_stop()}))]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.delete(None);
    d.at(5.0);
    d.delete(Some(10));
    d.at(40.0);
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "0 Killing: Stopping container app",
            "0 RunHook PreStop",
            "15 Stop SIGTERM grace=2",
            "17 SIGKILL",
        ]
    );
}

#[test]
fn t1_t10_forced_delete_grace_floor_one_second_and_two_second_stop() {
    let mut d = Driver::with(
        json!({"containers": [
            c("app", json!({"lifecycle": pre_stop()})),
            c("plain", json!({})),
        ]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
            d.ignore_stop.insert("plain".to_string());
        },
    );
    d.at(1.0);
    d.delete(Some(0));
    assert_eq!(d.m().pod().metadata.deletion_grace_period_seconds, Some(0));
    d.at(10.0);
    // The pod grace is floored at 1: preStop gets 1 s; every stop still leaves 2 s.
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "1 Killing: Stopping container app",
            "1 RunHook PreStop",
            "2 Stop SIGTERM grace=2",
            "4 SIGKILL",
        ]
    );
    assert_eq!(
        d.lifecycle("plain"),
        vec![
            "1 Killing: Stopping container plain",
            "1 Stop SIGTERM grace=2",
            "3 SIGKILL"
        ]
    );
    assert_eq!(d.terminated_at(), Some(4.0));
}

#[test]
fn t2_probe_grace_for_liveness_kills_deletion_grace_overrides() {
    let spec = json!({"terminationGracePeriodSeconds": 30, "containers": [c("app", json!({
        "livenessProbe": {"exec": {"command": ["check"]}, "periodSeconds": 1, "failureThreshold": 1, "terminationGracePeriodSeconds": 60},
    }))]});
    let mut d = Driver::with(spec.clone(), |d| {
        d.answer_probes("app", Liveness, fail("down"));
        d.ignore_stop.insert("app".to_string());
    });
    d.at(1.0);
    assert_eq!(
        d.stops(),
        vec![(1.0, "app".to_string(), "SIGTERM".to_string(), 60)]
    );

    // A pod deletion uses the pod value, never the probe's.
    let mut d = Driver::with(spec, |d| {
        d.ignore_stop.insert("app".to_string());
    });
    d.delete(None);
    assert_eq!(
        d.stops(),
        vec![(0.0, "app".to_string(), "SIGTERM".to_string(), 30)]
    );
}

#[test]
fn t3_killing_event_then_stop_signal_then_sigkill() {
    let mut d = Driver::with(
        json!({"terminationGracePeriodSeconds": 3, "containers": [
            c("app", json!({"lifecycle": {"stopSignal": "SIGUSR1"}})),
        ]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.at(2.0);
    let mark = d.log().len();
    d.delete(None);
    d.at(10.0);
    let seq: Vec<String> = d.log()[mark..]
        .iter()
        .filter_map(|(t, a)| match a {
            Action::EmitEvent(e) if e.reason == "Killing" => {
                Some(format!("{t} Killing [{:?}] {}", e.type_, e.message))
            }
            Action::StopContainer { signal, grace, .. } => {
                Some(format!("{t} StopContainer {signal} {}s", grace.as_secs()))
            }
            Action::KillContainer { .. } => Some(format!("{t} KillContainer")),
            Action::PodTerminated => Some(format!("{t} PodTerminated")),
            _ => None,
        })
        .collect();
    assert_eq!(
        seq,
        vec![
            "2 Killing [Normal] Stopping container app",
            "2 StopContainer SIGUSR1 3s",
            "5 KillContainer",
            "5 PodTerminated",
        ]
    );
}

#[test]
fn t4_all_containers_are_killed_concurrently() {
    let mut d = Driver::new(json!({"containers": [
        c("a", json!({"lifecycle": pre_stop()})),
        c("b", json!({"lifecycle": pre_stop()})),
        c("c", json!({})),
    ]}));
    d.at(1.0);
    d.delete(None);
    let hooks: Vec<(f64, String)> = d.hooks().into_iter().map(|h| (h.0, h.1)).collect();
    assert_eq!(hooks, vec![(1.0, "a".to_string()), (1.0, "b".to_string())]);
    assert_eq!(
        d.stops(),
        vec![(1.0, "c".to_string(), "SIGTERM".to_string(), 30)]
    );
    d.at(2.0);
    d.hook("b", HookKind::PreStop, Ok(()));
    d.at(4.0);
    d.hook("a", HookKind::PreStop, Ok(()));
    let stops: Vec<(f64, String, u64)> = d.stops().into_iter().map(|s| (s.0, s.1, s.3)).collect();
    assert_eq!(
        stops,
        vec![
            (1.0, "c".to_string(), 30),
            (2.0, "b".to_string(), 29),
            (4.0, "a".to_string(), 27)
        ]
    );
    assert!(d.m().is_terminated());
}

#[test]
fn t5_sidecars_stop_after_regular_containers_in_reverse_order() {
    let mut d = Driver::with(
        json!({
            "initContainers": [
                sidecar("s1", json!({"lifecycle": pre_stop()})),
                sidecar("s2", json!({"lifecycle": pre_stop()})),
            ],
            "containers": [
                c("a", json!({"lifecycle": pre_stop()})),
                c("b", json!({"lifecycle": pre_stop()})),
            ],
        }),
        |d| {
            d.ignore_stop.insert("s2".to_string());
        },
    );
    assert_eq!(d.m().phase(), Phase::Running);
    d.delete(None);
    // Every preStop, sidecars included, starts with the termination.
    let hooks: Vec<(f64, String)> = d.hooks().into_iter().map(|h| (h.0, h.1)).collect();
    assert_eq!(
        hooks,
        vec![
            (0.0, "s1".to_string()),
            (0.0, "s2".to_string()),
            (0.0, "a".to_string()),
            (0.0, "b".to_string()),
        ]
    );
    d.at(1.0);
    d.hook("s2", HookKind::PreStop, Ok(()));
    d.at(2.0);
    d.hook("s1", HookKind::PreStop, Ok(()));
    d.at(3.0);
    d.hook("a", HookKind::PreStop, Ok(()));
    // Sidecars wait for the regular containers.
    assert_eq!(d.stops().len(), 1);
    d.at(5.0);
    d.hook("b", HookKind::PreStop, Ok(()));
    // b exits at once; s2 (the later sidecar) goes first, s1 waits for it.
    let stops: Vec<(f64, String, u64)> = d.stops().into_iter().map(|s| (s.0, s.1, s.3)).collect();
    assert_eq!(
        stops,
        vec![
            (3.0, "a".to_string(), 27),
            (5.0, "b".to_string(), 25),
            (5.0, "s2".to_string(), 25)
        ]
    );
    d.at(6.0);
    d.exit("s2", 143);
    let stops: Vec<(f64, String, u64)> = d.stops().into_iter().map(|s| (s.0, s.1, s.3)).collect();
    // s1: preStop 2 s (28 left), waited 4 s for its turn (24 left).
    assert_eq!(stops[3], (6.0, "s1".to_string(), 24));
    assert!(d.m().is_terminated());
}

#[test]
fn t5_a_sidecar_whose_budget_ran_out_while_waiting_still_gets_two_seconds() {
    let mut d = Driver::with(
        json!({
            "terminationGracePeriodSeconds": 5,
            "initContainers": [sidecar("proxy", json!({}))],
            "containers": [c("app", json!({}))],
        }),
        |d| {
            d.ignore_stop.insert("app".to_string());
            d.ignore_stop.insert("proxy".to_string());
        },
    );
    d.delete(None);
    d.at(20.0);
    assert_eq!(
        d.lifecycle("proxy"),
        vec![
            "0 Killing: Stopping container proxy",
            "5 Stop SIGTERM grace=2",
            "7 SIGKILL"
        ]
    );
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "0 Killing: Stopping container app",
            "0 Stop SIGTERM grace=5",
            "5 SIGKILL"
        ]
    );
}

#[test]
fn t5_job_style_completion_stops_sidecars_in_reverse_order() {
    let mut d = Driver::with(
        json!({
            "restartPolicy": "Never",
            "initContainers": [sidecar("s1", json!({})), sidecar("s2", json!({}))],
            "containers": [c("job", json!({}))],
        }),
        |d| {
            d.ignore_stop.insert("s2".to_string());
        },
    );
    d.at(4.0);
    d.exit("job", 0);
    assert_eq!(
        d.lifecycle("s2"),
        vec![
            "4 Killing: Stopping container s2",
            "4 Stop SIGTERM grace=30"
        ]
    );
    assert_eq!(d.lifecycle("s1"), vec!["4 Killing: Stopping container s1"]);
    d.at(5.0);
    d.exit("s2", 143);
    assert_eq!(
        d.lifecycle("s1"),
        vec![
            "4 Killing: Stopping container s1",
            "5 Stop SIGTERM grace=29"
        ]
    );
    assert_eq!(d.m().phase(), Phase::Succeeded);
    assert!(d.m().is_terminated());
}

#[test]
fn t6_readiness_keeps_running_during_termination_and_can_unready_the_pod() {
    let mut d = Driver::with(
        json!({"containers": [c("app", json!({
            "lifecycle": pre_stop(),
            "readinessProbe": probe(1, 1),
            "livenessProbe": probe(1, 1),
        }))]}),
        |d| {
            d.answer_probes("app", Readiness, Success);
            d.answer_probes("app", Liveness, Success);
        },
    );
    d.at(1.5);
    d.delete(None);
    // T7: deletion itself does not flip readiness.
    assert!(d.ready("app"));
    assert_eq!(d.cond("Ready").0, "True");
    d.answer_probes("app", Readiness, fail("draining"));
    d.answer_probes("app", Liveness, fail("down"));
    d.at(3.0);
    assert!(!d.ready("app"));
    assert_eq!(d.cond("Ready").0, "False");
    assert_eq!(d.probe_times("app", Liveness), vec![1.0]);
    assert_eq!(d.messages("Killing"), vec!["Stopping container app"]);
    assert_eq!(d.m().phase(), Phase::Running);
}

#[test]
fn t6_statuses_stay_as_termination_began_but_a_dead_container_is_unready_at_once() {
    let mut d = Driver::with(
        json!({"containers": [c("a", json!({})), c("b", json!({}))]}),
        |d| {
            d.stop_code.insert("a".to_string(), 0);
            d.ignore_stop.insert("b".to_string());
        },
    );
    d.at(1.0);
    d.delete(Some(10));
    // `a` exited at once on SIGTERM; inside SyncTerminatingPod the statuses stay as written
    // when termination began (`a` still reads running) until `b` is gone too, but a container
    // that died is not ready at once (T6 as with the evented PLEG, kubernetes#128820): exactly
    // one of the two stays ready, and the pod's ContainersReady/Ready follow.
    assert!(!d.m().is_terminated());
    assert_eq!(d.state("a"), "running");
    assert!(!d.ready("a"));
    assert!(d.ready("b"));
    assert_eq!(d.cond("ContainersReady").0, "False");
    assert_eq!(d.cond("Ready").0, "False");
    assert_eq!(d.m().phase(), Phase::Running);
    d.at(4.0);
    d.exit("b", 143);
    // The final status shows both as they ended.
    assert!(d.m().is_terminated());
    assert_eq!(d.state("a"), "terminated(Completed,0)");
    assert_eq!(d.state("b"), "terminated(Error,143)");
    assert_eq!(d.cond("Ready").0, "False");
    assert_eq!(d.m().phase(), Phase::Failed);
}

#[test]
fn t8_final_phase_succeeded_only_if_every_regular_container_exited_zero() {
    let spec = json!({
        "initContainers": [sidecar("proxy", json!({}))],
        "containers": [c("a", json!({})), c("b", json!({}))],
    });
    // Both regular containers exit 0 on SIGTERM; the sidecar dies with 143 and is ignored.
    let mut d = Driver::with(spec.clone(), |d| {
        d.stop_code.insert("a".to_string(), 0);
        d.stop_code.insert("b".to_string(), 0);
    });
    d.delete(None);
    assert!(d.m().is_terminated());
    assert_eq!(d.state("proxy"), "terminated(Error,143)");
    assert_eq!(d.m().phase(), Phase::Succeeded);

    let mut d = Driver::with(spec, |d| {
        d.stop_code.insert("a".to_string(), 0);
    });
    d.delete(None);
    assert!(d.m().is_terminated());
    assert_eq!(d.m().phase(), Phase::Failed);
}

#[test]
fn t9_pod_terminated_after_every_container_is_dead() {
    let mut d = Driver::with(
        json!({"containers": [c("a", json!({})), c("b", json!({}))]}),
        |d| {
            d.ignore_stop.insert("b".to_string());
        },
    );
    d.delete(Some(10));
    assert!(!d.m().is_terminated());
    assert_eq!(d.terminated_at(), None);
    d.at(4.0);
    d.exit("b", 143);
    assert_eq!(d.terminated_at(), Some(4.0));
    assert!(d.m().is_terminated());
    assert_eq!(d.m().poll_timeout(), None);
    assert!(matches!(d.log().last(), Some((_, Action::PodTerminated))));
}

#[test]
fn t11_liveness_kill_of_a_sidecar_does_not_wait_for_ordering() {
    let mut d = Driver::with(
        json!({
            "initContainers": [sidecar("proxy", json!({"livenessProbe": probe(1, 1)}))],
            "containers": [c("app", json!({}))],
        }),
        |d| d.answer_probes("proxy", Liveness, fail("down")),
    );
    d.at(1.0);
    assert_eq!(
        d.lifecycle("proxy"),
        vec![
            "1 Killing: Init container proxy failed liveness probe",
            "1 Stop SIGTERM grace=30"
        ]
    );
    // Restarted right away; the pod is not terminating.
    assert!(!d.m().is_terminating());
    assert_eq!(d.status("proxy").restart_count, 1);
    assert_eq!(d.state("app"), "running");
}

#[test]
fn t11_definition_change_kill_and_restart() {
    let spec = json!({"containers": [c("app", json!({}))]});
    let mut d = Driver::new(spec.clone());
    d.at(2.0);
    let mut new = pod(spec);
    new.spec.as_mut().unwrap().containers[0].image = Some("busybox:2".to_string());
    d.spec_update(new);
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "2 Killing: Container app definition changed, will be restarted",
            "2 Stop SIGTERM grace=30"
        ]
    );
    assert_eq!(d.starts().last(), Some(&(2.0, "app".to_string(), 1)));
    assert_eq!(d.status("app").image, "busybox:2");
}

#[test]
fn m1_active_deadline_terminates_like_a_deletion() {
    let mut d = Driver::with(
        json!({"activeDeadlineSeconds": 10, "terminationGracePeriodSeconds": 4, "containers": [c("app", json!({}))]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.at(20.0);
    assert_eq!(
        d.events("DeadlineExceeded"),
        vec![(
            10.0,
            EventType::Normal,
            "Pod was active on the node longer than the specified deadline".to_string()
        )]
    );
    assert_eq!(
        d.lifecycle("app"),
        vec![
            "10 Killing: Stopping container app",
            "10 Stop SIGTERM grace=4",
            "14 SIGKILL"
        ]
    );
    assert_eq!(d.m().phase(), Phase::Failed);
    let status = d.m().pod().status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(d.terminated_at(), Some(14.0));
}

#[test]
fn t1_d8_eviction_kills_with_the_override_and_fails_the_pod_as_evicted_with_a_disruption_target() {
    // The kubelet's eviction manager: `TerminatePodAbnormallyAndWait` with grace 1 s
    // (hard threshold), phase Failed, reason Evicted, the DisruptionTarget condition and a
    // Warning Evicted event on the pod.
    let message = "The node was low on resource: ephemeral-storage. ";
    let mut d = Driver::with(
        json!({"terminationGracePeriodSeconds": 30, "containers": [c("app", json!({}))]}),
        |d| {
            d.ignore_stop.insert("app".to_string());
        },
    );
    d.at(5.0);
    d.d.input(
        Input::Evict {
            message: message.to_string(),
            grace: 1,
        },
        d.now(),
    );
    d.at(10.0);
    assert_eq!(
        d.events("Evicted"),
        vec![(5.0, EventType::Warning, message.to_string())]
    );
    assert_eq!(
        d.lifecycle("app"),
        // The override is 1 s; the kubelet's container kill raises it to its 2 s minimum.
        vec![
            "5 Killing: Stopping container app",
            "5 Stop SIGTERM grace=2",
            "7 SIGKILL"
        ]
    );
    assert_eq!(d.m().phase(), Phase::Failed);
    let status = d.m().pod().status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert_eq!(status.message.as_deref(), Some(message));
    let target = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("a DisruptionTarget condition");
    assert_eq!(
        (
            target.status.as_str(),
            target.reason.as_deref(),
            target.message.as_deref()
        ),
        ("True", Some("TerminationByKubelet"), Some(message))
    );
    // A second eviction of a finished pod changes nothing.
    d.d.input(
        Input::Evict {
            message: "again".to_string(),
            grace: 1,
        },
        d.now(),
    );
    assert_eq!(d.events("Evicted").len(), 1);
}

#[test]
fn b5_back_off_message_names_the_pod() {
    let mut d = Driver::new(json!({"containers": [c("app", json!({}))]}));
    d.at(1.0);
    d.exit("app", 1);
    d.at(2.0);
    d.exit("app", 1);
    assert_eq!(
        d.messages("BackOff"),
        vec![format!(
            "Back-off restarting failed container app in pod {FULL_NAME}"
        )]
    );
}

#[test]
fn t6_a_back_off_pending_at_deletion_is_no_timer_to_wake_for() {
    let mut d = Driver::new(json!({"containers": [
        c("app", json!({})),
        c("slow", json!({"lifecycle": pre_stop()})),
    ]}));
    d.at(1.0);
    d.exit("app", 1);
    d.at(2.0);
    d.exit("app", 1); // back-off until 12
    d.at(3.0);
    d.delete(None);
    // slow's preStop runs until 33; the back-off expiring at 12 must not spin the driver.
    d.at(20.0);
    assert!(d.m().poll_timeout().is_some_and(|t| t > d.now()));
    assert_eq!(d.starts().len(), 3);
    d.at(40.0);
    assert!(d.m().is_terminated());
}

#[test]
fn b7_a_back_off_expiring_while_initialization_regressed_is_no_busy_timer() {
    let mut d = Driver::new(json!({
        "initContainers": [sidecar("proxy", json!({}))],
        "containers": [c("app", json!({}))],
    }));
    d.at(1.0);
    d.exit("app", 1); // restarted at once
    d.at(2.0);
    d.exit("app", 1); // back-off until 12
    d.at(3.0);
    d.exit("proxy", 1); // restarted at once
    d.at(4.0);
    d.exit("proxy", 1); // back-off until 14: the pod is not initialized any more
    // At 12 the app's back-off is over but its turn has not come: nothing to spin on.
    d.at(13.0);
    assert!(d.m().poll_timeout().is_some_and(|t| t > d.now()));
    d.at(14.0);
    let last: Vec<(f64, String, i32)> = d.starts().into_iter().skip(4).collect();
    assert_eq!(
        last,
        vec![(14.0, "proxy".to_string(), 2), (14.0, "app".to_string(), 2)]
    );
}

#[test]
fn p11_a_terminal_phase_is_never_left_even_for_the_other_terminal_phase() {
    // The image change kills the app (restart forced, A11); it exits 0 and its replacement's start
    // is still in flight when the pod is deleted.
    let spec = json!({"containers": [c("app", json!({
        "restartPolicy": "Never",
        "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}],
    }))]});
    let mut d = Driver::with(spec.clone(), |d| {
        d.ignore_stop.insert("app".to_string());
    });
    d.d.runtime_mut().starts = false;
    let mut new = pod(spec);
    new.spec.as_mut().unwrap().containers[0].image = Some("busybox:2".to_string());
    d.spec_update(new);
    d.at(1.0);
    d.exit("app", 0);
    d.delete(Some(3));
    // The app's newest instance exited 0 and will not be restarted by policy.
    assert_eq!(d.m().phase(), Phase::Succeeded);
    // The replacement starts anyway and is killed with the pod (137): still Succeeded.
    d.start_pending();
    d.at(10.0);
    assert!(d.m().is_terminated());
    assert_eq!(d.kills().len(), 1);
    assert_eq!(d.m().phase(), Phase::Succeeded);
}
