//! `podvisor serve` with the real kubectl: scheduling gates (M11, K1: a gated pod does not
//! run until its last gate goes, then it is bound and starts), pod generation (D10:
//! `observedGeneration` follows `metadata.generation`), and PodGC (M14: terminated pods
//! beyond `--terminated-pod-gc-threshold` are deleted oldest first, seen by a watch).

use crate::serve_common::ServeCtx;
use serde_json::Value;
use std::time::{Duration, Instant};

fn node_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

fn create(ctx: &ServeCtx, manifest: &str) {
    let path = ctx.manifest(&format!("m{}", manifest.len()), manifest);
    ctx.kubectl_ok(&["create", "-f", path.to_str().unwrap()]);
}

fn pod(ctx: &ServeCtx, name: &str) -> Value {
    serde_json::from_str(&ctx.kubectl_ok(&["get", "pod", name, "-o", "json"])).unwrap()
}

/// Polls `check` on the pod's JSON until it holds (30 s at most).
fn wait_pod(ctx: &ServeCtx, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let p = pod(ctx, name);
        if check(&p) {
            return p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name}: {what} did not happen: {p}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name}: {table}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn generations(p: &Value) -> (Value, Vec<(String, Value)>) {
    let conditions = p["status"]["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["type"].as_str().unwrap_or("").to_owned(),
                        c["observedGeneration"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (p["status"]["observedGeneration"].clone(), conditions)
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn m11_a_gated_pod_runs_only_once_its_last_gate_goes() {
    let mut ctx = ServeCtx::new("sg");
    ctx.start(&[]);
    let started = ctx.path("started");
    create(
        &ctx,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: held}}\nspec:\n  schedulingGates:\n  \
             - name: example.com/quota\n  containers:\n  - name: app\n    image: busybox\n    \
             command: [sh, -c, 'touch {} && exec sleep 3600']\n",
            started.display()
        ),
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!started.exists(), "a gated pod must not start");
    let wide = ctx.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let r = row(&wide, "held");
    assert_eq!(
        (r[1].as_str(), r[2].as_str(), r[6].as_str()),
        ("0/1", "SchedulingGated", "<none>"),
        "{wide}"
    );

    ctx.kubectl_ok(&[
        "patch",
        "pod",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#,
    ]);
    let node = node_name();
    let p = wait_pod(&ctx, "held", "running and ready", |p| {
        p["status"]["phase"] == "Running" && p["status"]["containerStatuses"][0]["ready"] == true
    });
    assert!(started.exists());
    assert_eq!(p["spec"]["nodeName"], node.as_str());
    let wide = ctx.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let r = row(&wide, "held");
    assert_eq!(
        (r[2].as_str(), r[6].as_str()),
        ("Running", node.as_str()),
        "{wide}"
    );
    let events = ctx.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=Scheduled",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert_eq!(
        events,
        format!("Successfully assigned default/held to {node}")
    );

    // D10: the gate's removal made generation 2; the kubelet's status observes it, on every
    // condition it owns and on PodScheduled.
    let p = wait_pod(&ctx, "held", "observedGeneration 2", |p| {
        p["status"]["observedGeneration"] == 2
    });
    assert_eq!(p["metadata"]["generation"], 2);
    let (_, conditions) = generations(&p);
    for (t, g) in &conditions {
        assert_eq!(g, &Value::from(2), "{t}: {p}");
    }
    let types: Vec<&str> = conditions.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled"
        ]
    );
    // A spec change (activeDeadlineSeconds set) is generation 3, observed in turn.
    ctx.kubectl_ok(&[
        "patch",
        "pod",
        "held",
        "-p",
        r#"{"spec":{"activeDeadlineSeconds":3600}}"#,
    ]);
    wait_pod(&ctx, "held", "observedGeneration 3", |p| {
        p["metadata"]["generation"] == 3
            && generations(p).0 == 3
            && generations(p).1.iter().all(|(_, g)| g == 3)
    });

    // An unbound pod is deleted at once (grace 0: no kubelet will ever stop it).
    create(
        &ctx,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: never}\nspec:\n  schedulingGates:\n  \
         - name: example.com/never\n  containers:\n  - name: app\n    image: busybox\n    \
         command: [sleep, '3600']\n",
    );
    let deleted = Instant::now();
    ctx.kubectl_ok(&["delete", "pod", "never", "--timeout=10s"]);
    assert!(deleted.elapsed() < Duration::from_secs(5));
    ctx.kubectl_ok(&["delete", "pod", "held", "--grace-period=1", "--timeout=30s"]);
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}

#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn m14_podgc_deletes_terminated_pods_beyond_the_threshold_oldest_first() {
    let mut ctx = ServeCtx::new("gc");
    ctx.start(&["--terminated-pod-gc-threshold", "1"]);
    // The version before anything happens: a watch resumed from it later replays PodGC's
    // deletions as DELETED events, in order (one long-lived kubectl watch could miss the
    // second pass under load).
    let list: Value =
        serde_json::from_str(&ctx.kubectl_ok(&["get", "--raw", "/api/v1/namespaces/default/pods"]))
            .unwrap();
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for name in ["a", "b", "c"] {
        create(
            &ctx,
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: \
                 Never\n  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, \
                 'echo {} {name}']\n",
                ctx.marker
            ),
        );
        wait_pod(&ctx, name, "Succeeded", |p| {
            p["status"]["phase"] == "Succeeded"
        });
        // Creation times are whole seconds: one pod per second keeps "oldest" unambiguous.
        std::thread::sleep(Duration::from_millis(1100));
    }
    // PodGC runs every 20 s.
    let start = Instant::now();
    loop {
        let left = ctx.kubectl_ok(&["get", "pods", "-o", "name"]);
        if left.trim() == "pod/c" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(45),
            "PodGC did not collect a and b: {left}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = ctx.kubectl_ok(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={from}&timeoutSeconds=2"
        ),
    ]);
    let events: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect();
    let deleted: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "DELETED")
        .filter_map(|e| e["object"]["metadata"]["name"].as_str())
        .collect();
    assert_eq!(deleted, ["a", "b"], "{out}");
    assert_eq!(ctx.stop(Duration::from_secs(10)), Some(0));
}

/// A sleeper pod's manifest with extra spec lines (two-space indented under `spec:`).
fn sleeper(ctx: &ServeCtx, name: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n{extra}  containers:\n  - name: app\n    image: busybox\n    command: [sh, -c, 'exec sleep 3600 # {}']\n",
        ctx.marker
    )
}

fn running(p: &Value) -> bool {
    p["status"]["phase"] == "Running"
}

fn scheduled_condition(p: &Value) -> Value {
    p["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .unwrap_or(Value::Null)
}

/// The scheduler's filters on a real node: a cordon keeps a new pod `Pending` and unbound
/// with kube-scheduler's `FailedScheduling` text in `kubectl describe` until `kubectl
/// uncordon`, then it runs; a `NoSchedule` taint holds a pod until it tolerates it; a
/// `nodeSelector` that matches nothing holds one until `kubectl label node`.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn the_scheduler_filters_hold_pods_until_the_node_lets_them_in() {
    let mut ctx = ServeCtx::new("filt");
    ctx.start(&[]);
    let node = node_name();
    ctx.kubectl_ok(&["cordon", &node]);
    create(&ctx, &sleeper(&ctx, "held", ""));
    let p = wait_pod(&ctx, "held", "unschedulable", |p| {
        scheduled_condition(p)["reason"] == "Unschedulable"
    });
    assert_eq!(p["spec"]["nodeName"], Value::Null, "{p}");
    assert_eq!(p["status"]["phase"], "Pending");
    let described = ctx.kubectl_ok(&["describe", "pod", "held"]);
    assert!(
        described.contains(
            "default-scheduler  0/1 nodes are available: 1 node(s) were unschedulable. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        ),
        "{described}"
    );
    ctx.kubectl_ok(&["uncordon", &node]);
    let p = wait_pod(&ctx, "held", "running after the uncordon", running);
    assert_eq!(p["spec"]["nodeName"], node.as_str());

    ctx.kubectl_ok(&["taint", "nodes", &node, "dedicated=db:NoSchedule"]);
    create(&ctx, &sleeper(&ctx, "plain", ""));
    create(
        &ctx,
        &sleeper(
            &ctx,
            "db",
            "  tolerations:\n  - {key: dedicated, operator: Equal, value: db, effect: NoSchedule}\n",
        ),
    );
    wait_pod(&ctx, "db", "running with its toleration", running);
    let p = wait_pod(&ctx, "plain", "unschedulable", |p| {
        scheduled_condition(p)["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 node(s) had untolerated taint(s)"))
    });
    assert_eq!(p["spec"]["nodeName"], Value::Null);
    ctx.kubectl_ok(&["taint", "nodes", &node, "dedicated=db:NoSchedule-"]);
    wait_pod(&ctx, "plain", "running once the taint went", running);

    create(
        &ctx,
        &sleeper(&ctx, "fast", "  nodeSelector: {disk: ssd}\n"),
    );
    let p = wait_pod(&ctx, "fast", "unschedulable", |p| {
        scheduled_condition(p)["reason"] == "Unschedulable"
    });
    assert!(
        scheduled_condition(&p)["message"]
            .as_str()
            .unwrap()
            .starts_with(
                "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
            ),
        "{p}"
    );
    ctx.kubectl_ok(&["label", "node", &node, "disk=ssd"]);
    wait_pod(&ctx, "fast", "running once the node has the label", running);
    ctx.kubectl_ok(&["label", "node", &node, "disk-"]);
    ctx.kubectl_ok(&["delete", "pods", "--all", "--grace-period=1"]);
}

/// The taint-eviction controller on a real node: a `NoExecute` taint deletes a running pod
/// that does not tolerate it (its `DisruptionTarget` condition seen while it stops), one
/// tolerating it for 2 s after them, and leaves one tolerating it for ever running; created
/// pods carry the two 300 s tolerations of `DefaultTolerationSeconds`.
#[test]
#[ignore = "needs root: run as root with --include-ignored (scripts/test does)"]
fn a_no_execute_taint_evicts_running_pods_that_do_not_tolerate_it() {
    let mut ctx = ServeCtx::new("evict");
    ctx.start(&[]);
    let node = node_name();
    create(&ctx, &sleeper(&ctx, "plain", ""));
    create(
        &ctx,
        &sleeper(
            &ctx,
            "brief",
            "  tolerations:\n  - {key: dedicated, operator: Exists, effect: NoExecute, tolerationSeconds: 2}\n",
        ),
    );
    create(
        &ctx,
        &sleeper(
            &ctx,
            "forever",
            "  tolerations:\n  - {key: dedicated, operator: Exists, effect: NoExecute}\n",
        ),
    );
    for name in ["plain", "brief", "forever"] {
        wait_pod(&ctx, name, "running", running);
    }
    let p = pod(&ctx, "plain");
    let keys: Vec<&str> = p["spec"]["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable"
        ]
    );
    assert!(
        p["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["tolerationSeconds"] == 300 && t["effect"] == "NoExecute")
    );

    // A watch sees the condition: the pod may be gone by the time a get would look.
    let watch = ctx
        .kubectl_command(&["get", "pods", "-w", "-o", "json", "--output-watch-events"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let tainted = Instant::now();
    ctx.kubectl_ok(&["taint", "nodes", &node, "dedicated=db:NoExecute"]);
    let gone = |name: &str| {
        let start = Instant::now();
        loop {
            let out = ctx.kubectl(&["get", "pod", name, "--ignore-not-found", "-o", "name"]);
            if String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{name} was not deleted"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    gone("plain");
    gone("brief");
    assert!(tainted.elapsed() >= Duration::from_secs(2));
    let p = pod(&ctx, "forever");
    assert!(
        running(&p) && p["metadata"]["deletionTimestamp"].is_null(),
        "{p}"
    );
    ctx.kubectl_ok(&["taint", "nodes", &node, "dedicated=db:NoExecute-"]);
    let mut watch = watch;
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    let events: Vec<Value> = serde_json::Deserializer::from_str(&seen)
        .into_iter::<Value>()
        .filter_map(Result::ok)
        .collect();
    for name in ["plain", "brief"] {
        let marked = events.iter().any(|e| {
            let o = &e["object"];
            o["metadata"]["name"] == name
                && o["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c["type"] == "DisruptionTarget" && c["reason"] == "DeletionByTaintManager"
                    })
        });
        assert!(marked, "{name}: no DisruptionTarget seen in {seen}");
    }
    let events = ctx.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=TaintManagerEviction",
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ]);
    let mut lines: Vec<&str> = events.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "Marking for deletion Pod default/brief",
            "Marking for deletion Pod default/plain"
        ]
    );
    ctx.kubectl_ok(&["delete", "pod", "forever", "--grace-period=1"]);
}
