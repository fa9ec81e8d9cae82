//! End to end, lifecycle hooks (spec section 7, and the preStop part of section 8): exec,
//! httpGet (against a real server the test starts) and sleep handlers for postStart and
//! preStop, their order relative to the containers' own work (a shared log file every
//! container, hook and the HTTP server append to), failures, and the grace period a preStop
//! hook consumes.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// A container that logs `<name>-main` when it starts and `<name>-term` on SIGTERM, then
/// exits 0 (or keeps running when `ignore_term`).
fn logger(name: &str, log: &Path, ignore_term: bool) -> Value {
    let exit = if ignore_term { "" } else { "; exit 0" };
    let script = format!(
        "trap '{}{exit}' TERM; {}; while :; do sleep 1; done",
        log_line(log, &format!("{name}-term")),
        log_line(log, &format!("{name}-main")),
    );
    json!({
        "name": name, "image": "busybox", "command": sh(&script),
        "volumeMounts": [{"name": "shared", "mountPath": log.parent().unwrap()}],
    })
}

/// A pod whose containers share the log's directory (a hostPath, so that the test reads it
/// after the pod is gone).
fn shared_pod(name: &str, log: &Path, grace: u32, containers: Vec<Value>) -> Value {
    pod(
        name,
        json!({
            "terminationGracePeriodSeconds": grace,
            "volumes": [{"name": "shared", "hostPath": {
                "path": log.parent().unwrap(), "type": "Directory"}}],
            "containers": containers,
        }),
    )
}

fn exec_log(log: &Path, what: &str) -> Value {
    json!({"exec": {"command": sh(&log_line(log, what))}})
}

fn http_hook(port: u16, path: &str) -> Value {
    json!({"httpGet": {"host": "127.0.0.1", "port": port, "path": path}})
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn h1_h2_h4_exec_http_and_sleep_hooks_run_in_order() {
    let ctx = Ctx::new("h1order");
    let log = ctx.mkdir("shared").join("log");
    let server = HttpServer::start(200);
    server.log_to(&log);
    let mut ex = logger("ex", &log, false);
    ex["lifecycle"] = json!({
        "postStart": exec_log(&log, "ex-poststart"),
        "preStop": exec_log(&log, "ex-prestop"),
    });
    let mut web = logger("web", &log, false);
    web["lifecycle"] = json!({
        "postStart": http_hook(server.port, "/web-poststart"),
        "preStop": http_hook(server.port, "/web-prestop"),
    });
    let mut nap = logger("nap", &log, false);
    nap["lifecycle"] = json!({
        "postStart": {"sleep": {"seconds": 1}},
        "preStop": {"sleep": {"seconds": 2}},
    });
    let pod = shared_pod("hooks", &log, 10, vec![ex, web, nap]);
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("3/3", WAIT, |s| s["ready"] == "3/3");
    wait_log(&log, &["ex-main", "web-main", "nap-main"], WAIT);
    let deleted = epoch();
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let entries = read_log(&log);
    let msg = format!("log {entries:#?}\n{}", run.dump());
    // postStart completes inside the start step: the next container is created after it
    // (H2), and each hook ran once.
    assert!(
        pos(&entries, "ex-poststart") < pos(&entries, "web-main"),
        "{msg}"
    );
    assert!(
        pos(&entries, "http-web-poststart") < pos(&entries, "nap-main"),
        "{msg}"
    );
    let nap_started = run.event_times("Started", "nap")[0];
    let nap_running = run
        .first_container_time("nap", |c| c["state"] == "running")
        .unwrap();
    assert!(
        nap_running - nap_started >= 0.9,
        "a postStart sleep of 1 s delays the running state: {msg}"
    );
    // preStop runs before the stop signal, for every handler type (H4).
    assert!(
        pos(&entries, "ex-prestop") < pos(&entries, "ex-term"),
        "{msg}"
    );
    assert!(
        pos(&entries, "http-web-prestop") < pos(&entries, "web-term"),
        "{msg}"
    );
    assert!(at(&entries, "ex-prestop") >= deleted - 0.1, "{msg}");
    let nap_term = at(&entries, "nap-term") - deleted;
    assert!(
        (1.8..6.0).contains(&nap_term),
        "nap-term {nap_term:.2}s after delete: {msg}"
    );
    for name in ["ex", "web"] {
        let term = at(&entries, &format!("{name}-term")) - deleted;
        assert!(term < 3.0, "{name}-term {term:.2}s after delete: {msg}");
    }
    for what in [
        "ex-poststart",
        "ex-prestop",
        "http-web-poststart",
        "http-web-prestop",
    ] {
        assert_eq!(
            entries.iter().filter(|(w, _)| w == what).count(),
            1,
            "{msg}"
        );
    }
    let agents: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.headers["user-agent"].clone())
        .collect();
    assert!(
        agents.iter().all(|a| a.starts_with("kube-lifecycle/")),
        "{agents:?}"
    );
    // Everyone exited 0 on SIGTERM: the deleted pod Succeeded (T8).
    let last = run.final_status();
    assert_eq!(last["phase"], "Succeeded", "{msg}");
    for name in ["ex", "web", "nap"] {
        assert_eq!(container(last, name)["exit_code"], 0, "{msg}");
    }
    let mut killing = run.messages("Killing");
    killing.sort();
    assert_eq!(
        killing,
        [
            "Stopping container ex",
            "Stopping container nap",
            "Stopping container web"
        ]
    );
    assert!(
        run.events("FailedPostStartHook").is_empty() && run.events("FailedPreStopHook").is_empty()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn h3_failed_post_start_hook_kills_and_restarts_the_container() {
    let ctx = Ctx::new("h3poststart");
    let app = json!({
        "name": "app", "image": "busybox", "command": ["sleep", "100000"],
        "lifecycle": {"postStart": {"exec": {"command": sh("echo boom; exit 1")}}},
    });
    let pod = pod(
        "hookfail",
        json!({"terminationGracePeriodSeconds": 2, "containers": [app]}),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_events("FailedPostStartHook", Some("app"), 2, WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let failed = run.container_events("FailedPostStartHook", "app");
    assert!(failed.len() >= 2, "{}", run.dump());
    for e in &failed {
        assert_eq!(e["type"], "Warning");
        assert_eq!(e["message"], "PostStartHook failed");
    }
    // Each failure kills the instance through the normal kill path (H3).
    let killing = run.container_events("Killing", "app");
    assert_eq!(
        killing[0]["message"],
        "FailedPostStartHook",
        "{}",
        run.dump()
    );
    assert!(t(killing[0]) >= t(failed[0]));
    assert!(
        run.event_times("Started", "app").len() >= 2,
        "{}",
        run.dump()
    );
    // The start failure is the container's waiting reason, with the hook's text.
    let waiting = run
        .statuses()
        .into_iter()
        .filter_map(|s| find_container(s, "app"))
        .find(|c| c["reason"] == "PostStartHookError")
        .unwrap_or_else(|| panic!("no PostStartHookError status\n{}", run.dump()));
    let message = waiting["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Exec lifecycle hook ([sh -c echo boom; exit 1]) for Container \"app\" in Pod \
             \"hookfail_default("
        ),
        "{message}"
    );
    assert!(
        message.ends_with(
            ")\" failed - error: command 'sh -c echo boom; exit 1' exited with 1: , \
             message: \"boom\\n\""
        ),
        "{message}"
    );
    // The pod never had a running, ready app.
    assert!(
        !run.statuses().iter().any(|s| s["ready"] == "1/1"),
        "{}",
        run.dump()
    );
    assert!(
        run.final_container("app")["restart_count"]
            .as_i64()
            .unwrap()
            >= 1
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn h1_http_hook_ignores_the_status_code_and_fails_on_transport_errors() {
    let ctx = Ctx::new("h1http");
    let server = HttpServer::start(500);
    let refused = RefusedPort::new();
    let app = json!({
        "name": "app", "image": "busybox", "command": ["sleep", "100000"],
        "lifecycle": {
            "postStart": http_hook(server.port, "/start"),
            "preStop": http_hook(refused.port, "/stop"),
        },
    });
    let pod = pod(
        "httphooks",
        json!({"terminationGracePeriodSeconds": 2, "containers": [app]}),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("1/1", WAIT, |s| s["ready"] == "1/1");
    running.terminate();
    running.wait_event("FailedPreStopHook", Some("app"), WAIT);
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    // A 500 answer is still a successful hook.
    assert!(
        run.events("FailedPostStartHook").is_empty(),
        "{}",
        run.dump()
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].path, "/start");
    let failed = run.container_events("FailedPreStopHook", "app");
    assert_eq!(failed.len(), 1, "{}", run.dump());
    assert_eq!(failed[0]["type"], "Warning");
    assert_eq!(failed[0]["message"], "PreStopHook failed");
    // Termination went on normally: the container stopped on SIGTERM.
    assert_eq!(
        run.final_container("app")["exit_code"],
        143,
        "{}",
        run.dump()
    );
    assert_eq!(run.restarts(), 0);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn h4_t3_pre_stop_hook_consumes_the_grace_period() {
    let ctx = Ctx::new("h4grace");
    let log = ctx.mkdir("shared").join("log");
    // The app logs SIGTERM but keeps running; its preStop hook never returns.
    let mut app = logger("app", &log, true);
    app["lifecycle"] = json!({"preStop": {"exec": {"command": sh(&format!(
        "{}; exec sleep 100000", log_line(&log, "prestop")
    ))}}});
    let pod = shared_pod("slowstop", &log, 3, vec![app]);
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("1/1", WAIT, |s| s["ready"] == "1/1");
    wait_log(&log, &["app-main"], WAIT);
    let deleted = epoch();
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let entries = read_log(&log);
    let msg = format!("log {entries:#?}\n{}", run.dump());
    let prestop = at(&entries, "prestop") - deleted;
    assert!(prestop < 1.5, "{msg}");
    // The hook used the whole grace period (3 s); only then SIGTERM ...
    let term = at(&entries, "app-term") - deleted;
    assert!(
        (2.5..6.0).contains(&term),
        "SIGTERM {term:.2}s after delete: {msg}"
    );
    // ... and SIGKILL after the 2 s minimum extension (H4, T3).
    let killing = t(run.events("Killing")[0]);
    let ended = run
        .first_container_time("app", |c| c["state"] == "terminated")
        .unwrap();
    let total = ended - killing;
    assert!(
        (4.5..10.0).contains(&total),
        "ended {total:.2}s after Killing: {msg}"
    );
    let app = run.final_container("app");
    assert_eq!(app["exit_code"], 137, "{msg}");
    assert_eq!(app["reason"], "Error", "{msg}");
    assert_eq!(run.final_status()["phase"], "Failed", "{msg}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn h3_failed_http_post_start_hook_reports_the_transport_error() {
    let ctx = Ctx::new("h3http");
    let refused = RefusedPort::new();
    let app = json!({
        "name": "app", "image": "busybox", "command": ["sleep", "100000"],
        "lifecycle": {"postStart": http_hook(refused.port, "/hook")},
    });
    let pod = pod(
        "httpfail",
        json!({"restartPolicy": "Never", "terminationGracePeriodSeconds": 2, "containers": [app]}),
    );
    // Never: the killed instance is not restarted and the pod fails.
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(1), "{}", run.dump());
    assert_eq!(
        run.messages("FailedPostStartHook"),
        ["PostStartHook failed"]
    );
    assert_eq!(run.messages("Killing"), ["FailedPostStartHook"]);
    let waiting = run
        .statuses()
        .into_iter()
        .filter_map(|s| find_container(s, "app"))
        .find(|c| c["reason"] == "PostStartHookError")
        .unwrap_or_else(|| panic!("no PostStartHookError status\n{}", run.dump()));
    let message = waiting["message"].as_str().unwrap();
    let p = refused.port;
    assert!(
        message.starts_with(
            "HTTP lifecycle hook (/hook) for Container \"app\" in Pod \"httpfail_default("
        ),
        "{message}"
    );
    assert!(
        message.ends_with(&format!(
            ")\" failed - error: Get \"http://127.0.0.1:{p}/hook\": dial tcp 127.0.0.1:{p}: connect: \
             connection refused"
        )),
        "{message}"
    );
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed", "{}", run.dump());
    assert_eq!(last["restarts"], 0);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn t5_sidecar_pre_stop_starts_with_the_apps_but_its_stop_signal_waits() {
    let ctx = Ctx::new("t5prestop");
    let log = ctx.mkdir("shared").join("log");
    let mut sidecar = logger("sc", &log, false);
    sidecar["restartPolicy"] = json!("Always");
    sidecar["lifecycle"] = json!({"preStop": exec_log(&log, "sc-prestop")});
    let mut app = logger("app", &log, false);
    app["lifecycle"] = json!({"preStop": {"exec": {"command": sh(&format!(
        "sleep 2; {}", log_line(&log, "app-prestop")
    ))}}});
    let mut p = shared_pod("sidecarhooks", &log, 10, vec![app]);
    p["spec"]["initContainers"] = json!([sidecar]);
    let mut running = ctx.spawn(&[p], &[]);
    running.wait_status("2/2", WAIT, |s| s["ready"] == "2/2");
    wait_log(&log, &["sc-main", "app-main"], WAIT);
    let deleted = epoch();
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let entries = read_log(&log);
    let msg = format!("log {entries:#?}\n{}", run.dump());
    // Every preStop hook starts at once (T4, T5) ...
    let sc_prestop = at(&entries, "sc-prestop") - deleted;
    assert!(
        sc_prestop < 1.0,
        "sidecar preStop {sc_prestop:.2}s after delete: {msg}"
    );
    // ... but the sidecar's stop signal waits for the app to have terminated.
    let order: Vec<&str> = entries.iter().map(|(w, _)| w.as_str()).skip(2).collect();
    assert_eq!(
        order,
        ["sc-prestop", "app-prestop", "app-term", "sc-term"],
        "{msg}"
    );
    assert_eq!(run.final_status()["phase"], "Succeeded", "{msg}");
}
