//! Translations of the upstream e2e tests on init containers and sidecars (scenarios 01-27) that the
//! document does not spell out, in its form (manifests under `tests/conformance/`).
//!
//! Sources: `test/e2e/common/node/init_container.go` (03, 04) and
//! `test/e2e_node/container_lifecycle_test.go` (the others); each function names its test.
//! Timings are shortened (⏱) where upstream waits minutes; the orderings are kept.

use super::checks::*;
use super::harness::*;
use crate::conformance_support::*;
use std::time::Duration;

const RI1: &str = "restartable-init-1";
const RI2: &str = "restartable-init-2";
const RI3: &str = "restartable-init-3";

// ----------------------------------------------------------------------------------------------
// Helpers

/// `UPDATE(pod, spec.<list>[index].image)`: a JSON patch; kubectl's output.
fn patch_image(pod: &Pod, list: &str, index: usize, image: &str) -> std::process::Output {
    let patch =
        format!(r#"[{{"op":"replace","path":"/spec/{list}/{index}/image","value":"{image}"}}]"#);
    pod.srv.kubectl(
        &["patch", "pod", &pod.name, "--type=json", "-p", &patch],
        None,
    )
}

/// `UPDATE(pod, spec.initContainers[index].image)` to [`NEW_IMAGE`], checked to be accepted
/// (M11: the image is the one mutable field of a container).
fn update_init_image(c: &mut Checks, pod: &Pod, index: usize, what: &str) {
    let out = patch_image(pod, "initContainers", index, NEW_IMAGE);
    check_accepted(c, &out, what);
}

/// The image a test switches to (upstream's `alternateImage`).
pub(crate) const NEW_IMAGE: &str = "busybox:1.36";

/// 24, 24b, 27: once the three sidecars and regular-1 run, `DELETE(pod, grace)`; the pod ends
/// with `want_phase` and each `(container, exit code, reason)` of `want`. The pod, the checks
/// so far and how long the pod took to go.
fn delete_running_sidecar_pod<'a>(
    srv: &'a Server,
    id: &str,
    grace: i64,
    want_phase: &str,
    want: &[(&str, i64, &str)],
) -> (Pod<'a>, Checks, Duration) {
    let mut pod = srv.create_scenario(id);
    pod.wait_all_running(&[RI1, RI2, RI3, "regular-1"]);
    let (took, last) = pod.delete_with_grace(grace, secs(60));
    let mut c = Checks::new();
    check_final_phase(&mut c, &last, want_phase);
    check_all_terminated(&mut c, &pod, &last, want);
    (pod, c, took)
}

// ----------------------------------------------------------------------------------------------
// Init containers (03, 04, 06, 07, 08)

/// `init_container.go` — "should not start app containers if init containers fail on a
/// RestartAlways pod" (Conformance): init1 fails for ever, init2 and run1 never start, the pod
/// stays Pending with `Initialized` False (A5, P5, D3, B1, B5).
fn s03(srv: &Server) {
    let mut pod = srv.create_scenario("s03");
    let mut c = Checks::new();
    // K3, K8: kubectl shows the init container's back-off and its restarts with their age.
    check_kubectl_while(
        &mut c,
        &pod,
        "init1 in CrashLoopBackOff",
        |p| {
            let i1 = cstatus(p, "init1");
            state(i1)["reason"] == "CrashLoopBackOff" && restart_count(i1) >= 1
        },
        "0/1",
        "Init:CrashLoopBackOff",
        Some("init1"),
    );
    // ⏱ upstream 5 min: restarts at 0, 10, 20 s (B1).
    let (i, end) = pod.wait("init1 restartCount >= 3", secs(60), |p| {
        restart_count(cstatus(p, "init1")) >= 3
    });
    let p = &end.pod;
    check_phase(&mut c, p, "Pending");
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
    for n in ["init2", "run1"] {
        check_always_pod_initializing(&mut c, &pod, std::slice::from_ref(&last), n);
    }
    check_init_invariants(&mut c, &pod, "run1");
    check_monotonic(&mut c, &pod, "init1");
    c.finish("s03", || pod.diag());
}

/// `init_container.go` — "should not start app containers and fail the pod if init containers
/// fail on a RestartNever pod" (Conformance): init2 fails, the pod fails at once, run1 never
/// leaves `PodInitializing` (A5, P4, D3, K3).
fn s04(srv: &Server) {
    let mut pod = srv.create_scenario("s04");
    let (_, end) = pod.wait_phase("Failed", secs(60));
    let mut c = Checks::new();
    let p = &end.pod;
    check_not_initialized(&mut c, p, "containers with incomplete status: [init2]");
    check_terminal_conditions(&mut c, p);
    check_all_terminated(
        &mut c,
        &pod,
        &end,
        &[("init1", 0, "Completed"), ("init2", 1, "Error")],
    );
    c.check(
        p["status"]["initContainerStatuses"]
            .as_array()
            .is_some_and(|a| a.len() == 2),
        "2 initContainerStatuses",
    );
    check_kubectl(&mut c, &pod, "0/1", "Init:Error");
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    check_terminated(&mut c, &pod, &last, "init2", 1, "Error");
    let obs = pod.observations();
    check_always_pod_initializing(&mut c, &pod, &obs, "run1");
    check_not_restarted(
        &mut c,
        &pod,
        &obs,
        &["init1", "init2", "run1"],
        "restartCount 0",
    );
    check_init_invariants(&mut c, &pod, "run1");
    c.finish("s04", || pod.diag());
}

/// `container_lifecycle_test.go` — "should not launch regular containers if an init container
/// fails" (restartPolicy=Never).
fn s06(srv: &Server) {
    let mut pod = srv.create_scenario("s06");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Failed");
    check_terminated(&mut c, &pod, &end, "init-1", 1, "Error");
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .starts("init-1")
        .exits("init-1")
        .doesnt_start(&["regular-1"]);
    let cols = pod.kubectl_cols();
    c.check(
        cols[2] == "Init:Error",
        format!("kubectl STATUS Init:Error (is {cols:?})"),
    );
    pod.delete_and_wait_gone(secs(60));
    check_always_pod_initializing(&mut c, &pod, &pod.observations(), "regular-1");
    check_init_invariants(&mut c, &pod, "regular-1");
    c.finish("s06", || pod.diag());
}

/// `container_lifecycle_test.go` — "should run Init container to completion before call to
/// PostStart of regular container" (restartPolicy=Never).
fn s07(srv: &Server) {
    let mut pod = srv.create_scenario("s07");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    check_terminal_conditions(&mut c, &end.pod);
    let ev = pod.ev_log();
    let ps = "PostStart-regular-1";
    EvChecks::new(&mut c, &ev)
        .in_order(&["init-1", ps], true)
        .overlap("regular-1", ps);
    pod.delete_and_wait_gone(secs(60));
    c.finish("s07", || pod.diag());
}

/// `container_lifecycle_test.go` — "shouldn't restart init containers upon regular container
/// restart" (restartPolicy=Always; A4, A5: completed init containers are never re-run).
fn s08(srv: &Server) {
    let mut pod = srv.create_scenario("s08");
    // ⏱ upstream 2 min: regular-1 restarts at about 0, 10, 20 s after its exits.
    let (_, end) = pod.wait("regular-1 restartCount >= 3", secs(60), |p| {
        restart_count(cstatus(p, "regular-1")) >= 3
    });
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Running");
    let inits = ["init-1", "init-2", "init-3"];
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .in_order(&["init-1", "init-2", "init-3", "regular-1"], false)
        .not_restarted(&inits)
        .restarted("regular-1");
    pod.delete_and_wait_gone(secs(60));
    let obs = pod.observations();
    for x in inits {
        check_each(
            &mut c,
            &pod,
            &obs,
            |p| {
                let cs = cstatus(p, x);
                restart_count(cs) == 0 && state_kind(cs) != "running"
                    || cs.is_null()
                    || cond_status(p, "Initialized") != "True"
            },
            |p| format!("{x} re-run ({})", show(p, x)),
        );
    }
    check_never_pending_after_running(&mut c, &pod);
    check_init_invariants(&mut c, &pod, "regular-1");
    check_monotonic(&mut c, &pod, "regular-1");
    c.finish("s08", || pod.diag());
}

/// `container_lifecycle_test.go` — "should not restart init container when updated with a new
/// image after finishing" (restartPolicy=Always; A5, M12).
fn s08b(srv: &Server) {
    let mut pod = srv.create_scenario("s08b");
    let (i, _) = pod.wait("Running, regular-1 running", secs(60), |p| {
        phase(p) == "Running" && state_kind(cstatus(p, "regular-1")) == "running"
    });
    let mut c = Checks::new();
    update_init_image(
        &mut c,
        &pod,
        0,
        "UPDATE spec.initContainers[0].image is allowed (M11)",
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
    let obs = pod.observations()[i..].to_vec();
    check_each(
        &mut c,
        &pod,
        &obs,
        |p| {
            let cs = cstatus(p, "init-1");
            terminated_with(cs, 0, "Completed")
                && restart_count(cs) == 0
                && cs["image"] != NEW_IMAGE
        },
        |p| {
            format!(
                "init-1 stays terminated with 0, not restarted, old image ({}, image {})",
                show(p, "init-1"),
                cstatus(p, "init-1")["image"]
            )
        },
    );
    check_not_restarted(&mut c, &pod, &obs, &["regular-1"], "not restarted");
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev).not_restarted(&["init-1", "regular-1"]);
    pod.delete_and_wait_gone(secs(60));
    c.finish("s08b", || pod.diag());
}

/// `container_lifecycle_test.go` — "the regular container has its image updated during
/// initialization": "Should not start a regular container" (restartPolicy=Always), and "should
/// not restart the init container if the image is updated during initialization": the running
/// init container is left alone, the regular container starts once, with the new image (A5,
/// A12, M12).
fn s08c(srv: &Server) {
    let mut pod = srv.create_scenario("s08c");
    let (i, _) = pod.wait("init-1 running and started", secs(60), |p| {
        let s = cstatus(p, "init-1");
        state_kind(s) == "running" && s["started"] == true
    });
    let mut c = Checks::new();
    for (list, what) in [("initContainers", "init-1"), ("containers", "regular-1")] {
        let out = patch_image(&pod, list, 0, NEW_IMAGE);
        check_accepted(
            &mut c,
            &out,
            &format!("UPDATE the image of {what} during initialization"),
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
    check_phase(&mut c, &running.pod, "Running");
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
    EvChecks::new(&mut c, &ev).not_restarted(&["init-1", "regular-1", "regular-2"]);
    pod.delete_and_wait_gone(secs(60));
    c.finish("s08c", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecars restarting (11, 12, 13, 14, 15, 16, 17)

/// 11 and 12: a sidecar that exits by itself (code `code`) is restarted, before and after the
/// regular container started, whatever the pod's policy; the pod still succeeds (A5, P2, P5).
fn sidecar_exits_continuously(srv: &Server, id: &str, code: i64) {
    let mut pod = srv.create_scenario(id);
    let mut c = Checks::new();
    // K11a, K8: while the sidecar crash-loops in the initialized pod, kubectl shows
    // `Init:CrashLoopBackOff` with the sidecar's restarts.
    check_kubectl_while(
        &mut c,
        &pod,
        "Running, regular-1 running, restartable-init-1 in CrashLoopBackOff",
        |p| {
            phase(p) == "Running"
                && state(cstatus(p, RI1))["reason"] == "CrashLoopBackOff"
                && state_kind(cstatus(p, "regular-1")) == "running"
        },
        "1/2",
        "Init:CrashLoopBackOff",
        Some(RI1),
    );
    let (_, end) = pod.wait_terminal(secs(60));
    check_phase(&mut c, &end.pod, "Succeeded");
    let ev = pod.ev_log();
    // StartsBefore(regular-1, restartable-init-1): restarted after regular-1 started.
    EvChecks::new(&mut c, &ev)
        .starts_before(RI1, "regular-1")
        .starts_before("regular-1", RI1)
        .exits("regular-1")
        .not_restarted(&["init-1"]);
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
fn s11(srv: &Server) {
    sidecar_exits_continuously(srv, "s11", 0);
}

/// Same, "exits with exit code 1 continuously", restartPolicy=OnFailure.
fn s12(srv: &Server) {
    sidecar_exits_continuously(srv, "s12", 1);
}

/// `container_lifecycle_test.go` — "an Init container before restartable init container fails"
/// (restartPolicy=Never): the pod fails, neither the sidecar nor the regular container starts.
fn s13(srv: &Server) {
    let mut pod = srv.create_scenario("s13");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Failed");
    check_terminated(&mut c, &pod, &end, "init-1", 1, "Error");
    check_not_initialized(
        &mut c,
        &end.pod,
        "containers with incomplete status: [init-1 restartable-init-1]",
    );
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .exits("init-1")
        .doesnt_start(&[RI1, "regular-1"]);
    pod.delete_and_wait_gone(secs(60));
    let obs = pod.observations();
    for n in [RI1, "regular-1"] {
        check_always_pod_initializing(&mut c, &pod, &obs, n);
    }
    c.finish("s13", || pod.diag());
}

/// `container_lifecycle_test.go` — "an Init container after restartable init container fails"
/// (restartPolicy=Never): the pod fails, the sidecar ran alongside the failing init container
/// and is stopped (A5 KillPod).
fn s14(srv: &Server) {
    let mut pod = srv.create_scenario("s14");
    let (i, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Failed");
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
    EvChecks::new(&mut c, &ev)
        .exits("init-1")
        .overlap(RI1, "init-1")
        .doesnt_start(&["regular-1"]);
    pod.delete_and_wait_gone(secs(60));
    check_always_pod_initializing(&mut c, &pod, &pod.observations(), "regular-1");
    c.finish("s14", || pod.diag());
}

/// `container_lifecycle_test.go` — "an Init container before restartable init container
/// continuously fails" (restartPolicy=OnFailure): "should continuously run Pod keeping it
/// Pending", "should have Init container restartCount greater than 0", "should not start
/// restartable init container".
fn s15(srv: &Server) {
    let mut pod = srv.create_scenario("s15");
    let mut c = Checks::new();
    // K3: the failing init container's waiting reason, with a sidecar counted in READY (K2).
    check_kubectl_while(
        &mut c,
        &pod,
        "init-1 in CrashLoopBackOff",
        |p| state(cstatus(p, "init-1"))["reason"] == "CrashLoopBackOff",
        "0/2",
        "Init:CrashLoopBackOff",
        None,
    );
    // The previous run's lines.
    check_previous_logs(&mut c, &pod, "init-1", |l| {
        l.contains("init-1 Starting") && l.contains("init-1 Exiting")
    });
    let (i, end) = pod.wait("init-1 restartCount >= 3", secs(60), |p| {
        restart_count(cstatus(p, "init-1")) >= 3
    });
    let obs = pod.observations()[..=i].to_vec();
    check_phase_throughout(&mut c, &pod, &obs, "Pending");
    for n in [RI1, "regular-1"] {
        check_always_pod_initializing(&mut c, &pod, &obs, n);
    }
    check_not_initialized(
        &mut c,
        &end.pod,
        "containers with incomplete status: [init-1 restartable-init-1]",
    );
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .restarted("init-1")
        .doesnt_start(&[RI1]);
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, "init-1");
    c.finish("s15", || pod.diag());
}

/// `container_lifecycle_test.go` — "an Init container after restartable init container fails"
/// (restartPolicy=Always): the pod stays Pending while both restart, and they run together.
fn s16(srv: &Server) {
    let mut pod = srv.create_scenario("s16");
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
    EvChecks::new(&mut c, &ev)
        .restarted("init-1")
        .restarted(RI1)
        .overlap(RI1, "init-1")
        .doesnt_start(&["regular-1"]);
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, "init-1");
    check_monotonic(&mut c, &pod, RI1);
    c.finish("s16", || pod.diag());
}

/// `container_lifecycle_test.go` — "a restartable init container runs continuously"
/// (restartPolicy=Always): "should keep running a Pod continuously and produce log", "should
/// not restart a restartable init container", "should start a regular container".
fn s17(srv: &Server) {
    let mut pod = srv.create_scenario("s17");
    let (_, end) = pod.wait("regular-1 restartCount >= 2", secs(60), |p| {
        restart_count(cstatus(p, "regular-1")) >= 2
    });
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Running");
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .not_restarted(&[RI1])
        .restarted("regular-1");
    pod.delete_and_wait_gone(secs(60));
    check_not_restarted(&mut c, &pod, &pod.observations(), &[RI1], "restartCount 0");
    check_never_pending_after_running(&mut c, &pod);
    check_monotonic(&mut c, &pod, "regular-1");
    c.finish("s17", || pod.diag());
}

/// `container_lifecycle_test.go` — "should restart when updated with a new image" ("a
/// restartable init container runs continuously", restartPolicy=Always): only the updated
/// sidecar restarts (A5, A12, M12).
fn s17b(srv: &Server) {
    let mut pod = srv.create_scenario("s17b");
    pod.wait_all_running(&[RI1, RI2, "regular-1"]);
    let mut c = Checks::new();
    let from = pod.observations().len();
    let patched = std::time::Instant::now();
    update_init_image(
        &mut c,
        &pod,
        0,
        "UPDATE spec.initContainers[0].image is allowed (M11)",
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
    // The status shows the new instance running once runc started it; its script logs
    // `Starting` a moment later.
    let ev = wait_ev(&pod, "the new instance's Starting line", secs(10), |ev| {
        ev.restarted(RI1)
    });
    EvChecks::new(&mut c, &ev)
        .restarted(RI1)
        .not_restarted(&[RI2, "regular-1"]);
    check_event(
        &mut c,
        &pod,
        "Killing",
        "spec.initContainers{restartable-init-1}",
        "Init container restartable-init-1 definition changed",
    );
    pod.delete_and_wait_gone(secs(60));
    check_never_pending_after_running(&mut c, &pod);
    c.finish("s17b", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecar probes (19, 20, 21, 22)

/// `container_lifecycle_test.go` — "should launch restartable init containers serially
/// considering the startup probe" (A5, A8, S11, D3).
fn s19(srv: &Server) {
    let mut pod = srv.create_scenario("s19");
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
        None,
    );
    let (_, end) = pod.wait_terminal(secs(60));
    check_phase(&mut c, &end.pod, "Succeeded");
    check_terminal_conditions(&mut c, &end.pod);
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .starts_before(RI1, RI2)
        .starts_before(RI2, "regular-1")
        .not_restarted(&[RI1, RI2]);
    c.check(
        ev.first(RI2, "Starting") > ev.first(RI1, "Started")
            && ev.first("regular-1", "Starting") > ev.first(RI2, "Started"),
        "each container starts only after the previous sidecar's startup delay",
    );
    pod.delete_and_wait_gone(secs(60));
    let unstarted: Vec<Obs> = pod
        .observations()
        .into_iter()
        .filter(|o| {
            let r1 = cstatus(&o.pod, RI1);
            state_kind(r1) == "running" && r1["started"] != true
        })
        .collect();
    check_each(
        &mut c,
        &pod,
        &unstarted,
        |p| {
            state_kind(cstatus(p, RI2)) != "running"
                && state_kind(cstatus(p, "regular-1")) != "running"
        },
        |_| "the next container runs before restartable-init-1 started".to_string(),
    );
    check_each(
        &mut c,
        &pod,
        &unstarted,
        |p| cond_status(p, "Initialized") == "False" && phase(p) == "Pending",
        |_| "Initialized False and Pending while a sidecar starts (P2, D3)".to_string(),
    );
    c.check(
        !unstarted.is_empty(),
        "restartable-init-1 observed running with started false (its 3 s start delay)",
    );
    c.finish("s19", || pod.diag());
}

/// A sidecar's postStart hook finishes before the next init container starts (A8, A20, H2):
/// the log-protocol form of "should not launch second container before PostStart of the first
/// container completed" applied to a restartable init container.
fn s19b(srv: &Server) {
    let mut pod = srv.create_scenario("s19b");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let ev = pod.ev_log();
    let ps = "PostStart-restartable-init-1";
    EvChecks::new(&mut c, &ev)
        .in_order(&[ps, "init-1"], true)
        .overlap(RI1, ps)
        .completes_before("init-1", "regular-1");
    pod.delete_and_wait_gone(secs(60));
    c.finish("s19b", || pod.diag());
}

/// The preStop/restart checks shared by 20 and 21 (A5, H4, T11): the sidecar, killed for its
/// probe, runs its preStop hook and is restarted.
fn check_sidecar_killed_with_prestop(c: &mut Checks, ev: &EvLog) {
    let ps = "PreStop-restartable-init-1";
    EvChecks::new(c, ev)
        .overlap(RI1, ps)
        .starts(ps)
        .exits(RI1)
        .restarted(RI1);
}

/// The `Killing` event of restartable-init-1 killed for its `probe` probe.
fn check_sidecar_probe_kill(c: &mut Checks, pod: &Pod, probe: &str) {
    check_event(
        c,
        pod,
        "Killing",
        "spec.initContainers{restartable-init-1}",
        &format!("Init container restartable-init-1 failed {probe} probe"),
    );
}

/// `container_lifecycle_test.go` — "should call the container's preStop hook and not launch
/// next container if the restartable init container's startup probe fails" (restartPolicy=
/// Always).
fn s20(srv: &Server) {
    let mut pod = srv.create_scenario("s20");
    let mut c = Checks::new();
    check_kubectl_while(
        &mut c,
        &pod,
        "restartable-init-1 in CrashLoopBackOff",
        |p| state(cstatus(p, RI1))["reason"] == "CrashLoopBackOff",
        "0/2",
        "Init:CrashLoopBackOff",
        None,
    );
    let (i, _) = pod.wait("restartable-init-1 restartCount >= 2", secs(60), |p| {
        restart_count(cstatus(p, RI1)) >= 2
    });
    let obs = pod.observations()[..=i].to_vec();
    check_phase_throughout(&mut c, &pod, &obs, "Pending");
    check_always_pod_initializing(&mut c, &pod, &obs, "regular-1");
    check_each(
        &mut c,
        &pod,
        &obs,
        |p| cstatus(p, RI1)["started"] != true,
        |_| "restartable-init-1 started".to_string(),
    );
    let ev = pod.ev_log();
    check_sidecar_killed_with_prestop(&mut c, &ev);
    EvChecks::new(&mut c, &ev).doesnt_start(&["regular-1"]);
    check_sidecar_probe_kill(&mut c, &pod, "startup");
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
fn s21(srv: &Server) {
    let mut pod = srv.create_scenario("s21");
    let (_, end) = pod.wait(
        "restartable-init-1 restartCount >= 2 and regular-1 restartCount >= 1",
        secs(60),
        |p| restart_count(cstatus(p, RI1)) >= 2 && restart_count(cstatus(p, "regular-1")) >= 1,
    );
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Running");
    let ev = pod.ev_log();
    check_sidecar_killed_with_prestop(&mut c, &ev);
    EvChecks::new(&mut c, &ev).starts("regular-1");
    check_sidecar_probe_kill(&mut c, &pod, "liveness");
    pod.delete_and_wait_gone(secs(60));
    check_never_pending_after_running(&mut c, &pod);
    check_monotonic(&mut c, &pod, RI1);
    c.finish("s21", || pod.diag());
}

/// A sidecar's readiness probe: the sidecar counts for `ContainersReady`/`Ready` (D4, K2) but
/// `Initialized` needs only `started` (D3). Translates the sidecar readiness expectations of
/// `test/e2e/node/sidecar_container.go` / the KEP-753 docs ("sidecar containers ... readiness
/// probes ... contribute to the pod's readiness").
fn s22(srv: &Server) {
    let mut pod = srv.create_scenario("s22");
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
    let cols = pod.kubectl_cols();
    let mut c = Checks::new();
    // Ready copies ContainersReady.
    check_containers_not_ready(&mut c, &not_ready.pod, RI1);
    let (_, ready) = pod.wait_since(i, pod.created, "Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    c.check(
        cols[1] == "1/2"
            || pod
                .observations()
                .iter()
                .any(|o| o.seen < ready.seen && cond_status(&o.pod, "Ready") == "True"),
        format!(
            "kubectl READY 1/2 while the sidecar is not ready (is {})",
            cols[1]
        ),
    );
    check_kubectl(&mut c, &pod, "2/2", "Running");
    let init_at = ts(&cond(&ready.pod, "Initialized")["lastTransitionTime"]);
    let ready_at = ts(&cond(&ready.pod, "Ready")["lastTransitionTime"]);
    let gap = init_at.zip(ready_at).map(|(a, b)| b - a);
    c.check(
        gap.is_some_and(|g| g >= 5.0 - 1.0 - 1.0),
        format!("Ready about 5 s after Initialized (gap {gap:?} s)"),
    );
    pod.delete_and_wait_gone(secs(60));
    check_not_restarted(
        &mut c,
        &pod,
        &pod.observations(),
        &[RI1],
        "not restarted although not ready",
    );
    c.finish("s22", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Sidecars at the end of the pod (23, 24, 25, 26, 27)

/// The regular container of a Never pod with a sidecar fails: the sidecar is stopped and the
/// pod is Failed (A13, P2, P8d, K11c). Counterpart of "should complete a Pod successfully"
/// ("a restartable init container runs continuously", restartPolicy=Never) with a failing main
/// container.
fn s23(srv: &Server) {
    let mut pod = srv.create_scenario("s23");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Failed");
    check_terminal_conditions(&mut c, &end.pod);
    c.check(
        cond_status(&end.pod, "Initialized") == "True",
        "Initialized stays True in the Failed pod",
    );
    check_all_terminated(
        &mut c,
        &pod,
        &end,
        &[("regular-1", 1, "Error"), (RI1, 0, "Completed")],
    );
    check_kubectl(&mut c, &pod, "0/2", "Error");
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .not_restarted(&[RI1])
        .exits_before("regular-1", RI1);
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    check_final_phase(&mut c, &last, "Failed");
    check_terminated(&mut c, &pod, &last, RI1, 0, "Completed");
    c.finish("s23", || pod.diag());
}

/// `container_lifecycle_test.go` — "should mark pod as succeeded if any of the restartable init
/// containers have terminated with non-zero exit code" (T5, T8, P2).
fn s24(srv: &Server) {
    let (pod, mut c, took) = delete_running_sidecar_pod(
        srv,
        "s24",
        30,
        "Succeeded",
        &[
            ("regular-1", 0, "Completed"),
            (RI1, 0, "Completed"),
            (RI2, 1, "Error"),
            (RI3, 0, "Completed"),
        ],
    );
    c.check(
        took < secs(20),
        format!("gone well within the 30 s grace (took {took:?})"),
    );
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev).stop_in_reverse(Some("regular-1"), &[RI1, RI2, RI3]);
    c.finish("s24", || pod.diag());
}

/// `container_lifecycle_test.go` — "should mark pod as succeeded if any of the restartable init
/// containers have terminated with non-zero exit code by prestop hook": a failing preStop does
/// not change the outcome (H4 `FailedPreStopHook`, T8).
fn s24b(srv: &Server) {
    let all_completed: Vec<(&str, i64, &str)> = ["regular-1", RI1, RI2, RI3]
        .into_iter()
        .map(|n| (n, 0, "Completed"))
        .collect();
    let (pod, mut c, took) =
        delete_running_sidecar_pod(srv, "s24b", 30, "Succeeded", &all_completed);
    c.check(
        took < secs(20),
        format!("gone well within the 30 s grace (took {took:?})"),
    );
    let ev = pod.ev_log();
    for n in [RI1, RI2, RI3] {
        c.check(
            ev.first(&format!("PreStop-{n}"), "Exiting").is_some(),
            format!("PreStop-{n} ran"),
        );
    }
    EvChecks::new(&mut c, &ev).stop_in_reverse(None, &[RI1, RI2, RI3]);
    check_event(
        &mut c,
        &pod,
        "FailedPreStopHook",
        "spec.initContainers{restartable-init-2}",
        "PreStopHook failed",
    );
    c.finish("s24b", || pod.diag());
}

/// `container_lifecycle_test.go` — "should call sidecar container PreStop hook simultaneously"
/// (T5: preStop hooks start together, stop signals in reverse order).
fn s25(srv: &Server) {
    let mut pod = srv.create_scenario("s25");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let ri = [RI1, RI2, RI3];
    for name in ri {
        check_terminated(&mut c, &pod, &end, name, 0, "Completed");
    }
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev).sidecars_around(&ri, "regular-1");
    let ps: Vec<Option<f64>> = ri
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
    for name in ri {
        check_terminated(&mut c, &pod, &last, name, 0, "Completed");
    }
    c.finish("s25", || pod.diag());
}

/// `container_lifecycle_test.go` — "A restartable init container has its image updated during
/// pod termination": "should terminate gracefully when restartPolicy=Always": nothing restarts
/// once the pod is terminating (A15, T6), the sidecars stop in reverse order and the pod is gone
/// long before its grace period.
fn s25b(srv: &Server) {
    let mut pod = srv.create_scenario("s25b");
    pod.wait_all_running(&[RI2, RI3, "regular-1"]);
    let from = pod.observations().len();
    pod.delete(Some(60));
    let mut c = Checks::new();
    update_init_image(
        &mut c,
        &pod,
        1,
        "UPDATE of the image during termination is accepted",
    );
    // Each of the three handlers takes 3 s, one after the other (T5).
    let (took, last) = pod.wait_gone(secs(60));
    c.check(
        took < secs(30),
        format!("gone well before the 60 s grace (took {took:?})"),
    );
    let names = ["init-1", RI2, RI3, "regular-1"];
    check_not_restarted(
        &mut c,
        &pod,
        &pod.observations()[from..],
        &names,
        "restarted during termination",
    );
    for n in [RI2, RI3, "regular-1"] {
        check_terminated(&mut c, &pod, &last, n, 0, "Completed");
    }
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .not_restarted(&names)
        .stop_in_reverse(Some("regular-1"), &[RI2, RI3]);
    c.finish("s25b", || pod.diag());
}

/// `container_lifecycle_test.go` — "should terminate sidecars simultaneously if prestop doesn't
/// exit": the hooks use up the whole grace, then every sidecar gets the 2 s minimum at the same
/// time and is killed (H4, T3, T5). ⏱ grace 10 s (upstream 30 s, hooks live ~32 s).
fn s25c(srv: &Server) {
    let mut pod = srv.create_scenario("s25c");
    let (_, end) = pod.wait_terminal(secs(60));
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let ri = [RI1, RI2, RI3];
    for n in ri {
        check_terminated(&mut c, &pod, &end, n, 137, "Error");
    }
    let ev = pod.ev_log();
    EvChecks::new(&mut c, &ev)
        .starts_before(RI1, RI2)
        .starts_before(RI2, RI3)
        .starts_before(RI3, "regular-1");
    let hooks: Vec<(Option<f64>, Option<f64>)> = ri
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
    for (n, h) in ri.iter().zip(&hooks) {
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
fn s26b(srv: &Server) {
    let mut pod = srv.create_scenario("s26b");
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
    let (took, _) = pod.delete_with_grace(60, secs(60));
    let mut c = Checks::new();
    // ⏱ upstream: within containerTerminationSeconds + 60 s of a 180 s grace.
    c.check(
        took < secs(15),
        format!("gone long before the 60 s grace (took {took:?})"),
    );
    let ev = pod.ev_log();
    // restartable-init-2 got its stop signal.
    EvChecks::new(&mut c, &ev)
        .exits(RI2)
        .doesnt_start(&[RI3, "regular-1"]);
    c.finish("s26b", || pod.diag());
}

/// `container_lifecycle_test.go` — "should not hang in termination if terminated during
/// initialization": sidecars that never started are not waited for (T4, T5, H5).
fn s26(srv: &Server) {
    let mut pod = srv.create_scenario("s26");
    pod.wait(
        "start-init running and started, pod Pending",
        secs(60),
        |p| {
            let s = cstatus(p, "start-init");
            phase(p) == "Pending" && state_kind(s) == "running" && s["started"] == true
        },
    );
    let (took, last) = pod.delete_with_grace(3, secs(60));
    let mut c = Checks::new();
    // Upstream: less than grace + 3 s.
    c.check(
        took < secs(6),
        format!("gone within 6 s of DELETE(3) (took {took:?})"),
    );
    check_final_phase(&mut c, &last, "Failed");
    // P14: the pod never initialized; start-init shows its own exit (its TERM handler exits
    // 0), the never-started containers stay waiting.
    check_terminated(&mut c, &pod, &last, "start-init", 0, "Completed");
    for n in [RI1, RI2, RI3, "regular-1"] {
        check_always_pod_initializing(&mut c, &pod, std::slice::from_ref(&last), n);
    }
    let ev = pod.ev_log();
    // No preStop for the never-started sidecars.
    EvChecks::new(&mut c, &ev)
        .exits("start-init")
        .doesnt_start(&[
            RI1,
            RI2,
            RI3,
            "PreStop-restartable-init-1",
            "PreStop-restartable-init-2",
            "PreStop-restartable-init-3",
            "regular-1",
        ]);
    c.finish("s26", || pod.diag());
}

/// `container_lifecycle_test.go` — "should mark pod as failed if regular container has exceeded
/// its termination grace period seconds" (T3: at least 2 s per sidecar after the budget is
/// spent, T5, T8).
fn s27(srv: &Server) {
    let (pod, mut c, took) = delete_running_sidecar_pod(
        srv,
        "s27",
        5,
        "Failed",
        &[
            ("regular-1", 137, "Error"),
            (RI1, 137, "Error"),
            (RI2, 0, "Completed"),
            (RI3, 137, "Error"),
        ],
    );
    // T3/T5: every sidecar waits for its turn at most its remaining grace (the 5 s regular-1
    // uses up), then gets the 2 s minimum: all three are signalled together at about 5 s and
    // the last SIGKILL comes at about 7 s.
    c.check(
        took >= secs(6) && took < secs(15),
        format!("gone about 7 s after DELETE(5) (took {took:?})"),
    );
    let ev = pod.ev_log();
    // restartable-init-2 exited on its own.
    EvChecks::new(&mut c, &ev).exits(RI2);
    for n in ["regular-1", RI1, RI3] {
        c.check(
            ev.first(n, "Exiting").is_none(),
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
