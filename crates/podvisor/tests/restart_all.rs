//! `podvisor serve --feature-gates RestartAllContainersOnContainerExits=true` with the real
//! kubectl (1.32, and 1.34 when `PODVISOR_KUBECTL_134` names it, as `scripts/test` does):
//! KEP-5532's `RestartAllContainers` restart rule. The app exits 88 until an init container
//! has counted three runs in an emptyDir: each exit kills the sidecar, re-runs the init
//! container and restarts everything in the same sandbox (same uid, IP, volume), with restart
//! counts that go on. With the gate off the create is refused with the API server's message.

use crate::serve_common::{ServeCtx, kubectl_binary};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const GATE: &str = "RestartAllContainersOnContainerExits=true";

/// The pod: `setup` bumps the counter in the emptyDir, `watcher` is a sidecar, `app` exits 88
/// (a `RestartAllContainers` rule) until the counter reaches 3, then runs.
fn manifest(name: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  volumes:
  - name: work
    emptyDir: {{}}
  initContainers:
  - name: setup
    image: busybox
    command: [sh, -c, 'n=$(cat /work/count 2>/dev/null || echo 0); echo $((n+1)) > /work/count; echo "setup run $((n+1))"']
    volumeMounts:
    - {{name: work, mountPath: /work}}
  - name: watcher
    image: busybox
    restartPolicy: Always
    command: [sh, -c, 'trap "" TERM; while true; do sleep 1; done']
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'n=$(cat /work/count); echo "app sees $n"; [ "$n" -ge 3 ] || exit 88; exec sleep 3600']
    volumeMounts:
    - {{name: work, mountPath: /work}}
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes:
        operator: In
        values: [88]
"#
    )
}

/// kubectl 1.32 (`PODVISOR_KUBECTL` or the machine's), then 1.34 when the environment names
/// one.
fn kubectls() -> Vec<PathBuf> {
    let mut all = vec![kubectl_binary()];
    if let Some(k) = std::env::var_os("PODVISOR_KUBECTL_134") {
        all.push(PathBuf::from(k));
    }
    all
}

fn run(kubectl: &Path, ctx: &ServeCtx, args: &[&str]) -> Output {
    Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(ctx.kubeconfig())
        .arg("--cache-dir")
        .arg(
            ctx.dir
                .join(format!("kube-cache-{}", kubectl.to_string_lossy().len())),
        )
        .arg("--request-timeout=10s")
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("kubectl runs")
}

fn run_ok(kubectl: &Path, ctx: &ServeCtx, args: &[&str]) -> String {
    let out = run(kubectl, ctx, args);
    assert!(
        out.status.success(),
        "{} {args:?}: {}{}\n{}",
        kubectl.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        ctx.last_logs(2)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pod(kubectl: &Path, ctx: &ServeCtx, name: &str) -> Value {
    serde_json::from_str(&run_ok(kubectl, ctx, &["get", "pod", name, "-o", "json"])).unwrap()
}

fn status_of<'a>(p: &'a Value, list: &str, name: &str) -> &'a Value {
    p["status"][list]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no {list} entry {name}: {p}"))
}

fn condition<'a>(p: &'a Value, type_: &str) -> Option<&'a Value> {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kep5532_restart_all_containers_reruns_init_in_the_same_sandbox_through_kubectl() {
    let mut ctx = ServeCtx::new("ra");
    ctx.start(&["--feature-gates", GATE]);
    for (i, kubectl) in kubectls().iter().enumerate() {
        let name = format!("ra{i}");
        let path = ctx.manifest(&name, &manifest(&name));
        // Every version of the pod the API stores, from before the create on.
        let mut watch = Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(ctx.kubeconfig())
            .args([
                "get",
                "pods",
                "--watch",
                "-o",
                "json",
                "--request-timeout=0",
            ])
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let watch_out = watch.stdout.take().unwrap();
        let seen = std::thread::spawn(move || {
            serde_json::Deserializer::from_reader(watch_out)
                .into_iter::<Value>()
                .map_while(Result::ok)
                .collect::<Vec<Value>>()
        });
        run_ok(kubectl, &ctx, &["create", "-f", path.to_str().unwrap()]);

        // Observed at least once on the way: the first run, with its sandbox's identity.
        let started = Instant::now();
        let first = loop {
            let p = pod(kubectl, &ctx, &name);
            if p["status"]["podIP"].is_string() && p["status"]["initContainerStatuses"].is_array() {
                break p;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "no IP: {p}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let done = loop {
            let p = pod(kubectl, &ctx, &name);
            let app = status_of(&p, "containerStatuses", "app");
            if app["restartCount"] == 2 && app["state"]["running"].is_object() {
                break p;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{name}: the app did not run a third time: {p}\n{}",
                ctx.last_logs(3)
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // Same pod, same sandbox: uid, IP, and the emptyDir kept the counter.
        assert_eq!(done["metadata"]["uid"], first["metadata"]["uid"]);
        assert_eq!(done["status"]["podIP"], first["status"]["podIP"]);
        assert_eq!(done["status"]["phase"], "Running", "{done}");
        let count = run_ok(
            kubectl,
            &ctx,
            &["exec", &name, "-c", "app", "--", "cat", "/work/count"],
        );
        assert_eq!(count.trim(), "3");
        // The init container ran again (three times in all), the sidecar was restarted with
        // everything; restart counts went on.
        let setup = status_of(&done, "initContainerStatuses", "setup");
        assert_eq!(setup["restartCount"], 2, "{done}");
        assert_eq!(setup["state"]["terminated"]["exitCode"], 0);
        let watcher = status_of(&done, "initContainerStatuses", "watcher");
        assert_eq!(watcher["restartCount"], 2, "{done}");
        assert!(watcher["state"]["running"].is_object(), "{done}");
        let app = status_of(&done, "containerStatuses", "app");
        assert_eq!(app["lastState"]["terminated"]["exitCode"], 88, "{done}");
        // The sidecar ignores SIGTERM: SIGKILL came after the 2 s minimum, not after the
        // pod's 30 s grace period (KEP "Termination Grace Periods"; generous for a loaded
        // machine).
        let killed = &watcher["lastState"]["terminated"];
        assert_eq!(killed["exitCode"], 137, "{done}");
        let logs = run_ok(kubectl, &ctx, &["logs", &name, "-c", "setup"]);
        assert_eq!(logs.trim(), "setup run 3");
        // The condition is back to False with no reason; the watch saw it True twice, with
        // the phase Pending (KEP-5532 "Pod Status").
        let cond = condition(&done, "AllContainersRestarting").expect("the condition");
        assert_eq!(cond["status"], "False", "{done}");
        assert!(cond["reason"].is_null(), "{done}");
        let _ = watch.kill();
        let _ = watch.wait();
        let versions = seen.join().unwrap();
        let restarting: Vec<&Value> = versions
            .iter()
            .filter(|p| p["metadata"]["name"] == name.as_str())
            .filter(|p| {
                condition(p, "AllContainersRestarting").is_some_and(|c| c["status"] == "True")
            })
            .collect();
        assert!(!restarting.is_empty(), "never True: {versions:?}");
        for p in &restarting {
            let c = condition(p, "AllContainersRestarting").unwrap();
            assert_eq!(c["reason"], "RestartAllContainersStarted");
            assert_eq!(c["message"], "container exited with restart policy rule");
            assert_eq!(p["status"]["phase"], "Pending");
        }
        let rounds: std::collections::BTreeSet<String> = restarting
            .iter()
            .map(|p| status_of(p, "containerStatuses", "app")["restartCount"].to_string())
            .collect();
        assert_eq!(rounds.len(), 2, "one restart per exit 88: {rounds:?}");
        // How long the last round took, exit to the app's next start (whole seconds).
        let app = status_of(&done, "containerStatuses", "app");
        let secs = |v: &Value| {
            v.as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(jiff::Timestamp::as_second)
                .unwrap()
        };
        let stop_secs =
            secs(&killed["finishedAt"]) - secs(&app["lastState"]["terminated"]["finishedAt"]);
        assert!(
            (1..10).contains(&stop_secs),
            "SIGKILL {stop_secs} s after the exit: {done}"
        );
        eprintln!(
            "{}: exit 88 to the app's next start: {} s",
            kubectl.display(),
            secs(&app["state"]["running"]["startedAt"])
                - secs(&app["lastState"]["terminated"]["finishedAt"])
        );
        // Events: the sidecar was killed each time, no new sandbox.
        let events = run_ok(
            kubectl,
            &ctx,
            &[
                "get",
                "events",
                "--field-selector",
                &format!("involvedObject.name={name}"),
                "-o",
                "jsonpath={range .items[*]}{.reason}:{.message}:{.count}{\"\\n\"}{end}",
            ],
        );
        assert!(
            events.contains("Killing:Stopping container watcher:2"),
            "{events}"
        );
        assert!(!events.contains("SandboxChanged"), "{events}");
        run_ok(
            kubectl,
            &ctx,
            &["delete", "pod", &name, "--grace-period=1", "--timeout=60s"],
        );
    }
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn kep5532_gate_off_refuses_the_rule_with_the_api_servers_message() {
    let mut ctx = ServeCtx::new("rx");
    ctx.start(&[]);
    for (i, kubectl) in kubectls().iter().enumerate() {
        let name = format!("rx{i}");
        let path = ctx.manifest(&name, &manifest(&name));
        let out = run(kubectl, &ctx, &["create", "-f", path.to_str().unwrap()]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.trim(),
            format!(
                "The Pod \"{name}\" is invalid: spec.containers[0].restartPolicyRules[0].action: Unsupported value: \"RestartAllContainers\": supported values: \"Restart\""
            ),
            "{}",
            kubectl.display()
        );
        let out = run(kubectl, &ctx, &["get", "pod", &name]);
        assert!(!out.status.success(), "nothing was stored");
    }
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}
