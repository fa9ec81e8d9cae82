//! End to end, nothing leaks: a pod whose exec probes time out and whose exec hooks hang runs
//! for a while and is deleted; meanwhile no zombie piles up under the shim or podvisor, and
//! afterwards no process of the run, no cgroup and no pod directory is left. Containers and
//! exec children see only descriptors 0, 1 and 2.

use crate::common;

use common::*;
use podvisor_testkit::zombie_children;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// The descriptors `ls -l /proc/self/fd` listed, apart from the directory `ls` itself opened.
fn foreign_fds(listing: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(listing).unwrap_or_else(|e| panic!("{}: {e}", listing.display()));
    text.lines()
        .filter_map(|l| {
            // `lrwx------ 1 root root 64 ... 3 -> /proc/123/fd`
            let (left, target) = l.split_once(" -> ")?;
            let fd: u32 = left.split_whitespace().last()?.parse().ok()?;
            let ls_dir = target.starts_with("/proc/") && target.ends_with("/fd");
            (fd > 2 && !ls_dir).then(|| format!("{fd} -> {target}"))
        })
        .collect()
}

fn wait_file(path: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    while std::fs::metadata(path).map_or(true, |m| m.len() == 0) {
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn no_zombie_orphan_fd_or_cgroup_leak_with_timing_out_probes_and_hanging_hooks() {
    let ctx = Ctx::new("noleak");
    let fds = ctx.path("container-fds");
    let probe_fds = ctx.path("probe-fds");
    let hook_fds = ctx.path("hook-fds");
    let slow = json!({
        "exec": {"command": ["sleep", "5"]},
        "periodSeconds": 1, "timeoutSeconds": 1, "failureThreshold": 1000,
    });
    let hang = json!({"exec": {"command": ["sleep", "100000"]}});
    // It leaves a daemon (own session, so outside its process group) behind and exits; it
    // is not restarted, as the hanging postStart below blocks the pod's start steps (H2).
    let exiter = "setsid sleep 100001 & exit 0";
    // Children in and out of its process group, for the deletion to clean up.
    let forker = "setsid sleep 100002 & sleep 100003 & exec sleep 100000";
    let pod = pod(
        "leaky",
        json!({
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {"name": "fds", "image": "busybox",
                 "command": sh(&format!("ls -l /proc/self/fd > {}; exec sleep 100000", fds.display())),
                 "readinessProbe": {"exec": {"command": sh(&format!(
                     "ls -l /proc/self/fd > {}", probe_fds.display()))}, "periodSeconds": 1}},
                {"name": "probed", "image": "busybox", "command": ["sleep", "100000"],
                 "readinessProbe": slow, "livenessProbe": slow,
                 "lifecycle": {"preStop": hang}},
                {"name": "exiter", "image": "busybox", "command": sh(exiter)},
                {"name": "forker", "image": "busybox", "command": sh(forker)},
                // Its postStart never returns, which blocks the pod's start step for good.
                {"name": "hooked", "image": "busybox", "command": ["sleep", "100000"],
                 "lifecycle": {
                     "postStart": {"exec": {"command": sh(&format!(
                         "ls -l /proc/self/fd > {}; exec sleep 100000", hook_fds.display()))}},
                     "preStop": hang,
                 }},
            ],
        }),
    );
    let mut running = ctx.spawn(&[pod], &[]);
    running.wait_events("Unhealthy", Some("probed"), 4, WAIT);
    running.wait_event("Started", Some("hooked"), WAIT);
    running.wait_status("exiter exited", WAIT, |s| {
        container(s, "exiter")["state"] == "terminated"
    });
    for f in [&fds, &probe_fds, &hook_fds] {
        wait_file(f, WAIT);
    }
    let uids: Vec<_> = std::fs::read_dir(ctx.path("state/pods"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(uids.len(), 1);

    // While it runs: timed-out probe commands are killed (not piling up) and reaped (no
    // zombie stays under the shim or podvisor).
    let procs = ctx.processes();
    let podvisor = i32::try_from(running.pid()).unwrap();
    // (A child the shim has forked but not yet exec'd has the shim's command line too.)
    let shims: Vec<i32> = procs
        .iter()
        .filter(|p| p.ppid == podvisor && p.cmdline.contains(" shim "))
        .map(|p| p.pid)
        .collect();
    assert_eq!(shims.len(), 1, "one shim per pod: {procs:#?}");
    let parents = [shims[0], podvisor];
    let probes = procs.iter().filter(|p| p.cmdline == "sleep 5").count();
    assert!(probes <= 4, "{probes} probe commands alive: {procs:#?}");
    // The first exiter instance's daemon died with it: a container is over when its main
    // process is.
    let deadline = Instant::now() + Duration::from_secs(3);
    while ctx.processes().iter().any(|p| p.cmdline == "sleep 100001") {
        assert!(
            Instant::now() < deadline,
            "the exited container's daemon survived"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let forked = ctx.processes();
    for daemon in ["sleep 100002", "sleep 100003"] {
        assert!(
            forked.iter().any(|p| p.cmdline == daemon),
            "{daemon} not running: {forked:#?}"
        );
    }
    let first = zombie_children(&parents);
    std::thread::sleep(Duration::from_millis(1500));
    let second = zombie_children(&parents);
    let stuck: Vec<_> = second
        .iter()
        .filter(|z| first.iter().any(|f| f.pid == z.pid))
        .collect();
    assert!(stuck.is_empty(), "zombies not reaped: {stuck:#?}");

    running.terminate();
    // `wait` also fails when any process of the run (a hanging hook, a probe command, a
    // container, the shim) is still alive once podvisor has exited.
    let run = running.wait(RUN_TIMEOUT);
    // (1: the exited container, never restarted, made the pod unhealthy.)
    assert!(matches!(run.code, Some(0 | 1)), "{}", run.dump());
    let last = run.final_status();
    assert!(
        last["phase"] == "Failed" || last["phase"] == "Succeeded",
        "{}",
        run.dump()
    );
    for name in ["fds", "probed", "hooked", "exiter", "forker"] {
        assert_eq!(
            container(last, name)["state"],
            "terminated",
            "{}",
            run.dump()
        );
    }
    for (what, listing) in [
        ("container", &fds),
        ("exec probe", &probe_fds),
        ("exec hook", &hook_fds),
    ] {
        let extra = foreign_fds(listing);
        assert!(
            extra.is_empty(),
            "descriptors leaked into a {what}: {extra:?}"
        );
    }
    // Nothing of the pod remains on disk or in the cgroup hierarchies.
    assert_eq!(
        std::fs::read_dir(ctx.path("state/pods")).unwrap().count(),
        0
    );
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for root in [hierarchy.path(), "/sys/fs/cgroup".into()] {
            for uid in &uids {
                let dir = root.join("podvisor").join(uid);
                assert!(!dir.exists(), "cgroup left: {}", dir.display());
            }
        }
    }
}
