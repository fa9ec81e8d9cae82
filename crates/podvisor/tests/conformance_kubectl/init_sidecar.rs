//! Translations of the upstream e2e tests on init containers and sidecars (scenarios 01-27) that the
//! document does not spell out, in its form (manifests under `tests/conformance/`).
//!
//! Sources: `test/e2e/common/node/init_container.go` (03, 04) and
//! `test/e2e_node/container_lifecycle_test.go` (the others); each function names its test.
//! Timings are shortened (⏱) where upstream waits minutes; the orderings are kept.

use super::examples::{check_init_invariants, check_monotonic, check_sidecar_completed};
use super::harness::*;
use crate::conformance_support::*;
use serde_json::Value;

const RI1: &str = "restartable-init-1";
const RI2: &str = "restartable-init-2";
const RI3: &str = "restartable-init-3";

// ----------------------------------------------------------------------------------------------
// Helpers

/// `kubectl get pod NAME --no-headers`: the READY and STATUS columns.
fn kubectl_row(pod: &Pod) -> (String, String) {
    let cols = kubectl_cols(pod);
    (cols[1].clone(), cols[2].clone())
}

/// `kubectl get pod NAME --no-headers`: NAME, READY, STATUS, RESTARTS (which may read
/// `1 (5s ago)`), AGE.
fn kubectl_cols(pod: &Pod) -> Vec<String> {
    let out = pod
        .srv
        .kubectl_ok(&["get", "pod", &pod.name, "--no-headers"], None);
    let words: Vec<&str> = out.split_whitespace().collect();
    let mut cols: Vec<String> = words.iter().take(3).map(|w| (*w).to_string()).collect();
    cols.resize(3, String::new());
    let rest = words.get(3..words.len().saturating_sub(1)).unwrap_or(&[]);
    cols.push(rest.join(" "));
    cols.push(words.last().copied().unwrap_or("").to_string());
    cols
}

/// Once the pod satisfies `pred`, runs `kubectl get` and, if the pod still satisfies it
/// afterwards (an update in between makes the reading moot), checks READY and STATUS.
fn check_kubectl_while(
    c: &mut Checks,
    pod: &Pod,
    what: &str,
    pred: impl Fn(&Value) -> bool,
    ready: &str,
    status: &str,
) {
    pod.wait(what, secs(60), &pred);
    let cols = kubectl_cols(pod);
    if pred(&pod.last().pod) {
        c.check(
            cols[1] == ready && cols[2] == status,
            format!("{what}: kubectl READY {ready} STATUS {status} (is {cols:?})"),
        );
    } else {
        eprintln!("{}: {what}: the pod changed during kubectl get", pod.name);
    }
}

/// D3: `Initialized`, once True, stays True (a sidecar restarting after initialization does not
/// undo it).
fn check_initialized_stays(c: &mut Checks, pod: &Pod) {
    let mut was = false;
    for o in pod.observations() {
        let s = cond_status(&o.pod, "Initialized");
        c.check(
            !(was && s == "False"),
            format!(
                "t={:.3}: Initialized went from True back to False",
                pod.t(&o)
            ),
        );
        was |= s == "True";
    }
}

/// `UPDATE(pod, spec.initContainers[index].image)`: a JSON patch; kubectl's output.
fn patch_init_image(pod: &Pod, index: usize, image: &str) -> std::process::Output {
    patch_image(pod, "initContainers", index, image)
}

/// `UPDATE(pod, spec.<list>[index].image)`: a JSON patch; kubectl's output.
fn patch_image(pod: &Pod, list: &str, index: usize, image: &str) -> std::process::Output {
    let patch =
        format!(r#"[{{"op":"replace","path":"/spec/{list}/{index}/image","value":"{image}"}}]"#);
    pod.srv.kubectl(
        &["patch", "pod", &pod.name, "--type=json", "-p", &patch],
        None,
    )
}

/// The image a test switches to (upstream's `alternateImage`).
const NEW_IMAGE: &str = "busybox:1.36";

/// Whether `cs` is terminated with `code` and `reason`.
fn terminated_with(cs: &Value, code: i64, reason: &str) -> bool {
    let t = &cs["state"]["terminated"];
    t["exitCode"] == code && t["reason"] == reason
}

/// Describes a container status for a failed check.
fn show(p: &Value, name: &str) -> String {
    let cs = cstatus(p, name);
    format!(
        "{name} is {} {} (exit {}, rc {})",
        state_kind(cs),
        state(cs)["reason"],
        state(cs)["exitCode"],
        restart_count(cs)
    )
}

/// Checks that `name` is terminated with `code` and `reason` in `o`.
fn check_terminated(c: &mut Checks, pod: &Pod, o: &Obs, name: &str, code: i64, reason: &str) {
    c.check(
        terminated_with(cstatus(&o.pod, name), code, reason),
        format!(
            "t={:.3}: {name} terminated with {code}/{reason} ({})",
            pod.t(o),
            show(&o.pod, name)
        ),
    );
}

/// Checks that `name` waits with `PodInitializing` in every update that has its status.
fn check_always_pod_initializing(c: &mut Checks, pod: &Pod, obs: &[Obs], name: &str) {
    for o in obs {
        let cs = cstatus(&o.pod, name);
        if cs.is_null() {
            continue;
        }
        c.check(
            state_kind(cs) == "waiting" && state(cs)["reason"] == "PodInitializing",
            format!(
                "t={:.3}: {name} waits with PodInitializing ({})",
                pod.t(o),
                show(&o.pod, name)
            ),
        );
    }
}

/// Checks condition `Initialized`: False, `ContainersNotInitialized`, `message`.
fn check_not_initialized(c: &mut Checks, p: &Value, message: &str) {
    let ic = cond(p, "Initialized");
    c.check(
        ic["status"] == "False"
            && ic["reason"] == "ContainersNotInitialized"
            && ic["message"] == message,
        format!("Initialized False/ContainersNotInitialized/{message:?} (is {ic})"),
    );
}

/// P5 (1.32+): once the pod is Running, it does not go back to Pending before it ends.
fn check_never_pending_after_running(c: &mut Checks, pod: &Pod) {
    let mut running = false;
    for o in pod.observations() {
        let ph = phase(&o.pod);
        c.check(
            !(running && ph == "Pending"),
            format!("t={:.3}: back to Pending after Running", pod.t(&o)),
        );
        running |= ph == "Running";
    }
}

/// D3, D4, D5 for a terminal pod: `ContainersReady` and `Ready` False with reason
/// `PodCompleted`/`PodFailed`; `Initialized` True with reason `PodCompleted` when Succeeded.
fn check_terminal_conditions(c: &mut Checks, p: &Value) {
    let reason = if phase(p) == "Succeeded" {
        "PodCompleted"
    } else {
        "PodFailed"
    };
    for t in ["ContainersReady", "Ready"] {
        let k = cond(p, t);
        c.check(
            k["status"] == "False" && k["reason"] == reason,
            format!("{t} False/{reason} in the {} pod (is {k})", phase(p)),
        );
    }
    if reason == "PodCompleted" {
        let k = cond(p, "Initialized");
        c.check(
            k["status"] == "True" && k["reason"] == "PodCompleted",
            format!("Initialized True/PodCompleted (is {k})"),
        );
    }
}

/// Checks the phase of every update before the delete is `want`.
fn check_phase_throughout(c: &mut Checks, pod: &Pod, obs: &[Obs], want: &str) {
    for o in obs {
        c.check(
            phase(&o.pod) == want,
            format!("t={:.3}: phase {want} (is {})", pod.t(o), phase(&o.pod)),
        );
    }
}

/// The log protocol's `Starts(X)` / `DoesntStart(X)`, and `Exits(X)`.
fn starts(ev: &EvLog, x: &str) -> bool {
    ev.first(x, "Starting").is_some()
}

fn exits(ev: &EvLog, x: &str) -> bool {
    ev.first(x, "Exiting").is_some()
}

/// Whether an event with `reason` about `field_path` and a message satisfying `msg` exists.
fn has_event(pod: &Pod, reason: &str, field_path: &str, msg: impl Fn(&str) -> bool) -> bool {
    pod.events().iter().any(|e| {
        e["reason"] == reason
            && e["involvedObject"]["fieldPath"] == field_path
            && msg(e["message"].as_str().unwrap_or(""))
    })
}

// ----------------------------------------------------------------------------------------------
// Init containers (03, 04, 06, 07, 08)

/// `init_container.go` — "should not start app containers if init containers fail on a
/// RestartAlways pod" (Conformance): init1 fails for ever, init2 and run1 never start, the pod
/// stays Pending with `Initialized` False (A5, P5, D3, B1, B5).
pub(crate) fn s03(srv: &Server) {
    let mut pod = srv.create("s03", &manifest("s03.yaml"));
    let mut c = Checks::new();
    // K3, K8: kubectl shows the init container's back-off and its restarts with their age.
    let backing_off = |p: &Value| {
        let i1 = cstatus(p, "init1");
        state(i1)["reason"] == "CrashLoopBackOff" && restart_count(i1) >= 1
    };
    pod.wait("init1 in CrashLoopBackOff", secs(60), backing_off);
    let cols = kubectl_cols(&pod);
    let now = pod.last();
    if backing_off(&now.pod) {
        let rc = restart_count(cstatus(&now.pod, "init1"));
        c.check(
            cols[1] == "0/1"
                && cols[2] == "Init:CrashLoopBackOff"
                && cols[3].starts_with(&format!("{rc} ("))
                && cols[3].ends_with(" ago)"),
            format!(
                "kubectl READY 0/1 STATUS Init:CrashLoopBackOff RESTARTS {rc} (..ago) (is {cols:?})"
            ),
        );
    }
    // ⏱ upstream 5 min: restarts at 0, 10, 20 s (B1).
    let (i, end) = pod.wait("init1 restartCount >= 3", secs(60), |p| {
        restart_count(cstatus(p, "init1")) >= 3
    });
    let p = &end.pod;
    c.check(
        phase(p) == "Pending",
        format!("phase Pending (is {})", phase(p)),
    );
    check_not_initialized(
        &mut c,
        p,
        "containers with incomplete status: [init1 init2]",
    );
    c.check(
        p["status"]["initContainerStatuses"]
            .as_array()
            .is_some_and(|a| a.len() == 2),
        "2 initContainerStatuses",
    );
    let obs = pod.observations()[..=i].to_vec();
    check_phase_throughout(&mut c, &pod, &obs, "Pending");
    check_always_pod_initializing(&mut c, &pod, &obs, "run1");
    check_always_pod_initializing(&mut c, &pod, &obs, "init2");
    let (mut last_state, mut backoff) = (false, false);
    let tail = format!(
        " restarting failed container=init1 pod=s03-init-fails-always_default({})",
        pod.uid
    );
    for o in &obs {
        let i1 = cstatus(&o.pod, "init1");
        c.check(
            !terminated_with(i1, 0, "Completed"),
            format!("t={:.3}: init1 exited 0", pod.t(o)),
        );
        let lt = &i1["lastState"]["terminated"];
        if lt.is_object() {
            last_state = true;
            c.check(
                lt["exitCode"] == 1 && lt["reason"] == "Error",
                format!("t={:.3}: init1 lastState 1/Error (is {lt})", pod.t(o)),
            );
        }
        if state(i1)["reason"] == "CrashLoopBackOff" {
            backoff = true;
            let m = state(i1)["message"].as_str().unwrap_or("");
            c.check(
                m.starts_with("back-off ") && m.ends_with(&tail),
                format!("t={:.3}: CrashLoopBackOff message (B5): {m:?}", pod.t(o)),
            );
        }
    }
    c.check(
        last_state,
        "init1 shows lastState.terminated after a restart",
    );
    c.check(
        backoff,
        "init1 waits with CrashLoopBackOff between restarts",
    );
    c.check(
        has_event(&pod, "BackOff", "spec.initContainers{init1}", |m| {
            m.starts_with("Back-off restarting failed container init1 in pod")
        }),
        "EVENTS: BackOff for init1",
    );
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    // P14 with A15/S6: once deleted, init1 will not be restarted, so it shows its last exit
    // (not CrashLoopBackOff, not ContainerStatusUnknown); the never-started ones stay waiting.
    check_terminated(&mut c, &pod, &last, "init1", 1, "Error");
    check_always_pod_initializing(&mut c, &pod, std::slice::from_ref(&last), "init2");
    check_always_pod_initializing(&mut c, &pod, std::slice::from_ref(&last), "run1");
    check_init_invariants(&mut c, &pod, "run1");
    check_monotonic(&mut c, &pod, "init1");
    c.finish("s03", || pod.diag());
}

/// `init_container.go` — "should not start app containers and fail the pod if init containers
/// fail on a RestartNever pod" (Conformance): init2 fails, the pod fails at once, run1 never
/// leaves `PodInitializing` (A5, P4, D3, K3).
pub(crate) fn s04(srv: &Server) {
    let mut pod = srv.create("s04", &manifest("s04.yaml"));
    let (_, end) = pod.wait("phase Failed", secs(60), |p| phase(p) == "Failed");
    let mut c = Checks::new();
    let p = &end.pod;
    check_not_initialized(&mut c, p, "containers with incomplete status: [init2]");
    check_terminal_conditions(&mut c, p);
    check_terminated(&mut c, &pod, &end, "init1", 0, "Completed");
    check_terminated(&mut c, &pod, &end, "init2", 1, "Error");
    c.check(
        p["status"]["initContainerStatuses"]
            .as_array()
            .is_some_and(|a| a.len() == 2),
        "2 initContainerStatuses",
    );
    let (ready, status) = kubectl_row(&pod);
    c.check(
        ready == "0/1" && status == "Init:Error",
        format!("kubectl READY 0/1 STATUS Init:Error (is {ready} {status})"),
    );
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    check_terminated(&mut c, &pod, &last, "init2", 1, "Error");
    let obs = pod.observations();
    check_always_pod_initializing(&mut c, &pod, &obs, "run1");
    for o in &obs {
        for name in ["init1", "init2", "run1"] {
            c.check(
                restart_count(cstatus(&o.pod, name)) == 0,
                format!("t={:.3}: {name} restartCount 0", pod.t(o)),
            );
        }
    }
    check_init_invariants(&mut c, &pod, "run1");
    c.finish("s04", || pod.diag());
}

/// `container_lifecycle_test.go` — "should not launch regular containers if an init container
/// fails" (restartPolicy=Never).
pub(crate) fn s06(srv: &Server) {
    let _scratch = Scratch::new("s06");
    let mut pod = srv.create("s06", &manifest("s06.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Failed", "phase Failed");
    check_terminated(&mut c, &pod, &end, "init-1", 1, "Error");
    let ev = pod.ev_log();
    c.check(
        starts(&ev, "init-1") && exits(&ev, "init-1"),
        "Starts(init-1), Exits(init-1)",
    );
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    let (_, status) = kubectl_row(&pod);
    c.check(
        status == "Init:Error",
        format!("kubectl STATUS Init:Error (is {status})"),
    );
    pod.delete_and_wait_gone(secs(60));
    let obs = pod.observations();
    check_always_pod_initializing(&mut c, &pod, &obs, "regular-1");
    check_init_invariants(&mut c, &pod, "regular-1");
    c.finish("s06", || pod.diag());
}

/// `container_lifecycle_test.go` — "should run Init container to completion before call to
/// PostStart of regular container" (restartPolicy=Never).
pub(crate) fn s07(srv: &Server) {
    let _scratch = Scratch::new("s07");
    let mut pod = srv.create("s07", &manifest("s07.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    check_terminal_conditions(&mut c, &end.pod);
    let ev = pod.ev_log();
    let ps = "PostStart-regular-1";
    c.check(
        ev.completes_before("init-1", ps),
        "init-1 completes before PostStart-regular-1 starts",
    );
    c.check(
        ev.starts_before("init-1", ps),
        "StartsBefore(init-1, PostStart-regular-1)",
    );
    c.check(
        ev.exits_before("init-1", ps),
        "ExitsBefore(init-1, PostStart-regular-1)",
    );
    c.check(
        ev.overlap("regular-1", ps),
        "Overlap(regular-1, PostStart-regular-1)",
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish("s07", || pod.diag());
}

/// `container_lifecycle_test.go` — "shouldn't restart init containers upon regular container
/// restart" (restartPolicy=Always; A4, A5: completed init containers are never re-run).
pub(crate) fn s08(srv: &Server) {
    let _scratch = Scratch::new("s08");
    let mut pod = srv.create("s08", &manifest("s08.yaml"));
    // ⏱ upstream 2 min: regular-1 restarts at about 0, 10, 20 s after its exits.
    let (_, end) = pod.wait("regular-1 restartCount >= 3", secs(60), |p| {
        restart_count(cstatus(p, "regular-1")) >= 3
    });
    let mut c = Checks::new();
    c.check(
        phase(&end.pod) == "Running",
        format!("phase Running (is {})", phase(&end.pod)),
    );
    let ev = pod.ev_log();
    for (x, y) in [
        ("init-1", "init-2"),
        ("init-2", "init-3"),
        ("init-3", "regular-1"),
    ] {
        c.check(ev.starts_before(x, y), format!("StartsBefore({x}, {y})"));
        c.check(ev.exits_before(x, y), format!("ExitsBefore({x}, {y})"));
    }
    for x in ["init-1", "init-2", "init-3"] {
        c.check(ev.not_restarted(x), format!("NotRestarted({x})"));
    }
    c.check(ev.restarted("regular-1"), "Restarted(regular-1)");
    pod.delete_and_wait_gone(secs(60));
    for o in pod.observations() {
        for x in ["init-1", "init-2", "init-3"] {
            let cs = cstatus(&o.pod, x);
            c.check(
                restart_count(cs) == 0 && state_kind(cs) != "running"
                    || cs.is_null()
                    || cond_status(&o.pod, "Initialized") != "True",
                format!("t={:.3}: {x} re-run ({})", pod.t(&o), show(&o.pod, x)),
            );
        }
    }
    check_never_pending_after_running(&mut c, &pod);
    check_init_invariants(&mut c, &pod, "regular-1");
    check_monotonic(&mut c, &pod, "regular-1");
    c.finish("s08", || pod.diag());
}

/// `container_lifecycle_test.go` — "should not restart init container when updated with a new
/// image after finishing" (restartPolicy=Always; A5, M12).
pub(crate) fn s08b(srv: &Server) {
    let _scratch = Scratch::new("s08b");
    let mut pod = srv.create("s08b", &manifest("s08b.yaml"));
    let (i, _) = pod.wait("Running, regular-1 running", secs(60), |p| {
        phase(p) == "Running" && state_kind(cstatus(p, "regular-1")) == "running"
    });
    let mut c = Checks::new();
    let out = patch_init_image(&pod, 0, NEW_IMAGE);
    c.check(
        out.status.success(),
        format!(
            "UPDATE spec.initContainers[0].image is allowed (M11): {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    let spec_image = pod
        .get()
        .map(|p| p["spec"]["initContainers"][0]["image"].clone());
    c.check(
        spec_image.as_ref().is_some_and(|v| v == NEW_IMAGE),
        format!("the new image is in the spec ({spec_image:?})"),
    );
    // ⏱ upstream watches 30 s; a re-run would start at once.
    std::thread::sleep(secs(5));
    for o in &pod.observations()[i..] {
        let cs = cstatus(&o.pod, "init-1");
        c.check(
            terminated_with(cs, 0, "Completed")
                && restart_count(cs) == 0
                && cs["image"] != NEW_IMAGE,
            format!(
                "t={:.3}: init-1 stays terminated with 0, not restarted, old image ({}, image {})",
                pod.t(o),
                show(&o.pod, "init-1"),
                cs["image"]
            ),
        );
        c.check(
            restart_count(cstatus(&o.pod, "regular-1")) == 0,
            format!("t={:.3}: regular-1 not restarted", pod.t(o)),
        );
    }
    let ev = pod.ev_log();
    c.check(ev.not_restarted("init-1"), "NotRestarted(init-1)");
    c.check(ev.not_restarted("regular-1"), "NotRestarted(regular-1)");
    pod.delete_and_wait_gone(secs(60));
    c.finish("s08b", || pod.diag());
}

/// `container_lifecycle_test.go` — "the regular container has its image updated during
/// initialization": "Should not start a regular container" (restartPolicy=Always), and "should
/// not restart the init container if the image is updated during initialization": the running
/// init container is left alone, the regular container starts once, with the new image (A5,
/// A12, M12).
pub(crate) fn s08c(srv: &Server) {
    let _scratch = Scratch::new("s08c");
    let mut pod = srv.create("s08c", &manifest("s08c.yaml"));
    let (i, _) = pod.wait("init-1 running and started", secs(60), |p| {
        let s = cstatus(p, "init-1");
        state_kind(s) == "running" && s["started"] == true
    });
    let mut c = Checks::new();
    for (list, what) in [("initContainers", "init-1"), ("containers", "regular-1")] {
        let out = patch_image(&pod, list, 0, NEW_IMAGE);
        c.check(
            out.status.success(),
            format!(
                "UPDATE the image of {what} during initialization: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        );
    }
    let (j, running) = pod.wait_since(
        i,
        pod.created,
        "regular-1 and regular-2 running",
        secs(60),
        |p| {
            ["regular-1", "regular-2"]
                .iter()
                .all(|n| state_kind(cstatus(p, n)) == "running")
        },
    );
    let r1 = cstatus(&running.pod, "regular-1");
    c.check(
        r1["image"] == NEW_IMAGE && restart_count(r1) == 0,
        format!(
            "regular-1 runs the new image, never restarted (image {}, rc {})",
            r1["image"],
            restart_count(r1)
        ),
    );
    c.check(
        phase(&running.pod) == "Running",
        format!("phase Running (is {})", phase(&running.pod)),
    );
    check_phase_throughout(&mut c, &pod, &pod.observations()[..j], "Pending");
    let i1 = cstatus(&running.pod, "init-1");
    c.check(
        terminated_with(i1, 0, "Completed") && restart_count(i1) == 0 && i1["image"] != NEW_IMAGE,
        format!(
            "init-1 ran once to completion with its old image ({}, image {})",
            show(&running.pod, "init-1"),
            i1["image"]
        ),
    );
    let ev = pod.ev_log();
    for n in ["init-1", "regular-1", "regular-2"] {
        c.check(ev.not_restarted(n), format!("NotRestarted({n})"));
    }
    pod.delete_and_wait_gone(secs(60));
    c.finish("s08c", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecars restarting (11, 12, 13, 14, 15, 16, 17)

/// 11 and 12: a sidecar that exits by itself (code `code`) is restarted, before and after the
/// regular container started, whatever the pod's policy; the pod still succeeds (A5, P2, P5).
fn sidecar_exits_continuously(srv: &Server, id: &str, code: i64) {
    let _scratch = Scratch::new(id);
    let mut pod = srv.create(id, &manifest(&format!("{id}.yaml")));
    let mut c = Checks::new();
    // K11a, K8: while the sidecar crash-loops in the initialized pod, kubectl shows
    // `Init:CrashLoopBackOff` with the sidecar's restarts.
    let crash_looping = |p: &Value| {
        phase(p) == "Running"
            && state(cstatus(p, RI1))["reason"] == "CrashLoopBackOff"
            && state_kind(cstatus(p, "regular-1")) == "running"
    };
    pod.wait(
        "Running, regular-1 running, restartable-init-1 in CrashLoopBackOff",
        secs(60),
        crash_looping,
    );
    let cols = kubectl_cols(&pod);
    let now = pod.last();
    if crash_looping(&now.pod) {
        let rc = restart_count(cstatus(&now.pod, RI1));
        c.check(
            cols[1] == "1/2"
                && cols[2] == "Init:CrashLoopBackOff"
                && cols[3].starts_with(&format!("{rc} (")),
            format!(
                "kubectl READY 1/2 STATUS Init:CrashLoopBackOff RESTARTS {rc} (..ago) (is {cols:?})"
            ),
        );
    }
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    c.check(
        phase(&end.pod) == "Succeeded",
        format!("phase Succeeded (is {})", phase(&end.pod)),
    );
    let ev = pod.ev_log();
    c.check(
        ev.starts_before(RI1, "regular-1"),
        "StartsBefore(restartable-init-1, regular-1)",
    );
    c.check(
        ev.starts_before("regular-1", RI1),
        "StartsBefore(regular-1, restartable-init-1): restarted after regular-1 started",
    );
    c.check(exits(&ev, "regular-1"), "Exits(regular-1)");
    c.check(ev.not_restarted("init-1"), "NotRestarted(init-1)");
    let obs = pod.observations();
    let most = obs
        .iter()
        .max_by_key(|o| restart_count(cstatus(&o.pod, RI1)));
    let reason = if code == 0 { "Completed" } else { "Error" };
    c.check(
        most.is_some_and(|o| {
            let cs = cstatus(&o.pod, RI1);
            restart_count(cs) >= 1
                && cs["lastState"]["terminated"]["exitCode"] == code
                && cs["lastState"]["terminated"]["reason"] == reason
        }),
        format!("restartable-init-1 restarted, lastState {code}/{reason}"),
    );
    pod.delete_and_wait_gone(secs(60));
    check_never_pending_after_running(&mut c, &pod);
    check_initialized_stays(&mut c, &pod);
    check_monotonic(&mut c, &pod, RI1);
    c.finish(id, || pod.diag());
}

/// `container_lifecycle_test.go` — "a restartable init container starts and exits with exit
/// code 0 continuously" (restartPolicy=Never): "should complete a Pod successfully and produce
/// log", "should restart a restartable init container before/after the regular container
/// started", "should run a regular container to completion".
pub(crate) fn s11(srv: &Server) {
    sidecar_exits_continuously(srv, "s11", 0);
}

/// Same, "exits with exit code 1 continuously", restartPolicy=OnFailure.
pub(crate) fn s12(srv: &Server) {
    sidecar_exits_continuously(srv, "s12", 1);
}

/// `container_lifecycle_test.go` — "an Init container before restartable init container fails"
/// (restartPolicy=Never): the pod fails, neither the sidecar nor the regular container starts.
pub(crate) fn s13(srv: &Server) {
    let _scratch = Scratch::new("s13");
    let mut pod = srv.create("s13", &manifest("s13.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Failed", "phase Failed");
    check_terminated(&mut c, &pod, &end, "init-1", 1, "Error");
    check_not_initialized(
        &mut c,
        &end.pod,
        "containers with incomplete status: [init-1 restartable-init-1]",
    );
    let ev = pod.ev_log();
    c.check(exits(&ev, "init-1"), "Exits(init-1)");
    c.check(!starts(&ev, RI1), "DoesntStart(restartable-init-1)");
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    pod.delete_and_wait_gone(secs(60));
    let obs = pod.observations();
    check_always_pod_initializing(&mut c, &pod, &obs, RI1);
    check_always_pod_initializing(&mut c, &pod, &obs, "regular-1");
    c.finish("s13", || pod.diag());
}

/// `container_lifecycle_test.go` — "an Init container after restartable init container fails"
/// (restartPolicy=Never): the pod fails, the sidecar ran alongside the failing init container
/// and is stopped (A5 KillPod).
pub(crate) fn s14(srv: &Server) {
    let _scratch = Scratch::new("s14");
    let mut pod = srv.create("s14", &manifest("s14.yaml"));
    let (i, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Failed", "phase Failed");
    check_terminated(&mut c, &pod, &end, "init-1", 1, "Error");
    let (_, stopped) = pod.wait_since(
        i,
        pod.created,
        "restartable-init-1 terminated",
        secs(60),
        |p| state_kind(cstatus(p, RI1)) == "terminated",
    );
    c.check(
        restart_count(cstatus(&stopped.pod, RI1)) == 0,
        "restartable-init-1 not restarted once the pod failed",
    );
    let ev = pod.ev_log();
    c.check(exits(&ev, "init-1"), "Exits(init-1)");
    c.check(
        ev.overlap(RI1, "init-1"),
        "Overlap(restartable-init-1, init-1)",
    );
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    pod.delete_and_wait_gone(secs(60));
    check_always_pod_initializing(&mut c, &pod, &pod.observations(), "regular-1");
    c.finish("s14", || pod.diag());
}

/// `container_lifecycle_test.go` — "an Init container before restartable init container
/// continuously fails" (restartPolicy=OnFailure): "should continuously run Pod keeping it
/// Pending", "should have Init container restartCount greater than 0", "should not start
/// restartable init container".
pub(crate) fn s15(srv: &Server) {
    let _scratch = Scratch::new("s15");
    let mut pod = srv.create("s15", &manifest("s15.yaml"));
    let mut c = Checks::new();
    // K3: the failing init container's waiting reason, with a sidecar counted in READY (K2).
    check_kubectl_while(
        &mut c,
        &pod,
        "init-1 in CrashLoopBackOff",
        |p| state(cstatus(p, "init-1"))["reason"] == "CrashLoopBackOff",
        "0/2",
        "Init:CrashLoopBackOff",
    );
    let previous = pod.logs("init-1", true);
    c.check(
        previous
            .as_deref()
            .is_ok_and(|l| l.contains("init-1 Starting") && l.contains("init-1 Exiting")),
        format!("LOGS(init-1, previous) has the previous run's lines: {previous:?}"),
    );
    let (i, end) = pod.wait("init-1 restartCount >= 3", secs(60), |p| {
        restart_count(cstatus(p, "init-1")) >= 3
    });
    let obs = pod.observations()[..=i].to_vec();
    check_phase_throughout(&mut c, &pod, &obs, "Pending");
    check_always_pod_initializing(&mut c, &pod, &obs, RI1);
    check_always_pod_initializing(&mut c, &pod, &obs, "regular-1");
    check_not_initialized(
        &mut c,
        &end.pod,
        "containers with incomplete status: [init-1 restartable-init-1]",
    );
    let ev = pod.ev_log();
    c.check(ev.restarted("init-1"), "Restarted(init-1)");
    c.check(!starts(&ev, RI1), "DoesntStart(restartable-init-1)");
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, "init-1");
    c.finish("s15", || pod.diag());
}

/// `container_lifecycle_test.go` — "an Init container after restartable init container fails"
/// (restartPolicy=Always): the pod stays Pending while both restart, and they run together.
pub(crate) fn s16(srv: &Server) {
    let _scratch = Scratch::new("s16");
    let mut pod = srv.create("s16", &manifest("s16.yaml"));
    // ⏱ upstream waits for 3 restarts of initContainerStatuses[0] in 5 min.
    let (i, end) = pod.wait(
        "init-1 restartCount >= 3 and restartable-init-1 restartCount >= 2",
        secs(60),
        |p| restart_count(cstatus(p, "init-1")) >= 3 && restart_count(cstatus(p, RI1)) >= 2,
    );
    let mut c = Checks::new();
    let obs = pod.observations()[..=i].to_vec();
    check_phase_throughout(&mut c, &pod, &obs, "Pending");
    check_always_pod_initializing(&mut c, &pod, &obs, "regular-1");
    c.check(
        cond_status(&end.pod, "Initialized") == "False",
        "Initialized False",
    );
    let ev = pod.ev_log();
    c.check(ev.restarted("init-1"), "Restarted(init-1)");
    c.check(ev.restarted(RI1), "Restarted(restartable-init-1)");
    c.check(
        ev.overlap(RI1, "init-1"),
        "Overlap(restartable-init-1, init-1)",
    );
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, "init-1");
    check_monotonic(&mut c, &pod, RI1);
    c.finish("s16", || pod.diag());
}

/// `container_lifecycle_test.go` — "a restartable init container runs continuously"
/// (restartPolicy=Always): "should keep running a Pod continuously and produce log", "should
/// not restart a restartable init container", "should start a regular container".
pub(crate) fn s17(srv: &Server) {
    let _scratch = Scratch::new("s17");
    let mut pod = srv.create("s17", &manifest("s17.yaml"));
    let (_, end) = pod.wait("regular-1 restartCount >= 2", secs(60), |p| {
        restart_count(cstatus(p, "regular-1")) >= 2
    });
    let mut c = Checks::new();
    c.check(
        phase(&end.pod) == "Running",
        format!("phase Running (is {})", phase(&end.pod)),
    );
    let ev = pod.ev_log();
    c.check(ev.not_restarted(RI1), "NotRestarted(restartable-init-1)");
    c.check(ev.restarted("regular-1"), "Restarted(regular-1)");
    pod.delete_and_wait_gone(secs(60));
    for o in pod.observations() {
        c.check(
            restart_count(cstatus(&o.pod, RI1)) == 0,
            format!("t={:.3}: restartable-init-1 restartCount 0", pod.t(&o)),
        );
    }
    check_never_pending_after_running(&mut c, &pod);
    check_monotonic(&mut c, &pod, "regular-1");
    c.finish("s17", || pod.diag());
}

/// `container_lifecycle_test.go` — "should restart when updated with a new image" ("a
/// restartable init container runs continuously", restartPolicy=Always): only the updated
/// sidecar restarts (A5, A12, M12).
pub(crate) fn s17b(srv: &Server) {
    let _scratch = Scratch::new("s17b");
    let mut pod = srv.create("s17b", &manifest("s17b.yaml"));
    pod.wait("Running with every container running", secs(60), |p| {
        phase(p) == "Running"
            && [RI1, RI2, "regular-1"]
                .iter()
                .all(|n| state_kind(cstatus(p, n)) == "running")
    });
    let mut c = Checks::new();
    let from = pod.observations().len();
    let patched = std::time::Instant::now();
    let out = patch_init_image(&pod, 0, NEW_IMAGE);
    c.check(
        out.status.success(),
        format!(
            "UPDATE spec.initContainers[0].image is allowed (M11): {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    pod.wait_since(
        from,
        patched,
        "restartable-init-1 running the new image, restarted",
        secs(60),
        |p| {
            let cs = cstatus(p, RI1);
            state_kind(cs) == "running" && cs["image"] == NEW_IMAGE && restart_count(cs) >= 1
        },
    );
    let ev = pod.ev_log();
    c.check(ev.restarted(RI1), "HasRestarted(restartable-init-1)");
    c.check(ev.not_restarted(RI2), "HasNotRestarted(restartable-init-2)");
    c.check(ev.not_restarted("regular-1"), "HasNotRestarted(regular-1)");
    c.check(
        has_event(
            &pod,
            "Killing",
            "spec.initContainers{restartable-init-1}",
            |m| m == "Init container restartable-init-1 definition changed",
        ),
        "EVENTS: Killing `Init container restartable-init-1 definition changed`",
    );
    pod.delete_and_wait_gone(secs(60));
    check_never_pending_after_running(&mut c, &pod);
    c.finish("s17b", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecar probes (19, 20, 21, 22)

/// `container_lifecycle_test.go` — "should launch restartable init containers serially
/// considering the startup probe" (A5, A8, S11, D3).
pub(crate) fn s19(srv: &Server) {
    let _scratch = Scratch::new("s19");
    let mut pod = srv.create("s19", &manifest("s19.yaml"));
    let mut c = Checks::new();
    // K3: a sidecar that has not started yet is initialization step 0 of 2.
    check_kubectl_while(
        &mut c,
        &pod,
        "restartable-init-1 running, not started",
        |p| {
            let r = cstatus(p, RI1);
            state_kind(r) == "running" && r["started"] != true
        },
        "0/3",
        "Init:0/2",
    );
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    check_terminal_conditions(&mut c, &end.pod);
    let ev = pod.ev_log();
    c.check(
        ev.starts_before(RI1, RI2),
        "StartsBefore(restartable-init-1, restartable-init-2)",
    );
    c.check(
        ev.starts_before(RI2, "regular-1"),
        "StartsBefore(restartable-init-2, regular-1)",
    );
    c.check(
        ev.first(RI2, "Starting") > ev.first(RI1, "Started")
            && ev.first("regular-1", "Starting") > ev.first(RI2, "Started"),
        "each container starts only after the previous sidecar's startup delay",
    );
    for x in [RI1, RI2] {
        c.check(ev.not_restarted(x), format!("NotRestarted({x})"));
    }
    pod.delete_and_wait_gone(secs(60));
    let mut unstarted_seen = false;
    for o in pod.observations() {
        let p = &o.pod;
        let r1 = cstatus(p, RI1);
        if state_kind(r1) == "running" && r1["started"] != true {
            unstarted_seen = true;
            c.check(
                state_kind(cstatus(p, RI2)) != "running"
                    && state_kind(cstatus(p, "regular-1")) != "running",
                format!(
                    "t={:.3}: the next container runs before restartable-init-1 started",
                    pod.t(&o)
                ),
            );
            c.check(
                cond_status(p, "Initialized") == "False" && phase(p) == "Pending",
                format!(
                    "t={:.3}: Initialized False and Pending while a sidecar starts (P2, D3)",
                    pod.t(&o)
                ),
            );
        }
    }
    c.check(
        unstarted_seen,
        "restartable-init-1 observed running with started false (its 3 s start delay)",
    );
    c.finish("s19", || pod.diag());
}

/// A sidecar's postStart hook finishes before the next init container starts (A8, A20, H2):
/// the log-protocol form of "should not launch second container before PostStart of the first
/// container completed" applied to a restartable init container.
pub(crate) fn s19b(srv: &Server) {
    let _scratch = Scratch::new("s19b");
    let mut pod = srv.create("s19b", &manifest("s19b.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    let ev = pod.ev_log();
    let ps = "PostStart-restartable-init-1";
    c.check(
        ev.completes_before(ps, "init-1"),
        "PostStart-restartable-init-1 completes before init-1 starts",
    );
    c.check(
        ev.starts_before(ps, "init-1") && ev.exits_before(ps, "init-1"),
        "StartsBefore and ExitsBefore(PostStart-restartable-init-1, init-1)",
    );
    c.check(
        ev.overlap(RI1, ps),
        "Overlap(restartable-init-1, PostStart-restartable-init-1)",
    );
    c.check(
        ev.completes_before("init-1", "regular-1"),
        "init-1 completes before regular-1 starts",
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish("s19b", || pod.diag());
}

/// The preStop/restart checks shared by 20 and 21 (A5, H4, T11).
fn check_sidecar_killed_with_prestop(c: &mut Checks, ev: &EvLog) {
    let ps = "PreStop-restartable-init-1";
    c.check(
        ev.overlap(RI1, ps),
        "RunTogether(restartable-init-1, PreStop-restartable-init-1)",
    );
    c.check(starts(ev, ps), "Starts(PreStop-restartable-init-1)");
    c.check(exits(ev, RI1), "Exits(restartable-init-1)");
    c.check(ev.restarted(RI1), "Restarted(restartable-init-1)");
}

/// `container_lifecycle_test.go` — "should call the container's preStop hook and not launch
/// next container if the restartable init container's startup probe fails" (restartPolicy=
/// Always).
pub(crate) fn s20(srv: &Server) {
    let _scratch = Scratch::new("s20");
    let mut pod = srv.create("s20", &manifest("s20.yaml"));
    let mut c = Checks::new();
    check_kubectl_while(
        &mut c,
        &pod,
        "restartable-init-1 in CrashLoopBackOff",
        |p| state(cstatus(p, RI1))["reason"] == "CrashLoopBackOff",
        "0/2",
        "Init:CrashLoopBackOff",
    );
    let (i, _) = pod.wait("restartable-init-1 restartCount >= 2", secs(60), |p| {
        restart_count(cstatus(p, RI1)) >= 2
    });
    let obs = pod.observations()[..=i].to_vec();
    check_phase_throughout(&mut c, &pod, &obs, "Pending");
    check_always_pod_initializing(&mut c, &pod, &obs, "regular-1");
    for o in &obs {
        c.check(
            cstatus(&o.pod, RI1)["started"] != true,
            format!("t={:.3}: restartable-init-1 started", pod.t(o)),
        );
    }
    let ev = pod.ev_log();
    check_sidecar_killed_with_prestop(&mut c, &ev);
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    c.check(
        has_event(
            &pod,
            "Killing",
            "spec.initContainers{restartable-init-1}",
            |m| m == "Init container restartable-init-1 failed startup probe",
        ),
        "EVENTS: Killing `Init container restartable-init-1 failed startup probe`",
    );
    c.check(
        has_event(
            &pod,
            "Unhealthy",
            "spec.initContainers{restartable-init-1}",
            |m| m.starts_with("Startup probe failed:"),
        ),
        "EVENTS: Unhealthy `Startup probe failed:`",
    );
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, RI1);
    c.finish("s20", || pod.diag());
}

/// `container_lifecycle_test.go` — "should call the container's preStop hook and start the
/// next container if the restartable init container's liveness probe fails" (restartPolicy=
/// Always).
pub(crate) fn s21(srv: &Server) {
    let _scratch = Scratch::new("s21");
    let mut pod = srv.create("s21", &manifest("s21.yaml"));
    let (_, end) = pod.wait(
        "restartable-init-1 restartCount >= 2 and regular-1 restartCount >= 1",
        secs(60),
        |p| restart_count(cstatus(p, RI1)) >= 2 && restart_count(cstatus(p, "regular-1")) >= 1,
    );
    let mut c = Checks::new();
    c.check(
        phase(&end.pod) == "Running",
        format!("phase Running (is {})", phase(&end.pod)),
    );
    let ev = pod.ev_log();
    check_sidecar_killed_with_prestop(&mut c, &ev);
    c.check(starts(&ev, "regular-1"), "Starts(regular-1)");
    c.check(
        has_event(
            &pod,
            "Killing",
            "spec.initContainers{restartable-init-1}",
            |m| m == "Init container restartable-init-1 failed liveness probe",
        ),
        "EVENTS: Killing `Init container restartable-init-1 failed liveness probe`",
    );
    pod.delete_and_wait_gone(secs(60));
    check_never_pending_after_running(&mut c, &pod);
    check_monotonic(&mut c, &pod, RI1);
    c.finish("s21", || pod.diag());
}

/// A sidecar's readiness probe: the sidecar counts for `ContainersReady`/`Ready` (D4, K2) but
/// `Initialized` needs only `started` (D3). Translates the sidecar readiness expectations of
/// `test/e2e/node/sidecar_container.go` / the KEP-753 docs ("sidecar containers ... readiness
/// probes ... contribute to the pod's readiness").
pub(crate) fn s22(srv: &Server) {
    let _scratch = Scratch::new("s22");
    let mut pod = srv.create("s22", &manifest("s22.yaml"));
    let (i, not_ready) = pod.wait(
        "Running, Initialized, restartable-init-1 started but not ready",
        secs(60),
        |p| {
            let r = cstatus(p, RI1);
            phase(p) == "Running"
                && cond_status(p, "Initialized") == "True"
                && r["started"] == true
                && r["ready"] == false
                && state_kind(cstatus(p, "regular-1")) == "running"
        },
    );
    let row = kubectl_row(&pod);
    let mut c = Checks::new();
    let p = &not_ready.pod;
    let cr = cond(p, "ContainersReady");
    let want = "containers with unready status: [restartable-init-1]";
    c.check(
        cr["status"] == "False" && cr["reason"] == "ContainersNotReady" && cr["message"] == want,
        format!("ContainersReady False/ContainersNotReady/{want:?} (is {cr})"),
    );
    let rc = cond(p, "Ready");
    c.check(
        rc["status"] == "False" && rc["reason"] == "ContainersNotReady" && rc["message"] == want,
        format!("Ready copies ContainersReady (is {rc})"),
    );
    let (_, ready) = pod.wait_since(i, pod.created, "Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    c.check(
        row.0 == "1/2"
            || pod
                .observations()
                .iter()
                .any(|o| o.seen < ready.seen && cond_status(&o.pod, "Ready") == "True"),
        format!(
            "kubectl READY 1/2 while the sidecar is not ready (is {})",
            row.0
        ),
    );
    let (ready_col, status) = kubectl_row(&pod);
    c.check(
        ready_col == "2/2" && status == "Running",
        format!("kubectl READY 2/2 Running once ready (is {ready_col} {status})"),
    );
    let init_at = ts(&cond(&ready.pod, "Initialized")["lastTransitionTime"]);
    let ready_at = ts(&cond(&ready.pod, "Ready")["lastTransitionTime"]);
    let gap = init_at.zip(ready_at).map(|(a, b)| b - a);
    c.check(
        gap.is_some_and(|g| g >= 5.0 - 1.0 - 1.0),
        format!("Ready about 5 s after Initialized (gap {gap:?} s)"),
    );
    pod.delete_and_wait_gone(secs(60));
    for o in pod.observations() {
        c.check(
            restart_count(cstatus(&o.pod, RI1)) == 0,
            format!("t={:.3}: a not-ready sidecar is not restarted", pod.t(&o)),
        );
    }
    c.finish("s22", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecars at the end of the pod (23, 24, 25, 26, 27)

/// The regular container of a Never pod with a sidecar fails: the sidecar is stopped and the
/// pod is Failed (A13, P2, P8d, K11c). Counterpart of "should complete a Pod successfully"
/// ("a restartable init container runs continuously", restartPolicy=Never) with a failing main
/// container.
pub(crate) fn s23(srv: &Server) {
    let _scratch = Scratch::new("s23");
    let mut pod = srv.create("s23", &manifest("s23.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Failed", "phase Failed");
    check_terminal_conditions(&mut c, &end.pod);
    c.check(
        cond_status(&end.pod, "Initialized") == "True",
        "Initialized stays True in the Failed pod",
    );
    check_terminated(&mut c, &pod, &end, "regular-1", 1, "Error");
    check_sidecar_completed(&mut c, &pod, &end, RI1, "at Failed");
    let (ready, status) = kubectl_row(&pod);
    c.check(
        ready == "0/2" && status == "Error",
        format!("kubectl READY 0/2 STATUS Error (is {ready} {status})"),
    );
    let ev = pod.ev_log();
    c.check(ev.not_restarted(RI1), "NotRestarted(restartable-init-1)");
    c.check(
        ev.exits_before("regular-1", RI1),
        "ExitsBefore(regular-1, restartable-init-1)",
    );
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    c.check(phase(&last.pod) == "Failed", "final status Failed");
    check_sidecar_completed(&mut c, &pod, &last, RI1, "final status");
    c.finish("s23", || pod.diag());
}

/// `container_lifecycle_test.go` — "should mark pod as succeeded if any of the restartable init
/// containers have terminated with non-zero exit code" (T5, T8, P2).
pub(crate) fn s24(srv: &Server) {
    let _scratch = Scratch::new("s24");
    let mut pod = srv.create("s24", &manifest("s24.yaml"));
    pod.wait("Running with every container running", secs(60), |p| {
        phase(p) == "Running"
            && [RI1, RI2, RI3, "regular-1"]
                .iter()
                .all(|n| state_kind(cstatus(p, n)) == "running")
    });
    pod.delete(Some(30));
    let (took, last) = pod.wait_gone(secs(60));
    let mut c = Checks::new();
    c.check(
        phase(&last.pod) == "Succeeded",
        format!("final phase Succeeded (is {})", phase(&last.pod)),
    );
    check_terminated(&mut c, &pod, &last, "regular-1", 0, "Completed");
    check_terminated(&mut c, &pod, &last, RI1, 0, "Completed");
    check_terminated(&mut c, &pod, &last, RI2, 1, "Error");
    check_terminated(&mut c, &pod, &last, RI3, 0, "Completed");
    c.check(
        took < secs(20),
        format!("gone well within the 30 s grace (took {took:?})"),
    );
    let ev = pod.ev_log();
    c.check(
        ev.exits_before("regular-1", RI3),
        "ExitsBefore(regular-1, restartable-init-3)",
    );
    c.check(
        ev.exits_before(RI3, RI2),
        "ExitsBefore(restartable-init-3, restartable-init-2)",
    );
    c.check(
        ev.exits_before(RI2, RI1),
        "ExitsBefore(restartable-init-2, restartable-init-1)",
    );
    c.finish("s24", || pod.diag());
}

/// `container_lifecycle_test.go` — "should mark pod as succeeded if any of the restartable init
/// containers have terminated with non-zero exit code by prestop hook": a failing preStop does
/// not change the outcome (H4 `FailedPreStopHook`, T8).
pub(crate) fn s24b(srv: &Server) {
    let _scratch = Scratch::new("s24b");
    let mut pod = srv.create("s24b", &manifest("s24b.yaml"));
    pod.wait("Running with every container running", secs(60), |p| {
        phase(p) == "Running"
            && [RI1, RI2, RI3, "regular-1"]
                .iter()
                .all(|n| state_kind(cstatus(p, n)) == "running")
    });
    pod.delete(Some(30));
    let (took, last) = pod.wait_gone(secs(60));
    let mut c = Checks::new();
    c.check(
        phase(&last.pod) == "Succeeded",
        format!("final phase Succeeded (is {})", phase(&last.pod)),
    );
    for n in ["regular-1", RI1, RI2, RI3] {
        check_terminated(&mut c, &pod, &last, n, 0, "Completed");
    }
    c.check(
        took < secs(20),
        format!("gone well within the 30 s grace (took {took:?})"),
    );
    let ev = pod.ev_log();
    for n in [RI1, RI2, RI3] {
        c.check(
            exits(&ev, &format!("PreStop-{n}")),
            format!("PreStop-{n} ran"),
        );
    }
    c.check(
        ev.exits_before(RI3, RI2),
        "ExitsBefore(restartable-init-3, restartable-init-2)",
    );
    c.check(
        ev.exits_before(RI2, RI1),
        "ExitsBefore(restartable-init-2, restartable-init-1)",
    );
    c.check(
        has_event(
            &pod,
            "FailedPreStopHook",
            "spec.initContainers{restartable-init-2}",
            |m| m == "PreStopHook failed",
        ),
        "EVENTS: FailedPreStopHook `PreStopHook failed` for restartable-init-2",
    );
    c.finish("s24b", || pod.diag());
}

/// `container_lifecycle_test.go` — "should call sidecar container PreStop hook simultaneously"
/// (T5: preStop hooks start together, stop signals in reverse order).
pub(crate) fn s25(srv: &Server) {
    let _scratch = Scratch::new("s25");
    let mut pod = srv.create("s25", &manifest("s25.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    for name in [RI1, RI2, RI3] {
        check_sidecar_completed(&mut c, &pod, &end, name, "at Succeeded");
    }
    let ev = pod.ev_log();
    for (x, y) in [
        (RI1, RI2),
        (RI1, RI3),
        (RI2, RI3),
        (RI1, "regular-1"),
        (RI2, "regular-1"),
        (RI3, "regular-1"),
    ] {
        c.check(ev.starts_before(x, y), format!("StartsBefore({x}, {y})"));
    }
    for x in [RI1, RI2, RI3] {
        c.check(
            ev.exits_before("regular-1", x),
            format!("ExitsBefore(regular-1, {x})"),
        );
    }
    c.check(
        ev.exits_before(RI3, RI2),
        "ExitsBefore(restartable-init-3, restartable-init-2)",
    );
    c.check(
        ev.exits_before(RI2, RI1),
        "ExitsBefore(restartable-init-2, restartable-init-1)",
    );
    let ps: Vec<Option<f64>> = [RI1, RI2, RI3]
        .iter()
        .map(|n| ev.time_of_start(&format!("PreStop-{n}")))
        .collect();
    c.check(
        ps.iter().all(Option::is_some),
        format!("every sidecar's preStop ran ({ps:?})"),
    );
    let times: Vec<f64> = ps.into_iter().flatten().collect();
    let spread = times.iter().copied().fold(f64::MIN, f64::max)
        - times.iter().copied().fold(f64::MAX, f64::min);
    c.check(
        times.len() == 3 && spread < 1.0,
        format!("the preStop hooks started within 1 s of each other (spread {spread:.3} s)"),
    );
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    for name in [RI1, RI2, RI3] {
        check_sidecar_completed(&mut c, &pod, &last, name, "final status");
    }
    c.finish("s25", || pod.diag());
}

/// `container_lifecycle_test.go` — "A restartable init container has its image updated during
/// pod termination": "should terminate gracefully when restartPolicy=Always": nothing restarts
/// once the pod is terminating (A15, T6), the sidecars stop in reverse order and the pod is gone
/// long before its grace period.
pub(crate) fn s25b(srv: &Server) {
    let _scratch = Scratch::new("s25b");
    let mut pod = srv.create("s25b", &manifest("s25b.yaml"));
    pod.wait("Running with every container running", secs(60), |p| {
        phase(p) == "Running"
            && [RI2, RI3, "regular-1"]
                .iter()
                .all(|n| state_kind(cstatus(p, n)) == "running")
    });
    let from = pod.observations().len();
    pod.delete(Some(60));
    let mut c = Checks::new();
    let out = patch_init_image(&pod, 1, NEW_IMAGE);
    c.check(
        out.status.success(),
        format!(
            "UPDATE of the image during termination is accepted: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    // Each of the three handlers takes 3 s, one after the other (T5).
    let (took, last) = pod.wait_gone(secs(60));
    c.check(
        took < secs(30),
        format!("gone well before the 60 s grace (took {took:?})"),
    );
    for o in &pod.observations()[from..] {
        for n in ["init-1", RI2, RI3, "regular-1"] {
            c.check(
                restart_count(cstatus(&o.pod, n)) == 0,
                format!("t={:.3}: {n} restarted during termination", pod.t(o)),
            );
        }
    }
    check_terminated(&mut c, &pod, &last, RI2, 0, "Completed");
    check_terminated(&mut c, &pod, &last, RI3, 0, "Completed");
    check_terminated(&mut c, &pod, &last, "regular-1", 0, "Completed");
    let ev = pod.ev_log();
    for n in ["init-1", RI2, RI3, "regular-1"] {
        c.check(ev.not_restarted(n), format!("NotRestarted({n})"));
    }
    c.check(
        ev.exits_before("regular-1", RI3),
        "ExitsBefore(regular-1, restartable-init-3)",
    );
    c.check(
        ev.exits_before(RI3, RI2),
        "ExitsBefore(restartable-init-3, restartable-init-2)",
    );
    c.finish("s25b", || pod.diag());
}

/// `container_lifecycle_test.go` — "should terminate sidecars simultaneously if prestop doesn't
/// exit": the hooks use up the whole grace, then every sidecar gets the 2 s minimum at the same
/// time and is killed (H4, T3, T5). ⏱ grace 10 s (upstream 30 s, hooks live ~32 s).
pub(crate) fn s25c(srv: &Server) {
    let _scratch = Scratch::new("s25c");
    let mut pod = srv.create("s25c", &manifest("s25c.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(
        phase(&end.pod) == "Succeeded",
        format!("phase Succeeded (is {})", phase(&end.pod)),
    );
    for n in [RI1, RI2, RI3] {
        check_terminated(&mut c, &pod, &end, n, 137, "Error");
    }
    let ev = pod.ev_log();
    for (x, y) in [(RI1, RI2), (RI2, RI3), (RI3, "regular-1")] {
        c.check(ev.starts_before(x, y), format!("StartsBefore({x}, {y})"));
    }
    let hooks: Vec<(Option<f64>, Option<f64>)> = [RI1, RI2, RI3]
        .iter()
        .map(|n| {
            let h = format!("PreStop-{n}");
            (ev.time_of_start(&h), ev.time_of_last_loop(&h))
        })
        .collect();
    let lasts: Vec<f64> = hooks.iter().filter_map(|h| h.1).collect();
    let spread = lasts.iter().copied().fold(f64::MIN, f64::max)
        - lasts.iter().copied().fold(f64::MAX, f64::min);
    c.check(
        lasts.len() == 3 && spread < 1.0,
        format!("the hooks were killed together (last loops {hooks:?}, spread {spread:.3} s)"),
    );
    for (n, h) in [RI1, RI2, RI3].iter().zip(&hooks) {
        let life = h.0.zip(h.1).map(|(a, b)| b - a);
        c.check(
            life.is_some_and(|l| (l - 12.0).abs() <= 1.5),
            format!("PreStop-{n} lived about grace + 2 = 12 s ({life:?})"),
        );
    }
    pod.delete_and_wait_gone(secs(60));
    c.finish("s25c", || pod.diag());
}

/// `container_lifecycle_test.go` — "should terminate restartable init containers gracefully if
/// there is a non-started restartable init container" (T5: nothing waits for a sidecar that is
/// not running; the pod goes long before its grace period).
pub(crate) fn s26b(srv: &Server) {
    let _scratch = Scratch::new("s26b");
    let mut pod = srv.create("s26b", &manifest("s26b.yaml"));
    pod.wait(
        "restartable-init-2 running but not started",
        secs(60),
        |p| {
            let s = cstatus(p, RI2);
            phase(p) == "Pending"
                && p["status"]["initContainerStatuses"]
                    .as_array()
                    .is_some_and(|a| a.len() == 3)
                && state_kind(s) == "running"
                && s["started"] != true
        },
    );
    pod.delete(Some(60));
    let (took, _) = pod.wait_gone(secs(60));
    let mut c = Checks::new();
    // ⏱ upstream: within containerTerminationSeconds + 60 s of a 180 s grace.
    c.check(
        took < secs(15),
        format!("gone long before the 60 s grace (took {took:?})"),
    );
    let ev = pod.ev_log();
    c.check(exits(&ev, RI2), "restartable-init-2 got its stop signal");
    c.check(!starts(&ev, RI3), "DoesntStart(restartable-init-3)");
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    c.finish("s26b", || pod.diag());
}

/// `container_lifecycle_test.go` — "should not hang in termination if terminated during
/// initialization": sidecars that never started are not waited for (T4, T5, H5).
pub(crate) fn s26(srv: &Server) {
    let _scratch = Scratch::new("s26");
    let mut pod = srv.create("s26", &manifest("s26.yaml"));
    pod.wait(
        "start-init running and started, pod Pending",
        secs(60),
        |p| {
            let s = cstatus(p, "start-init");
            phase(p) == "Pending" && state_kind(s) == "running" && s["started"] == true
        },
    );
    pod.delete(Some(3));
    let (took, last) = pod.wait_gone(secs(60));
    let mut c = Checks::new();
    // Upstream: less than grace + 3 s.
    c.check(
        took < secs(6),
        format!("gone within 6 s of DELETE(3) (took {took:?})"),
    );
    c.check(
        phase(&last.pod) == "Failed",
        format!("final phase Failed (is {})", phase(&last.pod)),
    );
    // P14: the pod never initialized; start-init shows its own exit (its TERM handler exits
    // 0), the never-started containers stay waiting.
    check_terminated(&mut c, &pod, &last, "start-init", 0, "Completed");
    for n in [RI1, RI2, RI3, "regular-1"] {
        check_always_pod_initializing(&mut c, &pod, std::slice::from_ref(&last), n);
    }
    let ev = pod.ev_log();
    c.check(exits(&ev, "start-init"), "Exits(start-init)");
    for n in [RI1, RI2, RI3] {
        c.check(!starts(&ev, n), format!("DoesntStart({n})"));
        c.check(
            !starts(&ev, &format!("PreStop-{n}")),
            format!("no preStop for the never-started {n}"),
        );
    }
    c.check(!starts(&ev, "regular-1"), "DoesntStart(regular-1)");
    c.finish("s26", || pod.diag());
}

/// `container_lifecycle_test.go` — "should mark pod as failed if regular container has exceeded
/// its termination grace period seconds" (T3: at least 2 s per sidecar after the budget is
/// spent, T5, T8).
pub(crate) fn s27(srv: &Server) {
    let _scratch = Scratch::new("s27");
    let mut pod = srv.create("s27", &manifest("s27.yaml"));
    pod.wait("Running with every container running", secs(60), |p| {
        phase(p) == "Running"
            && [RI1, RI2, RI3, "regular-1"]
                .iter()
                .all(|n| state_kind(cstatus(p, n)) == "running")
    });
    pod.delete(Some(5));
    let (took, last) = pod.wait_gone(secs(60));
    let mut c = Checks::new();
    c.check(
        phase(&last.pod) == "Failed",
        format!("final phase Failed (is {})", phase(&last.pod)),
    );
    check_terminated(&mut c, &pod, &last, "regular-1", 137, "Error");
    check_terminated(&mut c, &pod, &last, RI1, 137, "Error");
    check_terminated(&mut c, &pod, &last, RI2, 0, "Completed");
    check_terminated(&mut c, &pod, &last, RI3, 137, "Error");
    // T3/T5: every sidecar waits for its turn at most its remaining grace (the 5 s regular-1
    // uses up), then gets the 2 s minimum: all three are signalled together at about 5 s and
    // the last SIGKILL comes at about 7 s.
    c.check(
        took >= secs(6) && took < secs(15),
        format!("gone about 7 s after DELETE(5) (took {took:?})"),
    );
    let ev = pod.ev_log();
    c.check(exits(&ev, RI2), "restartable-init-2 exited on its own");
    for n in ["regular-1", RI1, RI3] {
        c.check(
            !exits(&ev, n),
            format!("{n} was killed before its handler finished"),
        );
    }
    c.finish("s27", || pod.diag());
}

pub(crate) const SCENARIOS: &[(&str, ScenarioFn)] = &[
    ("s03", s03),
    ("s04", s04),
    ("s06", s06),
    ("s07", s07),
    ("s08", s08),
    ("s08b", s08b),
    ("s08c", s08c),
    ("s11", s11),
    ("s12", s12),
    ("s13", s13),
    ("s14", s14),
    ("s15", s15),
    ("s16", s16),
    ("s17", s17),
    ("s17b", s17b),
    ("s19", s19),
    ("s19b", s19b),
    ("s20", s20),
    ("s21", s21),
    ("s22", s22),
    ("s23", s23),
    ("s24", s24),
    ("s24b", s24b),
    ("s25", s25),
    ("s25b", s25b),
    ("s25c", s25c),
    ("s26", s26),
    ("s26b", s26b),
    ("s27", s27),
];
