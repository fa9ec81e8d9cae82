//! End to end, a lost sandbox (kubelet-lifecycle.md A1, A2, D2, the `SandboxChanged` event):
//! the pod's shim is killed with SIGKILL under a running pod. What it left running is killed,
//! and the pod goes on as the kubelet's does when its sandbox stops being READY — a new sandbox
//! (a fresh shim), initialization again from the first init container, restarts counted — or,
//! under `restartPolicy: Never`, the pod fails.

use crate::common;

use common::*;
use podvisor_testkit::alive;
use rustix::process::Signal;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// The one pod's shim pid file: `<state>/pods/<uid>/shim/shim.pid`.
fn shim_pid_file(ctx: &Ctx) -> PathBuf {
    let pods = ctx.path("state/pods");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&pods)
        .unwrap_or_else(|e| panic!("reading {}: {e}", pods.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one pod directory: {dirs:?}");
    dirs.pop().unwrap().join("shim").join("shim.pid")
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until `path` has `n` lines (a container is running before its shell wrote them).
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let lines = lines_of(path);
        if lines.len() >= n {
            return lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} has {} line(s), not {n}",
            path.display(),
            lines.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `pid` is gone (or a zombie no one reaped yet).
fn wait_gone(pid: i32, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while alive(pid) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A pod whose init container appends `init` to `<dir>/init.log` and whose app appends its
/// pid to `<dir>/app.pids`, then sleeps.
fn marker_pod(name: &str, policy: &str, dir: &Path) -> Value {
    let volume = json!([{"name": "shared", "hostPath": {"path": dir, "type": "Directory"}}]);
    let mount = json!([{"name": "shared", "mountPath": dir}]);
    pod(
        name,
        json!({
            "restartPolicy": policy, "terminationGracePeriodSeconds": 2,
            "volumes": volume,
            "initContainers": [{
                "name": "init", "image": "busybox", "volumeMounts": mount,
                "command": sh(&format!("echo init >> {}/init.log", dir.display())),
            }],
            "containers": [{
                "name": "app", "image": "busybox", "volumeMounts": mount,
                // `$$` is `$` after the kubelet's `$(VAR)` expansion.
                "command": sh(&format!("echo $$$$ >> {}/app.pids; exec sleep 3600", dir.display())),
            }],
        }),
    )
}

fn app_running(s: &Value, restarts: i64) -> bool {
    s["phase"] == "Running"
        && find_container(s, "app").is_some_and(|c| {
            c["state"] == "running" && c["restart_count"] == restarts && c["ready"] == true
        })
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a1_a2_killed_shim_is_a_lost_sandbox_and_the_pod_is_recreated() {
    let ctx = Ctx::new("sandboxlost");
    let dir = ctx.mkdir("shared");
    let mut running = ctx.spawn(&[marker_pod("lost", "Always", &dir)], &[]);
    running.wait_status("app running", WAIT, |s| app_running(s, 0));
    let old_shim = read_pid(&shim_pid_file(&ctx));
    let old_app: i32 = wait_lines(&dir.join("app.pids"), 1)[0].parse().unwrap();
    assert!(alive(old_shim) && alive(old_app));
    assert_eq!(lines_of(&dir.join("init.log")), ["init"]);

    podvisor_testkit::signal(old_shim, Signal::KILL);
    let changed = running.wait_event("SandboxChanged", None, WAIT);
    assert_eq!(changed["type"], "Normal");
    assert_eq!(
        changed["message"],
        "Pod sandbox changed, it will be killed and re-created."
    );
    assert!(changed["container"].is_null());
    running.wait_status("app restarted in the new sandbox", WAIT, |s| {
        app_running(s, 1)
    });
    // The old container did not outlive its shim; a new shim runs the new instance.
    assert!(
        wait_gone(old_app, Duration::from_secs(5)),
        "old app {old_app} still runs"
    );
    assert!(!alive(old_shim));
    let new_shim = read_pid(&shim_pid_file(&ctx));
    assert_ne!(new_shim, old_shim);
    assert!(alive(new_shim));
    // A2: initialization re-ran from the first init container.
    assert_eq!(lines_of(&dir.join("init.log")), ["init", "init"]);
    let pids = wait_lines(&dir.join("app.pids"), 2);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(alive(pids[1].parse().unwrap()));

    running.terminate();
    let run = running.wait(RUN_TIMEOUT);
    let lost_at = t(run.events("SandboxChanged")[0]);
    // D2: not ready to start containers while the new sandbox is made.
    assert!(
        run.statuses().iter().any(|s| t(s) >= lost_at
            && s["conditions"]["PodReadyToStartContainers"] == "False"
            && s["phase"] != "Succeeded"
            && s["phase"] != "Failed"),
        "{}",
        run.dump()
    );
    let restarted = run
        .statuses()
        .into_iter()
        .find(|s| app_running(s, 1))
        .unwrap();
    assert_eq!(container(restarted, "app")["last_exit_code"], 137);
    assert_eq!(container(restarted, "init")["restart_count"], 1);
    assert_eq!(
        restarted["conditions"]["PodReadyToStartContainers"],
        "True",
        "{}",
        run.dump()
    );
    assert_eq!(run.events("SandboxChanged").len(), 1, "{}", run.dump());
    assert_eq!(run.event_times("Started", "init").len(), 2);
    assert_eq!(run.event_times("Started", "app").len(), 2);
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a2_killed_shim_of_a_never_pod_fails_it() {
    let ctx = Ctx::new("sandboxnever");
    let dir = ctx.mkdir("shared");
    let mut running = ctx.spawn(&[marker_pod("never", "Never", &dir)], &[]);
    running.wait_status("app running", WAIT, |s| app_running(s, 0));
    let shim = read_pid(&shim_pid_file(&ctx));
    let app: i32 = wait_lines(&dir.join("app.pids"), 1)[0].parse().unwrap();
    podvisor_testkit::signal(shim, Signal::KILL);
    // The pod ends on its own; `wait` checks that nothing of it is left.
    let run = running.wait(RUN_TIMEOUT);
    assert!(!alive(app));
    let last = run.final_status();
    assert_eq!(last["phase"], "Failed", "{}", run.dump());
    assert_eq!(container(last, "app")["exit_code"], 137);
    assert_eq!(container(last, "app")["restart_count"], 0);
    assert!(run.events("SandboxChanged").is_empty(), "{}", run.dump());
    assert_eq!(lines_of(&dir.join("init.log")), ["init"]);
    assert_eq!(run.code, Some(1));
}
