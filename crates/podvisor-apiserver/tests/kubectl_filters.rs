//! The scheduler's filters and the taint-eviction controller through the real kubectl:
//! a cordon, a `NoSchedule` taint and a `nodeSelector` that matches nothing each leave a
//! pod `Pending` and unbound, with `PodScheduled=False` `Unschedulable` and kube-scheduler's
//! `FailedScheduling` text in `kubectl describe`, until `uncordon`, a toleration or `kubectl
//! label` lets it fit; a `NoExecute` taint deletes the pods that do not tolerate it (at once,
//! or after their `tolerationSeconds`) with `DisruptionTarget`; every created pod carries
//! the `DefaultTolerationSeconds` tolerations.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{NODE, TestServer, pod_yaml};

fn get(s: &TestServer, name: &str) -> Value {
    serde_json::from_str(&s.kubectl_ok(&["get", "pod", name, "-o", "json"])).unwrap()
}

fn condition(pod: &Value, type_: &str) -> Value {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Polls until `check` holds (20 s at most).
fn wait(s: &TestServer, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = get(s, name);
        if check(&p) {
            return p;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {what} did not happen: {p}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn bound(p: &Value) -> bool {
    p["spec"]["nodeName"] == NODE
}

/// The pod is left unbound with kube-scheduler's condition and event text.
fn assert_unschedulable(s: &TestServer, name: &str, reason: &str) {
    let message = format!(
        "0/1 nodes are available: 1 {reason}. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    let p = get(s, name);
    assert_eq!(p["spec"]["nodeName"], Value::Null, "{p}");
    assert_eq!(p["status"]["phase"], "Pending");
    let c = condition(&p, "PodScheduled");
    assert_eq!(
        (&c["status"], &c["reason"], &c["message"]),
        (
            &"False".into(),
            &"Unschedulable".into(),
            &Value::from(message.clone())
        ),
        "{p}"
    );
    let described = s.kubectl_ok(&["describe", "pod", name]);
    let line = described
        .lines()
        .find(|l| l.contains("FailedScheduling"))
        .unwrap_or_else(|| panic!("no FailedScheduling event: {described}"));
    assert!(line.trim_start().starts_with("Warning"), "{line}");
    assert!(
        line.contains(&format!("default-scheduler  {message}")),
        "{line}"
    );
}

#[test]
fn a_cordoned_node_takes_no_pod_until_uncordoned() {
    let s = TestServer::start();
    s.kubectl_ok(&["cordon", NODE]);
    s.create(&pod_yaml("web"));
    assert_unschedulable(&s, "web", "node(s) were unschedulable");
    // A pod that tolerates the cordon's taint is bound all the same.
    s.create(&format!(
        "{}  tolerations:\n  - {{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}}\n",
        pod_yaml("tolerant")
    ));
    assert!(bound(&get(&s, "tolerant")));
    s.kubectl_ok(&["uncordon", NODE]);
    let p = wait(&s, "web", "bound after the uncordon", bound);
    assert_eq!(condition(&p, "PodScheduled")["status"], "True", "{p}");
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
        "-o",
        "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}",
    ]);
    assert!(events.lines().any(|r| r == "Scheduled"), "{events}");
}

#[test]
fn a_no_schedule_taint_holds_pods_that_do_not_tolerate_it() {
    let s = TestServer::start();
    s.kubectl_ok(&["taint", "nodes", NODE, "dedicated=db:NoSchedule"]);
    s.create(&pod_yaml("plain"));
    assert_unschedulable(&s, "plain", "node(s) had untolerated taint(s)");
    s.create(&format!(
        "{}  tolerations:\n  - {{key: dedicated, operator: Equal, value: db, effect: NoSchedule}}\n",
        pod_yaml("db")
    ));
    assert!(bound(&get(&s, "db")));
    // A toleration added to the waiting pod lets it fit (tolerations may be added).
    s.kubectl_ok(&[
        "patch", "pod", "plain", "--type=json", "-p",
        r#"[{"op":"add","path":"/spec/tolerations/-","value":{"key":"dedicated","operator":"Exists","effect":"NoSchedule"}}]"#,
    ]);
    wait(&s, "plain", "bound once it tolerates the taint", bound);
}

#[test]
fn a_node_selector_waits_for_its_label() {
    let s = TestServer::start();
    s.create(&format!(
        "{}  nodeSelector: {{disk: ssd}}\n",
        pod_yaml("fast")
    ));
    assert_unschedulable(
        &s,
        "fast",
        "node(s) didn't match Pod's node affinity/selector",
    );
    s.kubectl_ok(&["label", "node", NODE, "disk=ssd"]);
    wait(&s, "fast", "bound once the node has the label", bound);
}

#[test]
fn created_pods_get_the_default_toleration_seconds() {
    let s = TestServer::start();
    s.create(&pod_yaml("web"));
    let p = get(&s, "web");
    assert_eq!(
        p["spec"]["tolerations"],
        serde_json::json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    let described = s.kubectl_ok(&["describe", "pod", "web"]);
    assert!(
        described.contains("node.kubernetes.io/not-ready:NoExecute op=Exists for 300s"),
        "{described}"
    );
}

/// A `NoExecute` taint: an intolerant pod is deleted at once, one tolerating it for 2 s
/// after them, one tolerating it for ever stays; each deleted one gets `DisruptionTarget`
/// and the taint manager's event. (Without a node agent here, a graceful delete leaves the
/// pod marked: `deletionTimestamp` is what the deletion is.)
#[test]
fn a_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it() {
    let s = TestServer::start();
    let with = |name: &str, toleration: &str| {
        s.create(&format!(
            "{}  tolerations:\n  - {toleration}\n",
            pod_yaml(name)
        ));
    };
    s.create(&pod_yaml("plain"));
    with(
        "brief",
        "{key: dedicated, operator: Exists, effect: NoExecute, tolerationSeconds: 2}",
    );
    with(
        "forever",
        "{key: dedicated, operator: Exists, effect: NoExecute}",
    );
    for name in ["plain", "brief", "forever"] {
        assert!(bound(&get(&s, name)), "{name}");
    }
    let tainted = Instant::now();
    s.kubectl_ok(&["taint", "nodes", NODE, "dedicated=db:NoExecute"]);
    let deleting = |p: &Value| !p["metadata"]["deletionTimestamp"].is_null();
    let p = wait(&s, "plain", "deleted", deleting);
    let c = condition(&p, "DisruptionTarget");
    assert_eq!(
        (&c["status"], &c["reason"], &c["message"]),
        (
            &"True".into(),
            &"DeletionByTaintManager".into(),
            &"Taint manager: deleting due to NoExecute taint".into()
        ),
        "{p}"
    );
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
    let p = wait(&s, "brief", "deleted after its toleration", deleting);
    assert!(
        tainted.elapsed() >= Duration::from_secs(2),
        "deleted before its 2 s"
    );
    assert_eq!(
        condition(&p, "DisruptionTarget")["reason"],
        "DeletionByTaintManager"
    );
    let events = s.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=TaintManagerEviction",
        "-o",
        "jsonpath={range .items[*]}{.source.component} {.message}{\"\\n\"}{end}",
    ]);
    let mut lines: Vec<&str> = events.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "taint-eviction-controller Marking for deletion Pod default/brief",
            "taint-eviction-controller Marking for deletion Pod default/plain",
        ]
    );
    let p = get(&s, "forever");
    assert!(p["metadata"]["deletionTimestamp"].is_null(), "{p}");
    assert_eq!(condition(&p, "DisruptionTarget"), Value::Null);
}

/// Removing the taint before the toleration runs out cancels the deletion.
#[test]
fn a_removed_no_execute_taint_cancels_the_deletion() {
    let s = TestServer::start();
    s.create(&format!(
        "{}  tolerations:\n  - {{key: dedicated, operator: Exists, effect: NoExecute, tolerationSeconds: 3600}}\n",
        pod_yaml("patient")
    ));
    s.kubectl_ok(&["taint", "nodes", NODE, "dedicated=db:NoExecute"]);
    s.kubectl_ok(&["taint", "nodes", NODE, "dedicated=db:NoExecute-"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = s.kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            "reason=TaintManagerEviction",
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ]);
        if events.contains("Cancelling deletion of Pod default/patient") {
            break;
        }
        assert!(Instant::now() < deadline, "no cancellation: {events}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(get(&s, "patient")["metadata"]["deletionTimestamp"].is_null());
}

/// NodeResourcesFit and NodePorts: what the node's pods hold is not free (the test node
/// has 8 cpus); deleting the pod that holds it lets the waiting one in. These are
/// resolvable rejections: preemption found no victims.
#[test]
fn requests_and_host_ports_wait_for_the_pods_that_hold_them() {
    let s = TestServer::start();
    let requesting = |name: &str, cpu: &str| {
        format!(
            "{}    resources:\n      requests: {{cpu: '{cpu}'}}\n",
            pod_yaml(name)
        )
    };
    s.create(&requesting("big", "6"));
    assert!(bound(&get(&s, "big")));
    s.create(&requesting("second", "4"));
    let p = get(&s, "second");
    assert_eq!(p["spec"]["nodeName"], Value::Null, "{p}");
    assert_eq!(
        condition(&p, "PodScheduled")["message"],
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    // More than the node has at all: preemption could not help.
    s.create(&requesting("huge", "9"));
    assert_eq!(
        condition(&get(&s, "huge"), "PodScheduled")["message"],
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
    s.kubectl_ok(&["delete", "pod", "big", "--grace-period=0", "--force"]);
    wait(&s, "second", "bound once big is gone", bound);

    let with_port = |name: &str| {
        format!(
            "{}    ports:\n    - {{containerPort: 80, hostPort: 18080}}\n",
            pod_yaml(name)
        )
    };
    s.create(&with_port("web-a"));
    assert!(bound(&get(&s, "web-a")));
    s.create(&with_port("web-b"));
    let p = get(&s, "web-b");
    assert_eq!(
        condition(&p, "PodScheduled")["message"],
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        "{p}"
    );
    s.kubectl_ok(&["delete", "pod", "web-a", "--grace-period=0", "--force"]);
    wait(&s, "web-b", "bound once web-a is gone", bound);
}
