//! The scenarios given in `../shared/spec/conformance-examples.md`, plus `u65` and `u73`.

use super::harness::*;
use crate::conformance_support::*;
#[allow(unused_imports)]
use serde_json::Value;
#[allow(unused_imports)]
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
// ----------------------------------------------------------------------------------------------
// Init containers (01, 02, 05)

/// Upstream's `initialized`: (every init container terminated with 0, one failed).
pub(crate) fn init_progress(p: &Value) -> (bool, bool) {
    let want = p["spec"]["initContainers"].as_array().map_or(0, Vec::len);
    let statuses = p["status"]["initContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut all = statuses.len() == want;
    let mut failed = false;
    for s in &statuses {
        let t = &s["state"]["terminated"];
        if !t.is_object() {
            all = false;
        } else if t["exitCode"] != 0 {
            all = false;
            failed = true;
        }
    }
    (all, failed)
}

/// The invariants upstream's init-container tests state for every observed update (01, 02):
/// while initialization is unfinished, `app` (when it has a status) waits with
/// `PodInitializing` and no restarts; `Initialized`, once present, stays present, has a
/// `lastTransitionTime`, is never `Unknown`, is True exactly when every init container
/// succeeded, and never goes back from True to False.
pub(crate) fn check_init_invariants(c: &mut Checks, pod: &Pod, app: &str) {
    let mut was_initialized = false;
    let mut present = false;
    for o in pod.observations() {
        let p = &o.pod;
        let t = pod.t(&o);
        let (all, failed) = init_progress(p);
        let a = cstatus(p, app);
        if (!all || failed) && !a.is_null() {
            c.check(
                state_kind(a) == "waiting" && state(a)["reason"] == "PodInitializing",
                format!(
                    "t={t:.3}: init unfinished but {app} is {} {}",
                    state_kind(a),
                    state(a)["reason"]
                ),
            );
            c.check(
                restart_count(a) == 0,
                format!(
                    "t={t:.3}: init unfinished but {app} restartCount {}",
                    a["restartCount"]
                ),
            );
        }
        let ic = cond(p, "Initialized");
        if ic.is_null() {
            c.check(
                !present,
                format!("t={t:.3}: condition Initialized disappeared"),
            );
            continue;
        }
        present = true;
        let s = ic["status"].as_str().unwrap_or("");
        c.check(
            s == "True" || s == "False",
            format!("t={t:.3}: Initialized is {s:?}"),
        );
        c.check(
            ic["lastTransitionTime"]
                .as_str()
                .is_some_and(|l| !l.is_empty()),
            format!("t={t:.3}: Initialized has no lastTransitionTime"),
        );
        c.check(
            (s == "True") == (all && !failed),
            format!("t={t:.3}: Initialized {s} but all init containers done = {all}"),
        );
        c.check(
            !(was_initialized && s == "False"),
            format!("t={t:.3}: Initialized went from True back to False"),
        );
        was_initialized |= s == "True";
    }
}

/// Condition `Initialized` True; exactly `n` init container statuses, each ready and
/// terminated with exit code 0.
pub(crate) fn check_init_statuses(c: &mut Checks, p: &Value, n: usize) {
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

pub(crate) fn s01(srv: &Server) {
    let mut pod = srv.create("s01", &manifest("s01.yaml"));
    let (_, end) = pod.wait("phase Succeeded", secs(60), |p| phase(p) == "Succeeded");
    let mut c = Checks::new();
    check_init_statuses(&mut c, &end.pod, 2);
    pod.delete_and_wait_gone(secs(60));
    check_init_invariants(&mut c, &pod, "run1");
    c.finish("s01", || pod.diag());
}

pub(crate) fn s02(srv: &Server) {
    let mut pod = srv.create("s02", &manifest("s02.yaml"));
    let (_, end) = pod.wait("phase Running", secs(60), |p| phase(p) == "Running");
    let mut c = Checks::new();
    check_init_statuses(&mut c, &end.pod, 2);
    pod.delete_and_wait_gone(secs(60));
    check_init_invariants(&mut c, &pod, "run1");
    for o in pod.observations() {
        for name in ["init1", "init2"] {
            c.check(
                restart_count(cstatus(&o.pod, name)) == 0,
                format!("t={:.3}: {name} restartCount stays 0", pod.t(&o)),
            );
        }
    }
    c.finish("s02", || pod.diag());
}

pub(crate) fn s05(srv: &Server) {
    let _scratch = Scratch::new("s05");
    let mut pod = srv.create("s05", &manifest("s05.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    let ev = pod.ev_log();
    for (x, y) in [
        ("init-1", "init-2"),
        ("init-2", "init-3"),
        ("init-3", "regular-1"),
    ] {
        c.check(
            ev.completes_before(x, y),
            format!("{x} completes before {y} starts"),
        );
        c.check(ev.starts_before(x, y), format!("StartsBefore({x}, {y})"));
        c.check(ev.exits_before(x, y), format!("ExitsBefore({x}, {y})"));
    }
    // Section 0.3: the same lines are in each container's log.
    for name in ["init-1", "init-2", "init-3", "regular-1"] {
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

pub(crate) fn s09(srv: &Server) {
    let _scratch = Scratch::new("s09");
    let mut pod = srv.create("s09", &manifest("s09.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(90), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    let ev = pod.ev_log();
    let (ri1, ri2) = ("restartable-init-1", "restartable-init-2");
    c.check(
        ev.completes_before("init-1", ri1),
        "init-1 completes before restartable-init-1 starts",
    );
    c.check(
        ev.overlap_from(ri1, "init-2"),
        "OverlapFrom(restartable-init-1, init-2)",
    );
    c.check(
        ev.completes_before("init-2", ri2),
        "init-2 completes before restartable-init-2 starts",
    );
    c.check(
        ev.starts_before(ri2, "init-3"),
        "StartsBefore(restartable-init-2, init-3)",
    );
    for (x, y) in [(ri1, ri2), (ri1, "init-3"), (ri2, "init-3")] {
        c.check(ev.overlap(x, y), format!("Overlap({x}, {y})"));
    }
    c.check(
        ev.completes_before("init-3", "regular-1"),
        "init-3 completes before regular-1 starts",
    );
    for x in [ri1, ri2] {
        c.check(
            ev.overlap(x, "regular-1"),
            format!("Overlap({x}, regular-1)"),
        );
        c.check(ev.not_restarted(x), format!("NotRestarted({x})"));
    }
    pod.delete_and_wait_gone(secs(60));
    c.finish("s09", || pod.diag());
}

/// Checks that sidecar `name` is terminated with exit code 0 and reason `Completed` in `o`.
pub(crate) fn check_sidecar_completed(c: &mut Checks, pod: &Pod, o: &Obs, name: &str, what: &str) {
    let s = cstatus(&o.pod, name);
    let t = &s["state"]["terminated"];
    c.check(
        t["exitCode"] == 0 && t["reason"] == "Completed",
        format!(
            "{what}: t={:.3}: {name} terminated/Completed with 0 (is {} {} {})",
            pod.t(o),
            state_kind(s),
            state(s)["reason"],
            state(s)["exitCode"]
        ),
    );
}

/// 10 and 10b: the sidecar runs for the whole pod, which then succeeds.
pub(crate) fn sidecar_continuous(srv: &Server, file: &str, c: &mut Checks) -> String {
    let _scratch = Scratch::new("s10");
    let mut pod = srv.create("s10", &manifest(file));
    let (_, end) = pod.wait("phase Succeeded", secs(60), |p| phase(p) == "Succeeded");
    let ev = pod.ev_log();
    c.check(
        ev.not_restarted("restartable-init-1"),
        format!("{file}: NotRestarted(restartable-init-1)"),
    );
    c.check(
        ev.first("regular-1", "Exiting").is_some(),
        format!("{file}: regular-1 Exiting present"),
    );
    check_sidecar_completed(c, &pod, &end, "restartable-init-1", file);
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    check_sidecar_completed(c, &pod, &last, "restartable-init-1", file);
    pod.diag()
}

pub(crate) fn s10(srv: &Server) {
    let mut c = Checks::new();
    // The variants share the pod name and the scratch path: one after the other.
    let never = sidecar_continuous(srv, "s10.yaml", &mut c);
    let on_failure = sidecar_continuous(srv, "s10b.yaml", &mut c);
    c.finish("s10", || format!("{never}\n{on_failure}"));
}

pub(crate) fn s18(srv: &Server) {
    let _scratch = Scratch::new("s18");
    let mut pod = srv.create("s18", &manifest("s18.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(90), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    let ev = pod.ev_log();
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    let ri = [
        "restartable-init-1",
        "restartable-init-2",
        "restartable-init-3",
    ];
    for name in ri {
        check_sidecar_completed(&mut c, &pod, &end, name, "at Succeeded");
        check_sidecar_completed(&mut c, &pod, &last, name, "final status");
    }
    for (x, y) in [
        (ri[0], ri[1]),
        (ri[0], ri[2]),
        (ri[1], ri[2]),
        (ri[0], "regular-1"),
        (ri[1], "regular-1"),
        (ri[2], "regular-1"),
    ] {
        c.check(ev.starts_before(x, y), format!("StartsBefore({x}, {y})"));
    }
    for x in ri {
        c.check(
            ev.exits_before("regular-1", x),
            format!("ExitsBefore(regular-1, {x})"),
        );
    }
    c.check(
        ev.exits_before(ri[2], ri[1]),
        "ExitsBefore(restartable-init-3, restartable-init-2)",
    );
    c.check(
        ev.exits_before(ri[1], ri[0]),
        "ExitsBefore(restartable-init-2, restartable-init-1)",
    );
    // Visibly serial: each sidecar's 5 s handler starts only once the next one has exited.
    for (later, earlier) in [(ri[1], ri[2]), (ri[0], ri[1])] {
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

pub(crate) fn s28(srv: &Server) {
    let mut pod = srv.create("s28", &manifest("s28.yaml"));
    let (_, ready) = pod.wait("condition Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    let mut c = Checks::new();
    c.check(phase(&ready.pod) == "Running", "phase Running");
    let started = ts(&cstatus(&ready.pod, "test-webserver")["state"]["running"]["startedAt"]);
    let ready_at = ts(&cond(&ready.pod, "Ready")["lastTransitionTime"]);
    let delay = started.zip(ready_at).map(|(s, r)| r - s);
    // Two status timestamps (1 s resolution): the document's ±1 s.
    c.check(
        delay.is_some_and(|d| d >= 5.0 - 1.0),
        format!(
            "Ready.lastTransitionTime - state.running.startedAt = {delay:?} s: at least the 5 s \
             initial delay"
        ),
    );
    pod.delete_and_wait_gone(secs(60));
    for o in pod.observations() {
        let sum: u64 = ["containerStatuses", "initContainerStatuses"]
            .iter()
            .filter_map(|k| o.pod["status"][k].as_array())
            .flatten()
            .map(restart_count)
            .sum();
        c.check(
            sum == 0,
            format!("t={:.3}: restart counts sum to {sum}", pod.t(&o)),
        );
    }
    eprintln!("s28: Ready {delay:?} s after the container started");
    c.finish("s28", || pod.diag());
}

/// 30, 32, 38: restartCount of `name` reaches 1 within 60 s; returns the updates before.
pub(crate) fn wait_restarted(pod: &Pod, name: &str) -> Vec<Obs> {
    let (i, _) = pod.wait("restartCount >= 1", secs(60), |p| {
        restart_count(cstatus(p, name)) >= 1
    });
    pod.observations()[..i].to_vec()
}

/// restartCount of `name` never decreases over the observed updates.
pub(crate) fn check_monotonic(c: &mut Checks, pod: &Pod, name: &str) {
    let mut previous = 0;
    for o in pod.observations() {
        let n = restart_count(cstatus(&o.pod, name));
        if cstatus(&o.pod, name).is_null() {
            continue;
        }
        c.check(
            n >= previous,
            format!("t={:.3}: restartCount went down to {n}", pod.t(&o)),
        );
        previous = previous.max(n);
    }
}

pub(crate) fn restarts_scenario(srv: &Server, id: &str, name: &str, started_false: bool) {
    let _scratch = Scratch::new(id);
    let mut pod = srv.create(id, &manifest(&format!("{id}.yaml")));
    let before = wait_restarted(&pod, name);
    let mut c = Checks::new();
    // Section 0.3: the previous instance's log stays readable after a restart.
    let previous = pod.logs(name, true);
    c.check(
        previous.is_ok(),
        format!("LOGS({name}, previous) after the restart: {previous:?}"),
    );
    if started_false {
        for o in &before {
            c.check(
                cstatus(&o.pod, name)["started"] != true,
                format!("t={:.3}: started before the first restart", pod.t(o)),
            );
        }
    }
    pod.delete_and_wait_gone(secs(60));
    check_monotonic(&mut c, &pod, name);
    c.finish(id, || pod.diag());
}

pub(crate) fn s30(srv: &Server) {
    restarts_scenario(srv, "s30", "busybox", false);
}

pub(crate) fn s32(srv: &Server) {
    restarts_scenario(srv, "s32", "agnhost-container", false);
}

pub(crate) fn s38(srv: &Server) {
    restarts_scenario(srv, "s38", "busybox", true);
}

// ----------------------------------------------------------------------------------------------
// Hooks (46, 47)

/// Starts OBS(`port`) and waits until it accepts connections.
pub(crate) fn start_observer<'a>(srv: &'a Server, id: &str, file: &str, port: u16) -> Pod<'a> {
    let obs = srv.create(id, &manifest(file));
    obs.wait("observer Running", secs(60), |p| phase(p) == "Running");
    let deadline = Instant::now() + secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "observer not listening on {port}{}",
            obs.diag()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    obs
}

/// Polls `LOGS(observer)` for `line` until `deadline`; when it was seen.
pub(crate) fn wait_observed(obs: &Pod, line: &str, deadline: Instant) -> Option<Instant> {
    loop {
        if obs
            .logs("observer", false)
            .is_ok_and(|l| l.lines().any(|l| l == line))
        {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub(crate) fn s46(srv: &Server) {
    let mut obs = start_observer(srv, "s46", "s46-observer.yaml", 18046);
    let mut hook = srv.create("s46", &manifest("s46.yaml"));
    let (_, running) = hook.wait("hook pod Running", secs(60), |p| phase(p) == "Running");
    let mut c = Checks::new();
    let seen = wait_observed(&obs, "GET /echo?msg=poststart", running.seen + secs(30));
    c.check(
        seen.is_some(),
        "observer logged GET /echo?msg=poststart within 30 s of the hook pod running",
    );
    hook.delete(Some(15));
    let (took, _) = hook.wait_gone(secs(30));
    eprintln!("s46: hook pod gone {took:?} after DELETE(15)");
    obs.delete_and_wait_gone(secs(60));
    c.finish("s46", || format!("{}{}", hook.diag(), obs.diag()));
}

pub(crate) fn s47(srv: &Server) {
    let mut obs = start_observer(srv, "s47", "s47-observer.yaml", 18047);
    let mut hook = srv.create("s47", &manifest("s47.yaml"));
    hook.wait("hook pod Running", secs(60), |p| phase(p) == "Running");
    let mut c = Checks::new();
    let line = "GET /echo?msg=prestop";
    c.check(
        obs.logs("observer", false)
            .is_ok_and(|l| !l.lines().any(|l| l == line)),
        "no prestop request before the delete",
    );
    hook.delete(Some(15));
    let deleted = hook.deleted.unwrap();
    let seen = wait_observed(&obs, line, deleted + secs(30));
    c.check(
        seen.is_some(),
        "observer logged GET /echo?msg=prestop within 30 s of the delete",
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

pub(crate) struct Variant {
    pub(crate) id: &'static str,
    pub(crate) container: &'static str,
    pub(crate) restart_count: u64,
    pub(crate) phase: &'static str,
    pub(crate) ready: &'static str,
    pub(crate) state: &'static str,
}

/// One row of scenario 55's table, checked in order, each "eventually" within 60 s; then
/// `DELETE(gracePeriodSeconds=0)` and the pod is gone within 60 s.
pub(crate) fn restart_policy_variant(srv: &Server, v: &Variant) {
    let _scratch = Scratch::new(v.id);
    let mut pod = srv.create(v.id, &manifest(&format!("{}.yaml", v.id)));
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
        let previous = pod.logs(name, true);
        c.check(
            previous.is_ok(),
            format!("{}: LOGS({name}, previous): {previous:?}", v.id),
        );
    }
    let row = |p: &Value| {
        restart_count(cstatus(p, name)) == v.restart_count
            && phase(p) == v.phase
            && cond_status(p, "Ready") == v.ready
            && state_kind(cstatus(p, name)) == v.state
    };
    c.check(
        row(&end.pod),
        format!(
            "{}: all of the row hold together at t={:.3}",
            v.id,
            pod.t(&end)
        ),
    );
    pod.delete(Some(0));
    let (took, last) = pod.wait_gone(within);
    if v.phase != "Running" {
        c.check(
            row(&last.pod),
            format!("{}: the final status still has the row's values", v.id),
        );
    }
    check_monotonic(&mut c, &pod, name);
    eprintln!("{}: gone {took:?} after DELETE(0)", v.id);
    c.finish(v.id, || pod.diag());
}

pub(crate) fn s55a(srv: &Server) {
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

pub(crate) fn s55b(srv: &Server) {
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

pub(crate) fn s55c(srv: &Server) {
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

pub(crate) fn s60(srv: &Server) {
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

pub(crate) fn s66(srv: &Server) {
    let mut pod = srv.create("s66", &manifest("s66.yaml"));
    let (_, end) = pod.wait("pod terminal", secs(60), terminal);
    let mut c = Checks::new();
    c.check(phase(&end.pod) == "Succeeded", "phase Succeeded");
    let msg = &cstatus(&end.pod, "termination-message-container")["state"]["terminated"]["message"];
    c.check(msg == "DONE", format!("message DONE (is {msg})"));
    pod.delete_and_wait_gone(secs(60));
    c.finish("s66", || pod.diag());
}

pub(crate) fn s71(srv: &Server) {
    let mut pod = srv.create("s71", &manifest("s71.yaml"));
    let (_, ready) = pod.wait("condition Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    let mut c = Checks::new();
    c.check(phase(&ready.pod) == "Running", "phase Running");
    let order = [
        "PodScheduled",
        "Initialized",
        "PodReadyToStartContainers",
        "ContainersReady",
        "Ready",
    ];
    let mut times = Vec::new();
    for t in order {
        c.check(
            cond_status(&ready.pod, t) == "True",
            format!("{t} present and True"),
        );
        times.push(ts(&cond(&ready.pod, t)["lastTransitionTime"]).unwrap_or(f64::NAN));
    }
    for (i, w) in times.windows(2).enumerate() {
        c.check(
            w[0] <= w[1],
            format!(
                "lastTransitionTime {} ({}) <= {} ({})",
                order[i],
                w[0],
                order[i + 1],
                w[1]
            ),
        );
    }
    pod.delete_and_wait_gone(secs(60));
    c.finish("s71", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// UPDATE (u65, u73): the upstream tests behind the document's scenarios 65 and 73

/// IDLE (0.5) pod manifest.
pub(crate) fn idle_pod(name: &str, extra_spec: &str) -> String {
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
pub(crate) fn u65(srv: &Server) {
    let mut pod = srv.create("u65", &idle_pod("u65-active-deadline", ""));
    let (running_i, running) = pod.wait("phase Running", secs(60), |p| phase(p) == "Running");
    let mut c = Checks::new();
    let out = pod.patch(r#"{"spec":{"activeDeadlineSeconds":3600}}"#);
    c.check(
        out.status.success(),
        format!(
            "UPDATE activeDeadlineSeconds nil -> 3600 is allowed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    let out = pod.patch(r#"{"spec":{"activeDeadlineSeconds":7200}}"#);
    let err = String::from_utf8_lossy(&out.stderr);
    c.check(
        !out.status.success() && err.contains("must be less than or equal to previous value"),
        format!("UPDATE activeDeadlineSeconds 3600 -> 7200 is refused: {err}"),
    );
    let out = pod.patch(r#"{"spec":{"terminationGracePeriodSeconds":5}}"#);
    let err = String::from_utf8_lossy(&out.stderr);
    c.check(
        !out.status.success() && err.contains("Forbidden: pod updates may not change fields"),
        format!("UPDATE terminationGracePeriodSeconds 30 -> 5 is refused: {err}"),
    );
    let patched = Instant::now();
    let out = pod.patch(r#"{"spec":{"activeDeadlineSeconds":5}}"#);
    c.check(
        out.status.success(),
        format!(
            "UPDATE activeDeadlineSeconds 3600 -> 5 is allowed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    );
    let (_, failed) = pod.wait_since(running_i, patched, "phase Failed", secs(30), |p| {
        phase(p) == "Failed"
    });
    let st = &failed.pod["status"];
    c.check(
        st["reason"] == "DeadlineExceeded"
            && st["message"] == "Pod was active on the node longer than the specified deadline",
        format!(
            "reason DeadlineExceeded (is {} {})",
            st["reason"], st["message"]
        ),
    );
    // Measured from status.startTime: not before startTime + 5 s (the harness's clock reads
    // the same host clock; a status timestamp has 1 s resolution).
    let start = ts(&running.pod["status"]["startTime"]);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - failed.seen.elapsed().as_secs_f64();
    c.check(
        start.is_some_and(|s| now >= s + 5.0 - 1.0),
        format!(
            "Failed {:?} s after status.startTime",
            start.map(|s| now - s)
        ),
    );
    let idle = cstatus(&failed.pod, "idle");
    c.check(
        state_kind(idle) == "terminated" || state_kind(idle) == "running",
        format!("idle is {}", state_kind(idle)),
    );
    pod.wait_since(0, pod.created, "idle terminated", secs(60), |p| {
        state_kind(cstatus(p, "idle")) == "terminated"
    });
    c.check(
        pod.events().iter().any(|e| {
            e["reason"] == "DeadlineExceeded"
                && e["type"] == "Normal"
                && e["message"] == "Pod was active on the node longer than the specified deadline"
        }),
        "EVENTS: DeadlineExceeded",
    );
    let (_, last) = pod.delete_and_wait_gone(secs(60));
    c.check(
        phase(&last.pod) == "Failed" && restart_count(cstatus(&last.pod, "idle")) == 0,
        "the final status stays Failed, never restarted",
    );
    c.finish("u65", || pod.diag());
}

/// `test/e2e/common/node/pods.go` — "should support pod readiness gates": Ready follows the
/// gates' conditions, patched into `pods/status` by the client (D5, D9).
pub(crate) fn u73(srv: &Server) {
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
