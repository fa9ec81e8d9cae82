//! Translations of the upstream e2e tests on probes (scenarios 28-45) that the
//! document does not spell out, in its form (manifests under `tests/conformance/`).
//!
//! Unless a scenario says otherwise the source is `test/e2e/common/node/container_probe.go`
//! ("Probing container"). Upstream's `initialDelaySeconds` 15 is 5 here (⏱), its observation
//! window of 4 min is 25-60 s (⏱); the order of delay, failure and restart is kept.

use super::checks::*;
use super::harness::*;
use crate::conformance_support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

// ----------------------------------------------------------------------------------------------
// Helpers

/// `(type, message, firstTimestamp)` of the pod's events with `reason` about (init) container
/// `c`.
fn events_of(pod: &Pod, reason: &str, c: &str) -> Vec<(String, String, Option<f64>)> {
    let fields = [
        format!("spec.containers{{{c}}}"),
        format!("spec.initContainers{{{c}}}"),
    ];
    pod.events()
        .iter()
        .filter(|e| {
            e["reason"] == reason
                && fields
                    .iter()
                    .any(|f| e["involvedObject"]["fieldPath"] == f.as_str())
        })
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
                ts(&e["firstTimestamp"]).or_else(|| ts(&e["eventTime"])),
            )
        })
        .collect()
}

/// R17: a Warning `Unhealthy` event for `c` whose message satisfies `pred`.
fn check_unhealthy(c: &mut Checks, pod: &Pod, name: &str, what: &str, pred: impl Fn(&str) -> bool) {
    let evs = events_of(pod, "Unhealthy", name);
    c.check(
        evs.iter().any(|(t, m, _)| t == "Warning" && pred(m)),
        format!("EVENTS: a Warning Unhealthy event for {name}: {what} (got {evs:?})"),
    );
}

/// No `Unhealthy` event for `c` whose message starts with `prefix`.
fn check_no_unhealthy(c: &mut Checks, pod: &Pod, name: &str, prefix: &str) {
    let evs: Vec<_> = events_of(pod, "Unhealthy", name)
        .into_iter()
        .filter(|(_, m, _)| m.starts_with(prefix))
        .collect();
    c.check(
        evs.is_empty(),
        format!("EVENTS: no Unhealthy event \"{prefix}...\" for {name} (got {evs:?})"),
    );
}

/// 10.6: a Normal `Killing` event for `c` with exactly `message`; its first timestamp.
fn check_killing(c: &mut Checks, pod: &Pod, name: &str, message: &str) -> Option<f64> {
    let evs = events_of(pod, "Killing", name);
    let hit = evs.iter().find(|(t, m, _)| t == "Normal" && m == message);
    c.check(
        hit.is_some(),
        format!("EVENTS: a Normal Killing event for {name}: {message:?} (got {evs:?})"),
    );
    hit.and_then(|(_, _, at)| *at)
}

/// Upstream's `runLivenessTest`, first step: waits until `name` is running or terminated.
fn wait_not_waiting(pod: &Pod, name: &str) -> (usize, Obs) {
    pod.wait(&format!("{name} not waiting"), secs(60), |p| {
        matches!(state_kind(cstatus(p, name)), "running" | "terminated")
    })
}

/// Upstream's `runLivenessTest` with 0 expected restarts: from the first update where `name`
/// is not waiting, `window` of observation during which `restartCount` stays 0 (and the
/// container keeps running).
fn expect_no_restart(c: &mut Checks, pod: &Pod, name: &str, window: Duration) {
    let (from, o) = wait_not_waiting(pod, name);
    std::thread::sleep((o.seen + window).saturating_duration_since(Instant::now()));
    check_each(
        c,
        pod,
        &pod.observations()[from..],
        |p| {
            let cs = cstatus(p, name);
            restart_count(cs) == 0 && state_kind(cs) == "running"
        },
        |p| format!("{name} running with restartCount 0 ({})", show(p, name)),
    );
    let evs = events_of(pod, "Killing", name);
    c.check(
        evs.is_empty(),
        format!("EVENTS: no Killing event for {name} (got {evs:?})"),
    );
}

/// Upstream's `runLivenessTest` with `n` expected restarts: `restartCount` of `name` reaches
/// `n` within `within` of CREATE; the updates up to that one.
fn expect_restarts(pod: &Pod, name: &str, n: u64, within: Duration) -> Vec<Obs> {
    let (i, _) = pod.wait(&format!("restartCount >= {n}"), within, |p| {
        restart_count(cstatus(p, name)) >= n
    });
    pod.observations()[..=i].to_vec()
}

/// Upstream's `runReadinessFailTest` and the never-ready checks: for `window` after `name`
/// is running, no update shows it (or the pod) ready, and it never restarts; at the end the
/// pod is Running with `ContainersReady`/`Ready` False for `ContainersNotReady` (D4, D5).
fn expect_never_ready(c: &mut Checks, pod: &Pod, name: &str, window: Duration) {
    let (from, o) = pod.wait(&format!("{name} running"), secs(60), |p| {
        state_kind(cstatus(p, name)) == "running"
    });
    std::thread::sleep((o.seen + window).saturating_duration_since(Instant::now()));
    let obs = pod.observations();
    check_each(
        c,
        pod,
        &obs,
        |p| cond_status(p, "Ready") != "True" && cstatus(p, name)["ready"] != true,
        |_| "Ready (never expected)".to_string(),
    );
    check_not_restarted(c, pod, &obs, &[name], "restarted");
    let last = &obs.last().expect("updates").pod;
    check_phase(c, last, "Running");
    // No startup probe: started as soon as it runs (S11).
    c.check(
        obs[from..]
            .iter()
            .all(|o| cstatus(&o.pod, name)["started"] == true),
        format!("{name} started: true on every update once running"),
    );
    check_containers_not_ready(c, last, name);
}

/// Forced `DELETE(pod, 0)` (upstream's cleanup, `NewDeleteOptions(0)`) and wait until gone.
fn delete_now(pod: &mut Pod) {
    pod.delete_with_grace(0, secs(30));
}

/// 4.2 for the sidecar variants: the regular container `main` does not run (it has no status
/// yet or waits) in any update of `obs`, the sidecar never having started.
fn check_main_waits(c: &mut Checks, pod: &Pod, obs: &[Obs]) {
    check_each(
        c,
        pod,
        obs,
        |p| {
            let main = cstatus(p, "main");
            main.is_null() || state_kind(main) == "waiting"
        },
        |p| format!("main not waiting for the sidecar ({})", cstatus(p, "main")),
    );
}

/// `lastState.terminated` of `name` in update `o`.
fn last_terminated<'a>(o: &'a Obs, name: &str) -> &'a Value {
    &cstatus(&o.pod, name)["lastState"]["terminated"]
}

// ----------------------------------------------------------------------------------------------
// Readiness

/// "with readiness probe that fails should never be ready and never restart" (Conformance):
/// WEB(18029) probed on 19029 where nothing listens. ⏱ 20 s of observation (upstream 1 min).
fn s29(srv: &Server) {
    readiness_fails(srv, "s29", 19029);
}

/// 29 and its sidecar variant (`port`: the probe's, with no listener).
fn readiness_fails(srv: &Server, id: &str, port: u16) {
    let mut pod = srv.create_scenario(id);
    let mut c = Checks::new();
    expect_never_ready(&mut c, &pod, "test-webserver", secs(20));
    // R19: a transport error is a failure with Go's error text.
    let host = pod.probe_host();
    let want = format!(
        "Readiness probe failed: Get \"http://{host}:{port}/\": dial tcp \
         {host}:{port}: connect: connection refused"
    );
    check_unhealthy(&mut c, &pod, "test-webserver", &want, |m| m == want);
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

/// A readiness probe that fails after the container was ready makes it (and the pod) not
/// ready without restarting it (R14: readiness never kills; D4, D5, D7). Same shape as the
/// sidecar variant of "should mark readiness on pods to false ..." without the delete.
fn s29b(srv: &Server) {
    let mut pod = srv.create_scenario("s29b");
    let (i, ready) = pod.wait("Ready True", secs(30), |p| {
        cond_status(p, "Ready") == "True"
    });
    let (j, unready) = pod.wait_since(i, pod.created, "Ready False again", secs(40), |p| {
        cond_status(p, "Ready") == "False"
    });
    let mut c = Checks::new();
    let cs = cstatus(&unready.pod, "busybox");
    c.check(
        state_kind(cs) == "running" && cs["ready"] == false && cs["started"] == true,
        format!("busybox still running, started, not ready (is {cs})"),
    );
    check_containers_not_ready(&mut c, &unready.pod, "busybox");
    for t in ["ContainersReady", "Ready"] {
        // D7: the transition time moved with the status, ~10 s after becoming ready.
        let (a, b) = (
            ts(&cond(&ready.pod, t)["lastTransitionTime"]),
            ts(&cond(&unready.pod, t)["lastTransitionTime"]),
        );
        c.check(
            a.zip(b).is_some_and(|(a, b)| b - a >= 5.0),
            format!("{t}.lastTransitionTime moved on becoming unready ({a:?} -> {b:?})"),
        );
    }
    // The file is gone by 10 s; a probe every 2 s with failureThreshold 1 notices it.
    let since_ready = unready.seen.duration_since(ready.seen);
    c.check(
        since_ready <= secs(10) + secs(5),
        format!("unready {since_ready:?} after ready (file removed ~10 s after start)"),
    );
    std::thread::sleep(secs(5));
    let obs = pod.observations();
    check_each(
        &mut c,
        &pod,
        &obs[j..],
        |p| cond_status(p, "Ready") == "False",
        |_| "ready again without the file".to_string(),
    );
    check_not_restarted(&mut c, &pod, &obs, &["busybox"], "restarted");
    check_unhealthy(&mut c, &pod, "busybox", "cat's error", |m| {
        m.starts_with("Readiness probe failed: cat: ") && m.contains("No such file or directory")
    });
    let kills = events_of(&pod, "Killing", "busybox");
    c.check(
        kills.is_empty(),
        format!("no Killing event (got {kills:?})"),
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish("s29b", || pod.diag());
}

/// "should not be ready with an exec readiness probe timeout": `sh -c 'sleep 10'` with
/// `timeoutSeconds: 1` is a Failure (R18), never ready, never restarted. ⏱ 20 s (1 min).
fn s37(srv: &Server) {
    readiness_exec_timeout(srv, "s37");
}

/// 37 and its sidecar variant.
fn readiness_exec_timeout(srv: &Server, id: &str) {
    let mut pod = srv.create_scenario(id);
    let mut c = Checks::new();
    expect_never_ready(&mut c, &pod, "busybox", secs(20));
    check_unhealthy(&mut c, &pod, "busybox", "exec timeout", |m| {
        m == "Readiness probe failed: command \"sh -c sleep 10\" timed out"
    });
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Liveness that passes

/// "should *not* be restarted with a exec \"cat /tmp/health\" liveness probe" (Conformance).
/// ⏱ 25 s of observation (4 min): probes at ~10 and ~20 s.
fn s31(srv: &Server) {
    liveness_passes(srv, "s31", "busybox");
}

/// 31, 33, 35 and their sidecar variants: no restart, no `Unhealthy` event.
fn liveness_passes(srv: &Server, id: &str, name: &str) {
    let mut pod = srv.create_scenario(id);
    let mut c = Checks::new();
    expect_no_restart(&mut c, &pod, name, secs(25));
    check_no_unhealthy(&mut c, &pod, name, "");
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

/// "should *not* be restarted with a tcp:8080 liveness probe" (Conformance): LIVE(18033)'s
/// `/healthz` fails after 10 s but the socket stays open, so the TCP probe passes (R20).
fn s33(srv: &Server) {
    liveness_passes(srv, "s33", "agnhost-container");
}

/// "should *not* be restarted with a /healthz http liveness probe" (Conformance): WEB(18035)
/// on `/`, `timeoutSeconds: 5`, `failureThreshold: 5`.
fn s35(srv: &Server) {
    liveness_passes(srv, "s35", "test-webserver");
}

/// "should *not* be restarted with a non-local redirect http liveness probe": the redirect to
/// `http://0.0.0.0/` is not followed; the 302 counts as success with a `ProbeWarning` event
/// (R17, R19) whose message contains upstream's text.
fn s43(srv: &Server) {
    nonlocal_redirect(srv, "s43", "agnhost-container");
}

/// 43 and its sidecar variant.
fn nonlocal_redirect(srv: &Server, id: &str, name: &str) {
    let mut pod = srv.create_scenario(id);
    let mut c = Checks::new();
    expect_no_restart(&mut c, &pod, name, secs(25));
    let want = "Probe terminated redirects, Response body: <a href=\"http://0.0.0.0/\">Found</a>.";
    let evs = events_of(&pod, "ProbeWarning", name);
    c.check(
        evs.iter().any(|(t, m, _)| {
            t == "Warning" && m.starts_with("Liveness probe warning: ") && m.contains(want)
        }),
        format!("EVENTS: Warning ProbeWarning \"Liveness probe warning: {want}\" (got {evs:?})"),
    );
    check_no_unhealthy(&mut c, &pod, name, "");
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Liveness that fails

/// "should have monotonically increasing restart count" (Conformance): LIVE(18034) with a
/// liveness probe on `/healthz`; every instance fails 10 s after it starts. ⏱ 2 restarts
/// within 60 s (upstream 5 in 14 min) and `periodSeconds: 2` (10), because the crash-loop
/// back-off (10 s, 20 s, ...) separates the restarts.
fn s34(srv: &Server) {
    let name = "agnhost-container";
    let mut pod = srv.create_scenario("s34");
    let before = expect_restarts(&pod, name, 2, secs(70));
    let mut c = Checks::new();
    // Each restart is a new instance that lived ~10 s, killed by the kubelet (T3: SIGTERM,
    // which python does not handle: 143).
    let mut seen = 0;
    for o in &before {
        let n = restart_count(cstatus(&o.pod, name));
        if n > seen {
            let t = last_terminated(o, name);
            let lived = ts(&t["finishedAt"])
                .zip(ts(&t["startedAt"]))
                .map(|(f, s)| f - s);
            c.check(
                t["exitCode"] == 143 && lived.is_some_and(|l| l >= 10.0 - 1.0),
                format!(
                    "t={:.3}: restart {n}: lastState.terminated exit 143 after >= 10 s (is {t})",
                    pod.t(o)
                ),
            );
            seen = n;
        }
    }
    check_unhealthy(&mut c, &pod, name, "status 500", |m| {
        m == "Liveness probe failed: HTTP probe failed with statuscode: 500"
    });
    check_killing(
        &mut c,
        &pod,
        name,
        "Container agnhost-container failed liveness probe, will be restarted",
    );
    delete_now(&mut pod);
    check_monotonic(&mut c, &pod, name);
    c.finish("s34", || pod.diag());
}

/// "should be restarted with an exec liveness probe with timeout": `sh -c 'sleep 10'` with
/// `timeoutSeconds: 1` fails by timing out (R18) and the container is restarted.
fn s36(srv: &Server) {
    exec_timeout_restart(
        srv,
        "s36",
        "Container busybox failed liveness probe, will be restarted",
    );
}

/// 36 and its sidecar variant (container `busybox`).
fn exec_timeout_restart(srv: &Server, id: &str, kill_message: &str) {
    let mut pod = srv.create_scenario(id);
    let before = expect_restarts(&pod, "busybox", 1, secs(60));
    let mut c = Checks::new();
    check_unhealthy(&mut c, &pod, "busybox", "exec timeout", |m| {
        m == "Liveness probe failed: command \"sh -c sleep 10\" timed out"
    });
    check_killing(&mut c, &pod, "busybox", kill_message);
    // The first instance ran ~10 s (delay 5 s, then the tick at 10 s, then 1 s of timeout),
    // not the 10 s of the probe's sleep on top.
    let t = last_terminated(before.last().unwrap(), "busybox");
    let lived = ts(&t["finishedAt"])
        .zip(ts(&t["startedAt"]))
        .map(|(f, s)| f - s);
    c.check(
        lived.is_some_and(|l| l <= 15.0),
        format!("the first instance was killed within 15 s of starting (is {t})"),
    );
    delete_now(&mut pod);
    check_monotonic(&mut c, &pod, "busybox");
    c.finish(id, || pod.diag());
}

/// "should be restarted with a failing exec liveness probe that took longer than the
/// timeout": `sh -c 'sleep 10 & exit 1'` fails (exit 1, or the timeout while the background
/// `sleep` holds the output open) and the container is restarted.
fn s36b(srv: &Server) {
    let mut pod = srv.create_scenario("s36b");
    expect_restarts(&pod, "busybox", 1, secs(60));
    let mut c = Checks::new();
    check_unhealthy(&mut c, &pod, "busybox", "a liveness failure", |m| {
        m.starts_with("Liveness probe failed: ")
    });
    check_killing(
        &mut c,
        &pod,
        "busybox",
        "Container busybox failed liveness probe, will be restarted",
    );
    delete_now(&mut pod);
    c.finish("s36b", || pod.diag());
}

/// "should be restarted with a local redirect http liveness probe": `/redirect?loc=%2Fhealthz`
/// is followed (same host, R19) to LIVE's `/healthz`, which fails after 10 s.
fn s42(srv: &Server) {
    local_redirect(srv, "s42", "agnhost-container");
}

/// 42 and its sidecar variant.
fn local_redirect(srv: &Server, id: &str, name: &str) {
    let mut pod = srv.create_scenario(id);
    expect_restarts(&pod, name, 1, secs(60));
    let mut c = Checks::new();
    check_unhealthy(
        &mut c,
        &pod,
        name,
        "the redirect's target answered 500",
        |m| m == "Liveness probe failed: HTTP probe failed with statuscode: 500",
    );
    let warnings = events_of(&pod, "ProbeWarning", name);
    c.check(
        warnings.is_empty(),
        format!("no ProbeWarning: a local redirect is followed (got {warnings:?})"),
    );
    delete_now(&mut pod);
    check_monotonic(&mut c, &pod, name);
    c.finish(id, || pod.diag());
}

/// "should be restarted with a GRPC liveness probe" (Conformance): the probe's port has no
/// listener; the connection is retried until `timeoutSeconds` (R21) and fails. (The passing
/// variant needs a gRPC health server, which python3's standard library cannot provide.)
fn s45b(srv: &Server) {
    let mut pod = srv.create_scenario("s45b");
    let before = expect_restarts(&pod, "agnhost", 1, secs(60));
    let mut c = Checks::new();
    let ip = before.last().unwrap().pod["status"]["podIP"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    let want = format!(
        "Liveness probe failed: timeout: failed to connect service \"{ip}:19045\" within 5s: \
         context deadline exceeded"
    );
    check_unhealthy(&mut c, &pod, "agnhost", &want, |m| m == want);
    check_killing(
        &mut c,
        &pod,
        "agnhost",
        "Container agnhost failed liveness probe, will be restarted",
    );
    delete_now(&mut pod);
    c.finish("s45b", || pod.diag());
}

/// "should *not* be restarted with a GRPC liveness probe" (Conformance), with GRPC(18145), a
/// python3 stand-in for agnhost's `grpc-health-checking` (a minimal h2c server of
/// `grpc.health.v1.Health/Check`). Beyond upstream, a readiness probe asks for the service
/// `down`, answered NOT_SERVING: never ready, with the R21 message.
fn s45g(srv: &Server) {
    let name = "agnhost";
    let mut pod = srv.create_scenario("s45g");
    let mut c = Checks::new();
    expect_no_restart(&mut c, &pod, name, secs(25));
    check_no_unhealthy(&mut c, &pod, name, "Liveness");
    let want = "Readiness probe failed: service unhealthy (responded with \"NOT_SERVING\")";
    check_unhealthy(&mut c, &pod, name, want, |m| m == want);
    check_each(
        &mut c,
        &pod,
        &pod.observations(),
        |p| cond_status(p, "Ready") != "True",
        |_| "Ready although NOT_SERVING".to_string(),
    );
    pod.delete_and_wait_gone(secs(60));
    c.finish("s45g", || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Startup probes

/// "should *not* be restarted by liveness probe because startup probe delays it": both
/// probes fail, but the startup probe has 60 attempts, so liveness never runs (R11) and
/// nothing restarts. ⏱ 30 s of observation (4 min).
fn s39(srv: &Server) {
    startup_delays_liveness(srv, "s39", "busybox");
}

/// 39 and its sidecar variant (where `main` never starts, the sidecar never being started).
fn startup_delays_liveness(srv: &Server, id: &str, name: &str) {
    let mut pod = srv.create_scenario(id);
    let mut c = Checks::new();
    expect_no_restart(&mut c, &pod, name, secs(30));
    let obs = pod.observations();
    check_each(
        &mut c,
        &pod,
        &obs,
        |p| cstatus(p, name)["started"] != true,
        |_| "started (the startup probe never succeeds)".to_string(),
    );
    if name != "busybox" {
        check_main_waits(&mut c, &pod, &obs);
    }
    // R17: exec failure with empty output leaves the trailing space.
    check_unhealthy(&mut c, &pod, name, "\"Startup probe failed: \"", |m| {
        m == "Startup probe failed: "
    });
    check_no_unhealthy(&mut c, &pod, name, "Liveness");
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

/// R10 and T6 (no single upstream test): a container whose startup probe has not succeeded is
/// deleted; it lingers 4 s on SIGTERM. The startup worker stops quietly (its Success is
/// published, nothing is killed for the probe), but no status is generated while the pod
/// terminates, so the container never turns ready and the pod never Ready.
fn s39d(srv: &Server) {
    let name = "busybox";
    let mut pod = srv.create_scenario("s39d");
    let (i, _) = pod.wait("running", secs(60), |p| {
        state_kind(cstatus(p, name)) == "running"
    });
    // A few failed startup probes first.
    std::thread::sleep(secs(3));
    pod.delete(None);
    let (took, _) = pod.wait_gone(secs(30));
    let mut c = Checks::new();
    c.check(
        took >= secs(4),
        format!("gone {took:?} after DELETE: the TERM handler's 4 s ran"),
    );
    check_each(
        &mut c,
        &pod,
        &pod.observations()[i..],
        |p| cond_status(p, "Ready") != "True" && cstatus(p, name)["ready"] != true,
        |p| format!("ready ({})", summarize(p)),
    );
    let kills = events_of(&pod, "Killing", name);
    c.check(
        kills
            .iter()
            .all(|(_, m, _)| m == "Stopping container busybox"),
        format!("only the deletion's Killing event (got {kills:?})"),
    );
    c.finish("s39d", || pod.diag());
}

/// "should be restarted by liveness probe after startup probe enables it": the startup file
/// appears after 10 s; once started the always-failing liveness probe restarts the container.
fn s40(srv: &Server) {
    liveness_after_startup(
        srv,
        "s40",
        "busybox",
        "Container busybox failed liveness probe, will be restarted",
    );
}

/// 40 and its sidecar variant: `name` is probed, `kill_message` is the `Killing` event's.
fn liveness_after_startup(srv: &Server, id: &str, name: &str, kill_message: &str) {
    let mut pod = srv.create_scenario(id);
    let before = expect_restarts(&pod, name, 1, secs(60));
    let mut c = Checks::new();
    let started = before
        .iter()
        .position(|o| cstatus(&o.pod, name)["started"] == true);
    c.check(
        started.is_some(),
        "started: true was observed before the restart (the startup probe succeeded first)",
    );
    // Started needs the file (~10 s after start): not before.
    if let Some(i) = started {
        let seen = pod.t(&before[i]);
        c.check(
            seen >= 9.0,
            format!("started: true at t={seen:.3}, before the file (10 s)"),
        );
    }
    check_unhealthy(&mut c, &pod, name, "\"Liveness probe failed: \"", |m| {
        m == "Liveness probe failed: "
    });
    check_killing(&mut c, &pod, name, kill_message);
    delete_now(&mut pod);
    check_monotonic(&mut c, &pod, name);
    c.finish(id, || pod.diag());
}

/// "should be ready immediately after startupProbe succeeds": readiness passes from the
/// start but is gated by the startup probe (R11); once started, the readiness probe runs at
/// once (R12) instead of waiting for its period. ⏱ startup file after 12 s (32), readiness
/// period 10 s (30), startup period 2 s (5), ready within 5 s of started (25).
fn s41(srv: &Server) {
    ready_after_startup(srv, "s41", "busybox", None);
}

/// 41 and its sidecar variant (`name` is probed; `main`, the regular container that must wait
/// for the sidecar to be started).
fn ready_after_startup(srv: &Server, id: &str, name: &str, main: Option<&str>) {
    let mut pod = srv.create_scenario(id);
    let (i, started) = pod.wait("started", secs(60), |p| cstatus(p, name)["started"] == true);
    let (_, ready) = pod.wait_since(i, pod.created, "Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    let mut c = Checks::new();
    c.check(
        pod.t(&started) >= 11.0,
        format!(
            "started at t={:.3}: not before the file (12 s)",
            pod.t(&started)
        ),
    );
    let ready_in = ready.seen.duration_since(started.seen);
    c.check(
        ready_in <= secs(5),
        format!("Ready {ready_in:?} after started: the readiness probe ran immediately"),
    );
    check_each(
        &mut c,
        &pod,
        &pod.observations()[..i],
        |p| cond_status(p, "Ready") != "True" && cstatus(p, name)["ready"] != true,
        |_| "ready before started".to_string(),
    );
    check_phase(&mut c, &ready.pod, "Running");
    if let Some(main) = main {
        // 4.2: a regular container starts only once every sidecar before it is started.
        let at = |c: &str| started_at(&ready.pod, c);
        let gap = at(main).zip(at(name)).map(|(m, s)| m - s);
        c.check(
            gap.is_some_and(|g| g >= 12.0 - 1.0),
            format!("{main} started {gap:?} s after {name}: only once {name} was started"),
        );
    }
    pod.delete_and_wait_gone(secs(60));
    c.finish(id, || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// Probe-level terminationGracePeriodSeconds (T2)

/// A DEAF container (0.5) killed for `reason` with the probe's 5 s grace although the pod's
/// is 500: SIGKILL (137) about 5 s after the `Killing` event.
fn probe_grace_scenario(srv: &Server, id: &str, kill_message: &str) {
    let mut pod = srv.create_scenario(id);
    let before = expect_restarts(&pod, "busybox", 1, secs(45));
    let mut c = Checks::new();
    let killed_at = check_killing(&mut c, &pod, "busybox", kill_message);
    let t = last_terminated(before.last().unwrap(), "busybox");
    let finished = ts(&t["finishedAt"]);
    let grace = killed_at.zip(finished).map(|(k, f)| f - k);
    c.check(
        t["exitCode"] == 137,
        format!("lastState exit code 137 (is {t})"),
    );
    // Two timestamps of 1 s resolution: ±1 s, plus a second for the SIGKILL to land.
    c.check(
        grace.is_some_and(|g| (5.0 - 1.0..=5.0 + 2.0).contains(&g)),
        format!("finishedAt - Killing = {grace:?} s: the probe's 5 s grace, not the pod's 500"),
    );
    delete_now(&mut pod);
    c.finish(id, || pod.diag());
}

/// "should override timeoutGracePeriodSeconds when LivenessProbe field is set".
fn s44(srv: &Server) {
    probe_grace_scenario(
        srv,
        "s44",
        "Container busybox failed liveness probe, will be restarted",
    );
}

/// "should override timeoutGracePeriodSeconds when StartupProbe field is set".
fn s44b(srv: &Server) {
    probe_grace_scenario(
        srv,
        "s44b",
        "Container busybox failed startup probe, will be restarted",
    );
}

// ----------------------------------------------------------------------------------------------
// Probes during termination (R10, T6, T7)

/// "should mark readiness on pods to false and disable liveness probes while pod is in
/// progress of terminating" (and its readiness-only twin): on SIGTERM the script removes
/// both probe files and lingers 8 s (⏱ 20); readiness keeps probing and makes the pod not
/// ready while the container still runs, liveness is off (no failure, no kill).
fn s45(srv: &Server) {
    readiness_while_terminating(srv, "s45");
}

/// 45 and its sidecar variant (where the sidecar gets its SIGTERM once `main` has stopped,
/// T5, and the pod is not ready from then on anyway: the sidecar's own `ready` is checked).
fn readiness_while_terminating(srv: &Server, id: &str) {
    let name = "probe-test";
    let mut pod = srv.create_scenario(id);
    let (i, _) = pod.wait("Ready True", secs(30), |p| {
        cond_status(p, "Ready") == "True"
    });
    pod.delete(None);
    let deleted = pod.deleted.unwrap();
    let (_, unready) = pod.wait_since(
        i,
        deleted,
        &format!("{name} not ready while terminating"),
        secs(30),
        |p| cstatus(p, name)["ready"] != true,
    );
    let mut c = Checks::new();
    let cs = cstatus(&unready.pod, name);
    c.check(
        unready.pod["metadata"]["deletionTimestamp"].is_string()
            && state_kind(cs) == "running"
            && cond_status(&unready.pod, "Ready") == "False",
        format!(
            "{name} went unready while terminating and still running, pod Ready False (is {})",
            summarize(&unready.pod)
        ),
    );
    let took = unready.seen.duration_since(deleted);
    c.check(
        took <= secs(6),
        format!("{name} unready {took:?} after DELETE (readiness every 2 s)"),
    );
    pod.wait_gone(secs(40));
    let kills: Vec<_> = events_of(&pod, "Killing", name)
        .into_iter()
        .filter(|(_, m, _)| m.contains("failed liveness probe"))
        .collect();
    c.check(
        kills.is_empty(),
        format!("no \"failed liveness probe\" Killing event (got {kills:?})"),
    );
    check_no_unhealthy(&mut c, &pod, name, "Liveness");
    check_unhealthy(
        &mut c,
        &pod,
        name,
        "readiness failed while terminating",
        |m| m.starts_with("Readiness probe failed: "),
    );
    c.finish(id, || pod.diag());
}

// ----------------------------------------------------------------------------------------------
// The same on a sidecar ("Probing restartable init container", same file): the probed
// container is a restartable init container, `main` an IDLE regular container.

/// "with readiness probe should not be ready before initial delay and never restart"; the
/// regular container does not wait for the sidecar's readiness, only for it to run (4.2).
fn s28s(srv: &Server) {
    let name = "test-webserver";
    let mut pod = srv.create_scenario("s28s");
    let (_, ready) = pod.wait("condition Ready True", secs(60), |p| {
        cond_status(p, "Ready") == "True"
    });
    let mut c = Checks::new();
    check_phase(&mut c, &ready.pod, "Running");
    check_ready_after_delay(&mut c, &ready.pod, name, 5.0);
    let at = |c: &str| started_at(&ready.pod, c);
    let gap = at("main").zip(at(name)).map(|(m, s)| m - s);
    c.check(
        gap.is_some_and(|g| g <= 3.0),
        format!("main started {gap:?} s after {name}: without waiting for its readiness"),
    );
    pod.delete_and_wait_gone(secs(60));
    check_no_restarts(&mut c, &pod);
    c.finish("s28s", || pod.diag());
}

/// "with readiness probe that fails should never be ready and never restart" (D4: sidecars
/// count for ContainersReady).
fn s29s(srv: &Server) {
    readiness_fails(srv, "s29s", 19129);
}

/// A sidecar restarted by its liveness probe: `Killing` with the init-container message;
/// the regular container keeps running, never restarted.
fn sidecar_liveness_restart(srv: &Server, id: &str, name: &str) {
    let mut pod = srv.create_scenario(id);
    let before = expect_restarts(&pod, name, 1, secs(60));
    let mut c = Checks::new();
    check_previous_logs(&mut c, &pod, name, |_| true);
    check_killing(
        &mut c,
        &pod,
        name,
        &format!("Init container {name} failed liveness probe"),
    );
    let last = &before.last().unwrap().pod;
    c.check(
        state_kind(cstatus(last, "main")) == "running",
        format!("main still running at the restart (is {})", summarize(last)),
    );
    delete_now(&mut pod);
    check_not_restarted(&mut c, &pod, &pod.observations(), &["main"], "restarted");
    check_monotonic(&mut c, &pod, name);
    c.finish(id, || pod.diag());
}

/// "should *not* be restarted with a exec \"cat /tmp/health\" liveness probe".
fn s31s(srv: &Server) {
    liveness_passes(srv, "s31s", "busybox");
}

/// "should *not* be restarted with a tcp:8080 liveness probe" (LIVE(18133)).
fn s33s(srv: &Server) {
    liveness_passes(srv, "s33s", "sidecar");
}

/// "should be restarted with an exec liveness probe with timeout".
fn s36s(srv: &Server) {
    exec_timeout_restart(srv, "s36s", "Init container busybox failed liveness probe");
}

/// "should *not* be restarted by liveness probe because startup probe delays it".
fn s39s(srv: &Server) {
    startup_delays_liveness(srv, "s39s", "sidecar");
}

/// "should be restarted with a local redirect http liveness probe".
fn s42s(srv: &Server) {
    local_redirect(srv, "s42s", "sidecar");
}

/// "should override timeoutGracePeriodSeconds when LivenessProbe field is set" (T2 holds for
/// sidecars: `computeInitContainerActions` kills with the liveness reason).
fn s44s(srv: &Server) {
    probe_grace_scenario(srv, "s44s", "Init container busybox failed liveness probe");
}

/// "should be restarted with a exec \"cat /tmp/health\" liveness probe".
fn s30s(srv: &Server) {
    sidecar_liveness_restart(srv, "s30s", "busybox");
}

/// "should be restarted with a /healthz http liveness probe" (LIVE(18132)).
fn s32s(srv: &Server) {
    sidecar_liveness_restart(srv, "s32s", "sidecar");
}

/// "should not be ready with an exec readiness probe timeout".
fn s37s(srv: &Server) {
    readiness_exec_timeout(srv, "s37s");
}

/// "should be restarted startup probe fails": the sidecar is restarted although its liveness
/// probe would pass; the regular container never starts meanwhile (4.2).
fn s38s(srv: &Server) {
    let name = "sidecar";
    let mut pod = srv.create_scenario("s38s");
    let before = expect_restarts(&pod, name, 1, secs(60));
    let mut c = Checks::new();
    check_each(
        &mut c,
        &pod,
        &before,
        |p| cstatus(p, name)["started"] != true,
        |_| format!("{name} started before the first restart"),
    );
    check_main_waits(&mut c, &pod, &before);
    check_killing(
        &mut c,
        &pod,
        name,
        "Init container sidecar failed startup probe",
    );
    check_unhealthy(&mut c, &pod, name, "\"Startup probe failed: \"", |m| {
        m == "Startup probe failed: "
    });
    delete_now(&mut pod);
    check_monotonic(&mut c, &pod, name);
    c.finish("s38s", || pod.diag());
}

/// "should be restarted by liveness probe after startup probe enables it".
fn s40s(srv: &Server) {
    liveness_after_startup(
        srv,
        "s40s",
        "sidecar",
        "Init container sidecar failed liveness probe",
    );
}

/// "should be ready immediately after startupProbe succeeds".
fn s41s(srv: &Server) {
    ready_after_startup(srv, "s41s", "sidecar", Some("main"));
}

/// "should *not* be restarted with a non-local redirect http liveness probe".
fn s43s(srv: &Server) {
    nonlocal_redirect(srv, "s43s", "sidecar");
}

/// "should mark readiness on pods to false and disable liveness probes while pod is in
/// progress of terminating".
fn s45s(srv: &Server) {
    readiness_while_terminating(srv, "s45s");
}

// ----------------------------------------------------------------------------------------------
// Probe failures that end a restartPolicy=Never pod through its preStop hook
// (`test/e2e_node/container_lifecycle_test.go`, "A regular container has a PreStop hook").
// Nothing is left to keep or restart, so the kubelet kills the whole pod (A13): `Killing` with
// the plain `Stopping container` message, the pod's grace (T2 does not apply), preStop first
// (T3). The container's TERM handler lingers 3 s (⏱ 15) and exits 0: phase Succeeded.

/// The pod of `id` runs to its end: the checks so far, the event log and the timeline.
fn prestop_on_probe_failure(srv: &Server, id: &str, probe_title: &str) -> (Checks, EvLog, String) {
    let mut pod = srv.create_scenario(id);
    let (_, end) = pod.wait_terminal(secs(60));
    let ev = pod.ev_log();
    let mut c = Checks::new();
    check_phase(&mut c, &end.pod, "Succeeded");
    let cs = cstatus(&end.pod, "regular-1");
    c.check(
        cs["state"]["terminated"]["exitCode"] == 0 && restart_count(cs) == 0,
        format!("regular-1 exited 0 from its TERM handler, never restarted (is {cs})"),
    );
    let pre = "PreStop-regular-1";
    EvChecks::new(&mut c, &ev)
        .overlap("regular-1", pre)
        .starts(pre)
        .exits("regular-1");
    // The hook ran before the stop signal: the container logs its exit after the hook's.
    c.check(
        ev.completes_before(pre, "regular-1") || ev.exits_before(pre, "regular-1"),
        "PreStop-regular-1 exits before regular-1",
    );
    check_unhealthy(&mut c, &pod, "regular-1", probe_title, |m| {
        m.starts_with(&format!("{probe_title} probe failed: "))
    });
    check_killing(&mut c, &pod, "regular-1", "Stopping container regular-1");
    let diag = pod.diag();
    pod.delete_and_wait_gone(secs(30));
    (c, ev, diag)
}

/// "should call the container's preStop hook and terminate it if its startup probe fails".
fn s38p(srv: &Server) {
    let (c, _, diag) = prestop_on_probe_failure(srv, "s38p", "Startup");
    c.finish("s38p", || diag);
}

/// "should call the container's preStop hook and terminate it if its liveness probe fails".
fn s30p(srv: &Server) {
    let (c, _, diag) = prestop_on_probe_failure(srv, "s30p", "Liveness");
    c.finish("s30p", || diag);
}

/// "should execute readiness probe while in preStop, but not liveness" (NodeConformance):
/// the liveness worker is on hold after its failure (R8) while readiness keeps probing
/// during the 5 s preStop (⏱ 10).
fn s45p(srv: &Server) {
    let (mut c, ev, diag) = prestop_on_probe_failure(srv, "s45p", "Liveness");
    let pre = "PreStop-regular-1";
    // Readiness ran in preStop, liveness did not.
    EvChecks::new(&mut c, &ev)
        .overlap_from(pre, "Readiness-regular-1")
        .no_overlap_from(pre, "Liveness-regular-1");
    c.finish("s45p", || diag);
}

pub(crate) const SCENARIOS: &[(&str, ScenarioFn)] = &[
    ("s29", s29),
    ("s29b", s29b),
    ("s31", s31),
    ("s33", s33),
    ("s34", s34),
    ("s35", s35),
    ("s36", s36),
    ("s36b", s36b),
    ("s37", s37),
    ("s39", s39),
    ("s39d", s39d),
    ("s40", s40),
    ("s41", s41),
    ("s42", s42),
    ("s43", s43),
    ("s44", s44),
    ("s44b", s44b),
    ("s45", s45),
    ("s45b", s45b),
    ("s45g", s45g),
    ("s28s", s28s),
    ("s29s", s29s),
    ("s30s", s30s),
    ("s32s", s32s),
    ("s37s", s37s),
    ("s38s", s38s),
    ("s40s", s40s),
    ("s41s", s41s),
    ("s43s", s43s),
    ("s45s", s45s),
    ("s31s", s31s),
    ("s33s", s33s),
    ("s36s", s36s),
    ("s39s", s39s),
    ("s42s", s42s),
    ("s44s", s44s),
    ("s30p", s30p),
    ("s38p", s38p),
    ("s45p", s45p),
];
