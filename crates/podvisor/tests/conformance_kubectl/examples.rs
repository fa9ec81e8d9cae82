//! The scenarios given in `../shared/spec/conformance-examples.md`, plus `u65` and `u73`.

use super::checks::*;
use super::harness::*;
use crate::conformance_support::*;
use serde_json::Value;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const RI1: &str = "restartable-init-1";
const RI2: &str = "restartable-init-2";
const RI3: &str = "restartable-init-3";

// ----------------------------------------------------------------------------------------------
// Init containers (01, 02, 05)

/// Condition `Initialized` True; exactly `n` init container statuses, each ready and
/// terminated with exit code 0.
fn check_init_statuses(c: &mut Checks, p: &Value, n: usize) {
    c.check(
        cond_status(p, "Initialized") == "True",
        "condition Initialized is True",
    );
    let inits = p["status"]["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    c.check(
        inits.len() == n,
        format!("{n} initContainerStatuses (got {})", inits.len()),
    );
    for i in &inits {
        let name = i["name"].as_str().unwrap_or("?");
        c.check(i["ready"] == true, format!("{name} ready"));
        c.check(
            i["state"]["terminated"]["exitCode"] == 0,
            format!("{name} terminated with exit code 0"),
        );
    }
}

/// 01 and 02: the two init containers succeed, `run1` reaches `phase`.
fn init_then<'a>(srv: &'a Server, id: &str, want_phase: &str) -> (Pod<'a>, Checks) {
    let mut pod = srv.create_scenario(id);
    let (_, end) = pod.wait_phase(want_phase, secs(60));
    let mut c = Checks::new();
    check_init_statuses(&mut c, &end.pod, 2);
    pod.delete_and_wait_gone(secs(60));
    check_init_invariants(&mut c, &pod, "run1");
    (pod, c)
}

fn s01(srv: &Server) {
    let (pod, c) = init_then(srv, "s01", "Succeeded");
    c.finish("s01", || pod.diag());
}

fn s02(srv: &Server) {
    let (pod, mut c) = init_then(srv, "s02", "Running");
    let obs = pod.observations();
    check_not_restarted(
        &mut c,
        &pod,
        &obs,
        &["init1", "init2"],
        "restartCount stays 0",
    );
    c.finish("s02", || pod.diag());
}

fn s05(srv: &Server) {
    let mut pod = srv.create_scenario("s05");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let ev = pod.ev_log();
    let chain = ["init-1", "init-2", "init-3", "regular-1"];
    EvChecks::new(&mut c, &ev).in_order(&chain, true);
    // Section 0.3: the same lines are in each container's log.
    for name in chain {
        let from_file: Vec<String> = ev
            .lines
            .iter()
            .filter(|e| e.actor == name)
            .map(|e| e.word.clone())
            .collect();
        let logs = pod.logs(name, false);
        let from_logs: Vec<String> = EvLog::parse(logs.as_deref().unwrap_or(""))
            .lines
            .into_iter()
            .map(|e| e.word)
            .collect();
        c.check(
            from_file == ["Starting", "Started", "Exiting"] && from_logs == from_file,
            format!("LOGS({name}) has its event-log lines: {logs:?} vs {from_file:?}"),
        );
    }
    pod.delete_and_wait_gone(secs(60));
    c.finish("s05", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecars (09, 10, 18)

fn s09(srv: &Server) {
    let mut pod = srv.create_scenario("s09");
    let (_, end) = pod.wait_terminal(secs(90));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .completes_before("init-1", RI1)
        .overlap_from(RI1, "init-2")
        .completes_before("init-2", RI2)
        .starts_before(RI2, "init-3")
        .overlap(RI1, RI2)
        .overlap(RI1, "init-3")
        .overlap(RI2, "init-3")
        .completes_before("init-3", "regular-1")
        .overlap(RI1, "regular-1")
        .overlap(RI2, "regular-1")
        .not_restarted(&[RI1, RI2]);
    pod.delete_and_wait_gone(secs(60));
    c.finish("s09", || pod.diag());
}

/// 10 and 10b: the sidecar runs for the whole pod, which then succeeds.
fn sidecar_continuous(srv: &Server, file: &str) -> (Checks, String) {
    let mut pod = srv.create_scenario_file("s10", file);
    let (_, end) = pod.wait_phase("Succeeded", secs(60));
    let mut c = Checks::new();
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .not_restarted(&[RI1])
        .exits("regular-1");
    check_terminated(&mut c, &pod, &end, RI1, 0, "Completed");
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    check_terminated(&mut c, &pod, &last, RI1, 0, "Completed");
    (c, pod.diag())
}

fn s10(srv: &Server) {
    let mut c = Checks::new();
    // The variants share the pod name and the scratch path: one after the other.
    let mut diags = Vec::new();
    for file in ["s10.yaml", "s10b.yaml"] {
        let (checks, diag) = sidecar_continuous(srv, file);
        c.merge(file, checks);
        diags.push(diag);
    }
    c.finish("s10", || diags.join("\n"));
}

fn s18(srv: &Server) {
    let mut pod = srv.create_scenario("s18");
    let (_, end) = pod.wait_terminal(secs(90));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let ev = pod.ev_log();
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    let ri = [RI1, RI2, RI3];
    for name in ri {
        check_terminated(&mut c, &pod, &end, name, 0, "Completed");
        check_terminated(&mut c, &pod, &last, name, 0, "Completed");
    }
    EvChecks::new(&mut c, &ev).sidecars_around(&ri, "regular-1");
    // Visibly serial: each sidecar's 5 s handler starts only once the next one has exited.
    for (later, earlier) in [(RI2, RI3), (RI1, RI2)] {
        let gap = ev
            .time_of(later, "Exiting")
            .zip(ev.time_of(earlier, "Exiting"))
            .map(|(a, b)| a - b);
        c.check(
            gap.is_some_and(|g| g >= 4.0),
            format!("{later} exits about 5 s after {earlier} (gap {gap:?} s)"),
        );
    }
    c.finish("s18", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Probes (28, 30, 32, 38)

fn s28(srv: &Server) {
    let mut pod = srv.create_scenario("s28");
    let (_, ready) = pod.wait("condition Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    let mut c = Checks::new();
    check_phase(&mut c, &ready.pod, "Running");
    let delay = check_ready_after_delay(&mut c, &ready.pod, "test-webserver", 5.0);
    pod.delete_and_wait_gone(secs(60));
    check_no_restarts(&mut c, &pod);
    eprintln!("s28: Ready {delay:?} s after the container started");
    c.finish("s28", || pod.diag());
}

/// 30, 32, 38: restartCount of `name` reaches 1 within 60 s, the previous instance's log
/// stays readable, and restartCount never decreases; with `started_false`, `name` is not
/// started before its first restart.
fn restarts_scenario(srv: &Server, id: &str, name: &str, started_false: bool) {
    let mut pod = srv.create_scenario(id);
    let (i, _) = pod.wait("restartCount >= 1", secs(60), |p| {
        restart_count(cstatus(p, name)) >= 1
    });
    let before = pod.observations()[..i].to_vec();
    let mut c = Checks::new();
    check_previous_logs(&mut c, &pod, name, |_| true);
    if started_false {
        check_each(
            &mut c,
            &pod,
            &before,
            |p| cstatus(p, name)["started"] != true,
            |_| "started before the first restart".to_string(),
        );
    }
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, name);
    c.finish(id, || pod.diag());
}

fn s30(srv: &Server) {
    restarts_scenario(srv, "s30", "busybox", false);
}

fn s32(srv: &Server) {
    restarts_scenario(srv, "s32", "agnhost-container", false);
}

fn s38(srv: &Server) {
    restarts_scenario(srv, "s38", "busybox", true);
}

// ----------------------------------------------------------------------------------------------
// Hooks (46, 47)

fn s46(srv: &Server) {
    let (mut obs, mut hook, running) = observed_hook_pod(srv, "s46", 18046);
    let mut c = Checks::new();
    check_observed(
        &mut c,
        &obs,
        "GET /echo?msg=poststart",
        running.seen + secs(30),
        "within 30 s of the hook pod running",
    );
    let (took, _) = hook.delete_with_grace(15, secs(30));
    eprintln!("s46: hook pod gone {took:?} after DELETE(15)");
    obs.delete_and_wait_gone(secs(60));
    c.finish("s46", || format!("{}{}", hook.diag(), obs.diag()));
}

fn s47(srv: &Server) {
    let (mut obs, mut hook, _) = observed_hook_pod(srv, "s47", 18047);
    let mut c = Checks::new();
    let line = "GET /echo?msg=prestop";
    check_not_observed(&mut c, &obs, line, "no prestop request before the delete");
    hook.delete(Some(15));
    let deleted = hook.deleted.unwrap();
    let seen = check_observed(
        &mut c,
        &obs,
        line,
        deleted + secs(30),
        "within 30 s of the delete",
    );
    let (took, _) = hook.wait_gone(secs(30));
    eprintln!(
        "s47: prestop seen {:?} and pod gone {took:?} after DELETE(15)",
        seen.map(|s| s - deleted)
    );
    obs.delete_and_wait_gone(secs(60));
    c.finish("s47", || format!("{}{}", hook.diag(), obs.diag()));
}

// ----------------------------------------------------------------------------------------------
// Restart policy (55)

struct Variant {
    id: &'static str,
    container: &'static str,
    restart_count: u64,
    phase: &'static str,
    ready: &'static str,
    state: &'static str,
}

/// One row of scenario 55's table, checked in order, each "eventually" within 60 s; then
/// `DELETE(gracePeriodSeconds=0)` and the pod is gone within 60 s.
fn restart_policy_variant(srv: &Server, v: &Variant) {
    let mut pod = srv.create_scenario(v.id);
    let name = v.container;
    let within = secs(60);
    let (i, _) = pod.wait(&format!("restartCount {}", v.restart_count), within, |p| {
        restart_count(cstatus(p, name)) == v.restart_count
    });
    let (i, _) = pod.wait_since(i, pod.created, &format!("phase {}", v.phase), within, |p| {
        phase(p) == v.phase
    });
    let (i, _) = pod.wait_since(i, pod.created, &format!("Ready {}", v.ready), within, |p| {
        cond_status(p, "Ready") == v.ready
    });
    let (_, end) = pod.wait_since(i, pod.created, &format!("state {}", v.state), within, |p| {
        state_kind(cstatus(p, name)) == v.state
    });
    let mut c = Checks::new();
    if v.restart_count > 0 {
        check_previous_logs(&mut c, &pod, name, |_| true);
    }
    let row = |p: &Value| {
        restart_count(cstatus(p, name)) == v.restart_count
            && phase(p) == v.phase
            && cond_status(p, "Ready") == v.ready
            && state_kind(cstatus(p, name)) == v.state
    };
    c.check(
        row(&end.pod),
        format!("all of the row hold together at t={:.3}", pod.t(&end)),
    );
    let (took, last) = pod.delete_with_grace(0, within);
    if v.phase != "Running" {
        c.check(
            row(&last.pod),
            "the final status still has the row's values",
        );
    }
    check_monotonic(&mut c, &pod, name);
    eprintln!("{}: gone {took:?} after DELETE(0)", v.id);
    c.finish(v.id, || pod.diag());
}

fn s55a(srv: &Server) {
    restart_policy_variant(
        srv,
        &Variant {
            id: "s55a",
            container: "terminate-cmd-rpa",
            restart_count: 2,
            phase: "Running",
            ready: "True",
            state: "running",
        },
    );
}

fn s55b(srv: &Server) {
    restart_policy_variant(
        srv,
        &Variant {
            id: "s55b",
            container: "terminate-cmd-rpof",
            restart_count: 1,
            phase: "Succeeded",
            ready: "False",
            state: "terminated",
        },
    );
}

fn s55c(srv: &Server) {
    restart_policy_variant(
        srv,
        &Variant {
            id: "s55c",
            container: "terminate-cmd-rpn",
            restart_count: 0,
            phase: "Failed",
            ready: "False",
            state: "terminated",
        },
    );
}

// ----------------------------------------------------------------------------------------------
// Deletion, termination message, conditions (60, 66, 71)

fn s60(srv: &Server) {
    // "unique value per run"
    let unique = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        .to_string();
    let selector = format!("time={unique}");
    let text = manifest("s60.yaml").replace("\"1700000060\"", &format!("\"{unique}\""));
    let mut c = Checks::new();
    let before = srv.list(&selector);
    c.check(
        before.is_empty(),
        format!("LIST({selector}) before CREATE is empty (got {before:?})"),
    );
    // The watch (of the label) is established before CREATE.
    let mut pod = srv.create_watched("s60", &text, &["-l".to_string(), selector.clone()]);
    let after = srv.list(&selector);
    c.check(
        after == ["s60-submit-remove"],
        format!("LIST({selector}) after CREATE is exactly the pod (got {after:?})"),
    );
    pod.wait("a watch event ADDED", secs(30), |_| true);
    c.check(
        pod.observations()
            .first()
            .is_some_and(|o| o.kind == "ADDED"),
        "the watch reports ADDED first",
    );
    let (running_i, _) = pod.wait("phase Running", secs(60), |p| phase(p) == "Running");
    pod.delete(Some(30));
    let deleted = pod.deleted.unwrap();
    // The object right after the delete: a GET (unless it is gone already) and the first
    // update the watch observed after it.
    if let Some(p) = pod.get() {
        c.check(
            p["metadata"]["deletionTimestamp"].is_string(),
            "GET right after DELETE shows metadata.deletionTimestamp",
        );
    }
    let (_, first_after) = pod.wait_since(
        running_i + 1,
        deleted,
        "the update after DELETE",
        secs(30),
        |p| p["metadata"]["deletionTimestamp"].is_string(),
    );
    let grace = first_after.pod["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0);
    c.check(
        grace > 0,
        format!("spec.terminationGracePeriodSeconds is non-zero ({grace})"),
    );
    c.check(
        first_after.pod["metadata"]["deletionGracePeriodSeconds"] == 30,
        format!(
            "metadata.deletionGracePeriodSeconds 30 (is {})",
            first_after.pod["metadata"]["deletionGracePeriodSeconds"]
        ),
    );
    let (took, last) = pod.wait_gone(secs(90));
    c.check(
        last.kind == "DELETED",
        format!("a DELETED watch event arrives (last was {})", last.kind),
    );
    c.check(
        last.pod["metadata"]["deletionTimestamp"].is_string()
            && last.pod["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .is_some_and(|g| g > 0),
        "the deleted object has deletionTimestamp and a non-zero terminationGracePeriodSeconds",
    );
    c.check(
        took <= secs(10),
        format!("gone within a few seconds (SHOULD; took {took:?})"),
    );
    let remaining = srv.list(&selector);
    c.check(
        remaining.is_empty(),
        format!("LIST({selector}) afterwards is empty (got {remaining:?})"),
    );
    c.check(
        pod.events().iter().any(|e| {
            e["reason"] == "Killing" && e["involvedObject"]["fieldPath"] == "spec.containers{pause}"
        }),
        "EVENTS: a Killing event for pause",
    );
    eprintln!("s60: gone {took:?} after DELETE(30)");
    c.finish("s60", || pod.diag());
}

/// `runtime.go` `matchTerminationMessage` (66, 67-70): the pod ends with `want_phase`, its
/// container terminated with message `want_msg`.
pub(crate) fn termination_message(srv: &Server, id: &str, want_phase: &str, want_msg: &str) {
    let mut pod = srv.create_scenario(id);
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, want_phase);
    let cs = cstatus(&end.pod, "termination-message-container");
    c.check(
        state_kind(cs) == "terminated",
        "the container is terminated",
    );
    let msg = &cs["state"]["terminated"]["message"];
    c.check(
        msg.as_str().unwrap_or("") == want_msg,
        format!("message {want_msg:?} (is {msg})"),
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

fn s66(srv: &Server) {
    termination_message(srv, "s66", "Succeeded", "DONE");
}

fn s71(srv: &Server) {
    let mut pod = srv.create_scenario("s71");
    let (_, ready) = pod.wait("condition Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    let mut c = Checks::new();
    check_phase(&mut c, &ready.pod, "Running");
    check_condition_order(
        &mut c,
        &ready.pod,
        &[
            "PodScheduled",
            "Initialized",
            "PodReadyToStartContainers",
            "ContainersReady",
            "Ready",
        ],
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish("s71", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// UPDATE (u65, u73): the upstream tests behind the document's scenarios 65 and 73

/// IDLE (0.5) pod manifest.
fn idle_pod(name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{extra_spec}  containers:\n  \
         - name: idle\n    image: busybox\n    command: [sh, -c, 'trap \"exit 0\" TERM; while \
         true; do sleep 1; done']\n"
    )
}

/// `test/e2e/common/node/pods.go` — "should allow activeDeadlineSeconds to be updated"
/// (Conformance): a running pod gets `activeDeadlineSeconds: 5` and fails with
/// `DeadlineExceeded` (M1); the field may be set and lowered but not raised, and
/// `terminationGracePeriodSeconds` may not change (M11).
fn u65(srv: &Server) {
    let mut pod = srv.create("u65", &idle_pod("u65-active-deadline", ""));
    let (running_i, running) = pod.wait("phase Running", secs(60), |p| phase(p) == "Running");
    let mut c = Checks::new();
    let out = pod.patch(r#"{"spec":{"activeDeadlineSeconds":3600}}"#);
    check_accepted(
        &mut c,
        &out,
        "UPDATE activeDeadlineSeconds nil -> 3600 is allowed",
    );
    let out = pod.patch(r#"{"spec":{"activeDeadlineSeconds":7200}}"#);
    check_refused(
        &mut c,
        &out,
        "must be less than or equal to previous value",
        "UPDATE activeDeadlineSeconds 3600 -> 7200 is refused",
    );
    let out = pod.patch(r#"{"spec":{"terminationGracePeriodSeconds":5}}"#);
    check_refused(
        &mut c,
        &out,
        "Forbidden: pod updates may not change fields",
        "UPDATE terminationGracePeriodSeconds 30 -> 5 is refused",
    );
    let patched = Instant::now();
    let out = pod.patch(r#"{"spec":{"activeDeadlineSeconds":5}}"#);
    check_accepted(
        &mut c,
        &out,
        "UPDATE activeDeadlineSeconds 3600 -> 5 is allowed",
    );
    let (_, failed) = pod.wait_since(running_i, patched, "phase Failed", secs(30), |p| {
        phase(p) == "Failed"
    });
    check_deadline_exceeded(&mut c, &failed.pod);
    // Measured from status.startTime: not before startTime + 5 s.
    check_deadline_timing(&mut c, &running.pod, &failed, 5.0, None);
    let idle = cstatus(&failed.pod, "idle");
    c.check(
        state_kind(idle) == "terminated" || state_kind(idle) == "running",
        format!("idle is {}", state_kind(idle)),
    );
    pod.wait_since(0, pod.created, "idle terminated", secs(60), |p| {
        state_kind(cstatus(p, "idle")) == "terminated"
    });
    check_deadline_event(&mut c, &pod);
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    c.check(
        phase(&last.pod) == "Failed" && restart_count(cstatus(&last.pod, "idle")) == 0,
        "the final status stays Failed, never restarted",
    );
    c.finish("u65", || pod.diag());
}

/// `test/e2e/common/node/pods.go` — "should support pod readiness gates": Ready follows the
/// gates' conditions, patched into `pods/status` by the client (D5, D9).
fn u73(srv: &Server) {
    let gates = "  readinessGates:\n  - {conditionType: k8s.io/test-condition1}\n  - \
                 {conditionType: k8s.io/test-condition2}\n";
    let mut pod = srv.create("u73", &idle_pod("u73-readiness-gates", gates));
    let (_, running) = pod.wait("Running with ContainersReady", secs(60), |p| {
        phase(p) == "Running" && cond_status(p, "ContainersReady") == "True"
    });
    let mut c = Checks::new();
    let ready = cond(&running.pod, "Ready");
    c.check(
        ready["status"] == "False" && ready["reason"] == "ReadinessGatesNotReady",
        format!("Ready False/ReadinessGatesNotReady at first (is {ready})"),
    );
    c.check(
        ready["message"]
            .as_str()
            .unwrap_or("")
            .contains(r#"corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist."#),
        format!("the message names the missing gate (is {})", ready["message"]),
    );
    let fmt = |t: &str, s: &str| {
        format!(r#"{{"status":{{"conditions":[{{"type":"{t}","status":"{s}"}}]}}}}"#)
    };

    // One gate True: still not ready (⏱ 2 s; upstream waits one 10 s sync loop).
    let from = pod.observations().len();
    pod.patch_status(&fmt("k8s.io/test-condition1", "True"));
    std::thread::sleep(secs(2));
    let obs = pod.observations();
    c.check(
        obs[from..]
            .iter()
            .all(|o| cond_status(&o.pod, "Ready") != "True"),
        "not Ready with only one gate True",
    );
    c.check(
        obs.last()
            .is_some_and(|o| cond_status(&o.pod, "k8s.io/test-condition1") == "True"),
        "the gate's condition is kept",
    );

    // Both gates True: Ready within 20 s (upstream tolerance 10 s).
    let from = pod.observations().len();
    let patched = Instant::now();
    pod.patch_status(&fmt("k8s.io/test-condition2", "True"));
    let (i, _) = pod.wait_since(from, patched, "Ready True", secs(20), |p| {
        cond_status(p, "Ready") == "True"
    });

    // One gate False again: not Ready within 20 s.
    let patched = Instant::now();
    pod.patch_status(&fmt("k8s.io/test-condition1", "False"));
    let (_, not_ready) = pod.wait_since(i + 1, patched, "Ready False", secs(20), |p| {
        cond_status(p, "Ready") == "False"
    });
    let ready = cond(&not_ready.pod, "Ready");
    c.check(
        ready["reason"] == "ReadinessGatesNotReady"
            && ready["message"]
                == r#"the status of pod readiness gate "k8s.io/test-condition1" is not "True", but False"#,
        format!("Ready False names the gate (is {ready})"),
    );
    c.check(
        cond_status(&not_ready.pod, "ContainersReady") == "True",
        "ContainersReady stays True",
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish("u73", || pod.diag());
}

pub(crate) const SCENARIOS: &[(&str, ScenarioFn)] = &[
    ("s01", s01),
    ("s02", s02),
    ("s05", s05),
    ("s09", s09),
    ("s10", s10),
    ("s18", s18),
    ("s28", s28),
    ("s30", s30),
    ("s32", s32),
    ("s38", s38),
    ("s46", s46),
    ("s47", s47),
    ("s55a", s55a),
    ("s55b", s55b),
    ("s55c", s55c),
    ("s60", s60),
    ("s66", s66),
    ("s71", s71),
    ("u65", u65),
    ("u73", u73),
];
