//! End to end, the container lifecycle on real processes: restart policies, CrashLoopBackOff
//! timing, init containers and sidecars (ordering read from a shared log file), grace periods
//! and SIGKILL, OOM kills, termination messages, activeDeadlineSeconds and emptyDir volumes.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

fn one(name: &str, policy: &str, script: &str) -> Value {
    pod(
        name,
        json!({
            "restartPolicy": policy, "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": "busybox", "command": sh(script)}],
        }),
    )
}

/// Gaps between consecutive values.
fn gaps(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

fn in_range(value: f64, low: f64, high: f64) -> bool {
    (low..=high).contains(&value)
}

/// A container logging `<name>-main` at start and `<name>-term` on SIGTERM (then exit 0),
/// sharing the log's directory.
fn logger(name: &str, log: &Path) -> Value {
    let script = format!(
        "trap '{}; exit 0' TERM; {}; while :; do sleep 1; done",
        log_line(log, &format!("{name}-term")),
        log_line(log, &format!("{name}-main")),
    );
    json!({
        "name": name, "image": "busybox", "command": sh(&script),
        "volumeMounts": [{"name": "shared", "mountPath": log.parent().unwrap()}],
    })
}

fn shared_volume(log: &Path) -> Value {
    json!([{"name": "shared", "hostPath": {"path": log.parent().unwrap(), "type": "Directory"}}])
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a15_restart_policy_always_restarts_after_exit_0() {
    let ctx = Ctx::new("a15always");
    let mut running = ctx.spawn(&[one("always", "Always", "exit 0")], &[]);
    running.wait_status("2 restarts", WAIT, |s| {
        container(s, "app")["restart_count"] == 2
    });
    let deleted_epoch = epoch();
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert!(
        run.event_times("Started", "app").len() >= 3,
        "{}",
        run.dump()
    );
    let restarted = run
        .statuses()
        .into_iter()
        .find(|s| container(s, "app")["restart_count"] == 2)
        .unwrap();
    assert_eq!(container(restarted, "app")["last_exit_code"], 0);
    // Restarted whatever the exit code, so never Succeeded while it ran (after the delete,
    // a last instance that exited 0 makes it Succeeded, T8).
    // (No Killing event marks the delete when it comes between two instances.)
    let deleted = deleted_epoch - run.started_epoch;
    assert!(
        run.statuses()
            .iter()
            .filter(|s| t(s) < deleted - 0.05)
            .all(|s| s["phase"] == "Running" || s["phase"] == "Pending"),
        "{}",
        run.dump()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a15_restart_policy_on_failure_restarts_until_exit_0() {
    let ctx = Ctx::new("a15onfailure");
    let flag = ctx.path("ran-once");
    let script = format!(
        "if [ -f {f} ]; then exit 0; else touch {f}; exit 1; fi",
        f = flag.display()
    );
    let run = ctx.run(&[one("onfailure", "OnFailure", &script)], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Succeeded", "{}", run.dump());
    assert_eq!(last["status_text"], "Completed");
    let app = container(last, "app");
    assert_eq!(app["exit_code"], 0);
    assert_eq!(app["reason"], "Completed");
    assert_eq!(app["last_exit_code"], 1);
    assert_eq!(app["restart_count"], 1);
    assert_eq!(run.event_times("Started", "app").len(), 2);
    // The first restart is immediate (B1): no back-off.
    assert!(run.events("BackOff").is_empty(), "{}", run.dump());
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a15_restart_policy_never_leaves_a_failed_container_dead() {
    let ctx = Ctx::new("a15never");
    let run = ctx.run(&[one("never", "Never", "exit 7")], &[]);
    assert_eq!(run.code, Some(1), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed");
    assert_eq!(last["status_text"], "Error");
    assert_eq!(last["restarts"], 0);
    let app = container(last, "app");
    assert_eq!(app["exit_code"], 7);
    assert_eq!(app["reason"], "Error");
    assert_eq!(run.event_times("Started", "app").len(), 1);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn b1_b8_crash_loop_back_off_reduced_waits_0_1_2_4_seconds() {
    let ctx = Ctx::new("b1crashloop");
    let mut running = ctx.spawn(&[one("crashloop", "OnFailure", "exit 1")], &[]);
    running.wait_events("Started", Some("app"), 5, WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let starts = run.event_times("Started", "app");
    let g = gaps(&starts[..5]);
    let msg = format!("gaps {g:.2?}\n{}", run.dump());
    assert!(g[0] < 0.8, "{msg}");
    assert!(in_range(g[1], 0.9, 2.0), "{msg}");
    assert!(in_range(g[2], 1.9, 4.0), "{msg}");
    assert!(in_range(g[3], 3.9, 8.0), "{msg}");
    // Blocked starts are reported as CrashLoopBackOff with the kubelet's texts (B5).
    let backoff = run.events("BackOff");
    assert!(backoff.len() >= 3, "{msg}");
    let message = backoff[0]["message"].as_str().unwrap();
    assert_eq!(backoff[0]["type"], "Warning");
    assert!(
        message.starts_with("Back-off restarting failed container app in pod crashloop_default("),
        "{message}"
    );
    let uid = &message[message.find('(').unwrap() + 1..message.len() - 1];
    let waiting: Vec<String> = run
        .statuses()
        .iter()
        .map(|s| container(s, "app"))
        .filter(|c| c["reason"] == "CrashLoopBackOff")
        .map(|c| c["message"].as_str().unwrap().to_string())
        .collect();
    for (i, delay) in ["1s", "2s", "4s"].iter().enumerate() {
        let want = format!(
            "back-off {delay} restarting failed container=app pod=crashloop_default({uid})"
        );
        assert!(waiting.contains(&want), "#{i}: {want} not in {waiting:?}");
    }
    assert!(
        run.status_texts().contains(&"CrashLoopBackOff".to_string()),
        "{msg}"
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn b8_max_restart_period_caps_the_back_off() {
    let ctx = Ctx::new("b8max");
    let mut running = ctx.spawn(
        &[one("capped", "Always", "exit 1")],
        &["--max-restart-period", "2s"],
    );
    running.wait_events("Started", Some("app"), 5, WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let g = gaps(&run.event_times("Started", "app")[..5]);
    let msg = format!("gaps {g:.2?}\n{}", run.dump());
    assert!(g[0] < 0.8, "{msg}");
    assert!(in_range(g[1], 0.9, 2.0), "{msg}");
    assert!(in_range(g[2], 1.9, 3.5), "{msg}");
    // Capped at 2 s rather than doubled to 4 s.
    assert!(in_range(g[3], 1.9, 3.5), "{msg}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a8_init_containers_run_one_at_a_time_in_order() {
    let ctx = Ctx::new("a8init");
    let log = ctx.mkdir("shared").join("log");
    let init = |name: &str| {
        let script = format!(
            "{}; sleep 1; {}",
            log_line(&log, &format!("{name}-start")),
            log_line(&log, &format!("{name}-end"))
        );
        json!({"name": name, "image": "busybox", "command": sh(&script),
               "volumeMounts": [{"name": "shared", "mountPath": ctx.path("shared")}]})
    };
    let app = json!({"name": "app", "image": "busybox", "command": sh(&log_line(&log, "app-main")),
                     "volumeMounts": [{"name": "shared", "mountPath": ctx.path("shared")}]});
    let pod = pod(
        "inits",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "volumes": shared_volume(&log),
            "initContainers": [init("init1"), init("init2")],
            "containers": [app],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let entries = read_log(&log);
    let order: Vec<&str> = entries.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        order,
        [
            "init1-start",
            "init1-end",
            "init2-start",
            "init2-end",
            "app-main"
        ],
        "{}",
        run.dump()
    );
    let texts = run.status_texts();
    for want in ["Init:0/2", "Init:1/2", "Completed"] {
        assert!(texts.contains(&want.to_string()), "{want} not in {texts:?}");
    }
    let last = run.final_status();
    assert_eq!(last["phase"], "Succeeded");
    for name in ["init1", "init2"] {
        let c = container(last, name);
        assert_eq!(c["init"], true);
        assert_eq!(c["reason"], "Completed");
        assert_eq!(c["exit_code"], 0);
    }
    // The app was created only after the last init container exited.
    let init2_done = run
        .first_container_time("init2", |c| c["state"] == "terminated")
        .unwrap();
    assert!(
        run.event_times("Created", "app")[0] >= init2_done,
        "{}",
        run.dump()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn m6_empty_dir_is_shared_between_an_init_container_and_the_app() {
    let ctx = Ctx::new("m6emptydir");
    let mount = ctx.mkdir("data");
    let data = mount.join("greeting");
    let volume_mounts = json!([{"name": "scratch", "mountPath": mount}]);
    let pod = pod(
        "sharing",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "initContainers": [{"name": "writer", "image": "busybox",
                "command": sh(&format!("echo hello-from-init > {}", data.display())),
                "volumeMounts": volume_mounts}],
            "containers": [{"name": "reader", "image": "busybox",
                "command": sh(&format!("cat {} > /dev/termination-log", data.display())),
                "volumeMounts": volume_mounts}],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    assert_eq!(run.final_status()["phase"], "Succeeded");
    assert_eq!(
        run.final_container("reader")["message"],
        "hello-from-init\n",
        "{}",
        run.dump()
    );
    // The file lived in the pod's emptyDir, not in the host directory behind the mount
    // point, and the emptyDir went away with the pod.
    assert!(
        !data.exists(),
        "written to the host directory instead of the emptyDir"
    );
    let pods = std::fs::read_dir(ctx.path("state/pods")).unwrap().count();
    assert_eq!(pods, 0, "the pod directory (and its emptyDir) is removed");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a13_t5_sidecars_start_before_the_app_and_stop_after_it_in_reverse_order() {
    let ctx = Ctx::new("t5sidecars");
    let log = ctx.mkdir("shared").join("log");
    let sidecar = |name: &str| {
        let mut c = logger(name, &log);
        c["restartPolicy"] = json!("Always");
        c
    };
    let app = json!({
        "name": "app", "image": "busybox",
        "command": sh(&format!("{}; sleep 1; {}", log_line(&log, "app-main"), log_line(&log, "app-done"))),
        "volumeMounts": [{"name": "shared", "mountPath": ctx.path("shared")}],
    });
    let pod = pod(
        "job",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
            "volumes": shared_volume(&log),
            "initContainers": [sidecar("sc1"), sidecar("sc2")],
            "containers": [app],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let entries = read_log(&log);
    let order: Vec<&str> = entries.iter().map(|(w, _)| w.as_str()).collect();
    // Once the app is done and will not restart, the sidecars are stopped, the later one
    // first (A13, T5).
    assert_eq!(
        order,
        [
            "sc1-main", "sc2-main", "app-main", "app-done", "sc2-term", "sc1-term"
        ],
        "{}",
        run.dump()
    );
    let last = run.final_status();
    assert_eq!(last["phase"], "Succeeded", "{}", run.dump());
    for name in ["sc1", "sc2"] {
        assert_eq!(
            container(last, name)["state"],
            "terminated",
            "{}",
            run.dump()
        );
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn t5_deleting_a_pod_stops_sidecars_after_the_app_in_reverse_order() {
    let ctx = Ctx::new("t5delete");
    let log = ctx.mkdir("shared").join("log");
    let sidecar = |name: &str| {
        let mut c = logger(name, &log);
        c["restartPolicy"] = json!("Always");
        c
    };
    let pod = pod(
        "svc",
        json!({
            "terminationGracePeriodSeconds": 5,
            "volumes": shared_volume(&log),
            "initContainers": [sidecar("sc1"), sidecar("sc2")],
            "containers": [logger("app1", &log), logger("app2", &log)],
        }),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("4/4", WAIT, |s| s["ready"] == "4/4");
    wait_log(
        &log,
        &["sc1-main", "sc2-main", "app1-main", "app2-main"],
        WAIT,
    );
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let entries = read_log(&log);
    let msg = format!("log {entries:#?}\n{}", run.dump());
    // Started in order: sidecars first.
    assert!(
        pos(&entries, "sc1-main") < pos(&entries, "sc2-main"),
        "{msg}"
    );
    assert!(
        pos(&entries, "sc2-main") < pos(&entries, "app1-main"),
        "{msg}"
    );
    assert!(
        pos(&entries, "sc2-main") < pos(&entries, "app2-main"),
        "{msg}"
    );
    // Stopped: the regular containers together, then sc2, then sc1.
    for app in ["app1-term", "app2-term"] {
        assert!(pos(&entries, app) < pos(&entries, "sc2-term"), "{msg}");
    }
    assert!(
        pos(&entries, "sc2-term") < pos(&entries, "sc1-term"),
        "{msg}"
    );
    assert_eq!(run.final_status()["phase"], "Succeeded", "{msg}");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn t3_sigkill_after_the_grace_period_when_sigterm_is_ignored() {
    let ctx = Ctx::new("t3sigkill");
    let trapped = ctx.path("trapped");
    let pod = pod(
        "stubborn",
        json!({
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {"name": "stubborn", "image": "busybox",
                 "command": sh(&format!("trap \"\" TERM; touch {}; sleep 100000", trapped.display()))},
                {"name": "quick", "image": "busybox", "command": ["sleep", "100000"]},
            ],
        }),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("2/2", WAIT, |s| s["ready"] == "2/2");
    wait_path(&trapped, WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "healthy when deleted: {}", run.dump());
    let killing = |name: &str| run.event_times("Killing", name)[0];
    let ended = |name: &str| {
        run.first_container_time(name, |c| c["state"] == "terminated")
            .unwrap()
    };
    let stubborn = ended("stubborn") - killing("stubborn");
    let msg = format!("stubborn {stubborn:.2}s\n{}", run.dump());
    assert!(in_range(stubborn, 1.8, 4.5), "{msg}");
    // T6: `quick` died of its SIGTERM at once (143, not the 137 of the grace deadline), but the
    // status shows it only with the final one, once `stubborn` is gone too.
    assert_eq!(ended("quick"), ended("stubborn"), "{msg}");
    let last = run.final_status();
    assert_eq!(container(last, "stubborn")["exit_code"], 137, "{msg}");
    assert_eq!(container(last, "stubborn")["reason"], "Error", "{msg}");
    assert_eq!(container(last, "quick")["exit_code"], 143, "{msg}");
    // 137 and 143 are failures: the deleted pod Failed (T8).
    assert_eq!(last["phase"], "Failed", "{msg}");
}

fn memory_cgroup_available() -> bool {
    Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
        || std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn s7_oom_killed_under_a_memory_limit() {
    let ctx = Ctx::new("s7oom");
    if !memory_cgroup_available() {
        eprintln!("skipped: no memory cgroup controller on this machine");
        return;
    }
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("")
        .status()
        .is_err()
    {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let pod = pod(
        "hungry",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": "python",
                "command": ["python3", "-c", "x = b'a' * (256 << 20); print(len(x))"],
                "resources": {"limits": {"memory": "32Mi"}}}],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(1), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed");
    assert_eq!(last["status_text"], "OOMKilled");
    let app = container(last, "app");
    assert_eq!(app["reason"], "OOMKilled", "{}", run.dump());
    assert_eq!(app["exit_code"], 137);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn m2_m3_termination_message_from_the_file() {
    let ctx = Ctx::new("m3file");
    let custom = ctx.mkdir("msgs").join("custom-termination-log");
    let c =
        |name: &str, script: &str| json!({"name": name, "image": "busybox", "command": sh(script)});
    let mut custom_path = c("custom", &format!("printf custom > {}", custom.display()));
    custom_path["terminationMessagePath"] = json!(custom);
    let pod = pod(
        "messages",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "containers": [
                c("bye", "echo to-the-log; printf bye > /dev/termination-log"),
                // Only the last 4096 bytes are kept (M3).
                c("long", "printf BEGIN > /dev/termination-log; \
                           head -c 5000 /dev/zero | tr '\\0' x >> /dev/termination-log; \
                           printf END >> /dev/termination-log"),
                custom_path,
            ],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Succeeded");
    assert_eq!(container(last, "bye")["message"], "bye");
    // Three containers: the pod's 12 KiB cap (M5) leaves each the whole 4096-byte tail.
    let long = container(last, "long")["message"].as_str().unwrap();
    assert_eq!(long.len(), 4096);
    assert_eq!(long, format!("{}END", "x".repeat(4093)));
    assert_eq!(container(last, "custom")["message"], "custom");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn m4_fallback_to_logs_on_error_only_when_the_container_failed() {
    let ctx = Ctx::new("m4fallback");
    let c = |name: &str, script: &str| {
        json!({"name": name, "image": "busybox", "command": sh(script),
               "terminationMessagePolicy": "FallbackToLogsOnError"})
    };
    let pod = pod(
        "fallback",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "containers": [
                c("failed", "echo line1; echo line2; echo line3; exit 3"),
                c("succeeded", "echo fine; exit 0"),
                c("filewins", "echo from-log; printf from-file > /dev/termination-log; exit 2"),
                c("many", "i=1; while [ $i -le 100 ]; do echo line$i; i=$((i+1)); done; exit 1"),
                // The default policy (File) never falls back to the log.
                {"name": "silent", "image": "busybox", "command": sh("echo in-the-log; exit 4")},
            ],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(1), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed");
    assert_eq!(
        container(last, "failed")["message"],
        "line1\nline2\nline3\n",
        "{}",
        run.dump()
    );
    assert_eq!(container(last, "succeeded")["message"], Value::Null);
    assert_eq!(container(last, "filewins")["message"], "from-file");
    // The log tail: the last 80 lines.
    let many = container(last, "many")["message"].as_str().unwrap();
    let want: String = (21..=100).map(|i| format!("line{i}\n")).collect();
    assert_eq!(many, want);
    assert_eq!(container(last, "silent")["message"], Value::Null);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn m1_active_deadline_seconds_fails_the_pod() {
    let ctx = Ctx::new("m1deadline");
    let pod = pod(
        "deadline",
        json!({
            "activeDeadlineSeconds": 2, "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "100000"]}],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(1), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed", "{}", run.dump());
    assert_eq!(last["reason"], "DeadlineExceeded");
    let events = run.events("DeadlineExceeded");
    assert_eq!(events.len(), 1, "{}", run.dump());
    assert_eq!(events[0]["type"], "Normal");
    assert_eq!(
        events[0]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    let when = t(events[0]);
    // Measured from status.startTime, which has whole seconds: up to 1 s early.
    assert!(in_range(when, 0.95, 5.0), "deadline hit at {when:.2}s");
    // The pod was then stopped like a deletion, and never restarted.
    assert_eq!(run.messages("Killing"), ["Stopping container app"]);
    assert_eq!(container(last, "app")["exit_code"], 143);
    assert_eq!(last["restarts"], 0);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a5_failed_init_container_under_never_fails_the_pod() {
    let ctx = Ctx::new("a5initnever");
    let pod = pod(
        "initfail",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "initContainers": [{"name": "init", "image": "busybox", "command": sh("exit 2")}],
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "100000"]}],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(1), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed", "{}", run.dump());
    assert_eq!(last["status_text"], "Init:Error");
    assert_eq!(container(last, "init")["exit_code"], 2);
    assert!(
        run.container_events("Created", "app").is_empty(),
        "{}",
        run.dump()
    );
    assert_eq!(container(last, "app")["state"], "waiting");
    assert_eq!(container(last, "app")["reason"], "PodInitializing");
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a5_failed_init_container_is_retried_under_on_failure() {
    let ctx = Ctx::new("a5initretry");
    let flag = ctx.path("tried");
    let script = format!(
        "if [ -f {f} ]; then exit 0; else touch {f}; exit 1; fi",
        f = flag.display()
    );
    let pod = pod(
        "initretry",
        json!({
            "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 2,
            "initContainers": [{"name": "init", "image": "busybox", "command": sh(&script)}],
            "containers": [{"name": "app", "image": "busybox", "command": sh("exit 0")}],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let last = run.final_status();
    assert_eq!(last["phase"], "Succeeded", "{}", run.dump());
    let init = container(last, "init");
    assert_eq!(init["restart_count"], 1);
    assert_eq!(init["exit_code"], 0);
    assert_eq!(init["last_exit_code"], 1);
    assert!(
        run.status_texts().contains(&"Init:Error".to_string()),
        "{}",
        run.dump()
    );
    // The app started once, after the successful retry.
    let app_created = run.event_times("Created", "app");
    assert_eq!(app_created.len(), 1);
    assert!(app_created[0] > run.event_times("Started", "init")[1]);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a5_a13_a_crashing_sidecar_is_restarted_even_under_never() {
    let ctx = Ctx::new("a5sidecar");
    // The sidecar lives long enough to be seen running (the kubelet's next sync, A21) and
    // let the app start, then keeps crashing while the app works.
    let pod = pod(
        "flaky",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "initContainers": [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
                                "command": sh("sleep 1.5; exit 1")}],
            "containers": [{"name": "app", "image": "busybox", "command": sh("sleep 3")}],
        }),
    );
    let run = ctx.run(&[pod], &[]);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let last = run.final_status();
    // Terminated sidecars do not count: the app's exit 0 makes the pod Succeeded (T8).
    assert_eq!(last["phase"], "Succeeded", "{}", run.dump());
    assert_eq!(container(last, "app")["exit_code"], 0);
    assert!(
        container(last, "sidecar")["restart_count"]
            .as_i64()
            .unwrap()
            >= 1,
        "{}",
        run.dump()
    );
    assert!(
        run.event_times("Started", "sidecar").len() >= 2,
        "{}",
        run.dump()
    );
    // The app was started once, after the sidecar first ran.
    assert_eq!(run.event_times("Started", "app").len(), 1);
    assert!(run.event_times("Started", "app")[0] >= run.event_times("Started", "sidecar")[0]);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn t1_t10_a_second_interrupt_forces_the_deletion() {
    let ctx = Ctx::new("t10force");
    let trapped = ctx.path("trapped");
    let pod = pod(
        "patient",
        json!({
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": "busybox",
                            "command": sh(&format!("trap '' TERM; touch {}; exec sleep 100000", trapped.display()))}],
        }),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("1/1", WAIT, |s| s["ready"] == "1/1");
    wait_path(&trapped, WAIT);
    running.terminate();
    running.wait_event("Killing", Some("app"), WAIT);
    std::thread::sleep(Duration::from_millis(500));
    let forced_epoch = epoch();
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let forced = forced_epoch - run.started_epoch;
    // Grace 0 still leaves the container 2 s between its stop signal and SIGKILL (T10),
    // instead of the 30 s it was given first.
    let ended = run
        .first_container_time("app", |c| c["state"] == "terminated")
        .unwrap();
    let took = ended - forced;
    assert!(
        (1.0..6.0).contains(&took),
        "ended {took:.2}s after the forced delete\n{}",
        run.dump()
    );
    assert_eq!(
        run.final_container("app")["exit_code"],
        137,
        "{}",
        run.dump()
    );
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a5_a8_a_sidecar_startup_probe_holds_the_app() {
    let ctx = Ctx::new("a8startup");
    let log = ctx.mkdir("shared").join("log");
    let flag = ctx.path("shared/sidecar-up");
    let mut sidecar = logger("proxy", &log);
    sidecar["restartPolicy"] = json!("Always");
    sidecar["command"] = sh(&format!(
        "trap 'exit 0' TERM; sleep 2; touch {}; {}; while :; do sleep 1; done",
        flag.display(),
        log_line(&log, "proxy-up")
    ));
    sidecar["startupProbe"] = json!({
        "exec": {"command": ["test", "-f", flag.display().to_string()]},
        "periodSeconds": 1, "failureThreshold": 30,
    });
    let pod = pod(
        "gated",
        json!({
            "terminationGracePeriodSeconds": 2,
            "volumes": shared_volume(&log),
            "initContainers": [sidecar],
            "containers": [logger("app", &log)],
        }),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_status("2/2", WAIT, |s| s["ready"] == "2/2");
    wait_log(&log, &["app-main"], WAIT);
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    assert_eq!(run.code, Some(0), "{}", run.dump());
    let entries = read_log(&log);
    let msg = format!("log {entries:#?}\n{}", run.dump());
    // The app is created only once the sidecar's startup probe has succeeded (A5, A8).
    assert!(
        pos(&entries, "proxy-up") < pos(&entries, "app-main"),
        "{msg}"
    );
    let sidecar_started = run
        .first_container_time("proxy", |c| c["started"] == true)
        .unwrap();
    assert!(
        run.event_times("Created", "app")[0] >= sidecar_started,
        "{msg}"
    );
    assert!(
        run.status_texts().contains(&"Init:0/1".to_string()),
        "{msg}"
    );
}

/// `securityContext` users (kubelet `DetermineEffectiveSecurityContext`,
/// `verifyRunAsNonRoot`): the app runs as its own `runAsUser` with the pod's `runAsGroup` and
/// supplementary groups, and writes its emptyDir and termination message as that user; a container with `runAsNonRoot` and no
/// `runAsUser` would run as root and is not started (`CreateContainerConfigError`).
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn security_context_run_as_user_and_run_as_non_root() {
    let ctx = Ctx::new("runasuser");
    let scratch = ctx.mkdir("scratch");
    let script = format!(
        "echo hi > {}/f && echo \"$(id -u) $(id -g) $(id -G)\" > /dev/termination-log",
        scratch.display()
    );
    let pod = pod(
        "nonroot",
        json!({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
            "securityContext": {"runAsGroup": 3000, "supplementalGroups": [4000]},
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [
                {"name": "app", "image": "busybox", "command": sh(&script),
                 "securityContext": {"runAsUser": 1000},
                 "volumeMounts": [{"name": "scratch", "mountPath": scratch}]},
                {"name": "root", "image": "busybox", "command": ["true"],
                 "securityContext": {"runAsNonRoot": true}},
            ],
        }),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    let status = running.wait_status("app done, root refused", WAIT, |s| {
        find_container(s, "app").is_some_and(|c| c["state"] == "terminated")
            && find_container(s, "root")
                .is_some_and(|c| c["reason"] == "CreateContainerConfigError")
    });
    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let app = container(&status, "app");
    assert_eq!(app["exit_code"], 0, "{}", run.dump());
    assert_eq!(app["message"], "1000 3000 3000 4000\n", "{}", run.dump());
    let message = container(&status, "root")["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "container has runAsNonRoot and image will run as root (pod: \"nonroot_default("
        ) && message.ends_with(")\", container: root)"),
        "{message}"
    );
    assert!(
        run.container_events("Started", "root").is_empty(),
        "{}",
        run.dump()
    );
    assert!(
        run.messages("Failed")
            .iter()
            .any(|m| *m == format!("Error: {message}")),
        "{}",
        run.dump()
    );
}
